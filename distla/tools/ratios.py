"""LAPACK's scaled residual ratios, in one place (pass at ``THRESHOLD``).

Used by the tests (``tests/helpers.py`` re-exports them), the demo, the
scaling study, the benchmarks and the multi-process worker. Every ratio is
computed on the host in float64 (complex128 for complex inputs) with the
machine epsilon of the result's dtype:

- matmul: ``||C - A B||_F / (||A||_F ||B||_F k eps)``
- solve:  ``||A x - b||_inf / (||A||_inf ||x||_inf n eps)``, per right-hand side
  and per matrix of a stack, the largest reported
- LU:     ``||P A - L U||_1 / (n ||A||_1 eps)``
- Cholesky: ``||A - L L^H||_1 / (n ||A||_1 eps)``
- QR:     ``||A - Q R||_1 / (max(m, n) ||A||_1 eps)`` and ``||I - Q^H Q||_1 / (m eps)``
- FFT:    ``||y - y_ref||_2 / (||y_ref||_2 log2(N) eps)``, N the transform's points
"""

from __future__ import annotations

import math

import numpy as np

# LAPACK's pass mark for its scaled ratios.
THRESHOLD = 30.0


def eps(dtype) -> float:
    """Machine epsilon of ``dtype`` (of its real part for complex dtypes)."""
    return float(np.finfo(np.dtype(dtype)).eps)


def wide(x) -> np.ndarray:
    """``x`` on the host in float64, or complex128 when complex."""
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def random_matrix(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal entries of ``dtype`` (real and imaginary parts for complex)."""
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def matmul_ratio(c, a, b) -> float:
    """``||C - A B||_F / (||A||_F ||B||_F k eps)``, the reference product in float64."""
    a64, b64 = wide(a), wide(b)
    ref = a64 @ b64
    err = np.linalg.norm(wide(c) - ref)
    scale = np.linalg.norm(a64) * np.linalg.norm(b64) * a64.shape[-1] * eps(np.asarray(c).dtype)
    return float(err / scale) if scale else float(err)


def solve_ratio(a, x, b) -> float:
    """``||A x - b||_inf / (||A||_inf ||x||_inf n eps)``, the largest over columns and matrices.

    ``a`` is ``(..., n, n)``; ``x`` and ``b`` are ``(..., n)`` (one right-hand
    side per matrix) or ``(..., n, k)``.
    """
    a64, x64, b64 = wide(a), wide(x), wide(b)
    if x64.ndim == a64.ndim - 1:
        x64, b64 = x64[..., None], b64[..., None]
    resid = np.abs(a64 @ x64 - b64).max(axis=-2)  # (..., k)
    norm_a = np.abs(a64).sum(axis=-1).max(axis=-1)[..., None]  # (..., 1)
    scale = norm_a * np.abs(x64).max(axis=-2) * a64.shape[-1] * eps(np.asarray(x).dtype)
    return float(np.max(resid / scale))


def lu_ratio(pa, l_, u, a) -> float:
    """``||P A - L U||_1 / (n ||A||_1 eps)`` from ``P A``, ``L`` and ``U``."""
    err = np.abs(wide(pa) - wide(l_) @ wide(u)).sum(axis=0).max()
    return float(err / (a.shape[0] * np.abs(wide(a)).sum(axis=0).max() * eps(np.asarray(u).dtype)))


def perm_of(piv) -> np.ndarray:
    """The row order of ``P A`` that LAPACK's interchanges ``piv`` (0-based) produce."""
    perm = np.arange(len(piv))
    for i, j in enumerate(np.asarray(piv)):
        perm[[i, j]] = perm[[j, i]]
    return perm


def lu_factor_ratio(a, lu, piv) -> float:
    """`lu_ratio` of ``lu_factor``'s result ``(lu, piv)`` (LAPACK's convention)."""
    lu, a = np.asarray(lu), np.asarray(a)
    n = a.shape[0]
    lower = np.tril(lu, -1) + np.eye(n, dtype=lu.dtype)
    return lu_ratio(a[perm_of(piv)], lower, np.triu(lu), a)


def fft_ratio(y, ref, points: int | None = None) -> float:
    """``||y - y_ref||_2 / (||y_ref||_2 log2(N) eps)``; ``N`` is ``points`` or ``ref.size``.

    ``ref`` is the float64 reference (numpy's transform of the widened input);
    for a real-input transform pass the input's size as ``points``.
    """
    ref = wide(ref)
    err = np.linalg.norm(wide(y) - ref)
    n = ref.size if points is None else points
    return float(err / (np.linalg.norm(ref) * math.log2(n) * eps(np.asarray(y).dtype)))


def cholesky_ratio(a, l_) -> float:
    """``||A - L L^H||_1 / (n ||A||_1 eps)`` for a lower factor ``L``."""
    a64, l64 = wide(a), wide(l_)
    err = np.abs(a64 - l64 @ l64.conj().T).sum(axis=0).max()
    scale = a64.shape[0] * np.abs(a64).sum(axis=0).max() * eps(np.asarray(l_).dtype)
    return float(err / scale)


def qr_ratio(a, q, r) -> float:
    """The larger of ``||A - Q R||_1 / (max(m, n) ||A||_1 eps)`` and ``||I - Q^H Q||_1 / (m eps)``.

    ``a`` is ``(m, n)``; ``q`` and ``r`` are the reduced (or complete) factors.
    """
    a64, q64, r64 = wide(a), wide(q), wide(r)
    m, n = a64.shape
    e = eps(np.asarray(q).dtype)
    norm_a = np.abs(a64).sum(axis=0).max()
    resid = np.abs(a64 - q64 @ r64).sum(axis=0).max() / (max(m, n) * norm_a * e)
    orth = np.abs(np.eye(q64.shape[1]) - q64.conj().T @ q64).sum(axis=0).max() / (m * e)
    return float(max(resid, orth))


def _one_norm(x) -> float:
    return float(np.abs(x).sum(axis=0).max()) if x.size else 0.0


def eigh_ratio(a, w, v) -> float:
    """The larger of ``||A - V Λ V^H||_1 / (n ||A||_1 eps)`` and ``||I - V^H V||_1 / (n eps)``."""
    a64, w64, v64 = wide(a), wide(w), wide(v)
    n = a64.shape[0]
    e = eps(np.asarray(v).dtype)
    resid = _one_norm(a64 - (v64 * w64) @ v64.conj().T) / (n * _one_norm(a64) * e)
    orth = _one_norm(np.eye(n) - v64.conj().T @ v64) / (n * e)
    return float(max(resid, orth))


def svd_ratio(a, u, s, vh) -> float:
    """The largest of ``||A - U Σ V^H||_1 / (max(m, n) ||A||_1 eps)`` and the orthogonality
    ratios ``||I - U^H U||_1 / (m eps)``, ``||I - V V^H||_1 / (n eps)`` (reduced factors)."""
    a64, u64, s64, vh64 = wide(a), wide(u), wide(s), wide(vh)
    m, n = a64.shape
    k = s64.shape[-1]
    u64, vh64 = u64[:, :k], vh64[:k]
    e = eps(np.asarray(u).dtype)
    resid = _one_norm(a64 - (u64 * s64) @ vh64) / (max(m, n) * _one_norm(a64) * e)
    orth_u = _one_norm(np.eye(k) - u64.conj().T @ u64) / (m * e)
    orth_v = _one_norm(np.eye(k) - vh64 @ vh64.conj().T) / (n * e)
    return float(max(resid, orth_u, orth_v))
