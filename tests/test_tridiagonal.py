"""Distributed eigvalsh by reduction to tridiagonal form (distla/linalg/_eigh/tridiagonal.py).

LAPACK's eigenvalue ratio ``max|w − w_LAPACK| / (n·eps·‖A‖₂)`` on the hard
spectra of the eigh tests, every dtype and mesh, sizes the mesh does not
divide and several reduction phases; the two kernels on their own; and the
communication: no collective carries more than a panel or a piece of the
trailing matrix.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from distla.kernels import bidiagonal, tridiagonal
from helpers import THRESHOLD, check_eigh, eps, has_layout, hermitian, place, random_matrix, wide
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg
from distla.linalg._eigh import tridiagonal as _tridiagonal


def value_ratio(a, w):
    a64 = wide(a)
    ref = np.linalg.eigvalsh(a64)
    scale = np.linalg.norm(a64, 2) or 1.0
    return np.max(np.abs(np.asarray(w, np.float64) - ref)) / (a.shape[0] * eps(a.dtype) * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("kind", ["random", "clustered", "repeated", "graded", "ill"])
def test_hard_spectra(kind, dtype):
    mesh = build_mesh((2, 4), "explicit")
    a = hermitian(np.random.default_rng(3), 45, dtype, kind)  # 45: the mesh does not divide it
    w = linalg.eigvalsh(place(a, mesh), plan="distributed")
    assert w.dtype == jnp.linalg.eigvalsh(a).dtype and w.shape == (45,)
    assert np.all(np.diff(np.asarray(w)) >= 0)
    assert value_ratio(a, w) <= THRESHOLD


def test_every_mesh(mesh):
    a = hermitian(np.random.default_rng(4), 37, np.float32)
    w = linalg.eigvalsh(place(a, mesh), plan="distributed")
    assert has_layout(w, mesh, P())  # replicated, as jnp's on a sharded matrix
    assert value_ratio(a, w) <= THRESHOLD


def test_phases_float64_and_upper_triangle(x64):
    # 600 rows: two phases of the reduction, the trailing matrix cut down in between
    assert len(_tridiagonal.phase_bounds(600)) == 3
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(5)
    a = hermitian(rng, 600, np.float64, "graded")
    junk = np.tril(rng.standard_normal((600, 600)), -1)  # never read with UPLO="U"
    w = linalg.eigvalsh(place(a + junk, mesh), "U", symmetrize_input=False, plan="distributed")
    assert value_ratio(a, w) <= THRESHOLD


def test_non_finite_input_gives_nan():
    mesh = build_mesh((2, 4), "auto")
    a = hermitian(np.random.default_rng(6), 16, np.float32)
    a[3, 5] = a[5, 3] = np.nan
    assert np.all(np.isnan(np.asarray(linalg.eigvalsh(place(a, mesh), plan="distributed"))))


def test_kernels_alone(x64):
    # bisection on T = tridiag(−1, 2, −1): λ_k = 2 − 2cos(kπ/(n+1))
    n = 50
    d, e = jnp.full((n,), 2.0), jnp.full((n,), -1.0)
    w = jax.jit(functools.partial(tridiagonal.bisect, k=n, axis_names=()))(d, e)
    exact = 2 - 2 * np.cos(np.arange(1, n + 1) * np.pi / (n + 1))
    assert np.max(np.abs(np.asarray(w) - exact)) <= 4 * n * eps(np.float64)
    # Sturm counts between the eigenvalues
    mid = (exact[:-1] + exact[1:]) / 2
    count = tridiagonal.sturm_count(d, e * e, jnp.float64(1e-300), jnp.asarray(mid))
    np.testing.assert_array_equal(np.asarray(count), np.arange(1, n))
    # the reduction on one device keeps the spectrum: T's eigenvalues are A's
    a = hermitian(np.random.default_rng(7), 64, np.complex128)
    reduce = functools.partial(
        tridiagonal.reduce_columns, steps=64, nb=16, row_axis=None, col_axis=None
    )
    _, d, e = jax.jit(reduce)(jnp.asarray(a))
    t = np.diag(np.asarray(d)) + np.diag(np.asarray(e)[:-1], -1) + np.diag(np.asarray(e)[:-1], 1)
    assert value_ratio(a, np.linalg.eigvalsh(t)) <= THRESHOLD


def _cost_on_2x4(fn_2d, n):
    """``distla.cost`` of ``fn_2d`` (``eigvalsh_2d`` or ``eigh_2d``) on an ``n x n`` float32
    matrix in 2D blocks on 2x4 Explicit (lowered, not run), and one local block's bytes."""
    mesh = build_mesh((2, 4), "explicit")
    x = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    fn = functools.partial(fn_2d, mesh=mesh.abstract_mesh, symmetrize=True, lower=True)
    return distla.cost(fn, x), n * n * 4 // 8


