"""The LU factorisation's public functions: ``lu_factor``, ``lu_solve``, ``lu`` (private).

Each declares its op (``distla._core.route.Op``): checks, the one-device
function, the stacked body, the distributed driver of ``rules``; the route
does the rest.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np

from ..._core import route
from ..._core.batch_layout import broadcast_batch
from ..._core.block_cyclic import solve_layouts
from ..._core.checks import ShapeError, as_array, result_dtype, scipy_flags, square
from ..._core.matmul import product
from ..._core.matrix import natural
from ..._core.mesh import run_on_mesh, shard_spec
from ..._core.plan import Plan
from .._refine import check_system, lower_precision, refine
from . import rules, stacks

# ------------------------------------------------------------------ lu_factor


def _check_matrix(what, a, **options):
    del options
    if a.ndim < 2:
        square(a, what)


def _factor_stacks(plan: Plan, a):
    if a.shape[-1] != a.shape[-2]:
        return jsl.lu_factor(a)  # jax's own: each member where it lies, no communication
    return stacks.lu_factor(plan, a)


LU_FACTOR = route.Op(
    "distla.linalg.lu_factor",
    check=_check_matrix,
    one_device=jsl.lu_factor,
    is_stack=route.beyond(2),
    stacked=_factor_stacks,
    family="lu",
    distributed=lambda plan, a: rules.lu_factor_2d(a, call=plan),
    keep_replicated=True,
)


@route.public
def lu_factor(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """LU factorisation with partial pivoting, as ``jax.scipy.linalg.lu_factor``.

    Args:
      a: ``[m, n]`` matrix, sharded on a 1- or 2-axis mesh (any layout), or a
        stack ``[..., n, n]`` sharded along its batch dimensions. Integer and
        bool inputs promote to the default float, as in jax.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: the distributed LU's block size ``nb`` (panel width and
        block-cyclic block); ``None`` picks one near 128 that pads least.

      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as [`solve`][distla.linalg.solve]'s (the one-device plan runs jnp's function).

    Returns:
      ``(lu, piv)``: ``lu`` (``[m, n]``) holds ``L`` (unit diagonal, not
      stored) below the diagonal and ``U`` on and above it, in the 2D block
      layout ``P(r, c)`` of ``a``'s mesh (the largest even layout that fits
      for uneven sizes); ``piv[i]`` (int32, ``min(m, n)`` of them) is the row
      interchanged with row ``i``, 0-based, as LAPACK and scipy number them.
      For a stack, both carry the batch dimensions and are sharded along them
      like ``a``. Empty inputs give jax's empty results.

    Pivoting is LAPACK's partial pivoting: at each step the entry of largest
    magnitude (for complex, largest ``|re| + |im|``) in the current column,
    so every ``|l_ij| <= 1`` and the pivots match scipy's wherever that entry
    is unambiguous. A singular ``a`` gives a zero on U's diagonal and no
    exception, as in LAPACK and jax (scipy warns; jax cannot).
    Differentiable for one square matrix (jax's LU derivative).

    Raises:
      ValueError: ``a`` has fewer than 2 dimensions. (A stack of rectangular
        matrices is factored by ``jax.scipy.linalg.lu_factor`` where it lies.)
      TypeError: dtypes jnp would not promote (or float16, which jax's LAPACK lacks).

    See also: ``jax.scipy.linalg.lu_factor``, ``distla.linalg.lu_solve``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> lu_and_piv = distla.linalg.lu_factor(a)
      >>> x = distla.linalg.lu_solve(lu_and_piv, b)
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    scipy_flags(LU_FACTOR.name, overwrite_a=overwrite_a, check_finite=check_finite)
    return route.call(LU_FACTOR, a, block_size=block_size, plan=plan)


# ------------------------------------------------------------------- lu_solve


def _vector(lu, b) -> bool:
    """jax.scipy's rule: ``b`` is a vector when 1-D, or (deprecated in jax) when it has
    one dimension fewer than ``lu`` and ends in ``n``."""
    return b.ndim == 1 or (b.ndim == lu.ndim - 1 and b.shape[-1:] == lu.shape[-1:])


def _check_factors(what, lu, piv, *, trans):
    square(lu, what)
    if trans not in (0, 1, 2):
        raise ValueError(f"{what}: trans must be 0, 1 or 2; got {trans!r}")
    if not jnp.issubdtype(piv.dtype, jnp.integer):
        raise TypeError(f"{what}: piv must be an integer array (from lu_factor); got {piv.dtype}")


def _batch(what, lu, piv, b) -> tuple[int, ...]:
    """The broadcast batch of ``lu``, ``piv`` and ``b`` (``ValueError`` if they do not match)."""
    n = lu.shape[-1]
    bb_shape = (*b.shape, 1) if _vector(lu, b) else b.shape
    if piv.shape[-1:] != (n,) or b.ndim < 1 or len(bb_shape) < 2 or bb_shape[-2] != n:
        raise ShapeError(
            f"{what}: lu {lu.shape}, piv {piv.shape} and b {b.shape} do not match: piv must be "
            f"(..., {n}) and b (..., {n}) (one dimension fewer than lu) or (..., {n}, k)"
        )
    try:
        return tuple(np.broadcast_shapes(lu.shape[:-2], piv.shape[:-1], bb_shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"{what}: batch dimensions of lu {lu.shape}, piv {piv.shape} and b {b.shape} do "
            "not broadcast"
        ) from None


def _check_solve(what, lu, piv, b, *, trans):
    _check_factors(what, lu, piv, trans=trans)
    _batch(what, lu, piv, b)


def _factor_and_rhs(what, lu, piv, b, **options):
    del piv, options
    return result_dtype(what, lu, b)


def _cast_solve(dtype, lu, piv, b, **options):
    del options
    return lu.astype(dtype), piv.astype(jnp.int32), b.astype(dtype)


def _lu_solve_one(lu, piv, b, *, trans):
    """``jax.scipy.linalg.lu_solve`` with its operands apart (the one-device plan's)."""
    return jsl.lu_solve((lu, piv), b, trans=trans)


def _one_system(lu, piv, b, **options):
    """One factorisation and a 1- or 2-D ``b``: the distributed solve, or one device."""
    del options
    return lu.ndim == 2 and piv.ndim == 1 and b.ndim <= 2


def _solve_stacks(plan: Plan, lu, piv, b, *, trans):
    """A stacked factorisation (each device its members), or one factorisation and a stack
    of right-hand sides (folded into the columns of one distributed solve)."""
    if lu.ndim == 2 and piv.ndim == 1:
        cols = _fold_columns(b, mesh=plan.mesh)  # [..., n, k] -> [n, (...) k]
        x = rules.lu_solve_2d(lu, piv, cols, trans=trans, call=plan)
        return _unfold_columns(x, b.shape, mesh=plan.mesh)
    vector = _vector(lu, b)
    batch = _batch(LU_SOLVE.name, lu, piv, b)
    bb = b[..., None] if vector else b
    lu, piv, bb = (
        broadcast_batch(lu, batch, 2),
        broadcast_batch(piv, batch, 1),
        broadcast_batch(bb, batch, 2),
    )
    x = stacks.lu_solve(plan, lu, piv, bb, trans=trans)
    return x[..., 0] if vector else x


@functools.partial(jax.jit, static_argnames=("mesh",))
def _fold_columns(b, *, mesh):
    n, k = b.shape[-2:]

    def body(b):
        return jnp.moveaxis(b.reshape(-1, n, k), 1, 0).reshape(n, -1)

    return run_on_mesh(body, mesh, shard_spec((n, b.size // n), mesh), b)


@functools.partial(jax.jit, static_argnames=("shape", "mesh"))
def _unfold_columns(x, shape, *, mesh):
    n, k = shape[-2:]
    spec = shard_spec(shape, mesh)

    def body(x):
        return jnp.moveaxis(x.reshape(n, -1, k), 0, 1).reshape(shape)

    return run_on_mesh(body, mesh, spec, x)


LU_SOLVE = route.Op(
    "distla.linalg.lu_solve",
    operands=("lu", "piv", "b"),
    check=_check_solve,
    promote=_factor_and_rhs,
    cast=_cast_solve,
    voters=(0, 2),
    one_device=_lu_solve_one,
    is_stack=lambda lu, piv, b, **options: not _one_system(lu, piv, b),
    stacked=_solve_stacks,
    family="lu_solve",
    layouts=solve_layouts,
    distributed=lambda plan, lu, piv, b, *, trans: rules.lu_solve_2d(
        lu, piv, b, trans=trans, call=plan
    ),
    keep_replicated=True,
)


def _check_refined(what, lu, piv, b, a, *, trans):
    _check_factors(what, lu, piv, trans=trans)
    check_system(what, lu, a, b)


def _system_dtype(what, lu, piv, b, a, **options):
    del lu, piv, options
    return result_dtype(what, a, b)


def _cast_refined(dtype, lu, piv, b, a, **options):
    del options
    return lu, piv.astype(jnp.int32), b.astype(dtype), a.astype(dtype)


def _refined(plan: Plan | None, lu, piv, b, a, *, trans):
    return refine(
        a,
        b,
        plan=plan,
        factorisation=rules.LU,
        factor_dtype=lu.dtype,
        factors=(lu, piv),
        trans=trans,
    ).x


# lu_solve with a: a lower-precision factorisation refined against a (dsgesv's second half)
LU_SOLVE_MIXED = route.Op(
    "distla.linalg.lu_solve",
    operands=("lu", "piv", "b", "a"),
    check=_check_refined,
    promote=_system_dtype,
    cast=_cast_refined,
    one_device=functools.partial(_refined, None),
    distributed=_refined,
)


@route.public
def lu_solve(
    lu_and_piv: tuple[jax.typing.ArrayLike, jax.typing.ArrayLike],
    b: jax.typing.ArrayLike,
    trans: int = 0,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b`` from ``lu_factor(a)``, as ``jax.scipy.linalg.lu_solve``.

    Args:
      lu_and_piv: the tuple ``(lu, piv)`` from [`lu_factor`][distla.linalg.lu_factor].
      b: ``[..., n]`` or ``[..., n, k]`` right-hand side(s), in any layout on
        the same mesh (an operand on one device is moved onto it). As in jax,
        ``b`` is a vector when it is 1-D (or, deprecated in jax, has one
        dimension fewer than ``lu`` and ends in ``n``); batch dimensions broadcast: a 2-D
        factorisation serves a
        ``[B, n, k]`` stack of right-hand sides (folded into ``n x B k``
        columns of one distributed solve) and a stacked one a single ``[n]``.
      trans: 0 solves ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      a: mixed precision (a distla extension): the matrix that was factored,
        in the system's precision, when ``(lu, piv)`` is its factorisation in
        the lower precision (float32 for float64, complex64 for complex128).
        The solve is then refined against ``a`` to ``a``'s precision, as the
        second half of LAPACK's dsgesv (GMRES-IR where classical refinement
        stalls; NaN where neither converges), so one low-precision factor
        serves many right-hand sides. ``a`` must have ``lu``'s shape and
        ``b`` its batch dimensions. With a factor of any other dtype ``a``
        is ignored; without ``a`` the semantics are jax's.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        factorisation and a 1- or 2-D ``b``, as [`solve`][distla.linalg.solve]'s; ``"auto"``
        takes one device only when called eagerly (as a compiled program the
        plan's collectives cost more than the two triangular solves).

    Returns:
      ``x`` with the broadcast shape: ``[n, k]`` in the 2D block layout of
      the mesh (``[n]`` split over the mesh's devices), or the largest even
      layout that fits; stacks sharded along the batch.

    Raises:
      TypeError: ``lu_and_piv`` is not a ``(lu, piv)`` pair.
      ValueError: shapes that do not match, or ``trans`` not in (0, 1, 2).

    See also: ``jax.scipy.linalg.lu_solve``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> x = distla.linalg.lu_solve(distla.linalg.lu_factor(a), b)
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    what = LU_SOLVE.name
    scipy_flags(what, overwrite_b=overwrite_b, check_finite=check_finite)
    if not isinstance(lu_and_piv, (tuple, list)) or len(lu_and_piv) != 2:
        got = (
            f"a {type(lu_and_piv).__name__} of shape {np.shape(lu_and_piv)}"
            if hasattr(lu_and_piv, "shape")
            else repr(type(lu_and_piv).__name__)
        )
        raise TypeError(
            f"{what}: the first argument must be the pair (lu, piv) that lu_factor returns; "
            f"got {got}. Call lu_solve(lu_factor(a), b) or lu_solve((lu, piv), b)."
        )
    lu, piv = lu_and_piv
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        lu, b, a = as_array(lu, "lu", what), as_array(b, "b", what), as_array(a, "a", what)
        if lower_precision(result_dtype(what, a, b)) == lu.dtype:
            return route.call(LU_SOLVE_MIXED, lu, piv, b, a, trans=trans)
    return route.call(LU_SOLVE, lu, piv, b, plan=plan, trans=trans)


# ------------------------------------------------------------------------- lu


class LUResult(NamedTuple):
    """``(p, l, u)`` with ``a == p @ l @ u``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> result = distla.linalg.lu(a)
      >>> type(result).__name__, result.l.shape
      ('LUResult', (256, 256))
      >>> p, l, u = (np.asarray(m) for m in result)
      >>> np.allclose(p @ l @ u, np.asarray(a), atol=1e-4)
      True
    """

    p: jax.Array
    l: jax.Array  # noqa: E741
    u: jax.Array


def _check_matrix_2d(what, a, **options):
    del options
    if a.ndim != 2:
        raise ShapeError(f"{what}: a must be a matrix (m, n); got a of shape {a.shape}")


def _plu(plan: Plan, a, *, permute_l):
    p, l, u = route.distributed(rules.PLU, plan, a)
    if permute_l:
        return natural(product(p, l, plan.mesh)), u
    return jnp.real(p), l, u  # jax's p is real


LU = route.Op(
    "distla.linalg.lu",
    check=_check_matrix_2d,
    one_device=jsl.lu,
    family="lu",
    distributed=_plu,
    result=lambda out, *, permute_l: tuple(out) if permute_l else LUResult(*out),
    keep_replicated=True,
)


@route.public
def lu(
    a: jax.typing.ArrayLike,
    permute_l: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> LUResult | tuple[jax.Array, jax.Array]:
    """``a == p @ l @ u``, as ``jax.scipy.linalg.lu``.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh (any layout;
        rectangular as in jax: the LU of an identity-padded square matrix,
        whose leading steps are ``a``'s own).
      permute_l: return ``(p @ l, u)`` instead of ``(p, l, u)``, as jax.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: as in [`lu_factor`][distla.linalg.lu_factor].
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as
        [`lu_factor`][distla.linalg.lu_factor]'s (the one-device plan runs ``jax.scipy.linalg.lu``).

    Returns:
      ``(p [m, m], l [m, k], u [k, n])`` with ``k = min(m, n)``: the
      permutation matrix, unit lower trapezoidal ``l`` and upper trapezoidal
      ``u``, each in the 2D block layout of the mesh (or the largest even
      layout that fits); ``p`` in ``a``'s real dtype, as jax's. Pivots as in
      [`lu_factor`][distla.linalg.lu_factor]. Differentiable
      (``jax.grad``/``jax.jvp``, any order) for square ``a``, with jax's rule.

    Raises:
      ValueError: ``a`` is not a matrix.

    See also: ``jax.scipy.linalg.lu``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> p, l, u = distla.linalg.lu(a)
      >>> np.allclose(np.asarray(p) @ np.asarray(l) @ np.asarray(u), np.asarray(a), atol=1e-4)
      True
    """
    scipy_flags(LU.name, permute_l=permute_l, overwrite_a=overwrite_a, check_finite=check_finite)
    return route.call(LU, a, block_size=block_size, plan=plan, permute_l=permute_l)
