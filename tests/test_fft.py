"""distla.fft against numpy.fft and jaxdecomp: values, layouts, meshes, jit, grad, cost, errors."""

import functools

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from conftest import build_mesh
from distla.kernels import transpose as tr
from helpers import THRESHOLD, has_layout, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla

MESHES = [
    pytest.param(((4, 2), "auto"), id="4x2-auto"),
    pytest.param(((4, 2), "explicit"), id="4x2-explicit"),
    pytest.param(((2, 4), "auto"), id="2x4-auto"),
    pytest.param(((2, 4), "explicit"), id="2x4-explicit"),
    pytest.param(((1, 8), "auto"), id="1x8-auto"),
    pytest.param(((1, 8), "explicit"), id="1x8-explicit"),
    pytest.param(((8, 1), "auto"), id="8x1-auto"),
    pytest.param(((8, 1), "explicit"), id="8x1-explicit"),
    pytest.param(((8,), "auto"), id="8-auto"),
    pytest.param(((8,), "explicit"), id="8-explicit"),
]
JAXDECOMP_MESHES = [
    pytest.param((4, 2), id="4x2"),
    pytest.param((2, 4), id="2x4"),
    pytest.param((1, 8), id="1x8"),
    pytest.param((8, 1), id="8x1"),
]


def _mesh(shape, kind):
    return build_mesh(shape, kind, names=("x", "y")[: len(shape)])


def _names(mesh):
    return tuple(mesh.axis_names)


def _pencils(mesh):
    """The forward transforms' input layout: P(a, b, None), or P(a, None, None)."""
    names = _names(mesh)
    return P(names[0], names[1], None) if len(names) == 2 else P(names[0], None, None)


def _natural_out(mesh):
    """The forward transforms' output layout: P(None, a, b), or P(None, a, None)."""
    names = _names(mesh)
    return P(None, names[0], names[1]) if len(names) == 2 else P(None, names[0], None)


def _fits(shape, mesh, spec):
    return distla._core.mesh.fitting_spec(shape, mesh.abstract_mesh, spec)


def _volume(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def fft_ratio(y, ref) -> float:
    """||y - y_ref||_2 / (||y_ref||_2 log2(N) eps), DESIGN.md's FFT ratio (N points)."""
    y, ref = np.asarray(y), np.asarray(ref)
    eps = np.finfo(y.dtype).eps
    err = np.linalg.norm(y.astype(ref.dtype) - ref)
    return float(err / (np.linalg.norm(ref) * np.log2(max(ref.size, 2)) * eps))


def _put(x, mesh):
    """``x`` in the pencil layout of ``mesh`` (the largest even layout that fits)."""
    return jax.device_put(x, NamedSharding(mesh, _fits(x.shape, mesh, _pencils(mesh))))


# --- values, layouts and round trips on every mesh ------------------------------------


@pytest.mark.parametrize("mesh_kind", MESHES)
def test_fftn_ifftn_every_mesh(mesh_kind):
    mesh = _mesh(*mesh_kind)
    x = _volume(np.random.default_rng(0), (16, 32, 64), np.complex64)
    y = distla.fft.fftn(_put(x, mesh))
    assert y.shape == x.shape and y.dtype == np.complex64
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, _natural_out(mesh))
    z = distla.fft.ifftn(y)
    assert fft_ratio(z, _wide(x)) <= THRESHOLD
    assert has_layout(z, mesh, _pencils(mesh))


# every mesh once, Auto and Explicit alternating (the kinds share all of the kernel)
RFFT_MESHES = [
    m for m in MESHES if m.id in ("4x2-auto", "2x4-explicit", "1x8-auto", "8x1-explicit", "8-auto")
]


@pytest.mark.parametrize("mesh_kind", RFFT_MESHES)
def test_rfftn_irfftn_every_mesh(mesh_kind):
    # Z//2 + 1 = 33 is odd: on pencils with b > 1 the spectrum comes back P(b, a, None)
    mesh = _mesh(*mesh_kind)
    x = _volume(np.random.default_rng(1), (16, 32, 64), np.float32)
    y = distla.fft.rfftn(_put(x, mesh))
    assert y.shape == (16, 32, 33) and y.dtype == np.complex64
    assert fft_ratio(y, np.fft.rfftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, _fits(y.shape, mesh, _natural_out(mesh)))
    z = distla.fft.irfftn(y, s=x.shape)
    assert z.dtype == np.float32
    assert fft_ratio(z, _wide(x)) <= THRESHOLD
    assert has_layout(z, mesh, _pencils(mesh))


