"""Values at the ends of float32's range: inf where jnp/scipy give inf, never silent zeros.

Before: ``eigh(plan="distributed")`` of a finite float32 matrix with eigenvalues
beyond float32's largest returned every eigenvalue as 0 (its power-of-two scale
reached the last normal binade and XLA:CPU flushed half of it to zero), the
generalized eigh reached the same path, and ``polar``'s one-device plan (jax's
QDWH) returned ``u = p = 0`` for a matrix of norm 1e38. The references are
numpy/scipy in float64 on the same float32 matrix, rounded to float32 (inf where
a value exceeds float32's largest), and jnp's own float32 routines.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sla
from conftest import build_mesh

import distla

L = distla.linalg
F32 = np.finfo(np.float32)
N = 64


def _orthogonal(seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((N, N)))
    return q


def _symmetric(w: np.ndarray, seed: int = 0) -> np.ndarray:
    q = _orthogonal(seed)
    a = ((q * w) @ q.T).astype(np.float32)
    assert np.isfinite(a).all()
    return (a + a.T) / 2  # exactly symmetric in float32


def _beyond_float32() -> np.ndarray:
    # two eigenvalues beyond float32's largest (3.4e38), the rest within 1e37..3e38,
    # large enough to be checked against the norm-wise error bound eps * ||a||
    rest = np.linspace(1e37, 3e38, N - 2) * np.where(np.arange(N - 2) % 2, 1, -1)
    return np.concatenate([[6e38, -5e38], rest])


def _rounded(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float32)


def _check_values(got, want64, scale):
    """``got`` is inf (with its sign) exactly where ``want64`` exceeds float32, and
    within 30 n eps ``scale`` of it elsewhere (the LAPACK bound for eigenvalues)."""
    got = np.asarray(got)
    want = _rounded(want64)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_array_equal(got[np.isinf(got)], want[np.isinf(want)])
    finite = np.isfinite(want)
    assert np.isfinite(got[finite]).all(), got
    err = np.abs(got[finite].astype(np.float64) - want64[finite]).max()
    assert err <= 30 * N * F32.eps * scale, (err, got[:6], want[:6])


@pytest.mark.parametrize("plan", ["distributed", "one_device"])
def test_eigh_beyond_float32_is_inf_there_and_right_elsewhere(plan, mesh24):
    a = _symmetric(_beyond_float32())
    a64 = a.astype(np.float64)
    want = np.linalg.eigvalsh(a64)
    norm = np.abs(want).max()  # ||a||_2, 6e38: beyond float32 too
    w, v = L.eigh(distla.shard(a, mesh24), plan=plan)
    _check_values(w, want, norm)
    # jnp's float32 eigenvalues are inf at the same places
    ref = np.asarray(jnp.linalg.eigvalsh(a))
    np.testing.assert_array_equal(np.isinf(np.asarray(w)), np.isinf(ref))
    _check_values(L.eigvalsh(distla.shard(a, mesh24), plan=plan), want, norm)
    # the eigenvectors are orthonormal (finite)
    v = np.asarray(v, np.float64)
    assert np.abs(v.T @ v - np.eye(N)).max() <= 30 * N * F32.eps


@pytest.mark.parametrize("plan", ["distributed", "one_device"])
@pytest.mark.parametrize("case", ["b-near-identity", "b-small"])
def test_generalized_eigh_beyond_float32(case, plan):
    # b-near-identity: a as in the eigh test (entries up to 1.3e38), b's eigenvalues
    # in [0.9, 1.1]; b-small: a's entries up to 4e37, b's eigenvalues in [0.1, 0.2],
    # so that L⁻¹ a L⁻ᴴ has entries near float32's largest (its symmetrization
    # overflowed to NaN). In both the two extreme generalized eigenvalues exceed
    # float32's largest and the others do not; scipy in float32 agrees.
    if case == "b-near-identity":
        w, b_range = _beyond_float32(), (0.9, 1.1)
    else:
        w, b_range = (
            np.concatenate([[3.3e38, -3.3e38], np.linspace(-1e37, 1e37, N - 2)]),
            (0.1, 0.2),
        )
    a = _symmetric(w, seed=1)
    b = _symmetric(np.linspace(*b_range, N), seed=2)
    want = sla.eigh(a.astype(np.float64), b.astype(np.float64), eigvals_only=True)
    assert np.isinf(_rounded(want)).sum() == 2
    mesh = build_mesh((2, 4), "auto")
    got = L.eigh(distla.shard(a, mesh), distla.shard(b, mesh), eigvals_only=True, plan=plan)
    _check_values(got, want, np.abs(w).max() / b_range[0])  # ||a|| ||b⁻¹||


def _polar_case(norm: float, seed: int = 3) -> np.ndarray:
    # well conditioned (singular values in [norm/2, norm]), so that u is well determined
    s = np.linspace(norm / 2, norm, N)
    return ((_orthogonal(seed) * s) @ _orthogonal(seed + 1).T).astype(np.float32)


@pytest.mark.parametrize("plan", ["one_device", "distributed"])
@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("norm", [1e38, 1e-30])
def test_polar_of_a_matrix_near_the_ends_of_the_range(norm, side, plan, mesh24):
    a = _polar_case(norm)
    u_ref, p_ref = sla.polar(a.astype(np.float64), side=side)
    u, p = L.polar(distla.shard(a, mesh24), side=side, plan=plan)
    u, p = np.asarray(u, np.float64), np.asarray(p, np.float64)
    bound = 30 * N * F32.eps
    assert np.linalg.norm(u - u_ref) / np.sqrt(N) <= bound, np.abs(u).max()
    assert np.linalg.norm(p - p_ref) / np.linalg.norm(p_ref) <= bound, np.abs(p).max()


def test_polar_of_one_device_inputs_at_1e38():
    # the call: an unsharded matrix of norm 1e38 (jax's QDWH), and a stack
    # holding it and a matrix of norm ~1 (each scaled by its own power of two)
    a = _polar_case(1e38)
    small = _polar_case(1.0, seed=5)
    bound = 30 * N * F32.eps
    for x in (a, np.stack([a, small])):
        u, p = L.polar(jnp.asarray(x))
        u, p = np.asarray(u, np.float64), np.asarray(p, np.float64)
        for k, one in enumerate(x.reshape(-1, N, N)):
            u_ref, p_ref = sla.polar(one.astype(np.float64))
            uk, pk = u.reshape(-1, N, N)[k], p.reshape(-1, N, N)[k]
            assert np.linalg.norm(uk - u_ref) / np.sqrt(N) <= bound, np.abs(uk).max()
            assert np.linalg.norm(pk - p_ref) / np.linalg.norm(p_ref) <= bound, np.abs(pk).max()
