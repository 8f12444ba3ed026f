"""Distributed svd by reduction to bidiagonal form (distla/linalg/_bidiagonal.py).

LAPACK's SVD ratios (``check_svd``) on the hard cases of the route: repeated
singular values across the devices' ranges (identity, orthogonal, clustered),
values at the rounding level (rank-deficient, zero, graded), every mesh, float64
with two reduction phases, complex; the singular values at the rounding level
taken from the matrix (``lstsq(rcond=-1)`` sees LAPACK's rank); the kernels alone;
the eager call's programs; and the communication.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from distla.kernels import bidiagonal, bidiagonal_vectors
from helpers import THRESHOLD, check_svd, eps, has_layout, hermitian, place, random_matrix, wide
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg
from distla.linalg import _bidiagonal

N = 45  # the mesh does not divide it; every case shares the compiled programs


def _with_values(rng, n, values):
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return ((u * values) @ v.T).astype(np.float32)


def _case(kind):
    rng = np.random.default_rng(21)
    if kind == "identity":
        return np.eye(N, dtype=np.float32)
    if kind == "orthogonal":  # one cluster of N values across every device's range
        return _with_values(rng, N, np.ones(N))
    if kind == "three-clusters":
        return _with_values(rng, N, np.repeat([3.0, 1.0, 1e-3], [15, 15, 15]))
    if kind == "geometric":  # down to 1e-6: values near the rounding level
        return _with_values(rng, N, np.logspace(0, -6, N))
    if kind == "zero":
        return np.zeros((N, N), np.float32)
    if kind == "rank-one":
        return np.outer(rng.standard_normal(N), rng.standard_normal(N)).astype(np.float32)
    return hermitian(rng, N, np.float32, kind)


@pytest.mark.parametrize(
    "kind",
    [
        "identity",
        "orthogonal",
        "three-clusters",
        "geometric",
        "zero",
        "rank-one",
        "random",
        "clustered",
        "repeated",
        "graded",
        "ill",
    ],
)
def test_hard_cases(kind):
    mesh = build_mesh((2, 4), "explicit")
    a = _case(kind)
    u, s, vh = linalg.svd(place(a, mesh), full_matrices=False, plan="distributed")
    check_svd(a, u, s, vh)


@pytest.mark.parametrize("kind", ["orthogonal", "three-clusters"])
def test_clusters_wider_than_the_guard(kind):
    # n = 136: 17 values a device, the guard 2 (block/8): clusters of 45 and 136 values
    # straddle the cuts, and the completion's QR pairs their halves again
    n = 136
    assert _bidiagonal.guard_of(-(-n // 8)) == 2
    rng = np.random.default_rng(21)
    counts = [n] if kind == "orthogonal" else [45, 45, n - 90]
    values = np.repeat([1.0, 3.0, 1e-3][: len(counts)], counts)
    a = _with_values(rng, n, values)
    mesh = build_mesh((2, 4), "explicit")
    u, s, vh = linalg.svd(place(a, mesh), full_matrices=False, plan="distributed")
    check_svd(a, u, s, vh)


def test_every_mesh(mesh):
    a = random_matrix(np.random.default_rng(22), (50, 31), np.float32)
    u, s, vh = linalg.svd(place(a, mesh), plan="distributed")
    check_svd(a, u, s, vh)
    assert has_layout(s, mesh, P())


def test_complex_rank_deficient_and_under_jit():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(23)
    a = random_matrix(rng, (40, 9), np.complex64) @ random_matrix(rng, (9, 40), np.complex64)
    u, s, vh = jax.jit(functools.partial(linalg.svd, plan="distributed"))(place(a, mesh))
    assert u.dtype == np.complex64 and s.dtype == np.float32
    check_svd(a, u, s, vh)


def test_float64_two_phases(x64):
    assert len(_bidiagonal.phase_bounds(600)) == 3
    mesh = build_mesh((2, 4), "auto")
    a = hermitian(np.random.default_rng(24), 600, np.float64, "graded")
    u, s, vh = linalg.svd(place(a, mesh), full_matrices=False, plan="distributed")
    check_svd(a, u, s, vh)


def test_values_at_the_rounding_level_come_from_the_matrix():
    # The rank-9 float32 product of tests/test_spectral_arguments.py. In exact arithmetic
    # its tenth singular value is 0.30·eps·σ₁ (the product rounded to float32); LAPACK's
    # sgesdd (jnp) gives 0.66 and the bidiagonal B of the blocked reduction about 2-3
    # (LAPACK's own blocked sgebrd gives 2 on larger matrices: kernels/bidiagonal.py).
    # svd takes those values as |uᵢᴴ a vᵢ|, of second order in the reduction's error,
    # so a cut at eps·σ₁ (lstsq(rcond=-1)) counts LAPACK's rank.
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(50)
    random_matrix(rng, (37, 37), np.float32)
    low = random_matrix(rng, (37, 9), np.float32) @ random_matrix(rng, (9, 37), np.float32)
    x = place(low, mesh)
    s = np.asarray(linalg.svd(x, compute_uv=True, plan="distributed")[1], np.float64)
    unit = eps(np.float32) * s[0]
    ref = np.linalg.svd(wide(low), compute_uv=False)
    assert s[8] > 1e3 * unit and np.max(s[9:]) < 0.5 * unit, s[8:12] / unit
    assert np.max(np.abs(s - ref)) <= THRESHOLD * 37 * unit
    b = place(random_matrix(rng, (37, 3), np.float32), mesh)
    assert int(linalg.lstsq(x, b, rcond=-1.0)[2]) == 9


@pytest.mark.parametrize(
    "mesh_shape, m, n, dtype, nb",
    [
        ((2, 4), 48, 32, np.complex128, 8),  # a tall complex matrix
        ((4, 2), 64, 40, np.float64, 8),  # an odd number of panels: a block of one
        ((2, 4), 40, 40, np.float64, 4),  # panels that straddle two devices' blocks
        ((2, 4), 16, 16, np.float64, 16),  # blocks narrower than a panel
    ],
)
def test_bidiagonal_kernel_stores_its_reflectors(x64, mesh_shape, m, n, dtype, nb):
    # A = Q B Pᴴ with Q and P unitary, to rounding: Q and P applied to the identity from
    # the reflectors the reduction keeps in place of the reduced part (xGEBRD, xORMBR)
    mesh = build_mesh(mesh_shape, "explicit")
    rng = np.random.default_rng(25)
    a = random_matrix(rng, (m, n), dtype)
    blocks = P("x", "y")
    kernel = functools.partial(
        bidiagonal.reduce_to_bidiagonal, steps=n, nb=nb, row_axis="x", col_axis="y", store=True
    )
    run = jax.jit(
        jax.shard_map(
            kernel, mesh=mesh, in_specs=(blocks,), out_specs=(blocks,) + (P(),) * 3, check_vma=False
        )
    )
    put = functools.partial(place, mesh=mesh)
    r, taus, d, e = run(put(a))

    def apply(side, y):
        kernel = functools.partial(
            bidiagonal.apply_reflectors, side=side, nb=nb, row_axis="x", col_axis="y"
        )
        specs = dict(in_specs=(blocks, P(), blocks), out_specs=blocks, check_vma=False)
        return np.asarray(jax.jit(jax.shard_map(kernel, mesh=mesh, **specs))(r, taus, put(y)))

    q, p = apply("left", np.eye(m, dtype=dtype)), apply("right", np.eye(n, dtype=dtype))
    d, e = np.asarray(d), np.asarray(e)
    b = np.zeros((m, n))
    b[np.arange(n), np.arange(n)] = d
    b[np.arange(n - 1), np.arange(1, n)] = e[: n - 1]
    e64 = eps(np.float64)
    resid = np.linalg.norm(a - q @ b @ p.conj().T, 1) / (n * np.linalg.norm(a, 1) * e64)
    orth_q = np.linalg.norm(np.eye(m) - q.conj().T @ q, 1) / (m * e64)
    orth_p = np.linalg.norm(np.eye(n) - p.conj().T @ p, 1) / (n * e64)
    assert max(resid, orth_q, orth_p) <= THRESHOLD, (resid, orth_q, orth_p)


def test_golub_kahan_vectors_and_cluster_shifts(x64):
    # B = bidiag(d, e) on one device: TGK's eigenvectors for +σ split into B's vectors
    rng = np.random.default_rng(26)
    k = 12
    d, e = rng.standard_normal(k), rng.standard_normal(k)
    b = np.diag(d) + np.diag(e[:-1], 1)
    ub, sb, vbh = np.linalg.svd(b)
    s = jnp.asarray(sb[::-1].copy())
    z = bidiagonal_vectors.golub_kahan_vectors(
        jnp.asarray(d), jnp.asarray(e), s, block=k, guard=0, axis_names=()
    )
    half = np.asarray(bidiagonal_vectors.halves(z))
    v, u = half[:k], half[k:]
    assert np.allclose(b @ v, u * np.asarray(s), atol=1e-12)
    assert np.allclose(v.T @ v, np.eye(k), atol=1e-12)
    # values within 8·eps·max|s| of a neighbour share one shift, the cluster's width below it
    w = jnp.asarray([0.1, 0.5, 0.5 + 1e-17, 0.5 + 2e-17, 0.9])
    shift = np.asarray(bidiagonal_vectors.cluster_shifts(w))
    assert shift[0] == 0.1 and shift[4] == 0.9
    assert np.all(shift[1:4] == shift[1]) and shift[1] <= 0.5


def test_eager_call_compiles_the_completion_only_when_needed(monkeypatch):
    # a matrix whose values are apart runs one program; a rank-deficient one also the
    # completion's (QR of both halves, values from the matrix), compiled on first need
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(27)
    ran = []
    monkeypatch.setattr(_bidiagonal, "_rest", _spy(_bidiagonal._rest, ran))
    a = random_matrix(rng, (40, 40), np.float32)
    check_svd(a, *linalg.svd(place(a, mesh), plan="distributed"))
    assert ran == []
    low = random_matrix(rng, (40, 3), np.float32) @ random_matrix(rng, (3, 40), np.float32)
    check_svd(low, *linalg.svd(place(low, mesh), plan="distributed"))
    assert ran == ["traced"]


def _spy(fn, ran):
    @functools.wraps(fn)
    def traced(*args, **kwargs):
        ran.append("traced")
        return fn(*args, **kwargs)

    return traced


def test_svd_moves_no_matrix():
    # n = 1024 on 2x4 (lowered, not run): the largest collective is a layout change of
    # at most two local blocks (no gather of the matrix or of the vectors); peak memory
    # per device a fixed number of local blocks: the matrix, Q and P (3), TGK's vectors
    # (2k x k: 2) and the windows they are computed in (about 9 while they live), U_B,
    # V_B, U and V (4), the completion's QR under lax.cond. Measured 27.5 blocks at
    # n = 1024 (25.5 at 4096); the polar + eigh route it replaced took 25.3 at 1024
    # (and 4 blocks in its largest collective)
    mesh = build_mesh((2, 4), "explicit")
    n = 1024
    x = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    c = distla.cost(functools.partial(linalg.svd, full_matrices=False, plan="distributed"), x)
    block = n * n * 4 // 8
    assert 0 < c.largest() <= 2 * block, (c.largest(), block)
    assert c.peak_memory_bytes <= 28 * block, c.peak_memory_bytes
