"""Distributed LU and the solve family: ``distla.linalg``.

Semantics follow ``jax.scipy.linalg`` and ``jnp.linalg``. Where the operands
are one matrix sharded over a mesh, the work runs as a distributed blocked LU
with partial pivoting (``distla/_lu.py``, ``kernels/lu.py``, ``kernels/trsm.py``).
Where they are a stack of matrices (leading batch dimensions), each device
factors and solves its own matrices with no communication
(``distla/_batched.py``). Unsharded operands fall back to the one-device jax
functions.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import NamedSharding

from . import _batched, _lu, _refine
from ._blas import single_thread_lapack_for_cpu_devices
from ._checks import as_array, empty_or_one_device, is_empty, onto_mesh, result_dtype
from ._mesh import (
    drop_trivial_sharding,
    fitting_spec,
    is_explicit,
    axes_taken_by_vmap,
    operand_mesh,
    run_on_mesh,
)
from ._cholesky import cho_factor, cho_solve, cholesky, solve_pos, solve_triangular
from ._cholesky import model_bytes as cholesky_model_bytes
from ._lu import model_bytes as lu_model_bytes
from ._qr import model_bytes as qr_model_bytes
from ._qr import qr
from ._spectral import (EighResult, SVDResult, cond, eigh, eigvalsh, lstsq, matrix_rank, norm, pinv, polar, svd, svdvals)  # noqa: E501
from .layout import natural_spec
from .matmul import matmul


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)`` with ``det(a) == sign * exp(logabsdet)``."""

    sign: jax.Array
    logabsdet: jax.Array


def _square(a: jax.Array, what: str, *, batch: bool = True) -> None:
    if a.ndim < 2 or (not batch and a.ndim != 2):
        want = "(..., n, n)" if batch else "(n, n)"
        raise ValueError(f"{what}: a must have shape {want}; got a of shape {a.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{what}: a must be square; got a of shape {a.shape}")


def _mesh_of(*xs, names):
    mesh = operand_mesh(*xs, names=names)
    if mesh is not None:
        single_thread_lapack_for_cpu_devices()
    return mesh


# --------------------------------------------------------------------- one matrix
# The functions below run one sharded matrix through distla/_lu.py. Each is
# wrapped so that jax.vmap of it becomes one batched call (_batched.with_vmap_rule)
# and so that its derivatives reuse the factorisation: solves are written as
# lax.custom_linear_solve, whose transpose is the solve with trans=1, the way
# jnp.linalg.solve is.


def _like(x, ref):
    """``x`` with ``ref``'s sharding type on Explicit meshes, as lax.custom_linear_solve needs."""
    sharding = jax.typeof(ref).sharding
    if _explicit(sharding):
        return jax.sharding.reshard(x, sharding)
    return x


def _explicit(sharding) -> bool:
    mesh = getattr(sharding, "mesh", None)
    return mesh is not None and mesh.size > 1 and is_explicit(mesh)


def _natural(x):
    """``x`` in distla's layout for its shape (largest even layout) on Explicit meshes."""
    sharding = jax.typeof(x).sharding
    if not _explicit(sharding):
        return x
    spec = fitting_spec(x.shape, sharding.mesh, natural_spec(x.ndim, sharding.mesh))
    return jax.sharding.reshard(x, NamedSharding(sharding.mesh, spec))


def _not_differentiable(fn, what):
    fn = jax.custom_jvp(fn)

    def rule(primals, tangents):
        raise TypeError(
            f"{what} is not differentiable in distla; differentiate distla.linalg.solve or "
            "distla.linalg.lu_solve, whose derivatives reuse the factorisation."
        )

    fn.defjvp(rule)
    return fn


def _factor_2d(a, *, dtype, block_size):
    def factor(a):
        return tuple(_lu.lu_factor(a, dtype=dtype, block_size=block_size))

    return _batched.with_vmap_rule("lu_factor", factor)(a)


def _lu_solve_kernel(trans, dtype):
    def kernel(lu, piv, b):
        return _lu.lu_solve(lu, piv, b, trans=trans, dtype=dtype)

    return _batched.with_vmap_rule("lu_solve", kernel, trans=trans)