def test_rfftn_even_half_spectrum_keeps_natural_layout():
    mesh = _mesh((4, 2), "explicit")
    x = _volume(np.random.default_rng(2), (16, 16, 14), np.float32)  # Z//2 + 1 = 8
    y = distla.fft.rfftn(_put(x, mesh))
    assert has_layout(y, mesh, P(None, "x", "y"))
    assert fft_ratio(y, np.fft.rfftn(_wide(x))) <= THRESHOLD
    assert fft_ratio(distla.fft.irfftn(y, s=x.shape), _wide(x)) <= THRESHOLD


@pytest.mark.parametrize(
    "mesh_kind",
    [
        pytest.param(((4, 2), "explicit"), id="4x2-explicit"),
        pytest.param(((8,), "auto"), id="8-auto"),
    ],
)
def test_sizes_the_mesh_does_not_divide(mesh_kind):
    mesh = _mesh(*mesh_kind)
    rng = np.random.default_rng(3)
    shape = (30, 42, 50)
    x = _volume(rng, shape, np.complex64)
    y = distla.fft.fftn(_put(x, mesh))
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, _fits(shape, mesh, _natural_out(mesh)))
    z = distla.fft.ifftn(y)
    assert fft_ratio(z, _wide(x)) <= THRESHOLD
    assert has_layout(z, mesh, _fits(shape, mesh, _pencils(mesh)))
    xr = _volume(rng, shape, np.float32)
    yr = distla.fft.rfftn(_put(xr, mesh))
    assert fft_ratio(yr, np.fft.rfftn(_wide(xr))) <= THRESHOLD
    assert has_layout(yr, mesh, _fits(yr.shape, mesh, _natural_out(mesh)))
    assert fft_ratio(distla.fft.irfftn(yr, s=shape), _wide(xr)) <= THRESHOLD


@pytest.mark.parametrize(
    "mesh_kind, shape",
    [
        pytest.param(((4, 2), "explicit"), (16, 32, 64), id="4x2-explicit"),
        pytest.param(((2, 4), "auto"), (30, 42, 50), id="2x4-auto-uneven"),
    ],
)
def test_textbook_pencil_algorithm(mesh_kind, shape):
    mesh = _mesh(*mesh_kind)
    rng = np.random.default_rng(18)
    x = _volume(rng, shape, np.complex64)
    y = distla.fft.fftn(_put(x, mesh), algorithm="pencil")
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, _fits(shape, mesh, P(None, "x", "y")))
    assert fft_ratio(distla.fft.ifftn(y, algorithm="pencil"), _wide(x)) <= THRESHOLD
    xr = _volume(rng, shape, np.float32)
    yr = distla.fft.rfftn(_put(xr, mesh), algorithm="pencil")
    assert fft_ratio(yr, np.fft.rfftn(_wide(xr))) <= THRESHOLD
    assert has_layout(yr, mesh, _fits(yr.shape, mesh, P(None, "x", "y")))
    back = distla.fft.irfftn(yr, s=shape, algorithm="pencil")
    assert fft_ratio(back, _wide(xr)) <= THRESHOLD


def test_64_cubed():
    mesh = _mesh((4, 2), "auto")
    x = _volume(np.random.default_rng(4), (64, 64, 64), np.complex64)
    y = distla.fft.fftn(_put(x, mesh))
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, P(None, "x", "y"))


def test_the_ratio_can_fail():
    x = _volume(np.random.default_rng(5), (8, 8, 8), np.complex64)
    ref = np.fft.fftn(_wide(x))
    assert fft_ratio(ref.astype(np.complex64), ref) <= THRESHOLD
    assert fft_ratio((ref * (1 + 1e-4)).astype(np.complex64), ref) > THRESHOLD


