"""The singular value decomposition: ``svd`` and ``svdvals`` (private; see docs/spectral.md).

One matrix sharded over a mesh: ``svd`` by reduction to bidiagonal form
(``_bidiagonal``: LAPACK's route, distributed), the values alone by
bidiagonal reduction (``_eigh.tridiagonal.svdvals_2d``). A stack sharded
along its batch runs jnp's function on each device with no collective
(``distla._core.stacked.stack``); one-device and empty inputs fall back to
jnp. Each public function declares its op (``distla._core.route.Op``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.checks import ShapeError
from .._core.matmul import product, product_here
from .._core.matrix import block_spec, ct_on, diag_mask, diagonal
from .._core.mesh import fitting_spec, run_on_mesh
from .._core.one_device import block_layout
from .._core.plan import Plan
from .._core.stacked import stack
from . import _bidiagonal as bidiagonal
from ._eigh import rules as eigh_rules
from ._eigh import tridiagonal


class SVDResult(NamedTuple):
    """``(U, S, Vh)`` with ``a == U @ diag(S) @ Vh``, as ``jnp.linalg.svd``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([3.0, 2.0, 1.0])), mesh)
      >>> result = distla.linalg.svd(a)
      >>> np.round(np.asarray(result.S), 4) + 0.0
      array([3., 2., 1.], dtype=float32)
    """

    U: jax.Array
    S: jax.Array
    Vh: jax.Array


def _check(what, a, *, hermitian, **options):
    del options
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got a of shape {a.shape}")
    if hermitian and a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"{what}: hermitian=True takes square matrices (as jnp's eigh "
            f"route); got a of shape {a.shape}"
        )


def _svd_specs(mesh, shape, full_matrices, compute_uv):
    if not compute_uv:
        return P()
    return bidiagonal.out_specs(mesh, shape, full_matrices)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _svd_tangent(u, s, vh, da, *, mesh):
    """jax's ``svd_jvp_rule`` (``full_matrices=False``) with ``distla.matmul``."""
    spec = block_spec(mesh)
    m, n = da.shape
    k = s.shape[0]
    out = (P(), fitting_spec((m, k), mesh, spec), fitting_spec((k, n), mesh, spec))

    def body(u, s, vh, da):
        dt = da.dtype
        ut, v = jnp.conj(u.T), jnp.conj(vh.T)
        ds_mat = product_here(product_here(ut, da), v)
        eye_k = diag_mask(ds_mat).astype(s.dtype)
        ds = diagonal(jnp.real(ds_mat)).astype(s.dtype)
        row = s[None, :]
        diffs = (row + row.T) * (row - row.T)
        f = (1 / (diffs + eye_k) - eye_k).astype(dt)
        dss = row.astype(dt) * ds_mat
        sds = row.T.astype(dt) * ds_mat
        zeros = (s == 0).astype(s.dtype)
        s_inv = 1 / (s + zeros) - zeros
        dudv_diag = 0.5 * (ds_mat - jnp.conj(ds_mat.T)) * (eye_k * s_inv[None, :]).astype(dt)
        du = product_here(u, f * (dss + jnp.conj(dss.T)) + dudv_diag)
        dv = product_here(v, f * (sds + jnp.conj(sds.T)))
        safe = jnp.where(s == 0, 1, s).astype(dt)[None, :]
        if m > n:
            dav = product_here(da, v)
            du = du + (dav - product_here(u, product_here(ut, dav))) / safe
        if n > m:
            dahu = product_here(jnp.conj(da.T), u)
            dv = dv + (dahu - product_here(v, product_here(vh, dahu))) / safe
        return ds, du, jnp.conj(dv.T)

    return run_on_mesh(body, mesh, out, u, s, vh, da)


def _svd_one(plan: Plan, a, *, full_matrices, compute_uv):
    if not compute_uv:  # the eigenvalues of [[0, r], [rᴴ, 0]] by tridiagonal reduction
        return tridiagonal.svdvals_2d(a, mesh=plan.mesh)
    return tuple(bidiagonal.svd_2d(a, full_matrices=full_matrices, mesh=plan.mesh))


