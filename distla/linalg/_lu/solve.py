"""The LU family's solve: ``solve`` and ``tensorsolve`` (private).

``solve`` declares its op (``distla._core.route.Op``): one matrix by the
distributed LU (``rules.SOLVE``), with ``assume_a="pos"`` by the Cholesky
family's solve, stacks on each device (``stacks``), and mixed precision
(``factor_dtype=``) by refinement (``distla.linalg._refine``).
"""

from __future__ import annotations

import math
import operator

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..._core import route
from ..._core.batch_layout import broadcast_batch
from ..._core.block_cyclic import solve_layouts
from ..._core.checks import ShapeError, as_array, is_empty, onto_mesh, scipy_flags, square
from ..._core.matrix import like, tril, triu
from ..._core.mesh import drop_trivial_sharding, natural_spec
from ..._core.plan import Plan
from .._cholesky import solve_pos
from .._refine import check_factor_dtype, solve_mixed
from . import rules, stacks
from .inverse import reshaped


def _solve_shapes(a: jax.Array, b: jax.Array, what: str) -> bool:
    """Check shapes as jnp.linalg.solve does; True when b is a single vector."""
    square(a, what)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ShapeError(f"{what}: b of shape {b.shape} does not match a of shape {a.shape}")
        return True
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n} (numpy 2 rules, as "
            f"jnp.linalg.solve); got a of shape {a.shape}, b of shape {b.shape}. For a stack "
            "of vectors use solve(a, b[..., None])[..., 0]."
        )
    try:
        jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(
            f"{what}: batch dimensions of a {a.shape} and b {b.shape} do not broadcast"
        ) from None
    return False


def _check(what, a, b, **options):
    del options
    _solve_shapes(a, b, what)


def _symmetrize(a, *, lower):
    """The Hermitian matrix whose ``lower`` (or upper) triangle ``a`` holds."""
    tri = tril(a) if lower else triu(a)
    strict = tril(a, -1) if lower else triu(a, 1)
    return tri + like(jnp.conj(jnp.swapaxes(strict, -1, -2)), tri)


def _cast(dtype, a, b, *, assume_a, lower, **options):
    del options
    a, b = a.astype(dtype), b.astype(dtype)
    if assume_a == "pos":  # jax.scipy reads only the `lower` triangle here (Cholesky)
        a = _symmetrize(drop_trivial_sharding(a), lower=lower)
    return a, b


def _solve_one(a, b, *, assume_a, lower, factor_dtype):
    """``jax.scipy.linalg.solve`` (the one-device plan's)."""
    del factor_dtype
    return jsl.solve(a, b, assume_a=assume_a, lower=lower)


def _solve_unsharded(a, b, **options):
    """``jnp.linalg.solve`` (unsharded and empty operands, whatever ``assume_a``)."""
    del options
    return jnp.linalg.solve(a, b)


def _is_stack(a, b, **options):
    del options
    return a.ndim > 2 or b.ndim > 2


def _layouts(plan: Plan, a, b, *, results, assume_a, **options):
    # the distributed plans' layouts: on Explicit meshes Cholesky's x keeps b's; the
    # LU's is the largest even one
    return solve_layouts(plan, a, b, results=results, like_b=assume_a == "pos")


def _solve_2d(plan: Plan, a, b, *, assume_a, lower, factor_dtype):
    del factor_dtype
    if assume_a == "pos":
        return solve_pos(a, b, lower=lower, call=plan)
    return rules.solve_2d(a, b, call=plan)


def _mixed(dtype, a, b, *, factor_dtype, **options):
    """Mixed precision for a non-empty system whose ``factor_dtype`` is below its dtype
    (``factor_dtype`` equal to it is the plain solve)."""
    del options
    if factor_dtype is None or is_empty(a, b):
        return None
    return SOLVE_MIXED if check_factor_dtype(dtype, factor_dtype, SOLVE.name) != dtype else None