# --- norms, dtypes, s, other layouts, one device --------------------------------------


def test_norms():
    mesh = _mesh((2, 4), "explicit")
    rng = np.random.default_rng(6)
    x = _volume(rng, (16, 16, 32), np.complex64)
    xr = _volume(rng, (16, 16, 32), np.float32)
    y = distla.fft.fftn(_put(x, mesh), norm="ortho")
    assert fft_ratio(y, np.fft.fftn(_wide(x), norm="ortho")) <= THRESHOLD
    assert fft_ratio(distla.fft.ifftn(y, norm="ortho"), _wide(x)) <= THRESHOLD
    yr = distla.fft.rfftn(_put(xr, mesh), norm="forward")
    assert fft_ratio(yr, np.fft.rfftn(_wide(xr), norm="forward")) <= THRESHOLD
    assert fft_ratio(distla.fft.irfftn(yr, norm="forward"), _wide(xr)) <= THRESHOLD


def test_complex128_and_float64(x64):
    mesh = _mesh((2, 4), "explicit")
    rng = np.random.default_rng(7)
    x = _volume(rng, (16, 32, 16), np.complex128)
    y = distla.fft.fftn(_put(x, mesh))
    assert y.dtype == np.complex128
    assert fft_ratio(y, np.fft.fftn(x)) <= THRESHOLD
    assert fft_ratio(distla.fft.ifftn(y), x) <= THRESHOLD
    xr = _volume(rng, (16, 32, 16), np.float64)
    yr = distla.fft.rfftn(_put(xr, mesh))
    assert yr.dtype == np.complex128
    assert fft_ratio(yr, np.fft.rfftn(xr)) <= THRESHOLD
    zr = distla.fft.irfftn(yr)
    assert zr.dtype == np.float64 and fft_ratio(zr, xr) <= THRESHOLD


def test_real_and_integer_inputs_cast_as_jnp():
    mesh = _mesh((4, 2), "auto")
    x = _volume(np.random.default_rng(8), (16, 16, 16), np.float32)
    y = distla.fft.fftn(_put(x, mesh))
    assert y.dtype == jnp.fft.fftn(x).dtype == np.complex64
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    xi = np.arange(16 * 16 * 16, dtype=np.int32).reshape(16, 16, 16) % 7
    yi = distla.fft.rfftn(_put(xi, mesh))
    assert yi.dtype == jnp.fft.rfftn(xi).dtype
    assert fft_ratio(yi, np.fft.rfftn(xi.astype(np.float64))) <= THRESHOLD


@pytest.mark.parametrize(
    "s", [pytest.param((16, 16, 30), id="crop-z"), pytest.param((12, 20, 17), id="mixed")]
)
def test_irfftn_s_as_jnp(s):
    mesh = _mesh((4, 2), "explicit")
    rng = np.random.default_rng(9)
    spec = _volume(rng, (16, 16, 9), np.complex64)
    got = distla.fft.irfftn(_put(spec, mesh), s=s)
    want = np.fft.irfftn(_wide(spec), s=s, axes=(0, 1, 2))
    assert got.shape == s == jnp.fft.irfftn(spec, s=s).shape
    assert fft_ratio(got, want) <= THRESHOLD


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(P(None, "x", "y"), id="x-pencils"),
        pytest.param(P(), id="replicated"),
        pytest.param(P("y", None, "x"), id="odd"),
    ],
)
def test_any_input_layout(spec):
    mesh = _mesh((4, 2), "explicit")
    x = _volume(np.random.default_rng(10), (16, 16, 16), np.complex64)
    xs = place(x, mesh, spec)
    y = distla.fft.fftn(xs)
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD
    assert has_layout(y, mesh, P(None, "x", "y"))


