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

from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.sharding import NamedSharding

from . import _batched, _lu
from ._blas import single_thread_lapack_for_cpu_devices
from ._checks import as_array, result_dtype
from ._cholesky import cho_factor, cho_solve, cholesky, solve_pos, solve_triangular
from ._mesh import drop_trivial_sharding, fitting_spec, is_explicit, operand_mesh
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
    """``trace(a^-1 da)``, linear in ``da``, for the derivatives of det and slogdet."""
    return _lu.trace(_solve_linear(lax.stop_gradient(a), da, dtype=dtype, block_size=block_size))


def _slogdet_2d(a, *, dtype, block_size):
    def primal(a):
        return tuple(_lu.slogdet(a, dtype=dtype, block_size=block_size))

    fn = jax.custom_jvp(_batched.with_vmap_rule("slogdet", primal))

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        sign, logabs = fn(a)
        g = _tr_inv_times(a, da, dtype=dtype, block_size=block_size)
        sign_dot = (g - jnp.real(g)).astype(sign.dtype) * sign
        return (sign, logabs), (sign_dot, jnp.real(g).astype(logabs.dtype))

    fn.defjvp(rule)
    return fn(a)


def _det_2d(a, *, dtype, block_size):
    def primal(a):
        return _lu.det(a, dtype=dtype, block_size=block_size)

    fn = jax.custom_jvp(_batched.with_vmap_rule("det", primal))

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        d = fn(a)
        return d, d * _tr_inv_times(a, da, dtype=dtype, block_size=block_size).astype(d.dtype)

    fn.defjvp(rule)
    return fn(a)


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


