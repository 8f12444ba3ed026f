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


def test_meshes_that_differ_in_device_order_are_named_so(mesh):
    reversed_ = jax.sharding.Mesh(
        np.array(mesh.devices.flat[::-1]).reshape(mesh.devices.shape),
        mesh.axis_names,
        axis_types=mesh.axis_types,
    )
    a = place(np.eye(8, dtype=np.float32), mesh)
    b = jax.device_put(
        np.ones(8, np.float32), jax.sharding.NamedSharding(reversed_, jax.sharding.PartitionSpec())
    )
    with pytest.raises(ValueError, match="different device order: a on devices"):
        dl.solve(a, b)


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


@pytest.mark.parametrize(
    "a",
    [
        [[np.nan]],
        [[-2.0]],
        [[np.nan, 1.0], [1.0, 2.0]],
        [[1e30, 0.0], [0.0, -1e30]],
        [[np.nan, 0, 0], [0, -2, 0], [0, 0, 3]],
    ],
    ids=["1-nan", "1-negative", "2-nan", "2-overflow", "3-nan"],
)
def test_slogdet_of_small_orders_as_jnp(mesh, a):
    """jnp takes closed forms at orders 1 and 2 (a NaN sign for a NaN entry, inf where
    det overflows) and the LU's pivots from 3 on (the sign counts negative pivots):
    the distributed plan gives the same at each order."""
    a = np.asarray(a, np.float32)
    got = dl.slogdet(place(a, mesh), plan="distributed")
    ref = jnp.linalg.slogdet(a)
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(r))


def _spd(n, seed):
    x = np.random.default_rng(seed).standard_normal((n, n))
    return (x @ x.T + n * np.eye(n)).astype(np.float32)


@pytest.fixture(scope="module")
def chol16():
    return jax.jit(lambda a: dl.cholesky(a, block_size=4))


@pytest.mark.parametrize(
    "where, value",
    [((13, 6), np.nan), ((5, 2), np.nan), ((9, 9), np.nan), ((9, 9), np.inf), ((3, 3), np.inf)],
    ids=["nan-13-6", "nan-5-2", "nan-diag", "inf-diag-9", "inf-diag-3"],
)
def test_cholesky_non_finite_pattern_as_jnp(mesh, chol16, where, value):
    """LAPACK's order: columns before the first one a bad entry reaches stay finite and
    exact; NaN and inf land where jnp's (unblocked potrf at this size) puts them."""
    b = _spd(16, 6)
    b[where] = value
    got = np.asarray(chol16(place(b, mesh)))
    ref = np.asarray(jnp.linalg.cholesky(b))
    assert np.isfinite(ref[:, : min(where)]).all()  # jnp keeps the columns before
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-5)


def test_cholesky_not_positive_definite_is_all_nan(mesh, chol16):
    b = _spd(16, 7)
    b[11, 11] = -1e3  # the pivot of column 11 is negative: LAPACK's info > 0
    got = np.asarray(chol16(place(b, mesh)))
    ref = np.asarray(jnp.linalg.cholesky(b))
    low = np.tril(np.ones((16, 16), bool))
    assert np.isnan(ref[low]).all() and np.isnan(got[low]).all()
    assert (got[~low] == 0).all()


def _extreme(shape, top, dtype, seed=8):
    """``dtype`` matrix with singular values in ``[top/4, top]`` (condition number <= 4)
    and its float64 copy (the reference rounds the same entries)."""
    m, n = shape
    k = min(m, n)
    rng = np.random.default_rng(seed)
    q1 = np.linalg.qr(rng.standard_normal((m, k)))[0]
    q2 = np.linalg.qr(rng.standard_normal((n, k)))[0]
    s = np.linspace(1.0, 0.25, k)
    a = (q1 * s) @ q2.T * top  # scaled after the product: no overflow on the way
    a = a.astype(dtype)
    return a, a.astype(np.float64)


