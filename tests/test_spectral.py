"""distla.linalg eigh, svd, polar, pinv, lstsq, matrix_rank, cond, norm: LAPACK's ratios.

Compiles dominate this file's time: the eager path compiles each QDWH / divide
step once per (shape, dtype, mesh) and polar, eigh and svd of one size share
them, so the tests reuse one size (n = 40) per mesh and dtype.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import (
    THRESHOLD,
    check_eigh,
    check_svd,
    eps,
    has_layout,
    hermitian,
    place,
    random_matrix,
    wide,
)
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg
from distla.linalg import _qdwh as _polar
from distla.linalg._eigh import divide as _eigh
from distla.linalg._eigh import pencil as _geneig

N = 40  # the 2x4 mesh's size for most tests (divides 8: the even layout)


# ----------------------------------------------------------------------- meshes

# Each mesh (shape and axis type) compiles the whole chain once, so the sweep over
# every mesh lives in test_spectral_dropin.py; here complex64 runs on 1x8-auto and
# float64 on 2x2-auto, and the other tests on 2x4-explicit, whose compiled steps
# they share.


@pytest.fixture
def mesh24():
    """The 2x4 Explicit mesh only (its compiled steps are shared by the tests below)."""
    return build_mesh((2, 4), "explicit")


@pytest.mark.parametrize("kind", ["random", "clustered", "repeated", "graded", "ill"])
def test_eigh_hard_spectra(mesh24, kind):
    rng = np.random.default_rng(1)
    a = hermitian(rng, N, np.float32, kind)
    w, v = linalg.eigh(place(a, mesh24))
    check_eigh(a, w, v)


def test_eigh_blocked_recursion(mesh24, monkeypatch):
    # the blocked divide and conquer that eigh's subsets take (recursion on the
    # diagonal blocks, leaf blocks on one device each), forced at n = 40 for the
    # whole spectrum: a level at 40, levels at the halves' padded order, leaves;
    # repeated eigenvalues make some block split arbitrarily
    monkeypatch.setattr(_geneig, "PARTIAL_MIN", 8)
    rng = np.random.default_rng(12)
    for kind in ("random", "repeated"):
        a = hermitian(rng, N, np.float32, kind)
        x = place(a, mesh24)
        _polar.STEPS.clear()
        w, v = linalg.eigh(x, subset_by_index=(0, N - 1), plan="distributed")
        check_eigh(a, w, v)
        assert _polar.STEPS["level"] >= 2 and _polar.STEPS["leaf"] >= 3, _polar.STEPS
        assert has_layout(v, mesh24, P("x", "y"))
        wv = np.asarray(linalg.eigvalsh(x), np.float64)
        ref = np.linalg.eigvalsh(wide(a))
        assert np.max(np.abs(wv - ref)) <= THRESHOLD * N * eps(np.float32) * np.linalg.norm(
            wide(a), 2
        )


def test_eigh_complex_and_uplo():
    mesh24 = build_mesh((1, 8), "auto")  # one more mesh shape, and complex64
    rng = np.random.default_rng(2)
    a = hermitian(rng, N, np.complex64)
    x = place(a, mesh24)
    w, v = linalg.eigh(x)
    assert w.dtype == np.float32 and v.dtype == np.complex64
    check_eigh(a, w, v)
    # only one triangle read when symmetrize_input=False, as jnp
    junk = np.triu(random_matrix(rng, (N, N), np.complex64), 1)
    w2 = linalg.eigvalsh(place(np.tril(a) + junk, mesh24), "L", symmetrize_input=False)
    np.testing.assert_allclose(
        np.asarray(w2), np.asarray(w), atol=30 * N * eps(np.float32) * np.linalg.norm(a, 2)
    )


def test_eigh_float64(x64):
    mesh = build_mesh((2, 2), "auto")
    rng = np.random.default_rng(3)
    a = hermitian(rng, 36, np.float64, "graded")
    w, v = linalg.eigh(place(a, mesh))
    assert w.dtype == np.float64
    check_eigh(a, w, v)
    u, s, vh = linalg.svd(place(a, mesh))
    check_svd(a, u, s, vh)


# ------------------------------------------------------------------ polar and SVD


@pytest.mark.parametrize("shape", [(N, N), (N, 24), (24, N)], ids=["square", "tall", "wide"])
def test_polar(mesh24, shape):
    rng = np.random.default_rng(4)
    a = random_matrix(rng, shape, np.float32)
    m, n = shape
    e = eps(np.float32)
    for side in ("right", "left"):
        # jax.scipy's qdwh refuses some of these shapes; distla takes every one
        u, p = linalg.polar(place(a, mesh24), side)
        k = n if side == "right" else m
        assert u.shape == (m, n) and p.shape == (k, k)
        u64, p64 = wide(u), wide(p)
        rec = u64 @ p64 if side == "right" else p64 @ u64
        resid = np.linalg.norm(a - rec, 1) / (max(m, n) * np.linalg.norm(a, 1) * e)
        gram = u64.T @ u64 if m >= n else u64 @ u64.T
        orth = np.linalg.norm(np.eye(min(m, n)) - gram, 1) / (max(m, n) * e)
        assert resid <= THRESHOLD and orth <= THRESHOLD, (side, resid, orth)
        assert np.linalg.eigvalsh(p64).min() >= -30 * e * np.linalg.norm(a, 2)
        np.testing.assert_allclose(p64, p64.T, atol=0)


@pytest.mark.parametrize("shape", [(N, N), (N, 24), (24, N)], ids=["square", "tall", "wide"])
def test_svd(mesh24, shape):  # tall and wide share QDWH on 40x24 and eigh at 24
    rng = np.random.default_rng(5)
    a = random_matrix(rng, shape, np.float32)
    x = place(a, mesh24)
    for full in (True, False):
        u, s, vh = linalg.svd(x, full_matrices=full)
        ref = jnp.linalg.svd(jnp.asarray(a), full_matrices=full)
        assert (u.shape, s.shape, vh.shape) == tuple(r.shape for r in ref)
        check_svd(a, u, s, vh)
    s2 = linalg.svdvals(x)
    np.testing.assert_allclose(
        np.asarray(s2), np.asarray(s), rtol=0, atol=30 * min(shape) * eps(np.float32) * float(s[0])
    )


def test_svd_rank_deficient_pinv_lstsq(mesh24):
    rng = np.random.default_rng(6)
    a = random_matrix(rng, (N, 9), np.float32) @ random_matrix(rng, (9, N), np.float32)
    x = place(a, mesh24)
    u, s, vh = linalg.svd(x)
    check_svd(a, u, s, vh)
    assert int(linalg.matrix_rank(x)) == 9 == int(jnp.linalg.matrix_rank(jnp.asarray(a)))
    e = eps(np.float32)
    pinv = np.asarray(linalg.pinv(x), np.float64)
    ref = np.linalg.pinv(a.astype(np.float64), rcond=10 * N * e)
    assert np.linalg.norm(pinv - ref, 1) / np.linalg.norm(ref, 1) < 30 * N * e * 10
    b = random_matrix(rng, (N, 3), np.float32)
    xs, resid, rank, sv = linalg.lstsq(x, place(b, mesh24))
    ref_x, ref_res, ref_rank, ref_s = jnp.linalg.lstsq(jnp.asarray(a), jnp.asarray(b))
    assert xs.shape == ref_x.shape and resid.shape == ref_res.shape and int(rank) == 9
    np.testing.assert_allclose(np.asarray(xs), np.asarray(ref_x), atol=1e-3 * np.abs(ref_x).max())
    np.testing.assert_allclose(np.asarray(resid), np.asarray(ref_res), rtol=1e-3)
    x1 = linalg.lstsq(x, place(b[:, 0], mesh24))[0]
    assert x1.shape == (N,)


def test_norm_and_cond(mesh24):
    rng = np.random.default_rng(7)
    a = hermitian(rng, N, np.float32, "ill") + 0 * random_matrix(rng, (N, N), np.float32)
    x = place(a, mesh24)
    a64 = a.astype(np.float64)
    for ord_ in (2, -2, "nuc", "fro", 1, np.inf):
        np.testing.assert_allclose(
            float(linalg.norm(x, ord_)), np.linalg.norm(a64, ord_), rtol=1e-4
        )
    assert linalg.norm(x, 2, keepdims=True).shape == (1, 1)
    np.testing.assert_allclose(float(linalg.cond(x)), np.linalg.cond(a64), rtol=1e-2)
    np.testing.assert_allclose(float(linalg.cond(x, -2)), 1 / np.linalg.cond(a64), rtol=1e-2)


# ------------------------------------------------------------ jnp's edge semantics


def test_fallbacks_ints_empty_and_stacks(mesh24):
    # integers promote; empty and one-device inputs give jnp's results
    ints = np.arange(16).reshape(4, 4) % 5
    w = linalg.eigvalsh(ints + ints.T)
    assert w.dtype == jnp.linalg.eigvalsh(ints + ints.T).dtype
    assert linalg.svd(jnp.zeros((0, 3))).S.shape == (0,)
    # a stack sharded along its batch: jnp on each device, no collective
    rng = np.random.default_rng(8)
    stack = np.stack([hermitian(rng, 6, np.float32) for _ in range(8)])
    xs = jax.device_put(stack, NamedSharding(mesh24, P(("x", "y"))))
    w, v = linalg.eigh(xs)
    w, v = np.asarray(w), np.asarray(v)
    for i in range(8):
        check_eigh(stack[i], w[i], v[i])
    c = distla.cost(lambda s: linalg.eigh(s), xs)
    assert c.total_collective_bytes == 0


def test_errors(mesh24):
    x = place(np.eye(8, 6, dtype=np.float32), mesh24)
    with pytest.raises(ValueError, match=r"\(\.\.\., n, n\); got a of shape \(8, 6\)"):
        linalg.eigh(x)
    with pytest.raises(ValueError, match="UPLO"):
        linalg.eigh(place(np.eye(8, dtype=np.float32), mesh24), UPLO="X")
    with pytest.raises(ValueError, match="side"):
        linalg.polar(x, "up")
    with pytest.raises(TypeError, match="two-dimensional"):
        linalg.lstsq(jnp.ones(3), jnp.ones(3))


# -------------------------------------------------------- jit, derivatives, cost


def test_jit_traced_path_matches(mesh24):
    # under jax.jit the loops are lax.while_loops: one program, same values
    rng = np.random.default_rng(9)
    a = random_matrix(rng, (N, N), np.float32)
    x = place(a, mesh24)
    u, p = jax.jit(linalg.polar)(x)
    u2, p2 = linalg.polar(x)
    np.testing.assert_allclose(np.asarray(u), np.asarray(u2), atol=50 * eps(np.float32))
    np.testing.assert_allclose(np.asarray(p), np.asarray(p2), atol=50 * eps(np.float32) * 10)


def test_eigh_jvp(mesh24):
    rng = np.random.default_rng(10)
    a = hermitian(rng, N, np.float32)
    da = hermitian(rng, N, np.float32)
    (w, v), (dw, dv) = jax.jvp(linalg.eigh, (place(a, mesh24),), (place(da, mesh24),))
    (rw, rv), (rdw, rdv) = jax.jvp(jnp.linalg.eigh, (jnp.asarray(a),), (jnp.asarray(da),))
    np.testing.assert_allclose(np.asarray(dw), np.asarray(rdw), atol=2e-3 * np.abs(rdw).max())
    # eigenvector tangents up to each vector's sign
    sign = np.sign(np.sum(np.asarray(v) * np.asarray(rv), axis=0))
    got = np.asarray(dv) * sign
    np.testing.assert_allclose(got, np.asarray(rdv), atol=2e-2 * np.abs(rdv).max())


@pytest.mark.parametrize("grid", [(2, 4), (4, 2), (1, 8), (8, 1), (2, 2)])
def test_polar_pads_to_the_in_place_step(grid):
    # every padded iterate of polar takes the in-place QR step (kernels/qdwh.py): its
    # stack's block-cyclic order is X's rows above I's; the padding holds the identity
    mesh = build_mesh(grid, "explicit").abstract_mesh
    for m, n in ((1, 1), (5, 3), (64, 64), (100, 37), (1000, 999), (4096, 4096), (3000, 1000)):
        m_pad, n_pad = _polar.padded_shape(mesh, m, n)
        assert m_pad - m >= n_pad - n >= 0, (m, n, m_pad, n_pad)
        assert _polar.step_block(mesh, m_pad, n_pad) is not None, (m, n, m_pad, n_pad)


@pytest.mark.parametrize("shape", [(64, 64), (128, 64)])
def test_qdwh_in_place_step_is_its_formula(mesh24, shape):
    # Q₁Q₂ᴴ of [√c X; I] = QR is √c X (I + c XᴴX)⁻¹, from the in-place kernel
    rng = np.random.default_rng(12)
    m, n = shape
    x = rng.standard_normal(shape) / np.sqrt(m)
    c = 900.0
    spec = P("x", "y")
    assert _polar.step_block(mesh24.abstract_mesh, m, n) is not None
    step = _polar.on_mesh(_polar._qr_product, mesh24.abstract_mesh, spec, (("spec", spec),))
    got = step(place(x.astype(np.float32), mesh24), jnp.float32(np.sqrt(c)))
    want = np.sqrt(c) * x @ np.linalg.inv(np.eye(n) + c * x.T @ x)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-4 * np.abs(want).max())


def test_cost_no_collective_carries_a_matrix():
    # the compiled steps at n = 1024 on 2x4: no collective moves a whole matrix (the
    # largest is the QR's gathered 2n x nb panel) and peak memory per device stays a
    # few local blocks (O(n²/p))
    mesh = build_mesh((2, 4), "explicit")
    amesh = mesh.abstract_mesh
    n = 1024
    spec = P("x", "y")
    whole = n * n * 4
    x = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=NamedSharding(mesh, spec))
    rep = NamedSharding(mesh, P())
    scalar = jax.ShapeDtypeStruct((), jnp.float32, sharding=rep)
    state = (jax.ShapeDtypeStruct((), jnp.int32, sharding=rep), x, scalar, scalar)
    start = jax.ShapeDtypeStruct((n,), jnp.int32, sharding=rep)
    specs = (P(), spec, P(), P())
    steps = {
        "qr": (_polar.on_mesh(_polar.qdwh_qr_step, amesh, specs, (("spec", spec),)), (state,)),
        "prep": (
            _polar.on_mesh(_eigh.level_prep, amesh, spec, (("spec", spec), ("leaf", 1))),
            (x, start),
        ),
        "basis": (
            _polar.on_mesh(_eigh.split_basis, amesh, (spec, P()), (("spec", spec), ("leaf", 1))),
            (state[0], start, x),
        ),
    }
    # the blocked eager driver's steps (eigh's subsets): columns of Q, a diagonal
    # block, the join of two halves
    half = jax.ShapeDtypeStruct((n, n // 2), jnp.float32, sharding=NamedSharding(mesh, spec))
    w_half = jax.ShapeDtypeStruct((n // 2,), jnp.float32, sharding=rep)
    index = state[0]
    rows = P(("x", "y"), None)
    steps.update(
        {
            "take": (
                _polar.on_mesh(
                    _eigh.take_columns,
                    amesh,
                    spec,
                    (("width", n // 2), ("rows", rows), ("spec", spec)),
                ),
                (x, index, index),
            ),
            "sub": (_polar.on_mesh(_eigh.sub_block, amesh, spec, (("spec", spec),)), (x, half)),
            "join": (
                _polar.on_mesh(
                    _eigh.join, amesh, (P(), spec), (("total", n), ("rows", rows), ("spec", spec))
                ),
                (w_half, w_half, index, index, half, half),
            ),
        }
    )
    from distla._core.mesh import grid_of
    from distla.linalg import _qr

    nb, m_pad, _ = _qr.blocking(grid_of(amesh, what="test"), 2 * n, n)
    for name, (fn, args) in steps.items():
        c = distla.cost(fn, *args)
        # the QR-based step factors [√c X; I] (2n x n): its largest collective is the
        # QR's own (tests/test_qr.py's bound: a gathered panel or a relayout block),
        # under half of that matrix; every other step moves under half of an n x n one
        if name == "qr":
            bound = min(max(m_pad * nb, 2 * m_pad * max(m_pad, n) / 8) * 4, whole - 1)
        else:
            bound = whole / 2 - 1
        assert c.largest() <= bound, (name, c.largest(), whole)
        # a few dozen local blocks (b, v, u, P, Ω, Y, Q and the QR's work): O(n²/p)
        assert c.peak_memory_bytes <= 32 * whole / 8, (name, c.peak_memory_bytes)


def test_svd_jvp(mesh24):
    rng = np.random.default_rng(11)
    a = random_matrix(rng, (N, N), np.float32)
    da = random_matrix(rng, (N, N), np.float32)
    x, dx = place(a, mesh24), place(da, mesh24)
    (u, s, vh), (du, ds, dvh) = jax.jvp(lambda x: linalg.svd(x, full_matrices=False), (x,), (dx,))
    _, (rdu, rds, rdvh) = jax.jvp(
        lambda x: jnp.linalg.svd(x, full_matrices=False), (jnp.asarray(a),), (jnp.asarray(da),)
    )
    np.testing.assert_allclose(np.asarray(ds), np.asarray(rds), atol=1e-3 * np.abs(rds).max())
    ds2 = jax.jvp(linalg.svdvals, (x,), (dx,))[1]
    np.testing.assert_allclose(np.asarray(ds2), np.asarray(ds), atol=1e-4 * np.abs(rds).max())
    # reconstruction of the tangent of a: dU S Vh + U dS Vh + U S dVh = da
    u, s, vh, du, ds, dvh = (np.asarray(t, np.float64) for t in (u, s, vh, du, ds, dvh))
    rec = (du * s) @ vh + (u * ds) @ vh + (u * s) @ dvh
    np.testing.assert_allclose(rec, da, atol=1e-3 * np.abs(da).max() * N)
    # a square matrix: full_matrices=True (the default) has the same factors, and jnp
    # differentiates it; so does the distributed plan
    ds3 = jax.jvp(lambda x: linalg.svd(x, plan="distributed")[1], (x,), (dx,))[1]
    np.testing.assert_allclose(np.asarray(ds3), np.asarray(rds), atol=1e-3 * np.abs(rds).max())


def test_polar_jvp(mesh24):
    rng = np.random.default_rng(12)
    a = random_matrix(rng, (N, N), np.float32) + 3 * np.eye(N, dtype=np.float32)
    da = random_matrix(rng, (N, N), np.float32)
    (u, p), (du, dp) = jax.jvp(linalg.polar, (place(a, mesh24),), (place(da, mesh24),))
    _, (rdu, rdp) = jax.jvp(jax.scipy.linalg.polar, (jnp.asarray(a),), (jnp.asarray(da),))
    np.testing.assert_allclose(np.asarray(du), np.asarray(rdu), atol=1e-3 * np.abs(rdu).max())
    np.testing.assert_allclose(np.asarray(dp), np.asarray(rdp), atol=1e-3 * np.abs(rdp).max())