def _lu_solve_2d(lu, piv, b, *, trans, dtype):
    def matvec(x):
        return _like(_lu.factors_matvec(lu, piv, x, trans=trans, dtype=dtype), x)

    def solve(_, rhs):
        return _like(_lu_solve_kernel(trans, dtype)(lu, piv, rhs), rhs)

    def transpose_solve(_, rhs):
        if trans == 2:  # the linear transpose of x -> A^-H x is x -> conj(A^-1 conj(x))
            x = jnp.conj(_lu_solve_kernel(0, dtype)(lu, piv, jnp.conj(rhs)))
        else:
            x = _lu_solve_kernel(1 - trans, dtype)(lu, piv, rhs)
        return _like(x, rhs)

    return _natural(lax.custom_linear_solve(matvec, b, solve, transpose_solve))


def _matvec(a, x):
    if x.ndim == 1:
        return matmul(a, x[:, None])[:, 0]
    return matmul(a, x)


def _solve_linear(a, b, *, dtype, block_size):
    """``a^-1 b`` as ``lax.custom_linear_solve``: linear in ``b``, its transpose the
    ``trans=1`` solve, differentiable in ``a`` through ``a @ x``; the factors of
    ``a`` are computed once."""
    lu, piv = _factor_2d(lax.stop_gradient(a), dtype=dtype, block_size=block_size)
    return _natural(
        lax.custom_linear_solve(
            lambda x: _like(_matvec(a, x), x),
            b,
            lambda _, rhs: _like(_lu_solve_kernel(0, dtype)(lu, piv, rhs), rhs),
            lambda _, rhs: _like(_lu_solve_kernel(1, dtype)(lu, piv, rhs), rhs),
        )
    )


def _solve_2d(a, b, *, dtype, block_size):
    def fused(a, b):  # factorisation and solves in one program
        return _lu.solve(a, b, dtype=dtype, block_size=block_size)

    def linear(a, b):
        return _solve_linear(a, b, dtype=dtype, block_size=block_size)

    primal = jax.custom_jvp(_batched.with_vmap_rule("solve", fused))
    primal.defjvp(lambda primals, tangents: jax.jvp(linear, primals, tangents))
    return primal(a, b)


def _tr_inv_times(a, da, *, dtype, block_size):
    """``trace(a^-1 da)``, linear in ``da`` and differentiable in ``a`` (to any order)."""
    return _lu.trace(_solve_linear(a, da, dtype=dtype, block_size=block_size))


def _regular_or_eye(a, regular):
    """``a`` where ``regular``, else the identity: a safe operand for the unused branch."""
    eye = _like(jnp.eye(a.shape[-1], dtype=a.dtype), a)
    return jnp.where(regular, a, eye)


def _slogdet_2d(a, *, dtype, block_size):
    def primal(a):
        return tuple(_lu.slogdet(a, dtype=dtype, block_size=block_size))

    fn = jax.custom_jvp(_batched.with_vmap_rule("slogdet", primal))

    def rule(primals, tangents):
        # jnp's rule: d log|det a| = trace(a^-1 da); the solve is differentiable
        # in a (custom_linear_solve through a @ x), so every order is right
        (a,), (da,) = primals, tangents
        sign, logabs = fn(a)
        g = _tr_inv_times(a, da, dtype=dtype, block_size=block_size)
        if jnp.issubdtype(dtype, jnp.complexfloating):
            sign_dot = (g - jnp.real(g).astype(g.dtype)).astype(sign.dtype) * sign
        else:
            sign_dot = jnp.zeros_like(sign)
        return (sign, logabs), (sign_dot, jnp.real(g).astype(logabs.dtype))

    fn.defjvp(rule)
    return fn(a)


def _det_2d(a, *, dtype, block_size):
    def primal(a):
        return _lu.det(a, dtype=dtype, block_size=block_size)

    fn = jax.custom_jvp(_batched.with_vmap_rule("det", primal))

    def rule(primals, tangents):
        # d det = trace(adj(a) da). Where det is finite and non-zero, adj(a) =
        # det(a) a^-1 built from differentiable pieces (det's own rule and a
        # solve differentiable in a), so higher derivatives are right; at a
        # singular (or overflowing) a, jnp's cofactor construction of adj(a)
        # (distla._lu.adjugate), which is zero where det overflows, as jnp's.
        (a,), (da,) = primals, tangents
        d = fn(a)
        regular = jnp.isfinite(d) & (d != 0)
        safe = _regular_or_eye(a, regular)
        t_regular = fn(safe) * _tr_inv_times(safe, da, dtype=dtype, block_size=block_size)
        adj = _adjugate_2d(lax.stop_gradient(a), dtype=dtype, block_size=block_size)
        t_singular = jnp.sum(_like(jnp.transpose(adj), da) * da)
        return d, jnp.where(regular, t_regular.astype(d.dtype), t_singular.astype(d.dtype))

    fn.defjvp(rule)
    return fn(a)