def test_no_collective_carries_a_matrix():
    # n = 2048 on 2x4: four phases; the largest collectives are the steps' psum of two
    # m-vectors and the moves of the trailing matrix between phases (under a local
    # block); peak memory per device a few local blocks
    n = 2048
    c, block = _cost_on_2x4(_tridiagonal.eigvalsh_2d, n)
    assert 0 < c.largest() <= block, (c.largest(), block)
    assert c.peak_memory_bytes <= 8 * block, c.peak_memory_bytes
    # per reduced column one psum of two m-vectors (m <= n; an all-reduce counts twice
    # its bytes at most), and a few moves of at most a local block besides
    assert c.total_collective_bytes <= n * 2 * 2 * n * 4 + 8 * block, c.total_collective_bytes


def test_derivatives_follow_eigh():
    mesh = build_mesh((2, 4), "explicit")
    a = hermitian(np.random.default_rng(8), 24, np.float32)
    da = hermitian(np.random.default_rng(9), 24, np.float32)

    def values(x):
        return linalg.eigvalsh(x, plan="distributed")

    w, dw = jax.jvp(values, (place(a, mesh),), (place(da, mesh),))
    w_ref, dw_ref = jax.jvp(jnp.linalg.eigvalsh, (a,), (da,))
    np.testing.assert_allclose(np.asarray(w), np.asarray(w_ref), atol=1e-4)
    np.testing.assert_allclose(np.asarray(dw), np.asarray(dw_ref), atol=1e-3)


# ------------------------------------------- svdvals: bidiagonal reduction


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((37, 37), np.float32),
        ((60, 24), np.complex64),
        ((24, 60), np.float32),
    ],
)
def test_svdvals_square_tall_and_wide(shape, dtype):
    mesh = build_mesh((4, 2), "explicit")
    rng = np.random.default_rng(11)
    a = random_matrix(rng, shape, dtype)
    a[:, :5] = 0  # rank-deficient: zero singular values come back as (near) zeros
    s = linalg.svdvals(place(a, mesh), plan="distributed")
    ref = np.linalg.svd(wide(a), compute_uv=False)
    assert s.dtype == jnp.linalg.svdvals(a).dtype and has_layout(s, mesh, P())
    assert np.all(np.diff(np.asarray(s)) <= 0) and np.all(np.asarray(s) >= 0)
    ratio = np.max(np.abs(np.asarray(s, np.float64) - ref)) / (max(shape) * eps(dtype) * ref[0])
    assert ratio <= THRESHOLD


def test_svdvals_near_the_top_of_float32():
    # the reflectors' norms square the entries: the matrix is scaled first
    mesh = build_mesh((2, 4), "auto")
    a = random_matrix(np.random.default_rng(12), (48, 16), np.float32) * np.float32(1e37)
    s = np.asarray(linalg.svdvals(place(a, mesh), plan="distributed"), np.float64)
    ref = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    assert np.all(np.isfinite(s))
    assert np.max(np.abs(s - ref)) <= THRESHOLD * 48 * eps(np.float32) * ref[0]


def test_bidiagonal_kernel_alone(x64):
    # one device, a tall complex matrix: B = Qᴴ A P has A's singular values
    a = random_matrix(np.random.default_rng(13), (80, 48), np.complex128)
    reduce = functools.partial(
        bidiagonal.reduce_to_bidiagonal, steps=48, nb=16, row_axis=None, col_axis=None
    )
    _, d, e = jax.jit(reduce)(jnp.asarray(a))
    b = np.diag(np.asarray(d)) + np.diag(np.asarray(e)[:-1], 1)
    ref = np.linalg.svd(a, compute_uv=False)
    got = np.linalg.svd(b, compute_uv=False)
    assert np.max(np.abs(got - ref)) <= THRESHOLD * 80 * eps(np.float64) * ref[0]