SOLVE = route.Op(
    "distla.linalg.solve",
    operands=("a", "b"),
    check=_check,
    cast=_cast,
    instead=_mixed,
    unsharded=_solve_unsharded,
    one_device=_solve_one,
    is_stack=_is_stack,
    stacked=lambda plan, a, b, **options: stacks.solve(plan, a, b),
    family="solve",
    layouts=_layouts,
    distributed=_solve_2d,
    keep_replicated=True,
)


def _refined(plan: Plan | None, a, b, *, factor_dtype, **options):
    del options
    if a.ndim > 2 or b.ndim > 2:  # one system per member
        vector = b.ndim == 1
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[: -2 + vector]))
        a = broadcast_batch(a, batch, 2)
        b = broadcast_batch(b, batch, 1 if vector else 2)
    return solve_mixed(plan, a, b, factorisation=rules.LU, factor_dtype=factor_dtype)


# solve with factor_dtype below the system's: LAPACK's dsgesv (refinement); taken by
# SOLVE once the dtype is known (SOLVE.instead)
SOLVE_MIXED = route.Op(
    "distla.linalg.solve",
    operands=("a", "b"),
    one_device=lambda a, b, **options: _refined(None, a, b, **options),
    distributed=_refined,
)

_ASSUME_A = ("gen", "sym", "her", "pos")