def test_one_device_falls_back_to_jnp():
    x = _volume(np.random.default_rng(11), (8, 8, 8), np.complex64)
    for fn, ref in [
        (distla.fft.fftn, np.fft.fftn(_wide(x))),
        (distla.fft.ifftn, np.fft.ifftn(_wide(x))),
        (distla.fft.pfft3d, np.fft.fftn(_wide(x)).transpose(1, 2, 0)),
        (distla.fft.pifft3d, np.fft.ifftn(_wide(x).transpose(2, 0, 1))),
    ]:
        assert fft_ratio(fn(jnp.asarray(x)), ref) <= THRESHOLD
    xr = x.real.copy()
    assert fft_ratio(distla.fft.rfftn(xr), np.fft.rfftn(_wide(xr))) <= THRESHOLD
    assert (
        fft_ratio(distla.fft.irfftn(x, s=(8, 8, 6)), np.fft.irfftn(x, s=(8, 8, 6), axes=(0, 1, 2)))
        <= 30
    )


# --- jaxdecomp drop-in ----------------------------------------------------------------


def _jaxdecomp():
    pytest.importorskip("packaging")  # jaxdecomp 0.3.1 imports it without declaring it
    import packaging  # noqa: F401

    return pytest.importorskip("jaxdecomp")


def _strip(spec):
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return tuple(entries)


@pytest.mark.parametrize("shape", JAXDECOMP_MESHES)
def test_pfft3d_matches_jaxdecomp(shape):
    jd = _jaxdecomp()
    mesh = _mesh(shape, "auto")
    x = _volume(np.random.default_rng(12), (16, 32, 64), np.complex64)
    xs = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    want = jd.fft.pfft3d(xs)
    got = distla.fft.pfft3d(xs)
    assert got.shape == want.shape == (32, 64, 16)
    assert _strip(got.sharding.spec) == _strip(want.sharding.spec)
    assert fft_ratio(got, np.asarray(want).astype(np.complex128)) <= THRESHOLD
    assert fft_ratio(got, np.fft.fftn(_wide(x)).transpose(1, 2, 0)) <= THRESHOLD
    back_want = jd.fft.pifft3d(want)
    back = distla.fft.pifft3d(got)
    assert back.shape == x.shape
    assert _strip(back.sharding.spec) == _strip(back_want.sharding.spec)
    assert fft_ratio(back, _wide(x)) <= THRESHOLD


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param((4, 2), id="4x2"),
        pytest.param((1, 8), id="1x8"),
        pytest.param((8, 1), id="8x1"),
    ],
)
def test_pfft3d_explicit_mesh_has_jaxdecomps_layout(shape):
    mesh = _mesh(shape, "explicit")
    auto = _mesh(shape, "auto")
    x = _volume(np.random.default_rng(13), (16, 32, 64), np.complex64)
    got = distla.fft.pfft3d(jax.device_put(x, NamedSharding(mesh, P("x", "y"))))
    assert fft_ratio(got, np.fft.fftn(_wide(x)).transpose(1, 2, 0)) <= THRESHOLD
    same_on_auto = distla.fft.pfft3d(jax.device_put(x, NamedSharding(auto, P("x", "y"))))
    assert has_layout(got, mesh, same_on_auto.sharding.spec)
    back = distla.fft.pifft3d(got)
    assert fft_ratio(back, _wide(x)) <= THRESHOLD
    assert has_layout(back, mesh, P("x", "y", None))


def test_pfft3d_slab_pencil_algorithm():
    mesh = _mesh((2, 4), "explicit")
    x = _volume(np.random.default_rng(19), (16, 32, 64), np.complex64)
    got = distla.fft.pfft3d(_put(x, mesh), algorithm="slab-pencil")
    assert has_layout(got, mesh, P("x", "y", None))
    assert fft_ratio(got, np.fft.fftn(_wide(x)).transpose(1, 2, 0)) <= THRESHOLD
    back = distla.fft.pifft3d(got, algorithm="slab-pencil")
    assert fft_ratio(back, _wide(x)) <= THRESHOLD


def test_pfft3d_one_axis_mesh_and_uneven_sizes():
    mesh = _mesh((8,), "explicit")
    x = _volume(np.random.default_rng(14), (16, 32, 64), np.complex64)
    got = distla.fft.pfft3d(_put(x, mesh), norm="ortho")
    assert has_layout(got, mesh, P(None, "x", None))
    assert fft_ratio(got, np.fft.fftn(_wide(x), norm="ortho").transpose(1, 2, 0)) <= THRESHOLD
    assert fft_ratio(distla.fft.pifft3d(got, norm="ortho"), _wide(x)) <= THRESHOLD
    mesh = _mesh((4, 2), "auto")
    x = _volume(np.random.default_rng(15), (12, 20, 18), np.complex64)
    got = distla.fft.pfft3d(_put(x, mesh))
    assert fft_ratio(got, np.fft.fftn(_wide(x)).transpose(1, 2, 0)) <= THRESHOLD
    assert has_layout(got, mesh, _fits(got.shape, mesh, P("x", "y", None)))
    assert fft_ratio(distla.fft.pifft3d(got), _wide(x)) <= THRESHOLD


