"""Edge cases against jnp/numpy: extreme scales, non-finite input, empty and odd shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import place

import distla.fft as dfft
import distla.linalg as dl


@pytest.fixture(scope="module")
def mesh():
    return build_mesh((2, 4), "explicit")


def _scaled(shape, top, seed=0):
    """float32 matrix with largest singular value ``top`` (float64 reference too)."""
    a = np.random.default_rng(seed).standard_normal(shape)
    a = a / np.linalg.svd(a, compute_uv=False)[0] * top
    a32 = a.astype(np.float32)
    return a32, a32.astype(np.float64)


@pytest.mark.parametrize("shape", [(48, 48), (48, 24)], ids=["square", "tall"])
@pytest.mark.parametrize("top", [1e38, 1e-30], ids=["1e38", "1e-30"])
def test_spectral_across_the_range(mesh, shape, top):
    a32, a64 = _scaled(shape, top)
    a = place(a32, mesh)
    s_ref = np.linalg.svd(a64, compute_uv=False)
    s = np.asarray(jax.jit(dl.svdvals)(a), np.float64)
    eps = float(np.finfo(np.float32).eps)
    assert np.all(np.isfinite(s)) and s[0] > 0
    np.testing.assert_array_less(np.abs(s - s_ref), 30 * max(shape) * eps * s_ref[0])
    assert int(dl.matrix_rank(a)) == np.linalg.matrix_rank(a64)
    if shape[0] != shape[1]:
        return  # the rest shares svdvals' and polar's programs with the square case
    assert float(dl.norm(a, 2)) == pytest.approx(s_ref[0], rel=1e-4)
    assert float(dl.cond(a)) == pytest.approx(np.linalg.cond(a64), rel=1e-3)
    u, p = dl.polar(a)
    u, p = np.asarray(u, np.float64), np.asarray(p, np.float64)
    assert np.abs(u @ p - a64).max() <= 30 * max(shape) * eps * s_ref[0]


def test_cond_of_singular_matrix_is_inf(mesh):
    rng = np.random.default_rng(1)
    s = np.zeros((32, 32), np.float32)
    s[:, :8] = rng.standard_normal((32, 8))
    s[:, 8:] = s[:, :1]
    a = place(s, mesh)
    for p in (1, np.inf):
        assert float(jnp.linalg.cond(s, p)) == np.inf
        got = dl.cond(a, p)
        assert isinstance(got, jax.Array) and float(got) == np.inf


@pytest.mark.parametrize("ord", [1, -1, np.inf, -np.inf])
def test_max_min_norms_keep_nan(mesh, ord):
    x = np.random.default_rng(2).standard_normal((32, 32)).astype(np.float32)
    x[:, 3] = np.nan
    assert np.isnan(float(dl.norm(place(x, mesh), ord)))
    v = place(x[:, 3].copy(), mesh, jax.sharding.PartitionSpec("x"))
    if ord in (np.inf, -np.inf):
        assert np.isnan(float(dl.norm(v, ord)))


def test_norm_of_float16_as_jnp(mesh):
    x = jnp.arange(64, dtype=jnp.float16).reshape(8, 8)
    for ord in (None, 1, np.inf, "fro"):
        got, ref = dl.norm(x, ord), jnp.linalg.norm(x, ord)
        assert got.dtype == ref.dtype and float(got) == float(ref)


def test_zero_width_and_raw_on_explicit_mesh(mesh):
    a_np = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    a = place(a_np, mesh)
    z = place(np.zeros((64, 0), np.float32), mesh, jax.sharding.PartitionSpec("x", None))
    for mode in ("reduced", "complete", "r"):
        got, ref = dl.qr(z, mode=mode), jnp.linalg.qr(np.zeros((64, 0), np.float32), mode=mode)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            assert g.shape == r.shape
            np.testing.assert_array_equal(np.asarray(g), np.asarray(r))
    h, tau = dl.qr(a, mode="raw")
    h_ref, tau_ref = jnp.linalg.qr(a_np, mode="raw")
    np.testing.assert_allclose(np.asarray(h), np.asarray(h_ref), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(tau), np.asarray(tau_ref), rtol=1e-5, atol=1e-5)
    got = dl.lstsq(a, z)
    ref = jnp.linalg.lstsq(a_np, np.zeros((64, 0), np.float32))
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
    assert int(got[2]) == int(ref[2])
    np.testing.assert_allclose(np.asarray(got[3]), np.asarray(ref[3]), rtol=1e-4)


def test_lstsq_refuses_b_on_another_mesh(mesh):
    other = build_mesh((4, 2), "explicit")
    a = place(np.eye(8, dtype=np.float32), mesh)
    b = place(np.ones((8, 2), np.float32), other)
    with pytest.raises(ValueError, match="different meshes"):
        dl.solve(a, b)
    with pytest.raises(ValueError, match="different meshes"):
        dl.lstsq(a, b)


def test_rfftn_of_zero_length_raises_as_numpy():
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        np.fft.rfftn(np.zeros((16, 16, 0)))
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        dfft.rfftn(jnp.zeros((16, 16, 0)))
    assert dfft.fftn(jnp.zeros((16, 16, 0))).shape == (16, 16, 0)


def test_cho_factor_takes_block_size(mesh):
    x = np.random.default_rng(4).standard_normal((24, 24))
    spd = (x @ x.T + 24 * np.eye(24)).astype(np.float32)
    c, low = dl.cho_factor(place(spd, mesh), lower=True, block_size=8)
    np.testing.assert_allclose(np.asarray(c), np.linalg.cholesky(spd), rtol=1e-4, atol=1e-4)
    assert low


def test_svd_of_nan_input_is_nan(mesh):
    x = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32)
    x[2, 5] = np.nan
    u, s, vh = dl.svd(place(x, mesh), full_matrices=False)
    u_ref, s_ref, vh_ref = jnp.linalg.svd(x, full_matrices=False)
    for got, ref in ((u, u_ref), (s, s_ref), (vh, vh_ref)):
        assert np.isnan(np.asarray(got)).all() == np.isnan(np.asarray(ref)).all()
    assert np.isnan(np.asarray(u)).any()
