"""``jax.scipy.linalg``'s spellings of distla.linalg's factorisations (private).

``cholesky``, ``eigh``, ``qr`` and ``svd`` have the same names in ``jnp.linalg``
and ``jax.scipy.linalg`` with different parameters and defaults (scipy's
``cholesky`` is upper by default, its ``qr`` has ``mode="full"`` and
``pivoting``, its ``svd`` a ``lapack_driver``). The functions here take
jax.scipy's parameters and call distla.linalg's own (one implementation per
family); the options that have no distributed algorithm (``pivoting=True``,
``lapack_driver="gesvd"``) run on the one-device plan
(``distla.linalg.set_plan_budget``).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax

from ... import linalg as _linalg
from ..._core import route
from ..._core.checks import ShapeError, as_array
from ..._core.matrix import block_spec
from ..._core.mesh import fitting_spec, run_on_mesh
from ..._core.plan import Plan
from ...linalg import _svd
from ._everywhere import everywhere

_QR_MODES = ("full", "economic", "r")
_SVD_DRIVERS = ("gesdd", "gesvd")


# --------------------------------------------------------------------------- cholesky


@route.public
def cholesky(
    a: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
) -> jax.Array:
    """Cholesky factor, as ``jax.scipy.linalg.cholesky``: the UPPER factor by default.

    The distributed blocked Cholesky of ``distla.linalg.cho_factor`` (ScaLAPACK's
    PDPOTRF on the 2D block-cyclic layout): one matrix on a mesh is factored with
    no device holding it whole; a stack sharded along its batch on each device.
    Unlike ``distla.linalg.cholesky`` (``jnp.linalg``'s: lower by default,
    symmetrizing), only the triangle named by ``lower`` is read, as scipy's.

    Args:
      a: ``[n, n]`` Hermitian positive definite matrix sharded on a 1- or 2-axis
        mesh (any layout), or a stack ``[..., n, n]``. Integers and bools promote
        to the default float.
      lower: return ``L`` (``a = L Lᴴ``, reading the lower triangle) instead of
        ``U`` (``a = Uᴴ U``, reading the upper triangle, the default).
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      block_size: the distributed factorisation's panel width (``None``: distla's
        choice).

    Returns:
      ``U`` or ``L`` (``[..., n, n]``, zeros in the other triangle) in the mesh's
      2D block layout ``P(r, c)`` (the largest even layout that fits). Not
      positive definite: NaN, as jax.

    Raises:
      ValueError: ``a`` is not square or has fewer than 2 dimensions.

    See also: ``jax.scipy.linalg.cholesky``, ``distla.linalg.cho_factor``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + 1.0, mesh)
      >>> u = sla.cholesky(a)
      >>> np.allclose(np.triu(np.asarray(u)), np.asarray(u))
      True
      >>> np.allclose(np.asarray(u).T @ np.asarray(u), np.asarray(a), atol=1e-4)
      True
    """
    del overwrite_a, check_finite
    return _linalg.cho_factor(a, lower=lower, block_size=block_size)[0]


# --------------------------------------------------------------------------- eigh


@route.public
def eigh(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike | None = None,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    turbo: bool = True,
    eigvals: Any = None,
    type: int = 1,  # noqa: A002  (scipy's name)
    check_finite: bool = True,
    *,
    subset_by_index: tuple[int, int] | None = None,
    subset_by_value: tuple[float, float] | None = None,
    plan: str = "auto",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Hermitian eigenproblems, as ``jax.scipy.linalg.eigh`` (and scipy's pencils).

    ``distla.linalg.eigh``'s algorithms: the tridiagonal reduction, bisection and
    inverse iteration on the 2D block layout for one sharded matrix (below the
    one-device budget ``plan="auto"`` runs LAPACK on one device), jnp's function on
    each device's members for a stack sharded along its batch. Beyond jax, which
    implements ``b=None`` and ``type=1`` only, the generalized problems
    (``b``, ``type`` 1-3) and subsets run too, as ``scipy.linalg.eigh``.

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh, or a stack
        ``[..., n, n]`` (the standard problem only).
      b: ``[n, n]`` Hermitian positive definite matrix on the same mesh, or
        ``None``.
      lower: as jax, which symmetrizes ``a`` (``(a + aᴴ)/2``) whatever the
        triangle: accepted, the result does not depend on it.
      eigvals_only: return the eigenvalues only.
      overwrite_a: accepted and ignored, as in jax.
      overwrite_b: accepted and ignored, as in jax.
      turbo: accepted and ignored, as in jax.
      eigvals: scipy's older ``subset_by_index`` (``(lo, hi)``, inclusive).
      type: 1 ``a x = λ b x``, 2 ``a b x = λ x``, 3 ``b a x = λ x``.
      check_finite: accepted and ignored, as in jax.
      subset_by_index: ``(lo, hi)``, the eigenvalues ``lo..hi`` (inclusive), as
        scipy (a distla extension).
      subset_by_value: ``(vl, vu)``, the eigenvalues in ``(vl, vu]``, as scipy
        (concrete operands only).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as
        ``distla.linalg.eigh``'s.

    Returns:
      ``(w, v)``, or ``w`` with ``eigvals_only``: ``w`` ascending, real,
      replicated; ``v`` (columns) in the mesh's 2D block layout (a stack: sharded
      along its batch).

    Raises:
      ValueError: as ``distla.linalg.eigh``.

    See also: ``jax.scipy.linalg.eigh``, ``distla.linalg.eigh``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.arange(4.0)), mesh)
      >>> np.round(np.asarray(sla.eigh(a, eigvals_only=True)), 4) + 0.0
      array([0., 1., 2., 3.], dtype=float32)
    """
    del overwrite_a, overwrite_b, turbo, check_finite
    uplo = "L" if lower else "U"
    scipy_form = (
        b is not None
        or type != 1
        or eigvals is not None
        or subset_by_index is not None
        or subset_by_value is not None
    )
    if not scipy_form:  # jax's problem: symmetrized, stacks too
        if eigvals_only:
            return _linalg.eigvalsh(a, uplo, plan=plan)
        return tuple(_linalg.eigh(a, UPLO=uplo, plan=plan))
    out = _linalg.eigh(
        a,
        b,
        lower=lower,
        eigvals_only=eigvals_only,
        type=type,
        eigvals=eigvals,
        subset_by_index=subset_by_index,
        subset_by_value=subset_by_value,
        plan=plan,
    )
    return out if eigvals_only else tuple(out)