def lu_factor(
    a: jax.typing.ArrayLike, *, block_size: int | None = None
) -> tuple[jax.Array, jax.Array]:
    """LU factorisation with partial pivoting, as ``jax.scipy.linalg.lu_factor``.

    Args:
      a: ``[n, n]`` matrix, sharded on a 1- or 2-axis mesh (any layout), or a
        stack ``[..., n, n]`` sharded along its batch dimensions.
      block_size: the distributed LU's block size ``nb`` (panel width and
        block-cyclic block); ``None`` picks one near 128 that pads least.

    Returns:
      ``(lu, piv)``: ``lu`` holds ``L`` (unit diagonal, not stored) below the
      diagonal and ``U`` on and above it, in the 2D block layout ``P(r, c)``
      of ``a``'s mesh (the largest even layout that fits for uneven sizes);
      ``piv[i]`` (int32) is the row interchanged with row ``i``, 0-based, as
      LAPACK and scipy number them. For a stack, both carry the batch
      dimensions and are sharded along them like ``a``.

    Pivoting is LAPACK's partial pivoting: at each step the entry of largest
    magnitude (for complex, largest ``|re| + |im|``) in the current column,
    so every ``|l_ij| <= 1`` and the pivots match scipy's wherever that entry
    is unambiguous. A singular ``a`` gives a zero on U's diagonal and no
    exception, as in LAPACK.

    Raises:
      ValueError: ``a`` is not square or has fewer than 2 dimensions.
      TypeError: ``a`` is not floating or complex.

    See also: ``jax.scipy.linalg.lu_factor``, ``distla.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_factor"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None:
        return jsl.lu_factor(drop_trivial_sharding(a).astype(dtype))
    if a.ndim > 2:
        return _batched.lu_factor(a.astype(dtype))
    factor = _not_differentiable(
        lambda a: _factor_2d(a, dtype=dtype, block_size=block_size), what
    )
    return factor(a)


def lu_solve(
    lu_and_piv: tuple[jax.typing.ArrayLike, jax.typing.ArrayLike],
    b: jax.typing.ArrayLike,
    trans: int = 0,
) -> jax.Array:
    """Solve ``a x = b`` from ``lu_factor(a)``, as ``jax.scipy.linalg.lu_solve``.

    Args:
      lu_and_piv: ``(lu, piv)`` from :func:`lu_factor`.
      b: ``[n]`` or ``[n, k]`` right-hand side(s) (with the batch dimensions of
        ``lu`` in front for a stack), in any layout on the same mesh.
      trans: 0 solves ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the 2D block layout of the mesh
      (``[n]`` split over the mesh's devices), or the largest even layout
      that fits.

    Raises:
      ValueError: shapes that do not match, or ``trans`` not in (0, 1, 2).

    See also: ``jax.scipy.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_solve"
    lu, piv = lu_and_piv
    lu = as_array(lu, "lu", what)
    piv = as_array(piv, "piv", what)
    b = as_array(b, "b", what)
    _square(lu, what)
    if trans not in (0, 1, 2):
        raise ValueError(f"{what}: trans must be 0, 1 or 2; got {trans!r}")
    n = lu.shape[-1]
    batch = lu.shape[:-2]
    if piv.shape != (*batch, n):
        raise ValueError(f"{what}: piv must have shape {(*batch, n)}; got {piv.shape}")
    if (
        b.ndim not in (len(batch) + 1, len(batch) + 2)
        or b.shape[: len(batch)] != batch
        or b.shape[len(batch)] != n
    ):
        raise ValueError(
            f"{what}: b must have shape {(*batch, n)} or {(*batch, n, 'k')} to match lu of "
            f"shape {lu.shape}; got b of shape {b.shape}"
        )
    dtype = result_dtype(what, lu, b)
    mesh = _mesh_of(lu, b, names=("lu", "b"))
    if mesh is None:
        lu, piv, b = (drop_trivial_sharding(x) for x in (lu, piv, b))
        return jsl.lu_solve((lu.astype(dtype), piv), b.astype(dtype), trans=trans)
    if batch:
        return _batched.lu_solve(lu.astype(dtype), piv, b.astype(dtype), trans=trans)
    return _lu_solve_2d(lu.astype(dtype), piv, b.astype(dtype), trans=trans, dtype=dtype)


class LUResult(NamedTuple):
    """``(p, l, u)`` with ``a == p @ l @ u``."""

    p: jax.Array
    l: jax.Array  # noqa: E741
    u: jax.Array


def lu(a: jax.typing.ArrayLike, *, block_size: int | None = None) -> LUResult:
    """``a == p @ l @ u``, as ``jax.scipy.linalg.lu``.

    Args:
      a: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh.
      block_size: as in :func:`lu_factor`.

    Returns:
      ``(p, l, u)``: the permutation matrix, unit lower triangular ``l`` and
      upper triangular ``u``, each ``[n, n]`` in the 2D block layout of the
      mesh. Pivots as in :func:`lu_factor`.

    Raises:
      ValueError: ``a`` is not a square matrix.

    See also: ``jax.scipy.linalg.lu``.
    """
    what = "distla.linalg.lu"
    a = as_array(a, "a", what)
    _square(a, what, batch=False)
    dtype = result_dtype(what, a)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None:
        return LUResult(*jsl.lu(drop_trivial_sharding(a).astype(dtype)))
    factor = _not_differentiable(lambda a: _lu.lu(a, dtype=dtype, block_size=block_size), what)
    return LUResult(*factor(a))


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


def solve(
    a: jax.typing.ArrayLike, b: jax.typing.ArrayLike, *, block_size: int | None = None
) -> jax.Array:
    """Solve ``a x = b``, as ``jnp.linalg.solve``.

    A single matrix sharded over a mesh is solved by the distributed LU; a
    stack sharded along its batch dimensions is solved on each device, with
    no communication at all.

    Args:
      a: ``[n, n]`` matrix, or ``[..., n, n]`` stack.
      b: ``[n]`` vector or ``[..., n, k]`` matrices. As in the installed jax
        (numpy 2 rules), a ``[B, n]`` right-hand side for a ``[B, n, n]``
        stack is not a stack of vectors: use ``solve(a, b[..., None])[..., 0]``.

    Returns:
      ``x`` of shape ``[..., n]`` or ``[..., n, k]``; for one matrix in the 2D
      block layout of the mesh, for a stack sharded along the batch like ``a``.
      A singular ``a`` gives inf/nan, as in LAPACK.

    Raises:
      ValueError: shapes that do not match (the message names them).

    See also: ``jnp.linalg.solve``, ``jax.scipy.linalg.solve``.
    """
    what = "distla.linalg.solve"
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    vector = _solve_shapes(a, b, what)
    dtype = result_dtype(what, a, b)
    mesh = _mesh_of(a, b, names=("a", "b"))
    if mesh is None:
        a, b = drop_trivial_sharding(a), drop_trivial_sharding(b)
        return jnp.linalg.solve(a.astype(dtype), b.astype(dtype))
    if a.ndim > 2 or b.ndim > 2 and not vector:
        return _batched.solve(a.astype(dtype), b.astype(dtype))
    return _solve_2d(a.astype(dtype), b.astype(dtype), dtype=dtype, block_size=block_size)


def det(a: jax.typing.ArrayLike, *, block_size: int | None = None) -> jax.Array:
    """Determinant, as ``jnp.linalg.det``.

    From the diagonal of U and the parity of the pivots; for one sharded
    matrix the product is a distributed reduction.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.

    Returns:
      Scalar (replicated), or ``[...]`` sharded along the batch like ``a``.
    """
    what = "distla.linalg.det"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    if _mesh_of(a, names=("a",)) is None:
        return jnp.linalg.det(drop_trivial_sharding(a).astype(dtype))
    if a.ndim > 2:
        return _batched.det(a.astype(dtype))
    return _det_2d(a.astype(dtype), dtype=dtype, block_size=block_size)


def slogdet(a: jax.typing.ArrayLike, *, block_size: int | None = None) -> SlogdetResult:
    """Sign and log-magnitude of the determinant, as ``jnp.linalg.slogdet``.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.

    Returns:
      ``SlogdetResult(sign, logabsdet)``; ``sign`` has ``a``'s dtype (a unit
      complex number for complex ``a``), ``logabsdet`` its real dtype. For a
      singular ``a``: sign 0 and logabsdet ``-inf``.
    """
    what = "distla.linalg.slogdet"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    if _mesh_of(a, names=("a",)) is None:
        return SlogdetResult(*jnp.linalg.slogdet(drop_trivial_sharding(a).astype(dtype)))
    if a.ndim > 2:
        return SlogdetResult(*_batched.slogdet(a.astype(dtype)))
    return SlogdetResult(*_slogdet_2d(a.astype(dtype), dtype=dtype, block_size=block_size))


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
    if _mesh_of(a, names=("a",)) is None:
        return jnp.linalg.inv(drop_trivial_sharding(a).astype(dtype))
    if a.ndim > 2:
        return _batched.inv(a.astype(dtype))
    return _inv_2d(a.astype(dtype), dtype=dtype, block_size=block_size)


__all__ = [
    "LUResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "det",
    "inv",
    "lu",
    "lu_factor",
    "lu_solve",
    "slogdet",
    "solve",
    "solve_triangular",
]