@pytest.mark.parametrize(
    "dtype, shape, top",
    [
        # wide runs on aᴴ: the programs of the float32 tall case above, and f64 tall's
        pytest.param(np.float32, (24, 48), 1e38, id="f32-wide-1e38"),
        pytest.param(np.float32, (24, 48), 1e-30, id="f32-wide-1e-30"),
        *[
            pytest.param(np.float64, shape, top, id=f"f64-{kind}-{top:g}")
            for kind, shape in (("square", (16, 16)), ("tall", (24, 8)), ("wide", (8, 24)))
            for top in (1e300, 1e-30)
        ],
    ],
)
def test_spectral_family_across_the_range(mesh, dtype, shape, top):
    """svdvals, norm(2), matrix_rank, cond, pinv, lstsq, polar and eigvalsh at the ends of
    the representable range, square and rectangular, against numpy in float64."""
    with jax.enable_x64(dtype == np.float64):
        a_np, a64 = _extreme(shape, top, dtype)
        m, n = shape
        tol = 30 * max(m, n) * float(np.finfo(dtype).eps)
        a = place(a_np, mesh)
        s_ref = np.linalg.svd(a64, compute_uv=False)
        cond_ref = s_ref[0] / s_ref[-1]
        s = np.asarray(dl.svdvals(a), np.float64)
        assert s.dtype == np.float64 and np.asarray(dl.svdvals(a)).dtype == dtype
        np.testing.assert_array_less(np.abs(s - s_ref), tol * s_ref[0])
        assert abs(float(dl.norm(a, 2)) - s_ref[0]) <= tol * s_ref[0]
        assert int(dl.matrix_rank(a)) == np.linalg.matrix_rank(a64) == min(m, n)
        assert abs(float(dl.cond(a)) - cond_ref) <= tol * cond_ref**2
        x_ref = np.linalg.pinv(a64)
        x = np.asarray(dl.pinv(a), np.float64)
        # entries below the normal range (1/1e38 in float32) are flushed to zero by XLA on
        # CPU, in jnp as in distla: allow the smallest normal number on top
        tiny = float(np.finfo(dtype).tiny)
        assert np.abs(x - x_ref).max() <= tol * cond_ref * np.abs(x_ref).max() + tiny
        y = np.random.default_rng(9).standard_normal((n, 2))
        b_np = (a64 @ y).astype(dtype)  # in a's range: the least-squares residual is rounding
        b = place(b_np, mesh, jax.sharding.PartitionSpec("x", None))
        xs, _, rank, sv = dl.lstsq(a, b)
        xs_ref = np.linalg.lstsq(a64, b_np.astype(np.float64), rcond=None)[0]
        scale = np.abs(xs_ref).max()
        assert np.abs(np.asarray(xs, np.float64) - xs_ref).max() <= tol * cond_ref * scale
        assert int(rank) == min(m, n)
        np.testing.assert_array_less(np.abs(np.asarray(sv, np.float64) - s_ref), tol * s_ref[0])
        u, p = dl.polar(a)
        u, p = np.asarray(u, np.float64), np.asarray(p, np.float64)
        assert np.abs(u @ p - a64).max() <= tol * s_ref[0]
        if m == n:
            h64 = (a64 + a64.T) / 2
            w = np.asarray(dl.eigvalsh(place(h64.astype(dtype), mesh)), np.float64)
            w_ref = np.linalg.eigvalsh(h64.astype(dtype).astype(np.float64))
            assert np.abs(w - w_ref).max() <= tol * np.abs(w_ref).max()


@pytest.mark.parametrize("transform", [jax.jacfwd, jax.jacrev, jax.hessian])
def test_eigvalsh_derivatives_outside_a_mesh_context(mesh, transform):
    x = np.random.default_rng(10).standard_normal((8, 8))
    h = ((x + x.T) / 2).astype(np.float32)
    got = transform(dl.eigvalsh)(place(h, mesh))  # no jax.set_mesh around it
    ref = transform(jnp.linalg.eigvalsh)(h)
    assert got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, atol=1e-4)


def test_cholesky_jacfwd_outside_a_mesh_context(mesh, chol16):
    spd = _spd(16, 11)
    got = jax.jacfwd(chol16)(place(spd, mesh))
    ref = jax.jacfwd(jnp.linalg.cholesky)(spd)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, atol=1e-5)