# --------------------------------------------------------------------------- qr


def _qr_pivoted(a, *, mode):
    """jax.scipy's column-pivoted QR (LAPACK's geqp3) of one matrix, on one device."""
    return jsl.qr(a, mode=mode, pivoting=True)


def _pad_rows_body(r, *, m):
    return jnp.pad(r, ((0, m - r.shape[0]), (0, 0)))


@functools.partial(jax.jit, static_argnames=("m", "mesh"))
def _pad_rows(r, *, m, mesh):
    """``[R; 0]`` with ``m`` rows, for scipy's ``mode="r"`` of a tall matrix (``(m, n)``),
    in the largest even 2D block layout that fits."""
    spec = fitting_spec((m, r.shape[1]), mesh, block_spec(mesh))
    return run_on_mesh(functools.partial(_pad_rows_body, m=m), mesh, spec, r)


def _padded(r, *, m):
    """``r`` with ``m`` rows, the new ones zero (a matrix or a stack)."""
    widths = [(0, 0)] * (r.ndim - 2) + [(0, m - r.shape[-2]), (0, 0)]
    return jnp.pad(r, widths)


def _padded_stack(plan: Plan, r, *, m):
    del plan
    return _padded(r, m=m)


def _padded_on(plan: Plan, r, *, m):
    return _pad_rows(r, m=m, mesh=plan.mesh)


#: scipy's ``mode="r"`` of a tall matrix: ``distla.linalg.qr``'s ``R`` padded to ``m`` rows
_R_PADDED = route.Op(
    "distla.scipy.linalg.qr",
    operands=("r",),
    one_device=_padded,
    distributed=_padded_on,
    promote=route.first_dtype,
    is_stack=route.beyond(2),
    stacked=_padded_stack,
)


def _check_matrix(what, a, **options):
    del options
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have shape (..., m, n); got a of shape {a.shape}")