# --- jit and grad ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_inside_jit(kind):
    mesh = _mesh((2, 4), kind)
    x = _volume(np.random.default_rng(16), (16, 16, 16), np.float32)

    @jax.jit
    def roundtrip(v):
        return distla.fft.irfftn(distla.fft.rfftn(v) * 2.0, s=v.shape)

    z = roundtrip(_put(x, mesh))
    assert fft_ratio(z, 2 * _wide(x)) <= THRESHOLD
    assert has_layout(z, mesh, P("x", "y", None))


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("name", ["fftn", "rfftn"])
def test_grad_matches_jnp(name, kind):
    mesh = _mesh((4, 2), kind)
    rng = np.random.default_rng(17)
    x = _volume(rng, (8, 16, 16), np.float32)
    ours, theirs = getattr(distla.fft, name), getattr(jnp.fft, name)
    w = _volume(rng, jax.eval_shape(theirs, x).shape, np.complex64)

    def loss(fn, v):
        return jnp.sum(jnp.real(fn(v) * w) ** 2)

    with jax.set_mesh(mesh):
        got = jax.grad(functools.partial(loss, ours))(_put(x, mesh))
    want = jax.grad(functools.partial(loss, theirs))(jnp.asarray(x))
    scale = np.linalg.norm(np.asarray(want))
    assert np.linalg.norm(np.asarray(got) - np.asarray(want)) <= 1e-5 * scale


def test_cpu_compiler_options_in_a_callers_jit():
    key = "xla_multiheap_size_constraint_per_heap"
    assert distla.fft.cpu_compiler_options((256,) * 3, np.complex64, 8) == {key: 16 * 2**20}
    assert distla.fft.cpu_compiler_options((256,) * 3, np.complex64, 4) == {key: 32 * 2**20}
    assert distla.fft.cpu_compiler_options((16, 16, 16), devices=8) == {key: 8 * 2**20}
    mesh = _mesh((4, 2), "explicit")
    x = _volume(np.random.default_rng(20), (16, 16, 16), np.complex64)
    opts = distla.fft.cpu_compiler_options(x.shape, x.dtype, devices=8)
    y = jax.jit(distla.fft.fftn, compiler_options=opts)(_put(x, mesh))
    assert fft_ratio(y, np.fft.fftn(_wide(x))) <= THRESHOLD


@pytest.mark.parametrize("name", ["fftn", "rfftn"])
def test_check_grads_jvp_and_vjp(x64, name):
    mesh = _mesh((2, 4), "auto")
    x = _put(_volume(np.random.default_rng(21), (8, 8, 8), np.float64), mesh)
    # check_grads draws its cotangents on one device: the mesh must be in context
    with jax.set_mesh(mesh):
        jax.test_util.check_grads(
            getattr(distla.fft, name), (x,), order=1, modes=("fwd", "rev"), atol=1e-7, rtol=1e-7
        )


# --- communication, from the compiled program ------------------------------------------