# ------------------------------------------------------------- eigh with vectors


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
@pytest.mark.parametrize("kind", ["random", "clustered", "repeated", "graded", "ill"])
def test_eigh_hard_spectra(kind, dtype):
    # clustered and repeated spectra put one cluster across several devices' ranges:
    # the check finds their vectors non-orthogonal (or parallel) and repairs them
    mesh = build_mesh((2, 4), "explicit")
    a = hermitian(np.random.default_rng(13), 45, dtype, kind)
    w, v = linalg.eigh(place(a, mesh), plan="distributed")
    assert v.dtype == dtype
    check_eigh(a, w, v)


@pytest.mark.parametrize(
    "spread, dtype, jit",
    [
        (1e-6, np.float32, False),
        (0.0, np.float32, False),
        (1e-6, np.complex64, False),
        (0.0, np.complex64, False),
        (1e-6, np.float32, True),
    ],
)
def test_eigh_clusters_wider_than_the_guard(spread, dtype, jit, monkeypatch):
    # n = 136: 17 values a device, the guard 2 (block/8; 4 with block/4): a cluster of 7
    # values (tight, or repeated) at every nominal cut leaves no gap within the guard,
    # so each straddles a cut, the probe fires and the repair orthonormalizes them (with
    # the guard at block/4 the cuts moved to the clusters' edges and the probe did not)
    from distla.kernels import tridiagonal_vectors as tv

    n, block = 136, 17
    assert tv.guard_of(block) == 2
    lam = np.linspace(-1.0, 1.0, n)
    for cut in range(block, n, block):
        lam[cut - 3 : cut + 4] = lam[cut] + spread * np.arange(-3, 4)
    rng = np.random.default_rng(17)
    q, _ = np.linalg.qr(random_matrix(rng, (n, n), dtype))
    a = (q * lam) @ q.conj().T
    a = ((a + a.conj().T) / 2).astype(dtype)
    repairs = []
    repair = _tridiagonal._eigh_repair
    monkeypatch.setattr(
        _tridiagonal, "_eigh_repair", lambda *a, **k: repairs.append(1) or repair(*a, **k)
    )
    eigh = functools.partial(linalg.eigh, plan="distributed")
    w, v = (jax.jit(eigh) if jit else eigh)(place(a, build_mesh((2, 4), "explicit")))
    assert jit or repairs, "the probe did not fire"  # under jit: the repair's loop
    check_eigh(a, w, v)


def test_guard_is_block_over_16_at_least_32_and_at_most_block_over_8():
    from distla.kernels import tridiagonal_vectors as tv

    # (block, guard): block/4 below 8, block/8 up to 256, 32, then block/16 from 512
    table = [(3, 0), (4, 1), (7, 1), (8, 1), (17, 2), (128, 16), (256, 32), (300, 32)]
    table += [(512, 32), (1024, 64)]
    assert [(block, tv.guard_of(block)) for block, _ in table] == table


def test_eigh_cluster_wider_than_a_sixteenth_guard(monkeypatch):
    # n = 2048 on 2x2: 512 values a device, the guard 32 (block/16; 64 with block/8):
    # a cluster of 72 values 1e-5 apart about the first cut leaves no gap within the
    # guard, so it straddles the cut, the probe fires and the repair orthonormalizes
    # (with the guard at block/8 the cut moved to the cluster's edge, 36 values away,
    # and the probe did not fire; 1e-6 apart it fired either way)
    from distla.kernels import tridiagonal_vectors as tv

    n, block = 2048, 512
    assert tv.guard_of(block) == 32
    lam = np.linspace(-1.0, 1.0, n)
    lam[block - 36 : block + 36] = lam[block] + 1e-5 * np.arange(-36, 36)
    rng = np.random.default_rng(18)
    q, _ = np.linalg.qr(random_matrix(rng, (n, n), np.float32))
    a = ((q * lam) @ q.T).astype(np.float32)
    a = (a + a.T) / 2
    repairs = []
    repair = _tridiagonal._eigh_repair
    monkeypatch.setattr(
        _tridiagonal, "_eigh_repair", lambda *a, **k: repairs.append(1) or repair(*a, **k)
    )
    w, v = linalg.eigh(place(a, build_mesh((2, 2), "explicit")), plan="distributed")
    assert repairs, "the probe did not fire"
    check_eigh(a, w, v)


