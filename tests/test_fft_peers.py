"""The FFT cases of the peers' suites, ported: numpy's test_pocketfft.py, jaxDecomp's test_fft.py.

Written here (not copied), with distla substituted for the function under test
and sharded operands; where numpy and jnp differ (dtypes without x64, error
types), jnp's behaviour is the expectation, as a drop-in must.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, has_layout, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla

F = distla.fft


def fft_ratio(y, ref) -> float:
    y, ref = np.asarray(y), np.asarray(ref)
    eps = np.finfo(y.dtype).eps
    err = np.linalg.norm(y.astype(ref.dtype) - ref)
    return float(err / (np.linalg.norm(ref) * np.log2(max(ref.size, 2)) * eps))


@pytest.fixture(scope="module")
def m42():
    return build_mesh((4, 2), "explicit")


def _c(rng, shape, dtype=np.complex64):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


# --- numpy: test_pocketfft.py ------------------------------------------------------------


def test_identity_round_trips(m42):
    """TestFFT1D.test_identity / test_identity_long_short: ifft(fft(x)) == x, n longer."""
    rng = np.random.default_rng(0)
    for n in (8, 24, 40):
        x = _c(rng, (n,))
        xs = place(x, m42, P(("x", "y")))
        assert fft_ratio(F.ifft(F.fft(xs)), x.astype(np.complex128)) <= THRESHOLD
        xr = x.real.copy()
        back = F.irfft(F.rfft(place(xr, m42, P("x"))), n)
        assert fft_ratio(back, xr.astype(np.float64)) <= THRESHOLD
        long = F.ifft(F.fft(xs, 2 * n), n)  # zero-padded to 2n, cropped back
        ref = np.fft.ifft(np.fft.fft(x.astype(np.complex128), 2 * n), n)
        assert fft_ratio(long, ref) <= THRESHOLD


def test_every_norm_against_numpy_and_round_trip(m42):
    """test_fft / test_ifft / test_rfftn / test_irfftn with each ``norm``."""
    rng = np.random.default_rng(1)
    x = _c(rng, (8, 6, 10))
    xs = place(x, m42, P("x", "y"))
    x128 = x.astype(np.complex128)
    real = place(x.real.copy(), m42, P("x", "y"))
    for norm in (None, "backward", "ortho", "forward"):
        y = F.fftn(xs, axes=(0, 2), norm=norm)
        assert fft_ratio(y, np.fft.fftn(x128, axes=(0, 2), norm=norm)) <= THRESHOLD
        assert fft_ratio(F.ifftn(y, axes=(0, 2), norm=norm), x128) <= THRESHOLD
        k = F.rfftn(real, norm=norm)
        assert fft_ratio(k, np.fft.rfftn(x128.real, norm=norm)) <= THRESHOLD
        assert fft_ratio(F.irfftn(k, (8, 6, 10), norm=norm), x128.real) <= THRESHOLD


def test_axes_transpose_property(m42):
    """TestFFT1D.test_axes: op(transpose(x, a)) == transpose(op(x, axes=a), a)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 6, 4)).astype(np.float32)
    xs = place(x, m42, P("x", "y"))
    for a in [(2, 0, 1)]:
        for op in (F.fftn, F.ifftn, F.rfftn, F.irfftn):
            op_tr = op(jnp.transpose(xs, a))
            tr_op = jnp.transpose(op(xs, axes=a), a)
            np.testing.assert_allclose(np.asarray(op_tr), np.asarray(tr_op), rtol=1e-5, atol=1e-4)