def _svd_jvp(fn, plan: Plan, primals, tangents, *, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    if compute_uv and full_matrices and a.shape[-1] != a.shape[-2]:  # square: the same
        raise NotImplementedError(
            "distla.linalg.svd: the derivative of a non-square matrix's SVD needs "
            "full_matrices=False (as jax's)"
        )
    if compute_uv:
        u, s, vh = fn(a)
    else:
        u, s, vh = svd_2d(plan, a, full_matrices=False, compute_uv=True)
    ds, du, dvh = _svd_tangent(u, s, vh, da, mesh=plan.mesh)
    if not compute_uv:
        return s, ds
    return (u, s, vh), (du, ds, dvh)


# The SVD of one matrix with jax's JVP rule (full_matrices=False, a square matrix, or
# values only)
_SVD_2D = route.Op(
    "distla.linalg.svd",
    one_device=jnp.linalg.svd,
    distributed=_svd_one,
    jvp=_svd_jvp,
    on_mesh=False,
)


def svd_2d(plan: Plan, a, *, full_matrices: bool, compute_uv: bool):
    """``(u, s, vh)`` (or ``s``) of one matrix on ``plan``'s mesh, with jax's rule."""
    return route.distributed(_SVD_2D, plan, a, full_matrices=full_matrices, compute_uv=compute_uv)


@functools.partial(jax.jit, static_argnames=("mesh", "compute_uv"))
def _from_eigenpairs(w, v, *, mesh, compute_uv):
    """``jnp.linalg.svd(a, hermitian=True)`` from ``eigh(a)``'s ascending ``(w, v)``.

    As jnp: ``s = |w|`` sorted descending (``lax.sort`` on ``(|w|, index, sign)``,
    reversed), ``U`` the eigenvectors in that order and ``Vh = (U·sign(w))ᴴ``.
    The columns are reordered by a product with the permutation matrix (SUMMA,
    exact: one unit entry per column), which keeps every device at its block.
    """
    s = jnp.abs(w)
    if not compute_uv:
        return lax.rev(lax.sort(s), (0,))
    n = s.shape[0]
    order = lax.broadcasted_iota(jnp.int32, s.shape, 0)
    s, order, sign = (lax.rev(x, (0,)) for x in lax.sort((s, order, jnp.sign(w)), num_keys=1))

    def permutation(order):  # column j holds a one in row order[j]
        return (lax.broadcasted_iota(jnp.int32, (n, n), 0) == order[None, :]).astype(v.dtype)

    perm = run_on_mesh(permutation, mesh, fitting_spec((n, n), mesh, block_spec(mesh)), order)
    u = product(v, perm, mesh)
    return u, s, ct_on(u * sign.astype(u.dtype)[None, :], mesh=mesh)


def _distributed(plan: Plan, a, *, full_matrices, compute_uv, hermitian, subset_by_index):
    del subset_by_index
    if hermitian:
        w, v = eigh_rules.eigh_2d(plan, a, symmetrize=True, lower=True)
        return _from_eigenpairs(w, v, mesh=plan.mesh, compute_uv=bool(compute_uv))
    return svd_2d(plan, a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))


def _stacked(plan: Plan, a, *, compute_uv, **options):
    def ref(x):
        return jnp.linalg.svd(x, compute_uv=compute_uv, **options)

    if not compute_uv:
        return stack(lambda x: ref(x)[..., None, :], (a,), (2,), 2, mesh=plan.mesh)[..., 0, :]
    u, s, vh = stack(
        lambda x: (lambda r: (r[0], r[1][..., None, :], r[2]))(ref(x)),
        (a,),
        (2,),
        2,
        mesh=plan.mesh,
    )
    return u, s[..., 0, :], vh


def _refuse(what, a, *, full_matrices, subset_by_index, **options):
    if subset_by_index is not None:
        if full_matrices:  # jnp's check comes first
            raise ValueError(f"{what}: full_matrices and subset_by_index cannot both be set")
        raise NotImplementedError(
            f"{what}: subset_by_index is not supported for a sharded matrix; pass None"
        )


def _layouts(plan: Plan, a, *, results, full_matrices, compute_uv, **options):
    specs = _svd_specs(plan.mesh, a.shape, full_matrices, compute_uv)
    return (block_layout(a.shape, plan.mesh),), (specs if compute_uv else (specs,))


SVD = route.Op(
    "distla.linalg.svd",
    check=_check,
    one_device=jnp.linalg.svd,
    refuse=_refuse,
    is_stack=route.beyond(2),
    stacked=_stacked,
    family="svd",
    layouts=_layouts,
    distributed=_distributed,
    result=lambda out, *, compute_uv, **options: SVDResult(*out) if compute_uv else out,
    keep_replicated=True,
)