# Each mesh shape once at n = 300, the axis types alternating so that both run: every
# (shape, axis type) pair runs this eigh at n = 37 (test_spectral_dropin.py's
# test_eigh_every_mesh), and each pair compiles its own programs here (seconds each).
ONE_KIND_PER_SHAPE = [
    pytest.param((shape, kind), id=f"{shape[0]}x{shape[1]}-{kind}")
    for shape, kind in (
        ((2, 4), "explicit"),
        ((4, 2), "auto"),
        ((2, 2), "explicit"),
        ((1, 8), "auto"),
        ((8, 1), "explicit"),
    )
]


@pytest.mark.parametrize("grid", ONE_KIND_PER_SHAPE)
def test_eigh_every_mesh_and_phases(grid):
    mesh = build_mesh(*grid)
    a = hermitian(np.random.default_rng(14), 300, np.float32, "clustered")
    w, v = linalg.eigh(place(a, mesh), plan="distributed")
    check_eigh(a, w, v)


def test_eigh_float64_two_phases_identity_and_zero(x64):
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(15)
    for a in (
        hermitian(rng, 600, np.float64, "graded"),
        np.eye(64),
        np.zeros((64, 64)),
        hermitian(rng, 64, np.complex128, "repeated"),
    ):
        w, v = linalg.eigh(place(a, mesh), plan="distributed")
        check_eigh(a, w, v)


def test_eigh_moves_no_matrix():
    # n = 1024 on 2x4: the largest collective is the layout change of the vectors
    # (a grid column's ranges, two local blocks), nothing gathers the matrix; peak
    # memory per device is a fixed number of local blocks (windows of n x 1.25n/p,
    # their neighbours', the inverse iteration's n x 1.25n/p operands)
    c, block = _cost_on_2x4(_tridiagonal.eigh_2d, 1024)
    assert 0 < c.largest() <= 2 * block, (c.largest(), block)
    assert c.peak_memory_bytes <= 20 * block, c.peak_memory_bytes


def test_tridiagonal_vectors_ranges_meet_at_wide_gaps():
    from distla.kernels import tridiagonal_vectors as tv

    w = jnp.asarray([0.0, 1, 1.001, 5, 5.001, 5.002, 9, 9.001], jnp.float32)
    bounds = tv.cuts(w, devices=4, block=2, guard=1)
    # nominal 2, 4, 6; each moved to the widest gap within one: 3 (1.001 → 5), 3, 6
    assert bounds.tolist() == [0, 3, 3, 6, 8]
    z = tv.window_vectors(
        jnp.asarray([1.0, 2, 3, 4]),
        jnp.asarray([0.5, 0.5, 0.5, 0]),
        jnp.linalg.eigvalsh(
            jnp.diag(jnp.asarray([1.0, 2, 3, 4]))
            + jnp.diag(jnp.full(3, 0.5), 1)
            + jnp.diag(jnp.full(3, 0.5), -1)
        ),
        0,
        width=4,
    )
    t = np.diag([1.0, 2, 3, 4]) + np.diag([0.5] * 3, 1) + np.diag([0.5] * 3, -1)
    ref_w, _ = np.linalg.eigh(t)
    assert np.allclose(t @ np.asarray(z), np.asarray(z) * ref_w, atol=1e-5)
    assert np.allclose(np.asarray(z).T @ np.asarray(z), np.eye(4), atol=1e-5)


def test_window_vectors_are_unit_to_rounding():
    # the Cholesky QR's shift leaves norms of 1/√(1 + width·eps); the kernel restores
    # them, or the orthogonality probe fires at large n on every matrix
    from distla.kernels import tridiagonal_vectors as tv

    rng = np.random.default_rng(16)
    d = jnp.asarray(rng.standard_normal(128), jnp.float32)
    e = jnp.asarray(rng.standard_normal(128), jnp.float32)
    t = np.diag(np.asarray(d, np.float64)) + np.diag(np.asarray(e[:-1], np.float64), 1)
    w = jnp.asarray(np.linalg.eigvalsh(t + np.triu(t, 1).T), jnp.float32)
    z = np.asarray(tv.window_vectors(d, e, w, 32, width=64), np.float64)
    assert np.abs(np.linalg.norm(z, axis=0) - 1).max() <= 4 * eps(np.float32)
