"""distla.scipy.fft: the DCTs of jax.scipy.fft, distributed, against scipy.fft.

Values by the FFT ratio against scipy in float64 (types 1-4, every norm, dct
and idct, meshes of the harness, sizes the mesh does not divide, real and
complex, float64 with x64); layouts as distla.fft.fftn's; communication: the
all_to_alls of fftn moving real values, no all-gather; derivatives with
check_grads.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.fft
from conftest import build_mesh
from distla.kernels.dct import dct_along
from helpers import THRESHOLD, fft_ratio, has_layout, place
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import distla
import distla.scipy.fft as D

TYPES = [1, 2, 3, 4]
NORMS = [None, "backward", "ortho", "forward"]


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _ref(x, inverse, **kw):
    f = scipy.fft.idctn if inverse else scipy.fft.dctn
    return f(np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64), **kw)


@pytest.fixture(scope="module")
def m24():
    return build_mesh((2, 4), "explicit")


def test_local_transforms_against_scipy(x64):
    """kernels/dct.py on one device, in float64: every type, norm, direction and a range
    of lengths (odd and even, down to each type's smallest), to a few ulps."""
    rng = np.random.default_rng(10)
    for n in (1, 2, 3, 4, 5, 8, 9, 16, 17):
        x = rng.standard_normal((3, n))
        for type_ in TYPES:
            if type_ == 1 and n == 1:
                continue
            for norm in NORMS:
                for inverse in (False, True):
                    f = scipy.fft.idct if inverse else scipy.fft.dct
                    want = f(x, type=type_, norm=norm)
                    got = dct_along(x, -1, type=type_, norm=norm, inverse=inverse)
                    err = np.abs(np.asarray(got) - want).max() / np.abs(want).max()
                    assert err < 1e-14, (n, type_, norm, inverse, err)


@pytest.mark.parametrize(
    "type_, norm",
    [(1, "forward"), (2, "ortho"), (3, None), (4, "backward")],
    ids=["type1-forward", "type2-ortho", "type3-none", "type4-backward"],
)
def test_every_type_against_scipy(m24, type_, norm):
    x = _rand((8, 12, 9), seed=type_)
    xs = place(x, m24, P("x", "y"))
    y = D.dctn(xs, type=type_, norm=norm)
    assert y.dtype == np.float32 and y.shape == x.shape
    assert fft_ratio(y, _ref(x, False, type=type_, norm=norm)) <= THRESHOLD
    back = D.idctn(y, type=type_, norm=norm)
    assert fft_ratio(back, x.astype(np.float64)) <= THRESHOLD
    assert fft_ratio(D.idctn(xs, type=type_, norm=norm), _ref(x, True, type=type_, norm=norm)) <= (
        THRESHOLD
    )


def test_meshes_layouts_as_fftn(mesh):
    """Every mesh of the harness: values, and the layouts of fftn / ifftn for the same input
    (Auto meshes at a size they divide, Explicit ones at one they do not)."""
    n = 13 if jax.sharding.AxisType.Explicit in mesh.axis_types else 16
    x = _rand((n, n, n), seed=1)
    xs = place(x, mesh, P(*mesh.axis_names))
    y = D.dctn(xs)
    assert fft_ratio(y, _ref(x, False)) <= THRESHOLD
    f = distla.fft.fftn(xs.astype(jnp.complex64))
    assert has_layout(y, mesh, f.sharding.spec), (y.sharding.spec, f.sharding.spec)
    back = D.idctn(y)
    assert fft_ratio(back, x.astype(np.float64)) <= THRESHOLD
    inv = distla.fft.ifftn(f)
    assert has_layout(back, mesh, inv.sharding.spec), (back.sharding.spec, inv.sharding.spec)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(dict(axes=(0,)), id="axis0"),
        pytest.param(dict(axes=(1, 2), type=3, norm="ortho"), id="axes12-type3"),
        pytest.param(dict(axes=(0, 2), s=(10, 7), type=1), id="s-crop-pad-type1"),
        pytest.param(dict(s=(6,), type=4), id="s-last-axis-type4"),
    ],
)
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_subsets_of_axes_and_lengths(call, kind):
    """The general route: batch axes keep their layout; s crops and zero-pads."""
    mesh = build_mesh((2, 4), kind)
    x = _rand((8, 12, 8), seed=2)
    xs = place(x, mesh, P("x", "y"))
    y = D.dctn(xs, **call)
    want = _ref(x, False, **call)
    assert y.shape == want.shape
    assert fft_ratio(y, want) <= THRESHOLD
    z = D.idctn(xs, **call)
    assert fft_ratio(z, _ref(x, True, **call)) <= THRESHOLD
    f = distla.fft.fftn(xs.astype(jnp.complex64), s=call.get("s"), axes=call.get("axes"))
    assert has_layout(y, mesh, f.sharding.spec), (y.sharding.spec, f.sharding.spec)


def test_one_axis_functions(m24):
    x = _rand((16, 6, 10), seed=3)
    xs = place(x, m24, P("x", "y"))
    for axis, n in ((0, None), (1, 9), (-1, 4)):
        for type_ in TYPES:
            y = D.dct(xs, type=type_, n=n, axis=axis, norm="ortho")
            want = scipy.fft.dct(x.astype(np.float64), type=type_, n=n, axis=axis, norm="ortho")
            assert fft_ratio(y, want) <= THRESHOLD, (axis, type_)
            z = D.idct(y, type=type_, axis=axis, norm="ortho")
            want = scipy.fft.idct(want, type=type_, axis=axis, norm="ortho")
            assert fft_ratio(z, want) <= THRESHOLD, (axis, type_)
    v = place(_rand((24,), seed=4), m24, P(("x", "y")))  # a sharded vector
    assert fft_ratio(D.dct(v), scipy.fft.dct(np.asarray(v, np.float64))) <= THRESHOLD