def _qr_pivoted_everywhere(plan: Plan, a, *, mode):
    """Above the budget (or a stack): jax's call, which gathers."""
    return everywhere(_qr_pivoted, a, mesh=plan.mesh, options=(("mode", mode),))


def _qr_pivoted_stack(plan: Plan, a, *, mode):
    del plan
    return _qr_pivoted(a, mode=mode)


def _as_tuple(out, **options):
    del options
    return tuple(out)


#: ``pivoting=True``: no distributed algorithm; one device within the budget, else jax's
QR_PIVOTED = route.Op(
    "distla.scipy.linalg.qr",
    one_device=_qr_pivoted,
    distributed=_qr_pivoted_everywhere,
    check=_check_matrix,
    is_stack=route.beyond(2),
    stacked=_qr_pivoted_stack,
    family="qr_pivoting",
    result=_as_tuple,
)


@route.public
def qr(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    lwork: Any = None,
    mode: str = "full",
    pivoting: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> tuple[jax.Array, ...]:
    """QR decomposition, as ``jax.scipy.linalg.qr``: ``mode="full"`` by default.

    Without pivoting, ``distla.linalg.qr``'s kernels: blocked Householder on the 2D
    block-cyclic layout (ScaLAPACK's PDGEQRF), TSQR for tall-skinny matrices with
    ``mode="economic"``; no device holds the whole matrix. ``pivoting=True``
    (LAPACK's ``geqp3``) has no distributed algorithm: one sharded matrix goes to
    one device within the plan budget (``distla.linalg.set_plan_budget``) and its
    results come back in the layouts below; above the budget jax's own call runs,
    which gathers the matrix onto every device.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh (any layout), or a stack
        ``[..., m, n]`` sharded along its batch. Integers and bools promote.
      overwrite_a: accepted and ignored, as in jax.
      lwork: accepted and ignored, as in jax.
      mode: ``"full"`` (``Q [m, m]``, ``R [m, n]``), ``"economic"`` (``Q [m, k]``,
        ``R [k, n]``, ``k = min(m, n)``) or ``"r"`` (``R [m, n]`` only, in a
        1-tuple as jax returns it).
      pivoting: column pivoting, ``a[:, P] = Q R`` with ``|diag(R)|``
        non-increasing; ``P`` is returned last.
      check_finite: accepted and ignored, as in jax.
      block_size: the Householder kernel's panel width (``None``: distla's choice).
      plan: for ``pivoting=True``: ``"auto"`` (one device within the budget),
        ``"one_device"`` (whatever the budget) or ``"distributed"`` (there is no
        distributed pivoted QR: jax's call, as above the budget).

    Returns:
      ``(Q, R)``, ``(Q, R, P)``, ``(R,)`` or ``(R, P)`` as jax: ``Q`` and ``R`` in
      the mesh's 2D block layout (the largest even layout that fits; a stack:
      sharded along its batch), ``P`` (int, ``[n]``) replicated. ``R`` is exactly
      upper triangular.

    Raises:
      ValueError: an unknown ``mode``, or ``a`` with fewer than 2 dimensions.

    See also: ``jax.scipy.linalg.qr``, ``distla.linalg.qr``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) + 0.5, mesh)
      >>> q, r = sla.qr(a)
      >>> q.shape, r.shape
      ((256, 256), (256, 256))
      >>> np.allclose(np.asarray(q) @ np.asarray(r), np.asarray(a), atol=1e-4)
      True
    """
    del overwrite_a, lwork, check_finite
    what = "distla.scipy.linalg.qr"
    if mode not in _QR_MODES:
        raise ValueError(
            f"{what}: unsupported QR decomposition mode {mode!r}; expected one of {_QR_MODES}"
        )
    a = as_array(a, "a", what)
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have shape (..., m, n); got a of shape {a.shape}")
    if pivoting:
        return route.call(QR_PIVOTED, a, plan=plan, mode=mode)
    m, n = a.shape[-2:]
    if mode == "economic":
        return tuple(_linalg.qr(a, "reduced", block_size=block_size))
    if mode == "full":
        return tuple(_linalg.qr(a, "complete", block_size=block_size))
    r = _linalg.qr(a, "r", block_size=block_size)
    if m > n:  # jax's R has m rows here (full_matrices=True)
        r = route.call(_R_PADDED, r, m=m)
    return (r,)


# --------------------------------------------------------------------------- svd


def _svd_gesvd(a, *, full_matrices, compute_uv):
    """LAPACK's ``gesvd`` (jax's ``SvdAlgorithm.QR``) on one device."""
    out = lax.linalg.svd(
        a,
        full_matrices=full_matrices,
        compute_uv=compute_uv,
        algorithm=lax.linalg.SvdAlgorithm.QR,
    )
    return tuple(out) if compute_uv else out


def _svd_stack(plan: Plan, a, **options):
    del plan
    return _svd_gesvd(a, **options)


def _svd_gesdd(plan: Plan, a, *, full_matrices, compute_uv):
    """Above the budget: ``distla.linalg.svd``'s distributed algorithm, on this call's plan."""
    out = route.on_plan(
        _svd.SVD,
        plan,
        a,
        full_matrices=full_matrices,
        compute_uv=compute_uv,
        hermitian=False,
        subset_by_index=None,
    )
    return tuple(out) if compute_uv else out


def _svd_result(out, *, compute_uv, **options):
    del options
    return tuple(out) if compute_uv else out


#: ``lapack_driver="gesvd"``: LAPACK's QR-iteration SVD on one device within the budget
SVD_GESVD = route.Op(
    "distla.scipy.linalg.svd",
    one_device=_svd_gesvd,
    distributed=_svd_gesdd,
    check=_check_matrix,
    is_stack=route.beyond(2),
    stacked=_svd_stack,
    family="svd_gesvd",
    result=_svd_result,
)


@route.public
def svd(
    a: jax.typing.ArrayLike,
    full_matrices: bool = True,
    compute_uv: bool = True,
    overwrite_a: bool = False,
    check_finite: bool = True,
    lapack_driver: str = "gesdd",
    *,
    plan: str = "auto",
) -> jax.Array | tuple[jax.Array, jax.Array, jax.Array]:
    """Singular value decomposition ``a = U diag(s) Vh``, as ``jax.scipy.linalg.svd``.

    ``lapack_driver="gesdd"`` (the default) is ``distla.linalg.svd``: QDWH polar
    and the distributed eigh for one sharded matrix (below the one-device budget
    ``plan="auto"`` runs LAPACK's ``gesdd`` on one device), jnp's function on each
    device's members for a stack sharded along its batch. jax ignores the driver;
    here ``"gesvd"`` is honoured: LAPACK's QR-iteration SVD (jax's
    ``SvdAlgorithm.QR``), which has no distributed algorithm, on one device within
    the budget (unsharded operands: where they are); above the budget the
    distributed ``gesdd`` route runs instead.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh, or a stack.
      full_matrices: ``U [m, m]`` and ``Vh [n, n]``; else ``[m, k]``, ``[k, n]``.
      compute_uv: return ``s`` only when False.
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      lapack_driver: ``"gesdd"`` or ``"gesvd"``, as scipy.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``.

    Returns:
      ``(U, s, Vh)`` or ``s``: ``s`` descending, replicated; ``U`` and ``Vh`` in the
      mesh's 2D block layout (the largest even layout that fits).

    Raises:
      ValueError: an unknown ``lapack_driver``.

    See also: ``jax.scipy.linalg.svd``, ``distla.linalg.svd``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([1.0, 3.0, 2.0])), mesh)
      >>> np.round(np.asarray(sla.svd(a, compute_uv=False)), 4) + 0.0
      array([3., 2., 1.], dtype=float32)
    """
    del overwrite_a, check_finite
    what = "distla.scipy.linalg.svd"
    if lapack_driver not in _SVD_DRIVERS:
        raise ValueError(
            f"{what}: lapack_driver must be one of {_SVD_DRIVERS} (as scipy); got {lapack_driver!r}"
        )
    if lapack_driver == "gesvd" and plan != "distributed":
        options = dict(full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
        return route.call(SVD_GESVD, a, plan=plan, **options)
    out = _linalg.svd(a, full_matrices, compute_uv, plan=plan)
    return tuple(out) if compute_uv else out