def test_norm_preserving_with_padding(m42):
    """test_all_1d_norm_preserving: ortho-normalised transforms keep ||x|| (n >= size)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(32).astype(np.float32)
    xs = place(x, m42, P("x"))
    for n in (32, 64):
        for fwd, inv in [(F.fft, F.ifft)]:
            y = fwd(xs, n=n, norm="ortho")
            np.testing.assert_allclose(np.linalg.norm(y), np.linalg.norm(x), rtol=1e-5)
            back = inv(y, norm="ortho")
            np.testing.assert_allclose(np.linalg.norm(back), np.linalg.norm(x), rtol=1e-5)


@pytest.mark.parametrize(
    "dtype", [np.int32, np.int8, np.bool_, np.uint8, np.float32], ids=lambda d: np.dtype(d).name
)
def test_integer_and_bool_inputs_promote_as_jnp(m42, dtype):
    x = (np.arange(48).reshape(8, 6) % 3).astype(dtype)
    xs = place(x, m42, P("x", "y"))
    for name in ("fftn", "rfftn", "fft2", "irfftn"):
        ours, theirs = getattr(F, name)(xs), getattr(jnp.fft, name)(x)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(
    "shape, kw",
    [
        pytest.param((0, 8), {}, id="0x8"),
        pytest.param((8, 0), {"axes": (0,)}, id="8x0-axes0"),
        pytest.param((0, 8), {"s": (3, 8)}, id="0x8-s-pads"),
        pytest.param((8, 1), {}, id="one-frequency-irfftn"),
    ],
)
def test_zero_size_as_jnp(m42, shape, kw):
    x = np.zeros(shape, np.complex64)
    xs = place(x, m42, P("x", "y"))
    for name in ("fftn", "ifftn", "irfftn"):
        ours, theirs = getattr(F, name)(xs, **kw), getattr(jnp.fft, name)(x, **kw)
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype), name
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    r = np.zeros(shape, np.float32)
    ours, theirs = F.rfftn(place(r, m42, P("x", "y")), **kw), jnp.fft.rfftn(r, **kw)
    assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_empty_results_where_jnp_puts_them(kind):
    # an empty transform of a sharded array comes back in jnp's layout (on an Explicit
    # mesh its type, so that arithmetic with jnp's result or the input works), not
    # uncommitted on one device
    mesh = build_mesh((2, 4), kind)
    xs = place(np.zeros((0, 8, 8), np.complex64), mesh, P("x", "y"))
    for name, kw in (("fftn", {"axes": (1, 2)}), ("fft", {}), ("ifftn", {"axes": (1, 2)})):
        ours, theirs = getattr(F, name)(xs, **kw), getattr(jnp.fft, name)(xs, **kw)
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype), name
        assert ours.sharding == theirs.sharding, (name, ours.sharding, theirs.sharding)
        if kind == "explicit":
            (ours - theirs).block_until_ready()
            traced = jax.jit(lambda v, name=name, kw=kw: getattr(F, name)(v, **kw))(xs)
            assert jax.typeof(traced).sharding.spec == jax.typeof(theirs).sharding.spec, name


@pytest.mark.parametrize("x64_on", [False, True], ids=["x64-off", "x64-on"])
def test_strict_promotion_and_x64(m42, x64_on):
    rng = np.random.default_rng(4)
    with jax.enable_x64(x64_on), jax.numpy_dtype_promotion("strict"):
        pairs = [(np.float32, np.complex64)] + [(np.float64, np.complex128)] * x64_on
        for real, cplx in pairs:
            x = rng.standard_normal((8, 4, 6)).astype(real)
            xs = place(x, m42, P("x", "y"))
            want = jnp.fft.rfftn(x, axes=(1, 2))
            got = F.rfftn(xs, axes=(1, 2))
            assert got.dtype == want.dtype
            k = F.fftn(xs.astype(cplx))
            assert k.dtype == jnp.fft.fftn(x.astype(cplx)).dtype
            back = F.irfftn(got, (4, 6), axes=(1, 2))
            assert back.dtype == want.real.dtype
            assert fft_ratio(back, x.astype(np.float64)) <= THRESHOLD


def test_errors_as_jnp(m42):
    """test_fftn_out_of_bounds / repeated axes / invalid n / complex input to rfft."""
    xs = place(np.ones((8, 4), np.complex64), m42, P("x", "y"))
    for bad in [dict(axes=(2,)), dict(axes=(-3,)), dict(axes=(0, 0)), dict(s=(0, 4))]:
        with pytest.raises(ValueError):
            jnp.fft.fftn(np.ones((8, 4), np.complex64), **bad)
        with pytest.raises(ValueError):
            F.fftn(xs, **bad)
    with pytest.raises(ValueError):
        F.fft(xs, n=0)
    with pytest.raises(TypeError):  # numpy's error type
        F.rfftn(xs)
    with pytest.raises(ValueError):  # jnp's
        F.rfft2(xs)
    for name in ("hfft", "ihfft"):  # jnp reads the axis's length first: an IndexError
        with pytest.raises(IndexError):
            getattr(jnp.fft, name)(np.ones((8, 4), np.float32), axis=5)
        with pytest.raises(IndexError):
            getattr(F, name)(xs.real if name == "ihfft" else xs, axis=5)
        for axis in [(0,), [1]]:  # one axis: jnp's ValueError
            with pytest.raises(ValueError, match="multiple axes"):
                getattr(jnp.fft, name)(np.ones((8, 4), np.float32), axis=axis)
            with pytest.raises(ValueError, match="multiple axes"):
                getattr(F, name)(xs.real if name == "ihfft" else xs, axis=axis)
    volume = place(np.ones((8, 4, 6), np.float32), m42, P("x", "y"))
    for name in ("fft2", "ifft2", "rfft2", "irfft2"):  # the 2-D names take two axes only
        for axes in [(0,), (0, 1, 2)]:
            with pytest.raises(ValueError, match="2 axes"):
                getattr(jnp.fft, name)(np.ones((8, 4, 6), np.float32), axes=axes)
            with pytest.raises(ValueError, match="2 axes"):
                getattr(F, name)(volume, axes=axes)


# --- jaxDecomp: tests/test_fft.py ------------------------------------------------------------

JD_MESHES = [(8, 1), (1, 8), (4, 2), (2, 4)]


def _jd_mesh(shape):
    return build_mesh(shape, "auto", names=("z", "y"))


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "not-contiguous"])
@pytest.mark.parametrize("mesh_shape", JD_MESHES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pfft3d_as_jaxdecomp(mesh_shape, contiguous):
    """TestFFTs: values, round trip, and with jaxdecomp itself: shapes and specs."""
    jd = pytest.importorskip("jaxdecomp")
    mesh = _jd_mesh(mesh_shape)
    rng = np.random.default_rng(5)
    x = _c(rng, (8, 16, 32))
    xs = jax.device_put(x, NamedSharding(mesh, P("z", "y")))
    k = F.pfft3d(xs, transpose_axis_contiguous=contiguous)
    ref = np.fft.fftn(x.astype(np.complex128))
    assert fft_ratio(k, ref.transpose(1, 2, 0) if contiguous else ref) <= THRESHOLD
    back = F.pifft3d(k, transpose_axis_contiguous=contiguous)
    assert fft_ratio(back, x.astype(np.complex128)) <= THRESHOLD
    assert has_layout(back, mesh, P("z", "y"))
    old = jd.config.transpose_axis_contiguous
    jd.config.update("transpose_axis_contiguous", contiguous)
    try:
        theirs = jd.fft.pfft3d(xs)
        k_default = F.pfft3d(xs)  # no keyword: jaxdecomp's setting is honoured
    finally:
        jd.config.update("transpose_axis_contiguous", old)
        jax.clear_caches()
    assert k.shape == theirs.shape == k_default.shape
    assert has_layout(k, mesh, theirs.sharding.spec), (k.sharding.spec, theirs.sharding.spec)
    np.testing.assert_array_equal(np.asarray(k_default), np.asarray(k))


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "not-contiguous"])
def test_pfft3d_grads_as_jaxdecomp(contiguous):
    """TestFFTsGrad on primes: grad of sum |pfft3d(x)|^2 and of |pifft3d(k)|^2.

    Parseval gives both exactly: sum |fftn(x)|^2 = N sum |x|^2, so jax's gradient
    (the conjugate of the Wirtinger derivative) is 2N conj(x); for the inverse,
    2/N conj(k). Compared with that float64 value by the FFT ratio (norm-wise),
    not element by element against jnp's float32 FFT, whose rounding differs
    between FFT libraries and jax releases.
    """
    mesh = _jd_mesh((4, 2))
    rng = np.random.default_rng(6)
    x = _c(rng, (29, 19, 17))
    size = x.size
    xs = jax.device_put(x, NamedSharding(mesh, P()))
    order = (1, 2, 0) if contiguous else (0, 1, 2)

    def power(f):
        return lambda v: jnp.sum(jnp.abs(f(v)) ** 2)

    ours = jax.grad(power(lambda v: F.pfft3d(v, transpose_axis_contiguous=contiguous)))(xs)
    assert fft_ratio(ours, 2 * size * np.conj(x.astype(np.complex128))) <= THRESHOLD
    k = np.fft.fftn(x).transpose(order).astype(np.complex64)
    inv = jax.grad(power(lambda v: F.pifft3d(v, transpose_axis_contiguous=contiguous)))(k)
    assert fft_ratio(inv, 2 / size * np.conj(k.astype(np.complex128))) <= THRESHOLD
    # the same identities hold for jnp's own gradient: the reference is the right one
    want = jax.grad(power(lambda v: jnp.fft.fftn(v).transpose(order)))(x)
    assert fft_ratio(want, 2 * size * np.conj(x.astype(np.complex128))) <= THRESHOLD


def test_fftfreq_gradient_kernel_as_jaxdecomp():
    """TestFFTFreq: i k * pfft3d(x), back with pifft3d, equals jnp's spectral derivative."""
    mesh = _jd_mesh((4, 2))
    rng = np.random.default_rng(7)
    x = _c(rng, (16, 8, 12))
    k = F.pfft3d(jax.device_put(x, NamedSharding(mesh, P("z", "y"))))
    local = np.fft.fftn(x.astype(np.complex128))
    kvec = [2 * np.pi * np.fft.fftfreq(n) for n in local.shape]
    # pfft3d's (Y, Z, X) array: fftfreq3d returns (kz, ky, kx) for its axes (2, 0, 1)
    for ours_k, axis in zip(F.fftfreq3d(k), (2, 0, 1), strict=True):
        grad = F.pifft3d(ours_k * k)
        shape = [1, 1, 1]
        global_axis = (1, 2, 0)[axis]  # (Y, Z, X) axis -> natural axis
        shape[global_axis] = -1
        ref = np.fft.ifftn(kvec[global_axis].reshape(shape) * local)
        assert fft_ratio(grad, ref) <= THRESHOLD


