"""Norms and condition numbers: ``norm``, ``matrix_norm``, ``cond`` (private; docs/spectral.md).

The spectral norms (``ord`` 2, -2, ``"nuc"``) of one sharded matrix take the
distributed singular values (``svd``'s op on the call's plan); every other norm
is jnp's own reduction, which XLA runs on the shards (partial sums and one
small all-reduce; nothing is gathered). ``cond`` follows ``jnp.linalg.cond``
with distla's svdvals, norm and inverse.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._core import route
from .._core.checks import ShapeError, result_dtype
from .._core.mesh import drop_trivial_sharding, replicated
from .._core.plan import Plan
from ._lu.inverse import INV
from ._svd import SVD

_VALUES = dict(full_matrices=True, compute_uv=False, hermitian=False, subset_by_index=None)
_SPECTRAL = (2, -2, "nuc")


def _matrix_axes(x, axis) -> bool:
    return (
        axis is None
        and x.ndim == 2
        or (
            isinstance(axis, tuple)
            and len(axis) == 2
            and x.ndim == 2
            and sorted(a % 2 for a in axis) == [0, 1]
        )
    )


def _stack_axes(x, axis) -> bool:
    """``axis`` names the last two axes of a stack (more than two dimensions)."""
    return (
        x.ndim > 2
        and isinstance(axis, tuple)
        and len(axis) == 2
        and sorted(a % x.ndim for a in axis) == [x.ndim - 2, x.ndim - 1]
    )


def _norm_dtype(what, x, *, ord, **options):
    """jnp's: the default float for integers and bools, and for the spectral norms (half
    precision refused, as jnp refuses it only for an SVD); the others keep ``x``'s."""
    del options
    if ord in _SPECTRAL or not jnp.issubdtype(x.dtype, jnp.inexact):
        return result_dtype(what, x)
    return x.dtype


def _jnp_norm(x, *, ord, axis, keepdims):
    """``jnp.linalg.norm``; the max/min norms carry a NaN as jnp's one-device ones do."""
    r = jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        # max/min norms: XLA's sharded max/min reductions drop NaN, so NaN is carried
        # by a sum over the same axes (NaN exactly when a reduced entry is NaN, as jnp's
        # one-device max/min gives it)
        nan = jnp.isnan(jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims))
        r = jnp.where(nan, jnp.asarray(jnp.nan, r.dtype), r)
    return r


def _unsharded(x, *, ord, axis, keepdims):
    if ord in _SPECTRAL and _matrix_axes(x, axis):  # an empty matrix's: jnp's own
        return jnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return _jnp_norm(x, ord=ord, axis=axis, keepdims=keepdims)


def _norm(plan: Plan, x, *, ord, axis, keepdims):
    if ord in _SPECTRAL and _matrix_axes(x, axis):
        if isinstance(axis, tuple) and axis[0] % 2 == 1:
            x = x.T
        s = route.on_plan(SVD, plan, x, **_VALUES)
        r = s[0] if ord == 2 else s[-1] if ord == -2 else jnp.sum(s)
        return r.reshape(1, 1) if keepdims else r
    if ord in _SPECTRAL and _stack_axes(x, axis):
        # a stack's spectral norms: jnp's, on whole members (its svd refuses split ones),
        # the batch where it is
        x = replicated(x)
    # one-device Explicit meshes: jnp's svd refuses operands "sharded" over size-1 axes
    return _jnp_norm(drop_trivial_sharding(x), ord=ord, axis=axis, keepdims=keepdims)


NORM = route.Op(
    "distla.linalg.norm",
    operands=("x",),
    promote=_norm_dtype,
    unsharded=_unsharded,
    one_device=jnp.linalg.norm,
    distributed=_norm,
)


