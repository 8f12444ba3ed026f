"""Least squares on the distributed SVD: ``lstsq``, ``pinv``, ``matrix_rank`` (docs/spectral.md).

Each follows ``jnp.linalg``'s algorithm line by line, with distla's ``svd``
(its op, on the call's plan: ``route.on_plan``) and ``distla.matmul`` in place
of the one-device calls, so a sharded matrix is never gathered. Inputs that
are not one sharded matrix (one device, stacks, empty, vectors) go to jnp.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.checks import ShapeError, is_empty, is_traced
from .._core.matmul import product_here
from .._core.matrix import block_spec
from .._core.mesh import fitting_spec, replicated, run_on_mesh
from .._core.plan import Plan
from ._svd import SVD

#: svd's options for the factors of ``a`` (``full_matrices=False``)
_FACTORS = dict(full_matrices=False, compute_uv=True, hermitian=False, subset_by_index=None)
#: svd's options for the singular values alone (svdvals)
_VALUES = dict(full_matrices=True, compute_uv=False, hermitian=False, subset_by_index=None)


def _matrix_or_stack(what, a, **options):
    del options
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got shape {a.shape}")


@functools.partial(jax.jit, static_argnames=("mesh",))
def _pinv_from_svd(u, s, vh, rtol, *, mesh):
    m, n = u.shape[0], vh.shape[1]
    out = fitting_spec((n, m), mesh, block_spec(mesh))

    def body(u, s, vh, rtol):
        cutoff = rtol * s[0]
        inv_s = jnp.where(s > cutoff, 1 / jnp.where(s > cutoff, s, 1), 0).astype(u.dtype)
        return product_here(jnp.conj(vh.T) * inv_s[None, :], jnp.conj(u.T))

    return run_on_mesh(body, mesh, out, u, s, vh, rtol)


def _pinv_one(plan: Plan, a, rtol, *, hermitian):
    svd = dict(_FACTORS, hermitian=hermitian)
    u, s, vh = route.on_plan(SVD, plan, a, **svd)
    return _pinv_from_svd(u, s, vh, rtol, mesh=plan.mesh)


def _pinv_jvp(fn, plan: Plan, primals, tangents, *, hermitian):
    (a, rtol), (da, _) = primals, tangents
    p = fn(a, rtol)  # [n, m]
    return p, _pinv_tangent(a, da, p, hermitian=hermitian, mesh=plan.mesh)


@functools.partial(jax.jit, static_argnames=("hermitian", "mesh"))
def _pinv_tangent(a, da, p, *, hermitian, mesh):
    """Golub and Pereyra (1973), eq. 4.12, as jax's rule: ``dp`` from ``p`` alone, so that
    the derivative is finite where the SVD's is not (repeated or zero singular values)."""
    m, n = a.shape
    out = fitting_spec((n, m), mesh, block_spec(mesh))

    def body(a, da, p):
        if hermitian:  # svd(hermitian=True) takes (a + aᴴ)/2, and so does its derivative
            a, da = (a + _h(a)) / 2, (da + _h(da)) / 2
        mul = product_here
        if m >= n:  # the products' inner dimensions are n where they can be
            s = mul(mul(p, _h(p)), _h(da))
            t = mul(mul(_h(da), _h(p)), p)
            dp = -mul(mul(p, da), p) + s - mul(mul(s, a), p) + t - mul(mul(p, a), t)
        else:
            s = mul(p, mul(_h(p), _h(da)))
            t = mul(_h(da), mul(_h(p), p))
            dp = -mul(p, mul(da, p)) + s - mul(s, mul(a, p)) + t - mul(p, mul(a, t))
        return dp.astype(p.dtype)

    return run_on_mesh(body, mesh, out, a, da, p)


def _h(x):
    return jnp.conj(x.T)


# One matrix's pseudo-inverse from its SVD, with jax's derivative rule (rtol: an operand
# without a derivative, which may be an array)
_PINV_2D = route.Op(
    "distla.linalg.pinv",
    operands=("a", "rtol"),
    one_device=jnp.linalg.pinv,
    distributed=_pinv_one,
    jvp=_pinv_jvp,
)


def _pinv(plan: Plan, a, *, rtol, hermitian):
    real = jnp.finfo(a.dtype).dtype
    if rtol is None:
        rtol = 10.0 * max(a.shape) * float(jnp.finfo(real).eps)
    return route.distributed(_PINV_2D, plan, a, jnp.asarray(rtol, real), hermitian=hermitian)


def _refuse_pinv(what, a, *, hermitian, **options):
    del options
    SVD.check(SVD.name, a, hermitian=hermitian)  # svd's own check, as its call made it


PINV = route.Op(
    "distla.linalg.pinv",
    check=_matrix_or_stack,
    one_device=jnp.linalg.pinv,
    refuse=_refuse_pinv,
    is_stack=route.beyond(2),
    # jnp's on whole members (its svd refuses split ones), the batch where it is
    stacked=lambda plan, a, **options: jnp.linalg.pinv(replicated(a), **options),
    distributed=_pinv,
    keep_replicated=True,
)


