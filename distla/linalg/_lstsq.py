"""pinv, lstsq, matrix_rank, cond and norm on the distributed SVD (docs/spectral.md).

Each follows ``jnp.linalg``'s algorithm line by line, with distla's
``svd``/``svdvals`` and ``distla.matmul`` in place of the one-device calls,
so a sharded matrix is never gathered. Inputs that are not one sharded
matrix (one device, stacks, empty, vectors) go to jnp.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from .._core.checks import (
    ShapeError,
    as_array,
    empty_or_one_device,
    is_empty,
    onto_mesh,
    result_dtype,
)
from .._core.eager import one_program
from .._core.matmul import product_here
from .._core.matrix import block_spec
from .._core.mesh import drop_trivial_sharding, fitting_spec, operand_mesh, run_on_mesh
from .._core.plan import mesh_of as _mesh_of
from ._lu.inverse import inv
from ._spectral import svd, svdvals


def _one_matrix(a) -> bool:
    return a.ndim == 2 and not is_empty(a) and _mesh_of(a, names=("a",)) is not None


@functools.partial(jax.jit, static_argnames=())
def _pinv_from_svd(u, s, vh, rtol):
    mesh = operand_mesh(u, vh, names=("u", "vh"))
    m, n = u.shape[0], vh.shape[1]
    out = fitting_spec((n, m), mesh, block_spec(mesh))

    def body(u, s, vh, rtol):
        cutoff = rtol * s[0]
        inv_s = jnp.where(s > cutoff, 1 / jnp.where(s > cutoff, s, 1), 0).astype(u.dtype)
        return product_here(jnp.conj(vh.T) * inv_s[None, :], jnp.conj(u.T))

    return run_on_mesh(body, mesh, out, u, s, vh, rtol)


@one_program
def pinv(
    a: jax.typing.ArrayLike,
    rtol: jax.typing.ArrayLike | None = None,
    hermitian: bool = False,
    *,
    rcond: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Moore–Penrose pseudo-inverse, as ``jnp.linalg.pinv``.

    ``V diag(1/s) Uᴴ`` over the singular values above ``rtol · s[0]``, from
    distla's distributed :func:`svd` and ``distla.matmul``.

    Args:
      a: ``[m, n]`` matrix sharded on a mesh (stacks and one-device inputs go
        to jnp).
      rtol: relative cutoff (default ``10 · max(m, n) · eps``); ``rcond`` is
        its older name, as in jnp.
      hermitian: as in jnp, ``a`` is taken to be Hermitian and the singular
        values and vectors come from :func:`svd`'s ``hermitian=True`` route
        (:func:`eigh` of ``(a + aᴴ)/2``).

    Returns:
      ``[n, m]`` in the mesh's 2D block layout (the largest even layout that
      fits). Differentiable as jnp's (jax differentiates through distla's svd).
    """
    what = "distla.linalg.pinv"
    if rcond is not None:
        if rtol is not None:
            raise ValueError(f"{what}: only one of rtol and rcond may be specified.")
        rtol = rcond
    a = as_array(a, "a", what)
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got shape {a.shape}")
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    if not _one_matrix(a):
        return empty_or_one_device(lambda x: jnp.linalg.pinv(x, rtol, hermitian), a)
    real = jnp.finfo(dtype).dtype
    if rtol is None:
        rtol = 10.0 * max(a.shape) * float(jnp.finfo(real).eps)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    return _pinv_from_svd(u, s, vh, jnp.asarray(rtol, real))