# One case per place that a rule is wrapped to run outside a mesh context (the
# one-matrix ops, solve, lu, lu_factor, cholesky), jacrev through cholesky's, and
# hessian (a rule inside a rule) through det's: each compiles its own programs.
@pytest.mark.parametrize(
    "name, transform",
    [
        ("det", jax.jacfwd),
        ("det", jax.hessian),
        ("solve", jax.jacfwd),
        ("lu_factor", jax.jacfwd),
        ("lu", jax.jacfwd),
        ("cholesky", jax.jacfwd),
        ("cholesky", jax.jacrev),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_lu_family_derivatives_outside_a_mesh_context(mesh, name, transform):
    """Derivatives of a matrix on an Explicit mesh with no jax.set_mesh around."""
    a_np = _spd(8, 13)
    b_np = np.ones((8, 2), np.float32)
    b = place(b_np, mesh, jax.sharding.PartitionSpec("x", None))
    fns = {
        "det": (dl.det, jnp.linalg.det),
        "solve": (lambda x: dl.solve(x, b), lambda x: jnp.linalg.solve(x, b_np)),
        "lu_factor": (lambda x: dl.lu_factor(x)[0], lambda x: jax.scipy.linalg.lu_factor(x)[0]),
        "lu": (lambda x: dl.lu(x)[2], lambda x: jax.scipy.linalg.lu(x)[2]),
        "cholesky": (dl.cholesky, jnp.linalg.cholesky),
    }
    got_fn, ref_fn = fns[name]
    got = np.asarray(transform(got_fn)(place(a_np, mesh)))  # no jax.set_mesh around it
    ref = np.asarray(transform(ref_fn)(a_np))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())


def test_lu_solve_derivatives_in_b(mesh):
    """lu_solve's jacrev in b is jax's, outside a mesh context too. Its hessian there
    fails (docs/caveats.md) as jax's own hessian of a function linear in an
    Explicit-sharded argument does; inside jax.set_mesh it is jax's (zero)."""
    a_np = _spd(8, 13)
    b_np = np.ones((8, 2), np.float32)
    factors = dl.lu_factor(place(a_np, mesh))
    factors_ref = jax.scipy.linalg.lu_factor(a_np)
    b = place(b_np, mesh, jax.sharding.PartitionSpec("x", None))
    got = np.asarray(jax.jacrev(lambda x: dl.lu_solve(factors, x))(b))  # no jax.set_mesh
    ref = np.asarray(jax.jacrev(lambda x: jax.scipy.linalg.lu_solve(factors_ref, x))(b_np))
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    with pytest.raises(ValueError, match="only AbstractMesh exists"):
        jax.hessian(lambda x: 2.0 * x)(b)  # jax's own, no distla in it
    with pytest.raises(ValueError, match="only AbstractMesh exists"):
        jax.hessian(lambda x: dl.lu_solve(factors, x))(b)
    with jax.set_mesh(mesh):
        hess = np.asarray(jax.hessian(lambda x: dl.lu_solve(factors, x))(b))
    assert hess.shape == (8, 2) * 3 and not hess.any()


def test_pinv_and_lstsq_gradients_as_jnp(mesh):
    """Full rank, float64: the gradients through distla's svd are jnp's."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(12)
        a_np, b_np = rng.standard_normal((24, 8)), rng.standard_normal((24, 2))
        wp, wx = rng.standard_normal((8, 24)), rng.standard_normal((8, 2))
        a = place(a_np, mesh)
        b = place(b_np, mesh, jax.sharding.PartitionSpec("x", None))

        def loss(pinv, lstsq):
            return lambda a, b: jnp.sum(pinv(a) * wp) + jnp.sum(lstsq(a, b)[0] * wx)

        with jax.set_mesh(mesh):
            got = jax.grad(loss(dl.pinv, dl.lstsq), argnums=(0, 1))(a, b)
        ref = jax.grad(loss(jnp.linalg.pinv, jnp.linalg.lstsq), argnums=(0, 1))(a_np, b_np)
        for g, r in zip(got, ref):
            assert g.dtype == np.float64 and g.shape == r.shape
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-10, atol=1e-10)