class TestCost:
    """Two all_to_alls for pencils, one for slabs, no all-gather, bytes as documented."""

    @pytest.mark.parametrize(
        "mesh_shape, name, count",
        [
            pytest.param((4, 2), "fftn", 2, id="4x2-fftn"),
            pytest.param((4, 2), "pfft3d", 2, id="4x2-pfft3d"),
            pytest.param((2, 4), "rfftn", 2, id="2x4-rfftn"),
            pytest.param((4, 2), "ifftn", 2, id="4x2-ifftn"),
            pytest.param((1, 8), "fftn", 1, id="1x8-fftn"),
            pytest.param((8, 1), "pfft3d", 1, id="8x1-pfft3d"),
            pytest.param((8,), "fftn", 1, id="8-fftn"),
        ],
    )
    def test_all_to_all_count_and_bytes(self, mesh_shape, name, count):
        mesh = _mesh(mesh_shape, "explicit")
        shape = (32, 32, 32)
        dtype = np.float32 if name == "rfftn" else np.complex64
        x = _put(np.ones(shape, dtype), mesh)
        if name == "ifftn":
            x = distla.fft.fftn(x)
        c = distla.cost(getattr(distla.fft, name), x)
        assert c.collective_counts["all-to-all"] == count
        others = {k: v for k, v in c.collective_counts.items() if k != "all-to-all"}
        assert not any(others.values()), others
        order = "yzx" if name == "pfft3d" else "xyz"
        model = distla.fft.model_bytes(shape, mesh_shape, real=name == "rfftn", order=order)
        assert model / 1.2 <= c.collective_bytes["all-to-all"] <= 1.2 * model
        # input, output and about two blocks of temporaries: O(N/p), never the volume
        block = np.prod(shape) * 8 / np.prod(mesh_shape)
        assert c.peak_memory_bytes <= 6 * block

    def test_rfftn_moves_half_the_bytes(self):
        mesh = _mesh((4, 2), "auto")
        shape = (32, 32, 30)  # Z//2 + 1 = 16 splits evenly: the natural layout
        real = distla.cost(distla.fft.rfftn, _put(np.ones(shape, np.float32), mesh))
        cplx = distla.cost(distla.fft.fftn, _put(np.ones(shape, np.complex64), mesh))
        ratio = real.collective_bytes["all-to-all"] / cplx.collective_bytes["all-to-all"]
        assert 0.45 <= ratio <= 0.6

    def test_uneven_sizes_never_gather_the_volume(self):
        mesh = _mesh((4, 2), "auto")
        x = _put(np.ones((30, 42, 50), np.complex64), mesh)
        c = distla.cost(distla.fft.fftn, x)
        assert c.collective_counts["all-to-all"] == 2
        # the result is replicated over 'x' (no even layout spreads it further): each device
        # gathers its half of the (padded) volume, never the whole one
        assert c.largest("all-gather") <= 0.6 * x.nbytes


# --- the transposes on their own (exact, integer-coded) ---------------------------------


def _coded(shape):
    return np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)


def _kernel(mesh, fn, spec_in, spec_out):
    return jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=spec_in, out_specs=spec_out))


@pytest.mark.parametrize("tile", [1, 32])
def test_zpencils_zslabs_xpencils(tile):
    mesh = _mesh((4, 2), "auto")
    v = _coded((16, 32, 64))
    axes = dict(row_axis="x", col_axis="y", tile=tile)
    zslab = P(("y", "x"), None, None)
    to_slabs = _kernel(mesh, functools.partial(tr.zpencils_to_zslabs, **axes), P("x", "y"), zslab)
    s = to_slabs(jax.device_put(v, NamedSharding(mesh, P("x", "y"))))
    np.testing.assert_array_equal(np.asarray(s), v.transpose(2, 0, 1))
    back = _kernel(mesh, functools.partial(tr.zslabs_to_zpencils, **axes), zslab, P("x", "y"))
    np.testing.assert_array_equal(np.asarray(back(s)), v)
    swapped = _kernel(
        mesh, functools.partial(tr.zslabs_to_zpencils, swap=True, **axes), zslab, P("y", "x")
    )(s)
    np.testing.assert_array_equal(np.asarray(swapped), v)
    for order, spec, want in [("xyz", P(None, "x", "y"), v), ("yzx", P("x", "y"), None)]:
        fn = functools.partial(tr.zslabs_to_xpencils, row_axis="x", order=order, tile=tile)
        out = _kernel(mesh, fn, zslab, spec)(s)
        want = v if order == "xyz" else v.transpose(1, 2, 0)
        np.testing.assert_array_equal(np.asarray(out), want)
        inv = functools.partial(tr.xpencils_to_zslabs, row_axis="x", order=order, tile=tile)
        np.testing.assert_array_equal(np.asarray(_kernel(mesh, inv, spec, zslab)(out)), s)