@jax.jit
def _lstsq_solve(a, u, s, vh, b, rcond):
    mesh = operand_mesh(a, u, names=("a", "u"))
    m, n = a.shape
    k = b.shape[1]
    out = (fitting_spec((n, k), mesh, block_spec(mesh)), P(), P())

    def body(a, u, s, vh, b, rcond):
        mask = (s > 0) & (s >= rcond.astype(s.dtype) * s[0])
        rank = mask.sum()
        # s and b scaled by the same power of two (exact) so that s[0] is about 1:
        # XLA computes a quotient as a product with the reciprocal, and 1/s is below
        # float32's normal range (flushed to zero on CPU) for s near 1e38
        # (applied as two halves: 2^-127 itself is subnormal in float32)
        half = jnp.ldexp(jnp.ones((), s.dtype), -(jnp.frexp(s[0])[1] // 2))
        safe = (jnp.where(mask, s, 1) * half * half).astype(a.dtype)[:, None]
        half = half.astype(b.dtype)
        utb = product_here(jnp.conj(u.T), b * half * half)
        x = product_here(jnp.conj(vh.T), jnp.where(mask[:, None], utb / safe, 0))
        r = b - product_here(a, x)
        resid = jnp.sum(jnp.abs(r) ** 2, axis=0)
        return x, resid, rank

    return run_on_mesh(body, mesh, out, a, u, s, vh, b, rcond)


@one_program
def lstsq(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    rcond: float | None = None,
    *,
    numpy_resid: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Least-squares solution of ``a x ≈ b``, as ``jnp.linalg.lstsq``.

    jnp's algorithm on distla's distributed :func:`svd`: singular values
    below ``rcond · s[0]`` are dropped (minimum-norm solution for
    rank-deficient ``a``).

    Args:
      a: ``[m, n]`` matrix sharded on a mesh.
      b: ``[m]`` or ``[m, k]`` on the same mesh (one-device operands are moved).
      rcond: relative cutoff (default ``eps · max(m, n)``; negative means eps).
      numpy_resid: numpy's residual rule (empty unless full rank and
        ``m > n``); default: always the residuals, as jnp.

    Returns:
      ``(x, resid, rank, s)`` as jnp: ``x`` ``[n]``/``[n, k]`` in the mesh's
      layout, ``resid`` ``[k]`` (squared 2-norms of ``b − a x``), ``rank``
      (int32 scalar) and ``s`` (descending), replicated. Differentiable in
      ``a`` and ``b`` as jnp's (jax differentiates through distla's svd).

    Raises:
      ValueError: leading dimensions differ, or ``a`` and ``b`` are on different meshes.
      TypeError: ``a`` not 2-D or ``b`` not 1- or 2-D, as jnp.
    """
    what = "distla.linalg.lstsq"
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    dtype = result_dtype(what, a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    if a.ndim != 2:
        raise TypeError(f"{what}: {a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(
            f"{what}: {b.ndim}-dimensional array given. Array must be one or two-dimensional"
        )
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"{what}: leading dimensions of a {a.shape} and b {b.shape} must match")
    operand_mesh(a, b, names=("a", "b"))  # the solves' check: one mesh for both
    if _one_matrix(a) and is_empty(b):  # no right-hand side: a's svdvals and rank only
        m, n = a.shape
        s = svdvals(a)
        real = s.dtype
        eps = float(jnp.finfo(real).eps)
        rc = eps * max(m, n) if rcond is None else jnp.where(rcond < 0, eps, rcond)
        rank = jnp.sum((s > 0) & (s >= jnp.asarray(rc, real) * s[0]))
        x = jnp.zeros((n,) + b.shape[1:], dtype)
        resid = jnp.zeros((0,), real)
        return x, resid, rank.astype(jnp.asarray(0).dtype), s
    if not _one_matrix(a) or is_empty(b):
        return empty_or_one_device(
            lambda a, b: jnp.linalg.lstsq(a, b, rcond, numpy_resid=numpy_resid), a, b
        )
    a, b = onto_mesh(a, b)
    m, n = a.shape
    real = jnp.finfo(dtype).dtype
    eps = float(jnp.finfo(real).eps)
    rc = eps * max(m, n) if rcond is None else jnp.where(rcond < 0, eps, rcond)
    u, s, vh = svd(a, full_matrices=False)
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    x, resid, rank = _lstsq_solve(a, u, s, vh, bb, jnp.asarray(rc, real))
    if numpy_resid and (m <= n or int(rank) < n):
        resid = jnp.asarray([], real)
    if vector:
        x = x[:, 0]
    return x, resid, rank.astype(jnp.asarray(0).dtype), s


@one_program
def matrix_rank(
    M: jax.typing.ArrayLike,
    rtol: jax.typing.ArrayLike | None = None,
    *,
    hermitian: bool = False,
    tol: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Rank by counting singular values above ``rtol · s_max``, as ``jnp.linalg.matrix_rank``.

    ``rtol`` defaults to ``max(m, n) · eps`` (``tol`` is its older name).
    The singular values come from the distributed :func:`svdvals`, or with
    ``hermitian=True``, as in jnp, from the eigenvalues of ``(M + Mᴴ)/2``
    (:func:`svd`'s ``hermitian=True`` route). Returns
    a scalar of the default integer type (int64 under x64), replicated.
    """
    what = "distla.linalg.matrix_rank"
    if tol is not None:
        if rtol is not None:
            raise ValueError(f"{what}: only one of tol or rtol may be specified.")
        rtol = tol
    M = as_array(M, "M", what)
    dtype = result_dtype(what, M)
    M = M.astype(dtype)
    if not _one_matrix(M):
        return empty_or_one_device(
            lambda x: jnp.linalg.matrix_rank(x, rtol, hermitian=hermitian), M
        )
    s = svd(M, compute_uv=False, hermitian=True) if hermitian else svdvals(M)
    if rtol is None:
        # max(m, n)·eps first: s_max·max(m, n) may overflow near the top of the range
        cut = s.max() * (np.float64(max(M.shape)) * jnp.finfo(s.dtype).eps).astype(s.dtype)
    else:
        cut = jnp.asarray(rtol, s.dtype)
    return jnp.sum(s > cut)  # the default int, as jnp


@one_program
def cond(x: jax.typing.ArrayLike, p=None) -> jax.Array:
    """Condition number, as ``jnp.linalg.cond``.

    ``p`` ``None``/``2``: ``s_max/s_min``; ``-2``: ``s_min/s_max`` (from the
    distributed :func:`svdvals`); other ``p`` (``1``, ``-1``, ``inf``,
    ``-inf``, ``"fro"``): ``norm(x, p) · norm(inv(x), p)`` with distla's
    inverse. Singular matrices give ``inf``, as jnp. Returns a replicated scalar.
    """
    what = "distla.linalg.cond"
    arr = as_array(x, "x", what)
    if arr.ndim < 2:
        raise ShapeError(f"{what}: input array must be at least 2D; got arr.shape={arr.shape}")
    if arr.shape[-1] == 0 or arr.shape[-2] == 0:
        raise ValueError(f"{what}: input array must not be empty; got arr.shape={arr.shape}")
    arr = arr.astype(result_dtype(what, arr))
    if not _one_matrix(arr):
        return empty_or_one_device(lambda a: jnp.linalg.cond(a, p), arr)
    if p is None or p == 2:
        s = svdvals(arr)
        return s[0] / s[-1]
    if p == -2:
        s = svdvals(arr)
        r = s[-1] / s[0]
    else:
        if arr.shape[-2] != arr.shape[-1]:
            raise ShapeError(
                f"{what}: for p={p!r}, array must be square; got arr.shape={arr.shape}"
            )
        r = norm(arr, ord=p) * norm(inv(arr), ord=p)
    return jnp.where(jnp.isnan(r) & ~jnp.isnan(arr).any(), jnp.inf, r)


@one_program
def norm(
    x: jax.typing.ArrayLike,
    ord: int | str | None = None,
    axis: None | tuple[int, ...] | int = None,
    keepdims: bool = False,
) -> jax.Array:
    """Matrix or vector norm, as ``jnp.linalg.norm``.

    For one sharded matrix and ``ord`` ``2``, ``-2`` or ``"nuc"``: the largest,
    smallest or summed singular values from the distributed :func:`svdvals`.
    Every other case is jnp's own reduction, which XLA runs on the shards
    (partial sums and one small all-reduce; nothing is gathered).
    """
    what = "distla.linalg.norm"
    x = as_array(x, "x", what)
    spectral = ord in (2, -2, "nuc")
    if spectral or not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(result_dtype(what, x))  # half precision: as jnp, only without an SVD
    matrix_axes = (
        axis is None
        and x.ndim == 2
        or (
            isinstance(axis, tuple)
            and len(axis) == 2
            and x.ndim == 2
            and sorted(a % 2 for a in axis) == [0, 1]
        )
    )
    if spectral and matrix_axes and is_empty(x):
        return empty_or_one_device(
            lambda y: jnp.linalg.norm(y, ord=ord, axis=axis, keepdims=keepdims), x
        )
    if spectral and matrix_axes and _one_matrix(x):
        if isinstance(axis, tuple) and axis[0] % 2 == 1:
            x = x.T
        s = svdvals(x)
        r = s[0] if ord == 2 else s[-1] if ord == -2 else jnp.sum(s)
        return r.reshape(1, 1) if keepdims else r
    # one-device Explicit meshes: jnp's svd refuses operands "sharded" over size-1 axes
    r = jnp.linalg.norm(drop_trivial_sharding(x), ord=ord, axis=axis, keepdims=keepdims)
    if ord in (1, -1, np.inf, -np.inf):
        # max/min norms: XLA's sharded max/min reductions drop NaN, so NaN is carried
        # by a sum over the same axes (NaN exactly when a reduced entry is NaN, as jnp's
        # one-device max/min gives it)
        nan = jnp.isnan(jnp.sum(jnp.abs(x), axis=axis, keepdims=keepdims))
        r = jnp.where(nan, jnp.asarray(jnp.nan, r.dtype), r)
    return r