@route.public
def solve(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    debug: bool = False,
    check_finite: bool = True,
    assume_a: str = "gen",
    *,
    block_size: int | None = None,
    factor_dtype: jax.typing.DTypeLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b``, as ``jnp.linalg.solve`` (and ``jax.scipy.linalg.solve``).

    A single matrix sharded over a mesh is solved by the distributed LU; a
    stack sharded along its batch dimensions is solved on each device, with
    no communication at all.

    Args:
      a: ``[n, n]`` matrix, or ``[..., n, n]`` stack. Integer and bool inputs
        promote to the default float, as in jnp.
      b: ``[n]`` vector or ``[..., n, k]`` matrices (one-device operands are
        moved onto ``a``'s mesh). As in the installed jax (numpy 2 rules), a
        ``[B, n]`` right-hand side for a ``[B, n, n]`` stack is not a stack of
        vectors: use ``solve(a, b[..., None])[..., 0]``; with
        ``assume_a="pos"`` it is, as in ``jax.scipy.linalg.solve``.
      assume_a: ``"gen"``, ``"sym"``, ``"her"`` or ``"pos"``, as in
        ``jax.scipy.linalg.solve``. ``"pos"`` on one sharded matrix runs the
        distributed Cholesky ([`cho_factor`][distla.linalg.cho_factor]); every other case, and
        stacks of matrices, runs the LU (right for any nonsingular ``a``).
        With ``"pos"`` only the triangle named by ``lower`` is read, as in
        jax (which reads all of ``a`` otherwise).
      lower: which triangle of ``a`` holds the matrix for ``assume_a`` other
        than ``"gen"``.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      debug: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: the distributed LU's block size (see [`lu_factor`][distla.linalg.lu_factor]).
      factor_dtype: mixed precision (a distla extension): factor in this
        dtype (float32 for a float64 system, complex64 for complex128) and
        refine to the system's precision, as LAPACK's dsgesv; NaN where
        refinement does not converge (docs: lu.md). ``None``: no.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix: below the budget ([`set_plan_budget`][distla.linalg.set_plan_budget]) and a measured
        crossover size, ``"auto"`` moves ``a`` and ``b`` to one device, runs
        ``jax.scipy.linalg.solve`` (LAPACK) there and shards ``x`` back in
        the same layout; ``distla.cost`` reports the plan.

    Returns:
      ``x`` of shape ``[..., n]`` or ``[..., n, k]``; for one matrix in the 2D
      block layout of the mesh, for a stack in the layout ``a``'s batch
      arrived in (so ``a @ x - b`` works on Explicit meshes).
      A singular ``a`` gives inf/nan, as in LAPACK and jax (no exception).

    Raises:
      ValueError: shapes that do not match (the message names them), or an
        unknown ``assume_a``.

    See also: ``jnp.linalg.solve``, ``jax.scipy.linalg.solve``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> x = distla.linalg.solve(a, b)
      >>> x.shape, x.sharding.spec
      ((256, 8), P('rows', 'cols'))
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    what = SOLVE.name
    scipy_flags(
        what,
        lower=lower,
        overwrite_a=overwrite_a,
        overwrite_b=overwrite_b,
        check_finite=check_finite,
    )
    if assume_a not in _ASSUME_A:
        raise ValueError(
            f"{what}: assume_a must be one of {_ASSUME_A} (as jax.scipy.linalg.solve); got "
            f"{assume_a!r}"
        )
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    if assume_a == "pos" and a.ndim > 2 and a.ndim == b.ndim + 1 and b.shape[-1] == a.shape[-1]:
        # jax.scipy's Cholesky path (not jnp's numpy 2 rules) reads [..., n] as one
        # vector per member of an [..., n, n] stack
        return solve(
            a,
            b[..., None],
            assume_a=assume_a,
            lower=lower,
            block_size=block_size,
            factor_dtype=factor_dtype,
            plan=plan,
        )[..., 0]
    options = dict(assume_a=assume_a, lower=bool(lower), factor_dtype=factor_dtype)
    return route.call(SOLVE, a, b, block_size=block_size, plan=plan, **options)


@route.public
def tensorsolve(
    a: jax.typing.ArrayLike, b: jax.typing.ArrayLike, axes: tuple[int, ...] | None = None
) -> jax.Array:
    """Solves ``tensordot(a, x, x.ndim) = b`` for ``x``, as ``jnp.linalg.tensorsolve``.

    [`solve`][distla.linalg.solve] (the distributed LU) on ``a`` reshaped to a square matrix.

    Args:
      a: array whose leading ``b.ndim`` axes are ``b``'s shape and whose
        remaining axes (``x``'s shape) hold as many elements as ``b``.
      b: right-hand side.
      axes: axes of ``a`` moved to the end first, as jnp's.

    Returns:
      ``x`` of shape ``a.shape[b.ndim:]`` (after moving ``axes``).

    Raises:
      ValueError: ``a``'s shape does not make a square system with ``b``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(64).reshape(8, 8, 64) * 2.0, mesh)
      >>> b = distla.shard(jnp.ones((8, 8)), mesh)
      >>> x = distla.linalg.tensorsolve(a, b)
      >>> x.shape, float(np.asarray(x)[0])
      ((64,), 0.5)
    """
    what = "distla.linalg.tensorsolve"
    # onto the mesh first: the reshapes below are jnp's (one-device beside sharded)
    a, b = onto_mesh(as_array(a, "a", what), as_array(b, "b", what))
    if axes is not None:
        axes = [operator.index(i) for i in axes]
        for i in axes:  # out of range: refused, as jnp refuses it (never wrapped)
            if not -a.ndim <= i < a.ndim:
                raise ValueError(
                    f"{what}: axis {i} is out of bounds for array of dimension {a.ndim} "
                    f"(a of shape {a.shape}); give axes in [-{a.ndim}, {a.ndim})"
                )
        axes = [i % a.ndim for i in axes]
        a = jnp.moveaxis(a, axes, range(a.ndim - len(axes), a.ndim))
    out_shape = a.shape[b.ndim :]
    n = math.prod(out_shape)
    if a.shape[: b.ndim] != b.shape or math.prod(b.shape) != n:
        raise ShapeError(
            f"{what}: a of shape {a.shape} does not make a square system for b of shape "
            f"{b.shape}: a's leading axes must be b's shape and its other axes must hold "
            f"{math.prod(b.shape)} elements"
        )
    matrix = a if a.ndim == 2 else reshaped(a, (n, n), lambda grid: grid.block_spec, what=what)
    # b and x in distla.shard's layouts (jnp's reshapes of split operands are refused)
    natural = lambda ndim: lambda grid: natural_spec(ndim, grid.mesh)  # noqa: E731
    options = dict(assume_a="gen", lower=False, factor_dtype=None)
    x = route.call(SOLVE, matrix, reshaped(b, (n,), natural(1), what=what), **options)
    return reshaped(x, out_shape, natural(len(out_shape)), what=what)