@pytest.mark.parametrize("mesh_shape", [(4, 2), (2, 4)], ids=["4x2", "2x4"])
def test_vmap_of_pfft3d_as_jaxdecomp(mesh_shape):
    """test_vmap: a stack of three pencils; each member in pfft3d's layout."""
    mesh = _jd_mesh(mesh_shape)
    x = _c(np.random.default_rng(8), (8, 8, 8))
    xs = jax.device_put(x, NamedSharding(mesh, P("z", "y")))
    single = F.pfft3d(xs)
    out = jax.vmap(F.pfft3d)(jnp.stack([xs, xs, xs]))
    assert out.shape == (3, 8, 8, 8)
    assert out[0].sharding.is_equivalent_to(single.sharding, 3)
    np.testing.assert_allclose(np.asarray(out[1]), np.asarray(single), rtol=1e-5, atol=1e-4)


def test_jacfwd_and_jacrev_of_pfft3d():
    """test_fwd_rev_grad: both Jacobians run and agree with jnp's."""
    mesh = _jd_mesh((4, 2))
    x = np.random.default_rng(9).standard_normal((8, 8, 8)).astype(np.float32)
    xs = jax.device_put(x, NamedSharding(mesh, P("z", "y")))

    def f(v):
        return F.pfft3d(v.astype(jnp.complex64)).real

    fwd, rev = jax.jacfwd(f)(xs), jax.jacrev(f)(xs)
    want = jax.jacfwd(lambda v: jnp.fft.fftn(v.astype(jnp.complex64)).transpose(1, 2, 0).real)(x)
    np.testing.assert_allclose(np.asarray(fwd), np.asarray(want), atol=1e-4)
    np.testing.assert_allclose(np.asarray(rev), np.asarray(want), atol=1e-4)