@pytest.mark.parametrize(
    "dtype", [np.complex64, np.int32, np.bool_], ids=lambda d: np.dtype(d).name
)
def test_dtypes_as_jax(m24, dtype):
    """Complex input: real and imaginary parts apart; integers and bools: jax's float32."""
    x = (_rand((8, 8, 4), seed=5) * 3).astype(dtype)
    if dtype == np.complex64:
        x = x + 1j * _rand((8, 8, 4), seed=6)
    xs = place(x, m24, P("x", "y"))
    ours, theirs = D.dctn(xs), jax.scipy.fft.dctn(x)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    assert fft_ratio(ours, _ref(x, False)) <= THRESHOLD
    assert D.idctn(xs).dtype == jax.scipy.fft.idctn(x).dtype


def test_float64_with_x64(m24, x64):
    x = _rand((8, 12, 6), seed=7, dtype=np.float64)
    xs = place(x, m24, P("x", "y"))
    for type_ in TYPES:
        y = D.dctn(xs, type=type_)
        assert y.dtype == np.float64
        assert fft_ratio(y, _ref(x, False, type=type_)) <= THRESHOLD
        assert fft_ratio(D.idctn(y, type=type_), x) <= THRESHOLD


def test_one_device_and_jax_type_2():
    x = _rand((6, 5, 4), seed=8)
    for type_ in TYPES:
        assert fft_ratio(D.dctn(x, type=type_), _ref(x, False, type=type_)) <= THRESHOLD
    np.testing.assert_allclose(
        np.asarray(D.dctn(x, norm="ortho")),
        np.asarray(jax.scipy.fft.dctn(x, norm="ortho")),
        rtol=1e-5,
        atol=1e-5,
    )
    np.testing.assert_allclose(
        np.asarray(D.idct(x, n=7, axis=0)),
        np.asarray(jax.scipy.fft.idct(x, n=7, axis=0)),
        rtol=1e-5,
        atol=1e-5,
    )


def test_zero_size_as_jax(m24):
    for shape, kw in (((0, 8, 4), {"axes": (1, 2)}), ((8, 0), {"axes": (0,)})):
        x = np.zeros(shape, np.float32)
        ours, theirs = D.dctn(place(x, m24, P("x", "y")), **kw), jax.scipy.fft.dctn(x, **kw)
        assert (ours.shape, ours.dtype) == (theirs.shape, theirs.dtype)


@pytest.mark.parametrize("mesh_shape", [(2, 4), (4, 2), (8,)], ids=["2x4", "4x2", "8"])
def test_communication_is_fftns_in_real_values(mesh_shape, partitioner):
    """The all_to_alls of fftn on the same layout, each moving half its bytes; no gather."""
    names = ("x", "y")[: len(mesh_shape)]
    mesh = build_mesh(mesh_shape, "explicit", names=names)
    x = place(np.zeros((32, 32, 32), np.float32), mesh, P(*names))
    ours = distla.cost(D.dctn, x)
    theirs = distla.cost(lambda v: distla.fft.fftn(v, algorithm="pencil"), x.astype(jnp.complex64))
    assert ours.collective_counts["all-gather"] == 0
    assert ours.total_collective_bytes == ours.collective_bytes["all-to-all"]
    assert ours.collective_counts["all-to-all"] == theirs.collective_counts["all-to-all"]
    assert 2 * ours.total_collective_bytes == theirs.total_collective_bytes
    inverse = distla.cost(D.idctn, D.dctn(x))
    assert inverse.total_collective_bytes == ours.total_collective_bytes
    axes = distla.cost(lambda v: D.dctn(v, axes=(0, 1)), x)
    assert axes.collective_counts["all-gather"] == 0


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_derivatives(kind):
    mesh = build_mesh((2, 4), kind)
    with jax.enable_x64(True), jax.set_mesh(mesh):
        x = place(_rand((8, 8, 6), seed=9, dtype=np.float64), mesh, P("x", "y"))
        check_grads(lambda v: D.dctn(v, type=3, norm="ortho"), (x,), 1, modes=("fwd", "rev"))
        check_grads(lambda v: D.idct(v, type=1, axis=0), (x,), 1, modes=("fwd", "rev"))


def test_errors_name_the_argument(m24):
    xs = place(np.ones((8, 8, 4), np.float32), m24, P("x", "y"))
    with pytest.raises(ValueError, match="type must be 1, 2, 3 or 4"):
        D.dctn(xs, type=5)
    with pytest.raises(ValueError, match="norm must be one of"):
        D.dct(xs, norm="unitary")
    with pytest.raises(ValueError, match="at least 2"):
        D.dct(xs, type=1, n=1)
    with pytest.raises(ValueError, match="at least 1"):
        D.idctn(xs, s=(0, 4), axes=(0, 1))
    with pytest.raises(ValueError):  # jax's own check of s
        D.dctn(xs, s=(1, 2, 3, 4))