@route.public
def norm(
    x: jax.typing.ArrayLike,
    ord: int | str | None = None,
    axis: None | tuple[int, ...] | int = None,
    keepdims: bool = False,
) -> jax.Array:
    """Matrix or vector norm, as ``jnp.linalg.norm``.

    For one sharded matrix and ``ord`` ``2``, ``-2`` or ``"nuc"``: the largest,
    smallest or summed singular values from the distributed [`svdvals`][distla.linalg.svdvals].
    Every other case is jnp's own reduction, which XLA runs on the shards
    (partial sums and one small all-reduce; nothing is gathered).

    Args:
      x: a vector, matrix or stack, any layout.
      ord: the norm's order, as ``jnp.linalg.norm``'s (``None``: Frobenius for a
        matrix, 2 for a vector).
      axis: the vector axis or the two matrix axes, as jnp's (``None``: all axes of a
        vector or matrix).
      keepdims: keep the reduced axes with size one.

    Returns:
      The norm, jnp's shape and dtype (real); replicated for one matrix.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.full((256, 256), 2.0), mesh)
      >>> distla.linalg.norm(a)
      Array(512., dtype=float32)
      >>> round(float(distla.linalg.norm(a, ord=2)), 2)
      512.0
    """
    return route.call(NORM, x, ord=ord, axis=axis, keepdims=keepdims)


@route.public
def matrix_norm(
    x: jax.typing.ArrayLike, /, *, keepdims: bool = False, ord: str | int = "fro"
) -> jax.Array:  # noqa: A002  (jnp's name)
    """Norm over the last two axes, as ``jnp.linalg.matrix_norm``.

    ``distla.linalg.norm`` with ``axis=(-2, -1)``: ``ord`` 2, -2 and
    ``"nuc"`` of one sharded matrix use the distributed ``svdvals``; the
    others are reductions XLA runs on the shards (one small all-reduce).

    Args:
      x: ``[..., m, n]`` array in any layout.
      keepdims: keep the two reduced axes with length one.
      ord: ``"fro"``, ``"nuc"``, ``1``, ``-1``, ``2``, ``-2``, ``inf``, ``-inf``.

    Returns:
      ``[...]`` (or ``[..., 1, 1]``) real array, replicated as jnp's reductions are.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.full((256, 256), 2.0), mesh)
      >>> distla.linalg.matrix_norm(a, ord=1)
      Array(512., dtype=float32)
    """
    return route.call(NORM, x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def _check_cond(what, arr, **options):
    del options
    if arr.ndim < 2:
        raise ShapeError(f"{what}: input array must be at least 2D; got arr.shape={arr.shape}")
    if arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"{what}: input array must not be empty; got arr.shape={arr.shape}")


def _cond(plan: Plan, arr, *, p):
    if p is None or p == 2:
        s = route.on_plan(SVD, plan, arr, **_VALUES)
        return s[0] / s[-1]
    if p == -2:
        s = route.on_plan(SVD, plan, arr, **_VALUES)
        r = s[-1] / s[0]
    else:
        if arr.shape[-2] != arr.shape[-1]:
            raise ShapeError(
                f"{COND.name}: for p={p!r}, array must be square; got arr.shape={arr.shape}"
            )
        norms = dict(ord=p, axis=None, keepdims=False)
        inverse = route.on_plan(INV, plan, arr)
        r = route.on_plan(NORM, plan, arr, **norms) * route.on_plan(NORM, plan, inverse, **norms)
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(arr).any(), jnp.inf, r)


COND = route.Op(
    "distla.linalg.cond",
    operands=("x",),
    check=_check_cond,
    one_device=jnp.linalg.cond,
    is_stack=route.beyond(2),
    stacked=lambda plan, arr, *, p: jnp.linalg.cond(replicated(arr), p),  # members whole
    distributed=_cond,
)


@route.public
def cond(x: jax.typing.ArrayLike, p=None) -> jax.Array:
    """Condition number, as ``jnp.linalg.cond``.

    ``p`` ``None``/``2``: ``s_max/s_min``; ``-2``: ``s_min/s_max`` (from the
    distributed [`svdvals`][distla.linalg.svdvals]); other ``p`` (``1``, ``-1``, ``inf``,
    ``-inf``, ``"fro"``): ``norm(x, p) · norm(inv(x), p)`` with distla's
    inverse. Singular matrices give ``inf``, as jnp.

    Args:
      x: ``[..., n, n]`` (or ``[..., m, n]`` for ``p`` ``None``, ``2`` or ``-2``), any
        layout: one matrix on a mesh takes the distributed route.
      p: the norm's order, as ``jnp.linalg.cond``'s (default ``None``: the 2-norm).

    Returns:
      The condition number, one per matrix of the stack: a replicated scalar for
      one matrix; ``inf`` for a singular one.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([1.0, 10.0])), mesh)
      >>> round(float(distla.linalg.cond(a)), 3)
      10.0
    """
    return route.call(COND, x, p=p)