@route.public
def svd(
    a: jax.typing.ArrayLike,
    full_matrices: bool = True,
    compute_uv: bool = True,
    hermitian: bool = False,
    subset_by_index: tuple[int, int] | None = None,
    *,
    plan: str = "auto",
) -> SVDResult | jax.Array:
    """Singular value decomposition ``a = U diag(S) Vh``, as ``jnp.linalg.svd``.

    One matrix sharded over a mesh: LAPACK's route, distributed: Householder
    reduction to real bidiagonal form ``a = Q B Pᴴ`` on the 2D block layout,
    ``B``'s singular values by bisection and its vectors by inverse iteration
    on the Golub–Kahan tridiagonal (each device a range), ``U = Q U_B``,
    ``V = P V_B`` (for ``m < n`` the same on ``aᴴ``); values at the rounding
    level are taken from ``a`` itself (docs/spectral.md). No device holds the
    whole matrix. Stacks sharded along the batch run jnp's function on each
    device. Below the one-device budget (``distla.linalg.set_plan_budget``)
    ``plan="auto"`` moves the matrix to one device, runs ``jnp.linalg.svd``
    there and shards the result back in the same layouts (``distla.cost``
    reports it).

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh, or a stack.
      full_matrices: ``U`` ``[m, m]`` and ``Vh`` ``[n, n]`` (the extra columns
        from a complete QR of ``U``); otherwise ``[m, k]`` and ``[k, n]``,
        ``k = min(m, n)``.
      compute_uv: return only ``S`` when False.
      hermitian: as in jnp, ``a`` is taken to be Hermitian: the decomposition is
        built from [`eigh`][distla.linalg.eigh] of ``(a + aᴴ)/2`` (``S = |λ|`` descending,
        ``U`` the eigenvectors in that order, ``Vh = (U·sign(λ))ᴴ``), so a
        non-Hermitian ``a`` gives what jnp gives for it; ``full_matrices`` is
        moot (square).
      subset_by_index: not supported for sharded matrices (``None`` only).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` (as [`eigh`][distla.linalg.eigh]).

    Returns:
      ``SVDResult(U, S, Vh)`` (or ``S``): ``S`` descending, non-negative,
      replicated; ``U`` and ``Vh`` in the mesh's 2D block layout (the largest
      even layout that fits). Differentiable (forward and reverse, jax's rule
      with ``distla.matmul``) for ``full_matrices=False`` or values only.

    Raises:
      ValueError: ``a`` has fewer than 2 dimensions.
      ValueError: ``subset_by_index`` with ``full_matrices=True``, as jnp.
      NotImplementedError: ``subset_by_index`` on a sharded matrix.
      ValueError: ``hermitian=True`` with a non-square ``a`` (also a
        ``TypeError``, which jnp raises there).

    See also: ``jnp.linalg.svd``, [`svdvals`][distla.linalg.svdvals].

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(512, 256) * 3.0, mesh)
      >>> u, s, vh = distla.linalg.svd(a, full_matrices=False)
      >>> u.shape, s.shape, vh.shape
      ((512, 256), (256,), (256, 256))
      >>> round(float(s.max()), 4)
      3.0
    """
    options = dict(
        full_matrices=bool(full_matrices),
        compute_uv=bool(compute_uv),
        hermitian=bool(hermitian),
        subset_by_index=subset_by_index,
    )
    return route.call(SVD, a, plan=plan, **options)


@route.public
def svdvals(x: jax.typing.ArrayLike, /, *, plan: str = "auto") -> jax.Array:
    """Singular values, descending, as ``jnp.linalg.svdvals``.

    One ``m x n`` matrix sharded over a mesh is reduced to real bidiagonal
    form by Householder reflections from both sides on its 2D block layout
    (LAPACK's ``xGEBRD``, blocked as ``xLABRD``: two psums of vectors per
    column, ``distla.kernels.bidiagonal``); the singular values are the top
    ``min(m, n)`` eigenvalues of the Golub–Kahan tridiagonal, bisected by
    each device for its share as in [`eigvalsh`][distla.linalg.eigvalsh]. No device holds more
    than its block of the matrix. Below the one-device budget
    ``plan="auto"`` runs ``jnp.linalg.svd`` on one device; stacks sharded
    along the batch run jnp's on each device.

    Args:
      x: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh, or a ``[..., m, n]``
        stack; integers and bools promote to the default float.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as [`svd`][distla.linalg.svd].

    Returns:
      ``[min(m, n)]`` real, non-negative, descending, replicated (stacks:
      sharded along the batch); within a few ``k·eps·σ₁`` of LAPACK's; NaN
      for a non-finite matrix. Differentiable ([`svd`][distla.linalg.svd]'s rule).

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([1.0, 3.0, 2.0])), mesh)
      >>> np.round(np.asarray(distla.linalg.svdvals(a)), 4) + 0.0
      array([3., 2., 1.], dtype=float32)
    """
    options = dict(full_matrices=True, compute_uv=False, hermitian=False, subset_by_index=None)
    return route.call(SVD, x, plan=plan, **options)