@route.public
def pinv(
    a: jax.typing.ArrayLike,
    rtol: jax.typing.ArrayLike | None = None,
    hermitian: bool = False,
    *,
    rcond: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Moore–Penrose pseudo-inverse, as ``jnp.linalg.pinv``.

    ``V diag(1/s) Uᴴ`` over the singular values above ``rtol · s[0]``, from
    distla's distributed [`svd`][distla.linalg.svd] and ``distla.matmul``.

    Args:
      a: ``[m, n]`` matrix sharded on a mesh (stacks and one-device inputs go
        to jnp).
      rtol: relative cutoff (default ``10 · max(m, n) · eps``); ``rcond`` is
        its older name, as in jnp.
      hermitian: as in jnp, ``a`` is taken to be Hermitian and the singular
        values and vectors come from [`svd`][distla.linalg.svd]'s ``hermitian=True`` route
        ([`eigh`][distla.linalg.eigh] of ``(a + aᴴ)/2``).

    Returns:
      ``[n, m]`` in the mesh's 2D block layout (the largest even layout that
      fits). Differentiable as jnp's (jax differentiates through distla's svd).

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256, 128) * 2.0, mesh)
      >>> a_pinv = distla.linalg.pinv(a)
      >>> a_pinv.shape, round(float(np.asarray(a_pinv)[0, 0]), 4)
      ((128, 256), 0.5)
    """
    if rcond is not None:
        if rtol is not None:
            raise ValueError(f"{PINV.name}: only one of rtol and rcond may be specified.")
        rtol = rcond
    return route.call(PINV, a, rtol=rtol, hermitian=hermitian)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _lstsq_solve(a, u, s, vh, b, rcond, *, mesh):
    m, n = a.shape
    k = b.shape[1]
    x_spec = fitting_spec((n, k), mesh, block_spec(mesh))
    # the residuals of b's columns where x's columns are (jnp's: b's columns' layout)
    out = (x_spec, P((tuple(x_spec) + (None, None))[1]), P())

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


def _check_lstsq(what, a, b, **options):
    """jnp's checks, in jnp's order: the leading dimensions first, then the ranks."""
    del options
    if a.ndim and b.ndim and a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"{what}: Leading dimensions of input arrays must match; got a of shape {a.shape} "
            f"and b of shape {b.shape}"
        )
    if a.ndim != 2:
        raise TypeError(f"{what}: {a.ndim}-dimensional array given. Array must be two-dimensional")
    if b.ndim not in (1, 2):
        raise TypeError(
            f"{what}: {b.ndim}-dimensional array given. Array must be one or two-dimensional"
        )


def _cutoff(a, rcond):
    m, n = a.shape
    real = jnp.finfo(a.dtype).dtype
    eps = float(jnp.finfo(real).eps)
    return eps * max(m, n) if rcond is None else jnp.where(rcond < 0, eps, rcond)


def _lstsq(plan: Plan, a, b, *, rcond, numpy_resid):
    m, n = a.shape
    real = jnp.finfo(a.dtype).dtype
    rc = _cutoff(a, rcond)
    if is_empty(b):  # no right-hand side: a's svdvals and rank only
        s = route.on_plan(SVD, plan, a, **_VALUES)
        rank = jnp.sum((s > 0) & (s >= jnp.asarray(rc, s.dtype) * s[0]))
        x = jnp.zeros((n,) + b.shape[1:], a.dtype)
        resid = jnp.zeros((0,), s.dtype)
        if numpy_resid:
            resid = _numpy_rule(resid, rank, m, n)
        return x, resid, rank.astype(jnp.asarray(0).dtype), s
    u, s, vh = route.on_plan(SVD, plan, a, **_FACTORS)
    vector = b.ndim == 1
    bb = b[:, None] if vector else b
    x, resid, rank = _lstsq_solve(a, u, s, vh, bb, jnp.asarray(rc, real), mesh=plan.mesh)
    if numpy_resid:
        resid = _numpy_rule(resid, rank, m, n)
    if vector:
        x = x[:, 0]
    return x, resid, rank.astype(jnp.asarray(0).dtype), s


def _numpy_rule(resid, rank, m, n):
    """``numpy_resid=True``'s residuals, as jnp's: none unless ``a`` has full column rank
    and ``m > n`` (then ``jnp.asarray([])``, the default float dtype whatever ``a``'s)."""
    if m <= n or int(rank) < n:
        return jnp.asarray([])
    return resid


def _lstsq_unsharded(a, b, *, rcond=None, numpy_resid=False):
    """jnp's lstsq of unsharded and empty operands.

    jnp's ``numpy_resid=True`` decides on the rank's value (``rank < n or m <= n``), which
    a trace does not have (``jax.eval_shape`` of the empty short cut): for an empty ``a``
    the rank is 0 and the decision is taken here from the shapes; for an empty ``b`` the
    residuals are empty either way (traced, they keep ``a``'s real dtype).
    """
    if not numpy_resid:
        return jnp.linalg.lstsq(a, b, rcond)
    m, n = a.shape
    if not is_empty(a) and not (is_empty(b) and is_traced(a, b)):
        return jnp.linalg.lstsq(a, b, rcond, numpy_resid=True)
    x, resid, rank, s = jnp.linalg.lstsq(a, b, rcond)
    if (is_empty(a) and n > 0) or m <= n:
        resid = jnp.asarray([])  # jnp's (the default float dtype)
    return x, resid, rank, s


# a sharded a and an empty b run lstsq's rank branch (not jnp's empty result)
LSTSQ = route.Op(
    "distla.linalg.lstsq",
    operands=("a", "b"),
    check=_check_lstsq,
    one_device=jnp.linalg.lstsq,
    unsharded=_lstsq_unsharded,
    empty=lambda a, b, **options: is_empty(a),
    distributed=_lstsq,
)


@route.public
def lstsq(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    rcond: float | None = None,
    *,
    numpy_resid: bool = False,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Least-squares solution of ``a x ≈ b``, as ``jnp.linalg.lstsq``.

    jnp's algorithm on distla's distributed [`svd`][distla.linalg.svd]: singular values
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
      layout, ``resid`` ``[k]`` (squared 2-norms of ``b − a x``, in the layout
      of ``x``'s columns, as jnp's follow ``b``'s), ``rank`` (int32 scalar) and
      ``s`` (descending), replicated. Differentiable in
      ``a`` and ``b`` as jnp's (jax differentiates through distla's svd).

    Raises:
      ValueError: leading dimensions differ, or ``a`` and ``b`` are on different meshes.
      TypeError: ``a`` not 2-D or ``b`` not 1- or 2-D, as jnp.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256, 128) * 2.0, mesh)
      >>> b = distla.shard(jnp.ones(256), mesh)
      >>> x, residuals, rank, s = distla.linalg.lstsq(a, b)
      >>> x.shape, int(rank), round(float(np.asarray(x)[0]), 4)
      ((128,), 128, 0.5)
    """
    return route.call(LSTSQ, a, b, rcond=rcond, numpy_resid=numpy_resid)


def _matrix_rank(plan: Plan, M, *, rtol, hermitian):
    if hermitian:
        s = route.on_plan(SVD, plan, M, **dict(_VALUES, hermitian=True))
    else:
        s = route.on_plan(SVD, plan, M, **_VALUES)
    if rtol is None:
        # max(m, n)·eps first: s_max·max(m, n) may overflow near the top of the range
        cut = s.max() * (np.float64(max(M.shape)) * jnp.finfo(s.dtype).eps).astype(s.dtype)
    else:
        cut = jnp.asarray(rtol, s.dtype)
    return jnp.sum(s > cut)  # the default int, as jnp


def _refuse_rank(what, M, *, hermitian, **options):
    del options
    SVD.check(SVD.name, M, hermitian=hermitian)  # svd's own check, as its call made it


MATRIX_RANK = route.Op(
    "distla.linalg.matrix_rank",
    operands=("M",),
    one_device=jnp.linalg.matrix_rank,
    refuse=_refuse_rank,
    is_stack=lambda M, **options: M.ndim != 2,
    stacked=lambda plan, M, **options: jnp.linalg.matrix_rank(replicated(M), **options),
    distributed=_matrix_rank,
)


@route.public
def matrix_rank(
    M: jax.typing.ArrayLike,
    rtol: jax.typing.ArrayLike | None = None,
    *,
    hermitian: bool = False,
    tol: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Rank by counting singular values above ``rtol · s_max``, as ``jnp.linalg.matrix_rank``.

    ``rtol`` defaults to ``max(m, n) · eps`` (``tol`` is its older name).
    The singular values come from the distributed [`svdvals`][distla.linalg.svdvals], or with
    ``hermitian=True``, as in jnp, from the eigenvalues of ``(M + Mᴴ)/2``
    ([`svd`][distla.linalg.svd]'s ``hermitian=True`` route). Returns
    a scalar of the default integer type (int64 under x64), replicated.

    Args:
      M: ``[..., m, n]``, any layout: one matrix on a mesh takes the distributed route.
      rtol: relative tolerance (default ``max(m, n) · eps``), a scalar or one per
        matrix.
      hermitian: ``M`` is Hermitian: the eigenvalues' magnitudes serve.
      tol: the older name of ``rtol`` (not both).

    Returns:
      The rank, one per matrix of the stack, in the default integer type.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([1.0, 1.0, 0.0, 0.0])), mesh)
      >>> distla.linalg.matrix_rank(a)
      Array(2, dtype=int32)
    """
    if tol is not None:
        if rtol is not None:
            raise ValueError(f"{MATRIX_RANK.name}: only one of tol or rtol may be specified.")
        rtol = tol
    return route.call(MATRIX_RANK, M, rtol=rtol, hermitian=hermitian)
