"""Spectral functions of ``distla.linalg``: eigh, eigvalsh, svd, svdvals (see docs/spectral.md).

One matrix sharded over a mesh runs distributed: ``eigh`` and ``eigvalsh`` by
reduction to tridiagonal form (``distla/linalg/_tridiagonal.py``), ``svd`` and
``svdvals`` by reduction to bidiagonal form (``distla/linalg/_bidiagonal.py``,
``_tridiagonal.svdvals_2d``), ``polar`` by QDWH (``distla/linalg/_polar.py``) and
eigh's subsets by spectral divide and conquer (``distla/linalg/_geneig.py``). A
stack sharded along its batch runs jnp's function on each device with no
collective (``distla._core.stacked.stack``); one-device and empty inputs fall back
to jnp. ``pinv``, ``lstsq``, ``matrix_rank``, ``cond`` and ``norm`` are in
``distla/linalg/_lstsq.py``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core.checks import (
    ShapeError,
    as_array,
    empty_or_one_device,
    is_empty,
    is_traced,
    result_dtype,
    square,
)
from .._core.eager import one_program
from .._core.matmul import product, product_here
from .._core.matrix import HIGHEST, block_spec, ct_on, diag_mask, diagonal
from .._core.mesh import fitting_spec, operand_mesh, run_on_mesh, tangent_on_mesh
from .._core.one_device import block_layout, choose_plan, on_one_device
from .._core.plan import mesh_of as _mesh_of
from .._core.stacked import stack as _stack
from .._core.stacked import vmappable as _vmappable
from . import _bidiagonal, _eigh, _polar, _tridiagonal


class EighResult(NamedTuple):
    """``(eigenvalues, eigenvectors)`` as ``jnp.linalg.eigh`` returns them."""

    eigenvalues: jax.Array
    eigenvectors: jax.Array


class SVDResult(NamedTuple):
    """``(U, S, Vh)`` with ``a == U @ diag(S) @ Vh``, as ``jnp.linalg.svd``."""

    U: jax.Array
    S: jax.Array
    Vh: jax.Array


def _matrix(a, what):
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got a of shape {a.shape}")


# ----------------------------------------------------------------------------- eigh


@functools.partial(jax.jit, static_argnames=("mesh",))
def _eigh_tangent(w, v, da, *, mesh):
    """jax's eigh JVP: ``dw = re diag(Vᴴ dA V)``, ``dV = V (F ∘ Vᴴ dA V)``,
    ``F_ij = 1/(w_j − w_i)``."""
    spec = block_spec(mesh)
    n = v.shape[0]
    out = (P(), fitting_spec((n, n), mesh, spec))

    def body(w, v, da):
        vh = jnp.conj(v.T)
        m = product_here(product_here(vh, da), v)
        on_diag = diag_mask(m)
        diag = diagonal(jnp.real(m))
        gap = w[None, :] - w[:, None]
        f = jnp.where(on_diag, 0, 1 / jnp.where(on_diag, 1, gap)).astype(m.dtype)
        dv = product_here(v, f * m)
        return diag.astype(w.dtype), dv

    return run_on_mesh(body, mesh, out, w, v, da)


def _eigh_2d(a, *, mesh, symmetrize, lower):
    def primal(a):
        return tuple(_tridiagonal.eigh_2d(a, mesh=mesh, symmetrize=symmetrize, lower=lower))

    def stacked(a):  # jax.vmap of eigh: the stack path, batch-sharded as jnp's
        return tuple(_eigh_stack(a, uplo="L" if lower else "U", symmetrize=symmetrize))

    # custom_vmap traces its function: concrete calls keep the eager path
    fn = jax.custom_jvp(_vmappable(primal, stacked) if is_traced(a) else primal)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        w, v = fn(a)
        da = tangent_on_mesh(da, a)  # jax.jacfwd's one-device basis
        da_h = _hermitian(da, mesh=mesh, symmetrize=symmetrize, lower=lower)
        dw, dv = _eigh_tangent(w, v, da_h, mesh=mesh)
        return (w, v), (dw, dv)

    fn.defjvp(rule)
    return fn(a)


@functools.partial(jax.jit, static_argnames=("symmetrize", "lower", "mesh"))
def _hermitian(a, *, symmetrize, lower, mesh=None):
    mesh = operand_mesh(a, names=("a",)) if mesh is None else mesh
    spec = fitting_spec(a.shape, mesh, block_spec(mesh))

    def body(a):
        return _eigh.hermitian_from(a, symmetrize=symmetrize, lower=lower)

    return run_on_mesh(body, mesh, spec, a)


def _eigh_stack(a, *, uplo, symmetrize):
    def fn(x):
        w, v = jnp.linalg.eigh(x, UPLO=uplo, symmetrize_input=symmetrize)
        return w[..., None, :], v

    w, v = _stack(fn, (a,), (2,), 2)
    return EighResult(w[..., 0, :], v)


def _eigh_prologue(what, a, UPLO):
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{what}: UPLO must be one of None, 'L', or 'U'; got {UPLO!r}")
    a = as_array(a, "a", what)
    square(a, what)
    dtype = result_dtype(what, a)
    return a.astype(dtype)


def eigh(
    a: jax.typing.ArrayLike,
    UPLO: str | None = None,
    symmetrize_input: bool = True,
    *,
    plan: str = "auto",
) -> EighResult:
    """Eigenvalues and eigenvectors of a Hermitian matrix, as ``jnp.linalg.eigh``.

    One matrix sharded over a mesh takes LAPACK's route: Householder
    reduction to real tridiagonal form ``Qᴴ A Q = T`` on the 2D block layout
    with ``Q`` accumulated, bisection for the eigenvalues, inverse iteration
    for ``T``'s eigenvectors (each device a contiguous range, ranges cut at
    wide gaps; vectors of a cluster that spans devices are re-orthonormalized
    by distributed Cholesky QR), and ``V = Q Z`` by SUMMA. No device holds
    the whole matrix; peak memory per device is ``O(n²/p)``. A stack sharded
    along its batch dimensions runs ``jnp.linalg.eigh`` on each device with
    no collective.

    The distributed route is slower than LAPACK on one device; below the one-device
    budget (``distla.linalg.set_plan_budget``) ``plan="auto"`` moves the
    matrix to one device instead, runs ``jnp.linalg.eigh`` (LAPACK) there and
    shards the result back in the same layouts (``distla.cost`` reports the
    plan and its bytes).

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh (any
        layout), or a ``[..., n, n]`` stack. Integers and bools promote to the
        default float.
      UPLO: ``None``/``"L"`` or ``"U"``: the triangle read when
        ``symmetrize_input`` is False.
      symmetrize_input: use ``(a + aᴴ)/2`` (jnp's default).
      plan: ``"auto"`` (the faster by the cost model, within the budget),
        ``"distributed"`` or ``"one_device"``, for one sharded matrix.

    Returns:
      ``EighResult(eigenvalues, eigenvectors)``: eigenvalues ascending, real,
      replicated (``[n]``); eigenvectors (columns, ``[n, n]``) in the mesh's
      2D block layout (the largest even layout that fits for uneven ``n``).
      Differentiable (jax's rule, through ``distla.matmul``).

    Raises:
      ValueError: ``a`` not square, or an unknown ``UPLO`` or ``plan``.

    See also: ``jnp.linalg.eigh``, :func:`eigvalsh`.
    """
    what = "distla.linalg.eigh"
    a = _eigh_prologue(what, a, UPLO)
    lower = UPLO in (None, "L")
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        return EighResult(
            *empty_or_one_device(lambda x: jnp.linalg.eigh(x, UPLO, symmetrize_input), a)
        )
    if a.ndim > 2:
        return _eigh_stack(a, uplo=UPLO, symmetrize=symmetrize_input)
    options = (("UPLO", UPLO), ("symmetrize_input", bool(symmetrize_input)))
    if choose_plan("eigh", plan, jnp.linalg.eigh, a, what=what, options=options) == "one_device":
        spec = block_layout(a.shape, mesh)
        return EighResult(
            *on_one_device(
                jnp.linalg.eigh,
                a,
                mesh=mesh,
                in_specs=(spec,),
                out_specs=(P(), spec),
                options=options,
            )
        )
    return EighResult(*_eigh_2d(a, mesh=mesh, symmetrize=bool(symmetrize_input), lower=lower))


@one_program
def eigvalsh(
    a: jax.typing.ArrayLike,
    UPLO: str | None = "L",
    *,
    symmetrize_input: bool = True,
    plan: str = "auto",
) -> jax.Array:
    """Eigenvalues of a Hermitian matrix, ascending, as ``jnp.linalg.eigvalsh``.

    One matrix sharded over a mesh is reduced to real tridiagonal form by
    Householder reflections on its 2D block layout (LAPACK's ``xHETRD``,
    blocked as ``xLATRD``; one psum of two ``n``-vectors per column), whose
    eigenvalues each device then bisects for its ``n/p`` share (``xSTEBZ``):
    about ``4n³/3`` flops, LAPACK's count, and no device holds more than its
    block of the matrix (``distla.kernels.tridiagonal``). Below the
    one-device budget ``plan="auto"`` runs ``jnp.linalg.eigvalsh`` on one
    device instead, as :func:`eigh`. A stack sharded along its batch runs
    jnp's on each device.

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh, or a
        ``[..., n, n]`` stack; integers and bools promote to the default float.
      UPLO: ``"L"``/``None`` or ``"U"``: the triangle read when
        ``symmetrize_input`` is False.
      symmetrize_input: use ``(a + aᴴ)/2`` (jnp's default).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as :func:`eigh`.

    Returns:
      ``[n]`` real eigenvalues, ascending, replicated (``[..., n]`` sharded
      along the batch for stacks); NaN for a non-finite matrix. Within a few
      ``n·eps·‖a‖₂`` of LAPACK's. Differentiable to any order (the derivative
      is :func:`eigh`'s, ``dw = re diag(Vᴴ dA V)``).
    """
    what = "distla.linalg.eigvalsh"
    a = _eigh_prologue(what, a, UPLO)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        return empty_or_one_device(
            lambda x: jnp.linalg.eigvalsh(x, UPLO, symmetrize_input=symmetrize_input), a
        )
    if a.ndim > 2:
        return _eigh_stack(a, uplo=UPLO, symmetrize=symmetrize_input).eigenvalues
    options = (("UPLO", UPLO), ("symmetrize_input", bool(symmetrize_input)))
    if (
        choose_plan("eigh", plan, jnp.linalg.eigvalsh, a, what=what, options=options)
        == "one_device"
    ):
        return on_one_device(
            jnp.linalg.eigvalsh,
            a,
            mesh=mesh,
            in_specs=(block_layout(a.shape, mesh),),
            out_specs=(P(),),
            options=options,
        )
    return _eigvalsh_2d(a, mesh=mesh, symmetrize=bool(symmetrize_input), lower=UPLO in (None, "L"))


def _eigvalsh_2d(a, *, mesh, symmetrize, lower):
    """Eigenvalues by reduction to tridiagonal form; derivatives by eigh's rule."""

    def primal(a):
        return _tridiagonal.eigvalsh_2d(a, mesh=mesh, symmetrize=symmetrize, lower=lower)

    def stacked(a):
        return _eigh_stack(a, uplo="L" if lower else "U", symmetrize=symmetrize).eigenvalues

    fn = jax.custom_jvp(_vmappable(primal, stacked) if is_traced(a) else primal)

    def rule(primals, tangents):  # dw = re diag(Vᴴ dA V) needs the eigenvectors
        def values(a):
            return _eigh_2d(a, mesh=mesh, symmetrize=symmetrize, lower=lower)[0]

        return jax.jvp(values, primals, tangents)

    fn.defjvp(rule)
    return fn(a)


# ------------------------------------------------------------------------------ SVD


def _svd_specs(mesh, shape, full_matrices, compute_uv):
    if not compute_uv:
        return P()
    return _bidiagonal.out_specs(mesh, shape, full_matrices)


@jax.jit
def _svd_tangent(u, s, vh, da):
    """jax's ``svd_jvp_rule`` (``full_matrices=False``) with ``distla.matmul``."""
    mesh = operand_mesh(u, vh, da, names=("u", "vh", "da"))
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


def _svd_diff(a, *, full_matrices, compute_uv):
    """The SVD of one matrix with jax's JVP rule (``full_matrices=False``, a square
    matrix, or values only)."""

    def primal(a):
        if not compute_uv:  # the eigenvalues of [[0, r], [rᴴ, 0]] by tridiagonal reduction
            return _tridiagonal.svdvals_2d(a, mesh=operand_mesh(a, names=("a",)))
        return tuple(_bidiagonal.svd_2d(a, full_matrices=full_matrices))

    fn = jax.custom_jvp(primal)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        if compute_uv and full_matrices and a.shape[-1] != a.shape[-2]:  # square: the same
            raise NotImplementedError(
                "distla.linalg.svd: the derivative of a non-square matrix's SVD needs "
                "full_matrices=False (as jax's)"
            )
        if compute_uv:
            u, s, vh = fn(a)
        else:
            u, s, vh = _svd_diff(a, full_matrices=False, compute_uv=True)
        ds, du, dvh = _svd_tangent(u, s, vh, da)
        if not compute_uv:
            return s, ds
        return (u, s, vh), (du, ds, dvh)

    fn.defjvp(rule)
    return fn(a)


@one_program
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
        built from :func:`eigh` of ``(a + aᴴ)/2`` (``S = |λ|`` descending,
        ``U`` the eigenvectors in that order, ``Vh = (U·sign(λ))ᴴ``), so a
        non-Hermitian ``a`` gives what jnp gives for it; ``full_matrices`` is
        moot (square).
      subset_by_index: not supported for sharded matrices (``None`` only).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` (as :func:`eigh`).

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

    See also: ``jnp.linalg.svd``, :func:`svdvals`.
    """
    what = "distla.linalg.svd"
    a = as_array(a, "a", what)
    _matrix(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    if hermitian and a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"{what}: hermitian=True takes square matrices (as jnp's eigh "
            f"route); got a of shape {a.shape}"
        )
    mesh = _mesh_of(a, names=("a",))

    def ref(x):
        return jnp.linalg.svd(
            x,
            full_matrices=full_matrices,
            compute_uv=compute_uv,
            hermitian=hermitian,
            subset_by_index=subset_by_index,
        )

    if mesh is None or is_empty(a):
        out = empty_or_one_device(ref, a)
        return SVDResult(*out) if compute_uv else out
    if subset_by_index is not None:
        if full_matrices:  # jnp's check comes first
            raise ValueError(f"{what}: full_matrices and subset_by_index cannot both be set")
        raise NotImplementedError(
            f"{what}: subset_by_index is not supported for a sharded matrix; pass None"
        )
    if a.ndim > 2:
        if not compute_uv:
            return _stack(lambda x: ref(x)[..., None, :], (a,), (2,), 2)[..., 0, :]
        u, s, vh = _stack(
            lambda x: (lambda r: (r[0], r[1][..., None, :], r[2]))(ref(x)), (a,), (2,), 2
        )
        return SVDResult(u, s[..., 0, :], vh)
    options = (
        ("full_matrices", bool(full_matrices)),
        ("compute_uv", bool(compute_uv)),
        ("hermitian", bool(hermitian)),
    )
    if choose_plan("svd", plan, jnp.linalg.svd, a, what=what, options=options) == "one_device":
        specs = _svd_specs(mesh, a.shape, full_matrices, compute_uv)
        out = on_one_device(
            jnp.linalg.svd,
            a,
            mesh=mesh,
            in_specs=(block_layout(a.shape, mesh),),
            out_specs=specs if compute_uv else (specs,),
            options=options,
        )
        return SVDResult(*out) if compute_uv else out
    if hermitian:
        w, v = eigh(a, plan="distributed")
        out = _from_eigenpairs(w, v, mesh=mesh, compute_uv=bool(compute_uv))
    else:
        out = _svd_diff(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    return SVDResult(*out) if compute_uv else out


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


@one_program
def svdvals(x: jax.typing.ArrayLike, /, *, plan: str = "auto") -> jax.Array:
    """Singular values, descending, as ``jnp.linalg.svdvals``.

    One ``m x n`` matrix sharded over a mesh is reduced to real bidiagonal
    form by Householder reflections from both sides on its 2D block layout
    (LAPACK's ``xGEBRD``, blocked as ``xLABRD``: two psums of vectors per
    column, ``distla.kernels.bidiagonal``); the singular values are the top
    ``min(m, n)`` eigenvalues of the Golub–Kahan tridiagonal, bisected by
    each device for its share as in :func:`eigvalsh`. No device holds more
    than its block of the matrix. Below the one-device budget
    ``plan="auto"`` runs ``jnp.linalg.svd`` on one device; stacks sharded
    along the batch run jnp's on each device.

    Args:
      x: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh, or a ``[..., m, n]``
        stack; integers and bools promote to the default float.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as :func:`svd`.

    Returns:
      ``[min(m, n)]`` real, non-negative, descending, replicated (stacks:
      sharded along the batch); within a few ``k·eps·σ₁`` of LAPACK's; NaN
      for a non-finite matrix. Differentiable (:func:`svd`'s rule).
    """
    return svd(x, compute_uv=False, plan=plan)


@jax.jit
def _polar_tangent(u, h, w, s, vh, da):
    """``(dU, dH)`` of ``a = U H`` (``m >= n``) from the SVD ``a = W diag(s) Vᴴ``.

    ``Ω = Uᴴ dU`` solves ``ΩH + HΩ = UᴴdA − dAᴴU`` (diagonal in ``V``'s basis:
    ``Ω̃_ij = M̃_ij / (s_i + s_j)``), ``dH = UᴴdA − ΩH``, and for ``m > n``
    ``dU = UΩ + (I − UUᴴ) dA H⁻¹``.
    """
    del w
    mesh = operand_mesh(u, da, names=("u", "da"))
    spec = block_spec(mesh)
    m, n = da.shape
    out = (fitting_spec((m, n), mesh, spec), fitting_spec((n, n), mesh, spec))

    def body(u, h, s, vh, da):
        dt = da.dtype
        v = jnp.conj(vh.T)
        uda = product_here(jnp.conj(u.T), da)
        mt = product_here(product_here(vh, uda - jnp.conj(uda.T)), v)
        tot = s[:, None] + s[None, :]
        om_t = jnp.where(tot > 0, mt / jnp.where(tot > 0, tot, 1).astype(dt), 0)
        om = product_here(product_here(v, om_t), vh)
        dh = uda - product_here(om, h)
        dh = (dh + jnp.conj(dh.T)) / 2
        du = product_here(u, om)
        if m > n:
            inv_s = jnp.where(s > 0, 1 / jnp.where(s > 0, s, 1), 0).astype(dt)
            rest = da - product_here(u, uda)
            du = du + product_here(product_here(rest, v * inv_s[None, :]), vh)
        return du, dh

    return run_on_mesh(body, mesh, out, u, h, s, vh, da)


def _polar_on_one_device(a, side, method, eps, max_iterations):
    """The one-device plan's polar: every shape and side, as the distributed plan takes them.

    ``jax.scipy.linalg.polar``'s QDWH refuses ``side="left"`` for ``m >= n`` and
    ``side="right"`` for ``m < n``, and traces ``eps``, which its QDWH needs static; so
    this calls ``jax.lax.linalg.qdwh`` on ``a`` (``m >= n``) or ``aᴴ`` and forms the
    other side's factor from the unitary one: ``a = u h`` gives ``p = a uᴴ`` on the left,
    ``a = p u`` gives ``h = uᴴ a`` on the right.
    """
    if method == "svd":
        return jsl.polar(a, side, method="svd")
    m, n = a.shape
    x = a if m >= n else jnp.conj(a.T)
    w, h, _, _ = lax.linalg.qdwh(x, max_iterations=max_iterations, eps=eps)
    u = w if m >= n else jnp.conj(w.T)
    if (side == "right") == (m >= n):  # the factor qdwh returned is this side's
        return u, h
    p = (
        jnp.matmul(a, jnp.conj(u.T), precision=HIGHEST)
        if side == "left"
        else jnp.matmul(jnp.conj(u.T), a, precision=HIGHEST)
    )
    return u, (p + jnp.conj(p.T)) / 2


@one_program
def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None, plan="auto"):
    """Polar decomposition, as ``jax.scipy.linalg.polar`` (see ``distla.linalg._polar.polar``).

    ``plan`` (``"auto"``, ``"distributed"``, ``"one_device"``) as :func:`eigh`'s:
    below the one-device budget ``"auto"`` runs ``jax.scipy.linalg.polar`` (with
    ``method``) on one device and shards ``(u, p)`` back in the distributed
    plan's layouts; ``method="svd"`` on a sharded matrix has only that plan.
    """
    what = "distla.linalg.polar"
    _polar.check_options(side, method, what)
    a = as_array(a, "a", what)
    mesh = _mesh_of(a, names=("a",))
    if a.ndim == 2 and mesh is not None and not is_empty(a):
        a = a.astype(result_dtype(what, a))
        options = (
            ("side", side),
            ("method", method),
            ("eps", eps),
            ("max_iterations", max_iterations),
        )
        if method == "svd" and plan == "auto":
            plan = "one_device"
        if (
            choose_plan("polar", plan, _polar_on_one_device, a, what=what, options=options)
            == "one_device"
        ):
            specs = _polar._out_specs(mesh, a.shape, side, P(*jax.typeof(a).sharding.spec))

            def one(a):
                return tuple(
                    on_one_device(
                        _polar_on_one_device,
                        a,
                        mesh=mesh,
                        in_specs=(block_layout(a.shape, mesh),),
                        out_specs=specs,
                        options=options,
                    )
                )

            m, n = a.shape
            if method == "svd" or (side == "right") != (m >= n) and m != n:
                # jax differentiates its SVD route itself; the rule below covers the
                # shapes whose polar factor is unitary (QDWH's forward mode, the rest)
                return one(a)
            # jax's QDWH is a while loop, which reverse mode cannot differentiate:
            # the distributed plan's rule instead, so that both plans differentiate alike
            return _with_polar_rule(one, a, side=side, mesh=mesh)
    if a.ndim != 2 or method != "qdwh" or mesh is None or is_empty(a):
        return _polar.polar(a, side, method=method, eps=eps, max_iterations=max_iterations)
    a = a.astype(result_dtype(what, a))
    return _with_polar_rule(
        lambda a: tuple(_polar.polar(a, side, max_iterations=max_iterations)),
        a,
        side=side,
        mesh=mesh,
    )


def _with_polar_rule(primal, a, *, side, mesh):
    """``primal(a) = (u, p)`` with the polar decomposition's derivative, from the SVD
    (``_polar_tangent``): linear in the tangent, so reverse mode and every order work."""
    fn = jax.custom_jvp(primal)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        u, p = fn(a)
        m, n = a.shape
        if side == "right" and m >= n:
            w, s, vh = svd(a, full_matrices=False)
            du, dp = _polar_tangent(u, p, w, s, vh, da)
        elif side == "left" and m <= n:  # aᴴ = uᴴ p: the right polar of aᴴ
            ah, dah = ct_on(a, mesh=mesh), ct_on(da, mesh=mesh)
            w, s, vh = svd(ah, full_matrices=False)
            du, dp = _polar_tangent(ct_on(u, mesh=mesh), p, w, s, vh, dah)
            du = ct_on(du, mesh=mesh)
        else:
            raise NotImplementedError(
                f"distla.linalg.polar: the derivative needs m >= n for side='right' and "
                f"m <= n for side='left'; got a of shape {a.shape}, side={side!r}"
            )
        return (u, p), (du, dp)

    fn.defjvp(rule)
    return fn(a)


polar.__doc__ = _polar.polar.__doc__


__all__ = ["EighResult", "SVDResult", "eigh", "eigvalsh", "polar", "svd", "svdvals"]