@pytest.mark.parametrize("split", [1, 2])
def test_xslabs_xminor(split):
    mesh = _mesh((8,), "auto")
    v = _coded((16, 32, 64))
    out_spec = P("x", None, None) if split == 1 else P(None, "x", None)
    fwd = _kernel(
        mesh, functools.partial(tr.xslabs_to_xminor, axis="x", split=split), P("x"), out_spec
    )
    u = fwd(jax.device_put(v, NamedSharding(mesh, P("x"))))
    np.testing.assert_array_equal(np.asarray(u), v.transpose(1, 2, 0))
    inv = _kernel(
        mesh, functools.partial(tr.xminor_to_xslabs, axis="x", split=split), out_spec, P("x")
    )
    np.testing.assert_array_equal(np.asarray(inv(u)), v)


def test_fit_tile():
    assert [tr.fit_tile(n, 32) for n in (1, 7, 12, 48, 64, 96)] == [1, 1, 4, 16, 32, 32]


# --- errors ---------------------------------------------------------------------------


class TestErrors:
    def test_rank_of_the_jaxdecomp_drop_ins(self):
        with pytest.raises(ValueError, match=r"3-D volumes.*\(2, 8, 8, 8\)"):
            distla.fft.pfft3d(jnp.ones((2, 8, 8, 8)))

    def test_three_axis_mesh(self):
        mesh = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
        x = jax.device_put(np.ones((8, 8, 8), np.complex64), NamedSharding(mesh, P("a", "b")))
        with pytest.raises(ValueError, match=r"1- or 2-axis mesh; got a 2x2x2 mesh"):
            distla.fft.fftn(x)

    @pytest.mark.parametrize(
        "s, match",
        [
            pytest.param((8, 8), "Shape and axes have different lengths", id="long"),
            pytest.param((8, 0, 8), "Shape should be positive", id="zero"),
        ],
    )
    def test_bad_s_as_jnp(self, s, match):
        x = _put(np.ones((8, 8, 5), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(ValueError, match=match):
            jnp.fft.irfftn(np.ones((8, 8, 5), np.complex64), s=s, axes=(0, 1, 2))
        with pytest.raises(ValueError, match=match):
            distla.fft.irfftn(x, s=s, axes=(0, 1, 2))

    def test_bad_norm(self):
        x = _put(np.ones((8, 8, 8), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(ValueError, match="norm must be one of.*'backwards'"):
            distla.fft.fftn(x, norm="backwards")

    def test_complex_input_to_rfftn(self):
        x = _put(np.ones((8, 8, 8), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(TypeError, match="real input; got dtype complex64"):
            distla.fft.rfftn(x)

    def test_bad_algorithm(self):
        x = _put(np.ones((8, 8, 8), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(ValueError, match="algorithm must be one of.*'summa'"):
            distla.fft.fftn(x, algorithm="summa")

    def test_bad_backend(self):
        x = _put(np.ones((8, 8, 8), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(ValueError, match="backend must be 'JAX' or 'cudecomp'.*'mpi'"):
            distla.fft.pfft3d(x, backend="mpi")

    def test_repeated_and_out_of_range_axes_as_jnp(self):
        x = _put(np.ones((8, 8, 8), np.complex64), _mesh((4, 2), "auto"))
        with pytest.raises(ValueError, match="repeated axes"):
            distla.fft.fftn(x, axes=(0, 0))
        with pytest.raises(ValueError, match="out of bounds"):
            distla.fft.fftn(x, axes=(3,))


def test_exported_names():
    assert sorted(distla.fft.__all__) == sorted(
        ["fftn", "ifftn", "rfftn", "irfftn", "pfft3d", "pifft3d", "fft", "ifft", "fft2"]
        + ["prfft3d", "pirfft3d"]
        + ["ifft2", "rfft2", "irfft2", "fftfreq3d", "rfftfreq3d", "rfft", "irfft"]
        + ["model_bytes"]  # the communication model of docs/fft.md
        + ["fftfreq", "rfftfreq", "fftshift", "ifftshift", "hfft", "ihfft"]  # jnp.fft's rest
    )