def _adjugate_2d(a, *, dtype, block_size):
    def adjugate(a):
        return _lu.adjugate(a, dtype=dtype, block_size=block_size)

    return _not_differentiable(adjugate, "the adjugate")(a)


def _inv_2d(a, *, dtype, block_size):
    def primal(a):
        return _lu.inv(a, dtype=dtype, block_size=block_size)

    fn = jax.custom_jvp(_batched.with_vmap_rule("inv", primal))

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        x = fn(a)
        return x, -matmul(matmul(x, da), x)

    fn.defjvp(rule)
    return fn(a)


def _tri(x, *, lower: bool, k: int = 0):
    """``jnp.tril(x, k)`` / ``jnp.triu(x, k)`` on any mesh (a mask from replicated iotas)."""
    r = lax.broadcasted_iota(jnp.int32, x.shape, 0)
    c = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    keep = (c - r <= k) if lower else (c - r >= k)
    return jnp.where(keep, x, jnp.zeros((), x.dtype))


def _lu_tangent(p, l, u, da, *, dtype, block_size):
    """``(dl, du)`` of ``a = p l u`` (square): jax's rule ``X = l^-1 p^T da u^-1``,
    ``dl = l tril(X, -1)``, ``du = triu(X) u``, with distla's inv and matmul."""
    pda = matmul(_like(jnp.transpose(p), da), da)
    x = matmul(matmul(_inv_2d(l, dtype=dtype, block_size=block_size), pda),
               _inv_2d(u, dtype=dtype, block_size=block_size))
    dl = matmul(l, _tri(x, lower=True, k=-1))
    du = matmul(_tri(x, lower=False), u)
    return dl, du


def _plu_2d(a, *, dtype, block_size):
    def primal(a):
        return tuple(_lu.lu(a, dtype=dtype, block_size=block_size))

    fn = jax.custom_jvp(primal)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        if a.shape[0] != a.shape[1]:
            raise NotImplementedError(
                "distla.linalg.lu of a rectangular matrix is not differentiable in distla "
                f"(got a of shape {a.shape}); jax.scipy.linalg.lu is. Differentiate a square "
                "matrix, or solve/lu_solve."
            )
        p, l, u = fn(a)
        dl, du = _lu_tangent(p, l, u, da, dtype=dtype, block_size=block_size)
        return (p, l, u), (jnp.zeros_like(p), _like(dl, l), _like(du, u))

    fn.defjvp(rule)
    return fn(a)


def _lu_factor_2d(a, *, dtype, block_size):
    def factor(a):
        return _factor_2d(a, dtype=dtype, block_size=block_size)

    fn = jax.custom_jvp(factor)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        if a.shape[0] != a.shape[1]:
            raise NotImplementedError(
                "distla.linalg.lu_factor of a rectangular matrix is not differentiable in "
                f"distla (got a of shape {a.shape})."
            )
        lu_, piv = fn(a)
        p, l, u = _lu._plu(lu_, piv)
        dl, du = _lu_tangent(p, l, u, da, dtype=dtype, block_size=block_size)
        return (lu_, piv), (_like(dl + du, lu_), np.zeros(piv.shape, jax.dtypes.float0))

    fn.defjvp(rule)
    return fn(a)


def _same_mesh(mesh, *xs):
    """One-device operands moved onto the operands' mesh (``_checks.onto_mesh``)."""
    del mesh
    return onto_mesh(*xs)


def _fallback(ref, *xs):
    """``ref`` on operands on one device or with no elements (``_checks.empty_or_one_device``)."""
    return empty_or_one_device(ref, *xs)


