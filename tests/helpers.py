"""Reference checks shared by the tests: LAPACK's scaled residual ratios.

The ratios live in ``distla.tools.ratios`` (one home for the tests, the demo,
the scaling study, the benchmarks and the multi-process worker); this module
re-exports them under the names the tests import, beside the placement
helpers.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import scipy.linalg
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from distla.tools.ratios import (  # noqa: F401  (re-exported)
    THRESHOLD,
    eps,
    fft_ratio,
    lu_factor_ratio,
    lu_ratio,
    matmul_ratio,
    random_matrix,
    solve_ratio,
    wide,
)


def place(x, mesh, spec=P("x", "y")):
    """device_put in ``spec``, dropping axes that do not divide (as jax requires)."""
    entries = []
    for dim, entry in enumerate((tuple(spec) + (None,) * x.ndim)[: x.ndim]):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
        entries.append(entry if x.shape[dim] % parts == 0 else None)
    return jax.device_put(x, NamedSharding(mesh, P(*entries)))


def assert_lapack_pivots(a, piv, err_msg: str = "") -> None:
    """``piv`` is LAPACK's partial pivoting of ``a``, on a matrix whose pivots leave no doubt.

    Two correct eliminations of ``a`` in its precision differ by rounding, so they
    choose the same rows only where LAPACK's choice beats the runner-up by more than
    rounding can move either. At step k the candidates are the Schur complement's
    column, ``l_ik u_kk`` (from scipy's factorisation in float64), and rounding moves
    each by at most about ``γ_(k+1) Σ_p |l_ip| |u_pk| <= (k+1) n u s_k`` (Higham, Thm
    9.3; ``|l| <= 1``, ``s_k`` the largest of column k in ``a`` and in ``U``). A step
    nearer than that is a matrix whose pivots depend on the BLAS kernels, the CPU
    or the thread count: the test fails on every machine, telling its author to
    choose another matrix. Exact ties (equal candidates: Wilkinson's matrix, zero
    columns) are computed exactly by any elimination and go to the first row, as
    LAPACK's i?amax chooses.
    """
    a = np.asarray(a)
    a64 = wide(a)
    with warnings.catch_warnings():  # singular test matrices: LAPACK's zero pivot is the point
        warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
        lu, ref = scipy.linalg.lu_factor(a64, check_finite=False)
    unit = eps(a.dtype) / 2
    n = min(a.shape)
    for k in range(n):
        cand = lu[k:, k] * lu[k, k]
        cand[0] = lu[k, k]
        mag = np.abs(cand.real) + np.abs(cand.imag)  # |re| + |im|, as LAPACK's i?amax
        gap = mag[0] - (mag[1:].max() if mag.size > 1 else 0.0)
        s_k = max(np.abs(a64[:, k]).max(), np.abs(lu[: k + 1, k]).max())
        assert gap == 0 or gap > (k + 1) * n * unit * s_k, (
            f"{err_msg} step {k}: LAPACK's pivot beats the next row by {gap:.3g}, within "
            "rounding; the chosen pivots would depend on the machine: use another matrix"
        )
    np.testing.assert_array_equal(np.asarray(piv), ref, err_msg=err_msg)


def put(x, mesh):
    """``x`` in the mesh's natural 2D layout (``P(*mesh.axis_names)``), as :func:`place`."""
    return place(np.asarray(x), mesh, P(*mesh.axis_names))


def close(got, want, tol):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def has_layout(x, mesh, spec) -> bool:
    """True if ``x`` is laid out as ``spec`` on ``mesh`` (trailing ``None``s do not matter)."""
    return x.sharding.is_equivalent_to(NamedSharding(mesh, spec), x.ndim)


def eigh_ratios(a, w, v):
    """``‖A − VΛVᴴ‖₁/(n‖A‖₁eps)``, ``‖I − VᴴV‖₁/(n·eps)``, eigenvalues vs LAPACK / (n·eps·‖A‖₂)."""
    a64, w64, v64 = wide(a), np.asarray(w, np.float64), wide(v)
    n = a64.shape[0]
    e = eps(np.asarray(v).dtype)
    norm = np.linalg.norm(a64, 1) or 1.0
    resid = np.linalg.norm(a64 - (v64 * w64) @ v64.conj().T, 1) / (n * norm * e)
    orth = np.linalg.norm(np.eye(n) - v64.conj().T @ v64, 1) / (n * e)
    ref = np.linalg.eigvalsh(a64)
    vals = np.max(np.abs(w64 - ref)) / (n * e * (np.linalg.norm(a64, 2) or 1.0))
    return resid, orth, vals


def check_eigh(a, w, v):
    """Ascending eigenvalues and every eigh ratio within LAPACK's pass mark."""
    assert w.shape == (a.shape[0],) and v.shape == a.shape
    assert np.all(np.diff(np.asarray(w)) >= 0), "eigenvalues not ascending"
    ratios = eigh_ratios(a, w, v)
    assert max(ratios) <= THRESHOLD, ratios
    return ratios


def check_svd(a, u, s, vh):
    """Descending values, the SVD residual and both orthogonalities, and values vs LAPACK."""
    a64, u64, s64, vh64 = wide(a), wide(u), np.asarray(s, np.float64), wide(vh)
    m, n = a64.shape
    k = min(m, n)
    e = eps(np.asarray(u).dtype)
    assert np.all(np.diff(s64) <= 0) and np.all(s64 >= 0)
    resid = np.linalg.norm(a64 - (u64[:, :k] * s64) @ vh64[:k], 1) / (
        max(m, n) * (np.linalg.norm(a64, 1) or 1.0) * e
    )
    orth_u = np.linalg.norm(np.eye(u64.shape[1]) - u64.conj().T @ u64, 1) / (m * e)
    orth_v = np.linalg.norm(np.eye(vh64.shape[0]) - vh64 @ vh64.conj().T, 1) / (n * e)
    ref = np.linalg.svd(a64, compute_uv=False)
    vals = np.max(np.abs(s64 - ref)) / (k * e * (ref[0] or 1.0))
    ratios = (resid, orth_u, orth_v, vals)
    assert max(ratios) <= THRESHOLD, ratios
    return ratios


def check_polar(a, u, p, side):
    """LAPACK-style polar ratios: ‖A − UP‖₁/(max(m,n)‖A‖₁eps), ‖I − UᴴU‖₁/(max(m,n)eps)."""
    a64, u64, p64 = wide(a), wide(u), wide(p)
    m, n = a64.shape
    e = eps(np.asarray(u).dtype)
    assert u.shape == (m, n) and p.shape == ((n, n) if side == "right" else (m, m))
    rec = u64 @ p64 if side == "right" else p64 @ u64
    resid = np.linalg.norm(a64 - rec, 1) / (max(m, n) * np.linalg.norm(a64, 1) * e)
    gram = u64.conj().T @ u64 if m >= n else u64 @ u64.conj().T
    orth = np.linalg.norm(np.eye(min(m, n)) - gram, 1) / (max(m, n) * e)
    assert resid <= THRESHOLD and orth <= THRESHOLD, (side, resid, orth)
    np.testing.assert_allclose(p64, p64.conj().T, atol=30 * e * np.abs(p64).max())
    assert np.linalg.eigvalsh(p64).min() >= -30 * e * np.linalg.norm(a64, 2)


def kinds(tree):
    return [(x.shape, np.dtype(x.dtype)) for x in jax.tree.leaves(tree)]


def same_kind(got, ref, what=""):
    """Shapes and dtypes of ``got`` equal those of ``ref`` (trees of arrays)."""
    assert kinds(got) == kinds(ref), what


def hermitian(rng, n, dtype, kind="random"):
    """Hermitian test matrices with the spectra LAPACK's tests use."""
    g = random_matrix(rng, (n, n), dtype)
    if kind == "random":
        return (g + g.conj().T) / 2
    q, _ = np.linalg.qr(g)
    if kind == "clustered":  # two tight clusters and a few outliers
        lam = np.concatenate(
            [
                1 + 1e-6 * rng.standard_normal(n // 2),
                -1 + 1e-6 * rng.standard_normal(n - n // 2 - 3),
                [5.0, 7.0, -9.0],
            ]
        )
    elif kind == "repeated":  # three eigenvalues, each repeated
        lam = np.repeat([-2.0, 0.5, 3.0], [n // 3, n // 3, n - 2 * (n // 3)])
    elif kind == "graded":  # 1 .. eps, alternating signs
        lam = np.logspace(0, np.log10(eps(dtype)), n) * np.where(np.arange(n) % 2, -1, 1)
    elif kind == "ill":  # cond 1/sqrt(eps)
        lam = np.logspace(0, np.log10(np.sqrt(eps(dtype))), n)
    else:
        raise ValueError(kind)
    a = (q * lam) @ q.conj().T
    return ((a + a.conj().T) / 2).astype(dtype)