def test_jaxdecomp_keyword_names():
    """jaxdecomp's keywords (``pfft3d(a=...)``, ``fftfreq3d(array=...)``) give the same
    results as DESIGN's positional operand."""
    jd = pytest.importorskip("jaxdecomp")
    mesh = _jd_mesh((4, 2))
    x = jax.device_put(_c(np.random.default_rng(8), (8, 16, 8)), NamedSharding(mesh, P("z", "y")))
    k = F.pfft3d(x)
    np.testing.assert_array_equal(np.asarray(F.pfft3d(a=x)), np.asarray(k))
    np.testing.assert_array_equal(np.asarray(F.pifft3d(a=k)), np.asarray(F.pifft3d(k)))
    for name in ("fftfreq3d", "rfftfreq3d"):
        ours = getattr(F, name)(array=k, d=0.5)
        theirs = getattr(jd.fft, name)(array=k, d=0.5)
        for o, t in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-6)


@pytest.mark.parametrize(
    "name, mine, theirs",
    [
        ("pfft3d", "x", "a"),
        ("pifft3d", "y", "a"),
        ("fftfreq3d", "k", "array"),
        ("rfftfreq3d", "k", "array"),
    ],
)
def test_operand_given_once(name, mine, theirs):
    """The operand twice, or not at all, is a TypeError naming both spellings."""
    fn = getattr(F, name)
    v = jnp.ones((4, 4, 4), jnp.complex64)
    with pytest.raises(TypeError, match=f"as {mine} .*{theirs}=; got both"):
        fn(v, **{theirs: v})
    with pytest.raises(TypeError, match="got neither"):
        fn()


# --- wavenumbers of one-device spectra (the reference path of a particle-mesh code) -------


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("name", ["fftfreq3d", "rfftfreq3d"])
def test_wavenumbers_of_an_unsharded_spectrum(name, jit):
    """fftfreq3d(pfft3d(numpy zeros)): jaxdecomp returns the wavenumbers; distla raised
    "is_fully_addressable is not implemented for AbstractMesh" (under jit: "Reshard
    should only be used with ... a non-empty mesh")."""
    jd = pytest.importorskip("jaxdecomp")

    def f(fft, freq):
        return lambda v: getattr(freq, name)(fft.pfft3d(v))

    x = np.zeros((8, 6, 4), np.float32)
    ours = (jax.jit(f(distla.fft, distla.fft)) if jit else f(distla.fft, distla.fft))(x)
    theirs = f(jd.fft, jd.fft)(x)
    for o, t in zip(ours, theirs, strict=True):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