def _inv_one_device(a):
    """``jnp.linalg.inv``, also per example under ``jax.vmap`` over Explicit axes.

    There jnp's own ``inv`` gathers from an unbatched identity with batched
    pivots, which sharding-in-types cannot type; the vmap becomes one
    batched call instead (``_batched.with_vmap_rule``).
    """
    if not axes_taken_by_vmap():
        return jnp.linalg.inv(a)
    return _batched.with_vmap_rule("inv", jnp.linalg.inv)(a)


def _check_scipy_flags(what, **flags):
    """``check_finite``/``overwrite_*``: accepted and ignored, as in jax.scipy.linalg."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what}: {name} must be a bool (ignored, as in jax.scipy); got "
                            f"{value!r}")


def lu_factor(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
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
      ValueError: ``a`` has fewer than 2 dimensions, or is a non-square stack.
      TypeError: dtypes jnp would not promote (or float16, which jax's LAPACK lacks).

    See also: ``jax.scipy.linalg.lu_factor``, ``distla.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_factor"
    _check_scipy_flags(what, overwrite_a=overwrite_a, check_finite=check_finite)
    a = as_array(a, "a", what)
    if a.ndim != 2:
        _square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        return _fallback(jsl.lu_factor, a)
    if a.ndim > 2:
        return _batched.lu_factor(a)
    return _lu_factor_2d(a, dtype=dtype, block_size=block_size)


def lu_solve(
    lu_and_piv: tuple[jax.typing.ArrayLike, jax.typing.ArrayLike],
    b: jax.typing.ArrayLike,
    trans: int = 0,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Solve ``a x = b`` from ``lu_factor(a)``, as ``jax.scipy.linalg.lu_solve``.

    Args:
      lu_and_piv: the tuple ``(lu, piv)`` from :func:`lu_factor`.
      b: ``[..., n]`` or ``[..., n, k]`` right-hand side(s), in any layout on
        the same mesh (an operand on one device is moved onto it). As in jax,
        ``b`` is a vector when it is 1-D (or, deprecated in jax, has one
        dimension fewer than ``lu`` and ends in ``n``); batch dimensions broadcast: a 2-D factorisation serves a
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

    Returns:
      ``x`` with the broadcast shape: ``[n, k]`` in the 2D block layout of
      the mesh (``[n]`` split over the mesh's devices), or the largest even
      layout that fits; stacks sharded along the batch.

    Raises:
      TypeError: ``lu_and_piv`` is not a ``(lu, piv)`` pair.
      ValueError: shapes that do not match, or ``trans`` not in (0, 1, 2).

    See also: ``jax.scipy.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_solve"
    _check_scipy_flags(what, overwrite_b=overwrite_b, check_finite=check_finite)
    if not isinstance(lu_and_piv, (tuple, list)) or len(lu_and_piv) != 2:
        got = (f"a {type(lu_and_piv).__name__} of shape {np.shape(lu_and_piv)}"
               if hasattr(lu_and_piv, "shape") else repr(type(lu_and_piv).__name__))
        raise TypeError(
            f"{what}: the first argument must be the pair (lu, piv) that lu_factor returns; "
            f"got {got}. Call lu_solve(lu_factor(a), b) or lu_solve((lu, piv), b)."
        )
    lu, piv = lu_and_piv
    lu = as_array(lu, "lu", what)
    piv = as_array(piv, "piv", what)
    b = as_array(b, "b", what)
    _square(lu, what)
    if trans not in (0, 1, 2):
        raise ValueError(f"{what}: trans must be 0, 1 or 2; got {trans!r}")
    if not jnp.issubdtype(piv.dtype, jnp.integer):
        raise TypeError(f"{what}: piv must be an integer array (from lu_factor); got {piv.dtype}")
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        x = _refine.lu_solve_mixed(lu, piv, b, trans=trans, a=a)
        if x is not None:
            return x
    n = lu.shape[-1]
    # jax.scipy's rule: a vector when b is 1-D, or (deprecated in jax) when b has
    # one dimension fewer than lu and ends in n
    vector = b.ndim == 1 or (b.ndim == lu.ndim - 1 and b.shape[-1:] == (n,))
    bb_shape = (*b.shape, 1) if vector else b.shape
    if piv.shape[-1:] != (n,) or b.ndim < 1 or len(bb_shape) < 2 or bb_shape[-2] != n:
        raise ValueError(
            f"{what}: lu {lu.shape}, piv {piv.shape} and b {b.shape} do not match: piv must be "
            f"(..., {n}) and b (..., {n}) (one dimension fewer than lu) or (..., {n}, k)"
        )
    try:
        batch = tuple(np.broadcast_shapes(lu.shape[:-2], piv.shape[:-1], bb_shape[:-2]))
    except ValueError:
        raise ValueError(
            f"{what}: batch dimensions of lu {lu.shape}, piv {piv.shape} and b {b.shape} do "
            "not broadcast"
        ) from None
    dtype = result_dtype(what, lu, b)
    lu, b = lu.astype(dtype), b.astype(dtype)
    piv = piv.astype(jnp.int32)
    mesh = _mesh_of(lu, b, names=("lu", "b"))
    if mesh is None or is_empty(lu, b):
        return _fallback(lambda lu, piv, b: jsl.lu_solve((lu, piv), b, trans=trans), lu, piv, b)
    lu, piv, b = _same_mesh(mesh, lu, piv, b)
    if lu.ndim == 2 and piv.ndim == 1:
        if b.ndim <= 2:
            return _lu_solve_2d(lu, piv, b, trans=trans, dtype=dtype)
        cols = _fold_columns(b)  # [..., n, k] -> [n, (...) k]: one solve, many columns
        x = _lu_solve_2d(lu, piv, cols, trans=trans, dtype=dtype)
        return _unfold_columns(x, b.shape)
    bb = b[..., None] if vector else b
    lu = _broadcast_batch(lu, batch, 2)
    piv = _broadcast_batch(piv, batch, 1)
    bb = _broadcast_batch(bb, batch, 2)
    x = _batched.lu_solve(lu, piv, bb, trans=trans)
    return x[..., 0] if vector else x


def _broadcast_batch(x, batch, core):
    shape = (*batch, *x.shape[x.ndim - core:])
    return x if x.shape == shape else jnp.broadcast_to(x, shape)


@jax.jit
def _fold_columns(b):
    mesh = operand_mesh(b, names=("b",))
    n, k = b.shape[-2:]

    def body(b):
        return jnp.moveaxis(b.reshape(-1, n, k), 1, 0).reshape(n, -1)

    if mesh is None:  # a one-device b beside a sharded factorisation
        return body(b)
    spec = fitting_spec((n, b.size // n), mesh, natural_spec(2, mesh))
    return run_on_mesh(body, mesh, spec, b)


@functools.partial(jax.jit, static_argnames=("shape",))
def _unfold_columns(x, shape):
    mesh = operand_mesh(x, names=("x",))
    n, k = shape[-2:]
    spec = fitting_spec(shape, mesh, natural_spec(len(shape), mesh))

    def body(x):
        return jnp.moveaxis(x.reshape(n, -1, k), 0, 1).reshape(shape)

    return run_on_mesh(body, mesh, spec, x)


class LUResult(NamedTuple):
    """``(p, l, u)`` with ``a == p @ l @ u``."""

    p: jax.Array
    l: jax.Array  # noqa: E741
    u: jax.Array


def lu(
    a: jax.typing.ArrayLike,
    permute_l: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
) -> LUResult | tuple[jax.Array, jax.Array]:
    """``a == p @ l @ u``, as ``jax.scipy.linalg.lu``.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh (any layout;
        rectangular as in jax: the LU of an identity-padded square matrix,
        whose leading steps are ``a``'s own).
      permute_l: return ``(p @ l, u)`` instead of ``(p, l, u)``, as jax.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: as in :func:`lu_factor`.

    Returns:
      ``(p [m, m], l [m, k], u [k, n])`` with ``k = min(m, n)``: the
      permutation matrix, unit lower trapezoidal ``l`` and upper trapezoidal
      ``u``, each in the 2D block layout of the mesh (or the largest even
      layout that fits). Pivots as in :func:`lu_factor`. Differentiable
      (``jax.grad``/``jax.jvp``, any order) for square ``a``, with jax's rule.

    Raises:
      ValueError: ``a`` is not a matrix.

    See also: ``jax.scipy.linalg.lu``.
    """
    what = "distla.linalg.lu"
    _check_scipy_flags(what, permute_l=permute_l, overwrite_a=overwrite_a,
                       check_finite=check_finite)
    a = as_array(a, "a", what)
    if a.ndim != 2:
        raise ValueError(f"{what}: a must be a matrix (m, n); got a of shape {a.shape}")
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        out = _fallback(lambda a: jsl.lu(a, permute_l=permute_l), a)
        return tuple(out) if permute_l else LUResult(*out)
    p, l, u = _plu_2d(a, dtype=dtype, block_size=block_size)
    if permute_l:
        return _natural(matmul(p, l)), u
    return LUResult(p, l, u)


def _solve_shapes(a: jax.Array, b: jax.Array, what: str) -> bool:
    """Check shapes as jnp.linalg.solve does; True when b is a single vector."""
    _square(a, what)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ValueError(f"{what}: b of shape {b.shape} does not match a of shape {a.shape}")
        return True
    if b.ndim < 2 or b.shape[-2] != n:
        raise ValueError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n} (numpy 2 rules, as "
            f"jnp.linalg.solve); got a of shape {a.shape}, b of shape {b.shape}. For a stack "
            "of vectors use solve(a, b[..., None])[..., 0]."
        )
    try:
        jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(
            f"{what}: batch dimensions of a {a.shape} and b {b.shape} do not broadcast"
        ) from None
    return False


_ASSUME_A = ("gen", "sym", "her", "pos")


def solve(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    *,
    assume_a: str = "gen",
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    debug: bool = False,
    check_finite: bool = True,
    block_size: int | None = None,
    factor_dtype: jax.typing.DTypeLike | None = None,
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
        vectors: use ``solve(a, b[..., None])[..., 0]``.
      assume_a: ``"gen"``, ``"sym"``, ``"her"`` or ``"pos"``, as in
        ``jax.scipy.linalg.solve``; every one is solved by the LU today (right
        for any nonsingular ``a``). With ``"pos"`` only the triangle named by
        ``lower`` is read, as in jax (which reads all of ``a`` otherwise).
      lower: which triangle of ``a`` holds the matrix for ``assume_a`` other
        than ``"gen"``.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      debug: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: the distributed LU's block size (see :func:`lu_factor`).
      factor_dtype: mixed precision (a distla extension): factor in this
        dtype (float32 for a float64 system, complex64 for complex128) and
        refine to the system's precision, as LAPACK's dsgesv; NaN where
        refinement does not converge (``distla/_refine.py``). ``None``: no.

    Returns:
      ``x`` of shape ``[..., n]`` or ``[..., n, k]``; for one matrix in the 2D
      block layout of the mesh, for a stack in the layout ``a``'s batch
      arrived in (so ``a @ x - b`` works on Explicit meshes).
      A singular ``a`` gives inf/nan, as in LAPACK and jax (no exception).

    Raises:
      ValueError: shapes that do not match (the message names them), or an
        unknown ``assume_a``.

    See also: ``jnp.linalg.solve``, ``jax.scipy.linalg.solve``.
    """
    what = "distla.linalg.solve"
    _check_scipy_flags(what, lower=lower, overwrite_a=overwrite_a, overwrite_b=overwrite_b,
                       check_finite=check_finite)
    if assume_a not in _ASSUME_A:
        raise ValueError(
            f"{what}: assume_a must be one of {_ASSUME_A} (as jax.scipy.linalg.solve); got "
            f"{assume_a!r}"
        )
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    vector = _solve_shapes(a, b, what)
    dtype = result_dtype(what, a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    if assume_a == "pos":  # jax.scipy reads only the `lower` triangle here (Cholesky)
        a = _symmetrize(a, lower=lower)
    mesh = _mesh_of(a, b, names=("a", "b"))
    if factor_dtype is not None and not is_empty(a, b):
        return _refine.solve_mixed(*onto_mesh(a, b), factor_dtype=factor_dtype)
    if mesh is None or is_empty(a, b):
        return _fallback(jnp.linalg.solve, a, b)
    a, b = _same_mesh(mesh, a, b)
    if a.ndim > 2 or b.ndim > 2 and not vector:
        return _batched.solve(a, b)
    if assume_a == "pos":
        return solve_pos(a, b, lower=lower)
    return _solve_2d(a, b, dtype=dtype, block_size=block_size)


def _symmetrize(a, *, lower):
    """The Hermitian matrix whose ``lower`` (or upper) triangle ``a`` holds."""
    r = lax.broadcasted_iota(jnp.int32, a.shape, a.ndim - 2)
    c = lax.broadcasted_iota(jnp.int32, a.shape, a.ndim - 1)
    tri = jnp.where((r >= c) if lower else (r <= c), a, jnp.zeros((), a.dtype))
    strict = jnp.where(r == c, jnp.zeros((), a.dtype), tri)
    return tri + _like(jnp.conj(jnp.swapaxes(strict, -1, -2)), tri)


def det(a: jax.typing.ArrayLike, *, block_size: int | None = None) -> jax.Array:
    """Determinant, as ``jnp.linalg.det``.

    ``sign * exp(logabsdet)`` from the diagonal of U and the parity of the
    pivots, as jnp forms it (an overflow gives ``+-inf``; complex: inf in both
    parts); for one sharded matrix the product is a distributed reduction.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack; integer and bool inputs
        promote to the default float.

    Returns:
      Scalar (replicated), or ``[...]`` sharded along the batch like ``a``.
      ``det`` of a 0x0 matrix is 1. Derivatives of every order where ``a``
      is regular; at a singular ``a`` the gradient is the adjugate (jnp's
      cofactor construction: right for rank ``n - 1`` with the zero pivot
      last, zero for lower rank or an overflowing det), as jnp's.
    """
    what = "distla.linalg.det"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    if _mesh_of(a, names=("a",)) is None or is_empty(a):
        return _fallback(jnp.linalg.det, a)
    if a.ndim > 2:
        return _batched.det(a)
    return _det_2d(a, dtype=dtype, block_size=block_size)


def slogdet(
    a: jax.typing.ArrayLike, *, method: str | None = None, block_size: int | None = None
) -> SlogdetResult:
    """Sign and log-magnitude of the determinant, as ``jnp.linalg.slogdet``.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.
      method: ``None``/``"lu"`` or ``"qr"`` as in jnp; distla computes both
        with its LU (the values agree).

    Returns:
      ``SlogdetResult(sign, logabsdet)``; ``sign`` has ``a``'s dtype (a unit
      complex number for complex ``a``), ``logabsdet`` its real dtype. For a
      singular ``a``: sign 0 and logabsdet ``-inf``; a real matrix with an
      inf entry keeps a sign of +-1, as in jnp.

    Raises:
      ValueError: an unknown ``method``, or ``a`` not square.
    """
    what = "distla.linalg.slogdet"
    if method not in (None, "lu", "qr"):
        raise ValueError(
            f"{what}: unknown method {method!r}; supported are 'lu' (None) and 'qr', as jnp"
        )
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    if method == "qr" and jnp.issubdtype(dtype, jnp.complexfloating):
        raise NotImplementedError(f"{what}: method='qr' is not implemented for complex inputs "
                                  "(nor in jnp)")
    if _mesh_of(a, names=("a",)) is None or is_empty(a):
        return SlogdetResult(*_fallback(jnp.linalg.slogdet, a))
    if a.ndim > 2:
        return SlogdetResult(*_batched.slogdet(a))
    return SlogdetResult(*_slogdet_2d(a, dtype=dtype, block_size=block_size))


def inv(a: jax.typing.ArrayLike, *, block_size: int | None = None) -> jax.Array:
    """Inverse, as ``jnp.linalg.inv``: ``lu_solve`` against the identity.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.

    Returns:
      ``a^{-1}`` in ``a``'s layout (2D blocks, or sharded along the batch).
      Singular ``a`` gives inf/nan.
    """
    what = "distla.linalg.inv"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    if _mesh_of(a, names=("a",)) is None or is_empty(a):
        return _fallback(_inv_one_device, a)
    if a.ndim > 2:
        return _batched.inv(a)
    return _inv_2d(a, dtype=dtype, block_size=block_size)


__all__ = [
    "EighResult",
    "SVDResult",
    "cond",
    "eigh",
    "eigvalsh",
    "lstsq",
    "matrix_rank",
    "norm",
    "pinv",
    "polar",
    "svd",
    "svdvals",
    "LUResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "cholesky_model_bytes",
    "det",
    "inv",
    "lu",
    "lu_factor",
    "lu_model_bytes",
    "lu_solve",
    "qr",
    "qr_model_bytes",
    "slogdet",
    "solve",
    "solve_triangular",
]
