"""distla.jaxdecomp: jaxdecomp's public functions, against the installed jaxdecomp.

Values and layouts equal jaxdecomp's on Auto meshes; Explicit meshes, 1-axis
meshes, extents jaxdecomp does not take and one device against numpy
references; the halo exchange's derivative is its true adjoint (a dot-product
test); communication counted with distla.cost against each model.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, fft_ratio, has_layout
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import distla
import distla.jaxdecomp as djd

MESHES = [(2, 4), (4, 2), (8, 1), (1, 8)]


def _ids(shape):
    return f"{shape[0]}x{shape[1]}"


def _jd():
    return pytest.importorskip("jaxdecomp")


def _mesh(shape, kind="auto"):
    return build_mesh(shape, kind, names=("z", "y"))


def _put(x, mesh, spec=P("z", "y")):
    return jax.device_put(x, NamedSharding(mesh, spec))


@pytest.fixture
def contiguous_setting():
    """Restores jaxdecomp's and distla.jaxdecomp's transpose_axis_contiguous after a test."""
    jd = _jd()
    before = jd.config.transpose_axis_contiguous
    yield jd
    jd.config.update("transpose_axis_contiguous", before)
    djd.config._contiguous = djd.config.__class__()._contiguous  # unset: follow jaxdecomp
    jax.clear_caches()


def _set_contiguous(jd, value):
    jd.config.update("transpose_axis_contiguous", value)
    djd.config.update("transpose_axis_contiguous", value)
    jax.clear_caches()  # jaxdecomp reads its setting at trace time


# --- the namespace -----------------------------------------------------------------------

# jaxdecomp's names that are not functions of this namespace, and why
NOT_MIRRORED = {
    # cuDecomp's runtime: query and tune its own process grid on GPUs
    "get_pencil_info",
    "get_autotuned_config",
    "make_config",
    # its submodules and import leftovers
    "halo",
    "transpose",
    "typing",
    "dataclass",
    "version",
    "PackageNotFoundError",
}


def test_every_jaxdecomp_name_is_there():
    jd = _jd()
    theirs = {n for n in dir(jd) if not n.startswith("_")} - NOT_MIRRORED
    missing = theirs - set(dir(djd))
    assert not missing, sorted(missing)
    fft_names = set(jd.fft.__all__) | {"prfft3d", "pirfft3d"}
    assert not fft_names - set(dir(djd.fft)), sorted(fft_names - set(dir(djd.fft)))
    for name in sorted(theirs):
        assert callable(getattr(djd, name)) == callable(getattr(jd, name)), name
    for name in ("PENCILS", "SLAB_XY", "SLAB_YZ", "NO_DECOMP", "HALO_COMM_NCCL"):
        assert getattr(djd, name).value == getattr(jd, name).value, name
        assert getattr(djd, name).name == getattr(jd, name).name, name
    # the same function objects under both of jaxdecomp's spellings, and in distla.fft
    assert djd.pfft3d is djd.fft.pfft3d is distla.fft.pfft3d
    assert djd.fft.prfft3d is distla.fft.prfft3d


@pytest.mark.parametrize("module", ["top", "fft"])
def test_signatures_take_jaxdecomps_arguments(module):
    jd = _jd()
    theirs, ours = (jd, djd) if module == "top" else (jd.fft, djd.fft)
    names = [n for n in getattr(theirs, "__all__", dir(theirs)) if not n.startswith("_")]
    names += ["prfft3d", "pirfft3d"] if module == "fft" else []
    checked = 0
    for name in sorted(set(names) - NOT_MIRRORED):
        fn_j = getattr(theirs, name)
        if not inspect.isfunction(fn_j):
            continue
        sig_j, sig_d = inspect.signature(fn_j), inspect.signature(getattr(ours, name))
        for i, (pname, pj) in enumerate(sig_j.parameters.items()):
            pd = list(sig_d.parameters.values())[i]
            # the operand may be named as distla names it (x, y, k) and also by keyword
            if pname in sig_d.parameters:
                pd = sig_d.parameters[pname]
            assert pd.kind in (pj.kind, inspect.Parameter.KEYWORD_ONLY), (name, pname)
            if pj.default is not inspect.Parameter.empty:
                assert pd.default == pj.default, (name, pname, pd.default, pj.default)
        checked += 1
    assert checked >= (5 if module == "fft" else 12)


def test_config_and_constants(contiguous_setting):
    jd = contiguous_setting
    assert djd.config.transpose_axis_contiguous == jd.config.transpose_axis_contiguous
    jd.config.update("transpose_axis_contiguous", False)
    assert djd.config.transpose_axis_contiguous is False  # follows jaxdecomp's until set
    djd.config.update("transpose_axis_contiguous", True)
    assert djd.config.transpose_axis_contiguous is True
    djd.config.update("halo_comm_backend", djd.HALO_COMM_MPI)
    assert djd.config.halo_comm_backend == djd.HALO_COMM_MPI
    djd.config.update("halo_comm_backend", djd.HALO_COMM_NCCL)
    with pytest.raises(ValueError, match="not a valid configuration key"):
        djd.config.update("transpose_axis_contigous", True)
    djd.init()
    djd.finalize()


# --- halo_exchange ----------------------------------------------------------------------


def halo_reference(x, parts, extents, periods, whole=False):
    """numpy: the blocks of ``x`` (``parts[d]`` along axis ``d``) with their ghost cells
    filled axis after axis (``extents[d] = (lo, hi)``); an axis of one block is left as
    it is, or with ``whole`` is its own neighbour."""
    y = np.array(x, copy=True)
    for d, ((lo, hi), n, per) in enumerate(zip(extents, parts, periods)):
        if (not lo and not hi) or (n == 1 and not whole):
            continue
        before = y.copy()
        length = y.shape[d] // n
        take = lambda a, s, e: np.take(a, range(s, e), axis=d)  # noqa: E731
        for j in range(n):
            start = j * length
            low = (j - 1) % n if per or j > 0 else None
            high = (j + 1) % n if per or j < n - 1 else None
            idx = [slice(None)] * y.ndim
            if lo:
                idx[d] = slice(start, start + lo)
                src = low * length if low is not None else None
                y[tuple(idx)] = (
                    0 if src is None else take(before, src + length - hi - lo, src + length - hi)
                )
            if hi:
                idx[d] = slice(start + length - hi, start + length)
                src = high * length if high is not None else None
                y[tuple(idx)] = 0 if src is None else take(before, src + lo, src + lo + hi)
    return y


def _rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("mesh_shape", MESHES, ids=_ids)
def test_halo_exchange_as_jaxdecomp(mesh_shape):
    jd = _jd()
    mesh = _mesh(mesh_shape)
    x = _put(_rand((16, 16, 4)), mesh)
    for periods in [(True, True), (False, True), (False, False)]:
        for extents in [(1, 1), (2, 1)]:
            if 16 // max(mesh_shape) < 2 * max(extents):  # jaxdecomp's blocks too small
                continue
            ours = djd.halo_exchange(x, extents, periods)
            theirs = jd.halo_exchange(x, extents, periods)
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
            assert ours.sharding == theirs.sharding or has_layout(ours, mesh, theirs.sharding.spec)
            parts = (mesh_shape[0], mesh_shape[1], 1)
            ref = halo_reference(np.asarray(x), parts, [(e, e) for e in extents], periods)
            np.testing.assert_array_equal(np.asarray(ours), ref[..., : x.shape[2]])


@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1)], ids=_ids)
def test_halo_exchange_explicit_and_jit(mesh_shape):
    """Explicit meshes and jax.jit give the values of the Auto mesh's eager call."""
    jd = _jd()
    x = _rand((16, 8, 6), seed=1)
    auto = _put(x, _mesh(mesh_shape))
    want = np.asarray(jd.halo_exchange(auto, (1, 1), (True, False)))
    mesh = _mesh(mesh_shape, "explicit")
    xe = _put(x, mesh)
    got = djd.halo_exchange(xe, (1, 1), (True, False))
    np.testing.assert_array_equal(np.asarray(got), want)
    assert jax.typeof(got).sharding.spec == jax.typeof(xe).sharding.spec
    jitted = jax.jit(lambda v: djd.halo_exchange(v, (1, 1), (True, False)))
    np.testing.assert_array_equal(np.asarray(jitted(xe)), want)
    np.testing.assert_array_equal(np.asarray(jitted(auto)), want)


@pytest.mark.parametrize(
    "extents, periods, spec",
    [
        pytest.param(((1, 2), 3), (True, False), P("z", "y"), id="pairs-per-end"),
        pytest.param((1, 0, 2), (False, True, True), P("z", None, "y"), id="third-axis"),
        pytest.param((1, 1), True, P(("z", "y")), id="two-mesh-axes-on-one"),
        pytest.param((1, 1), True, P(("y", "z")), id="two-mesh-axes-not-in-mesh-order"),
    ],
)
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_halo_exchange_beyond_jaxdecomp(extents, periods, spec, kind):
    """Extents per end, a third axis, any layout (the blocks are the layout's)."""
    mesh = _mesh((2, 4), kind)
    x = _rand((16, 24, 16), seed=2)
    xs = _put(x, mesh, spec)
    got = djd.halo_exchange(xs, extents, periods)
    ext = [e if isinstance(e, tuple) else (e, e) for e in extents]
    ext += [(0, 0)] * (3 - len(ext))
    per = periods if isinstance(periods, tuple) else (periods,) * 3
    per += (False,) * (3 - len(per))
    sizes = dict(mesh.shape)
    entries = (tuple(spec) + (None,) * 3)[:3]
    parts = [
        int(np.prod([sizes[n] for n in ((e,) if isinstance(e, str) else e or ())])) for e in entries
    ]
    np.testing.assert_array_equal(np.asarray(got), halo_reference(x, parts, ext, per))
    assert has_layout(got, mesh, spec)


def test_halo_exchange_batched_and_1_axis_mesh():
    mesh = build_mesh((8,), "explicit", names=("z",))
    x = _rand((2, 16, 4, 4), seed=3)
    got = djd.halo_exchange(_put(x, mesh, P(None, "z")), (1, 1), (True, True))
    ref = np.stack([halo_reference(v, (8, 1, 1), [(1, 1), (1, 1)], (True, True)) for v in x])
    np.testing.assert_array_equal(np.asarray(got), ref)


def test_halo_exchange_on_one_device():
    jd = _jd()
    x = _rand((8, 6, 4), seed=4)
    for periods in [(True, True), (False, True)]:
        ours = djd.halo_exchange(x, (1, 2), periods)
        np.testing.assert_array_equal(
            np.asarray(ours), np.asarray(jd.halo_exchange(x, (1, 2), periods))
        )
        np.testing.assert_array_equal(np.asarray(ours), x)  # jaxdecomp's: unchanged
        whole = djd.halo_exchange(x, (1, 2), periods, exchange_whole_axes=True)
        ref = halo_reference(x, (1, 1, 1), [(1, 1), (2, 2)], periods, whole=True)
        np.testing.assert_array_equal(np.asarray(whole), ref)
    # the periodic exchange of a one-block axis is jnp.pad's wrap of the own cells
    inner = x[1:-1, 2:-2]
    wrapped = np.pad(inner, [(1, 1), (2, 2), (0, 0)], mode="wrap")
    got = djd.halo_exchange(x, (1, 2), True, exchange_whole_axes=True)
    np.testing.assert_array_equal(np.asarray(got), wrapped)
    # on a 2x4 mesh, every axis exchanged: the same ghosts as on one device
    mesh = _mesh((2, 4), "explicit")
    x = _rand((16, 16, 4), seed=5)
    one = djd.halo_exchange(x, (1, 1, 1), True, exchange_whole_axes=True)
    many = djd.halo_exchange(_put(x, mesh), (1, 1, 1), True, exchange_whole_axes=True)
    ref = halo_reference(x, (2, 4, 1), [(1, 1)] * 3, (True,) * 3, whole=True)
    np.testing.assert_array_equal(np.asarray(many), ref)
    assert not np.array_equal(np.asarray(one), ref)  # the blocks differ: so do the ghosts


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_halo_exchange_derivative_is_the_adjoint(kind):
    """<H u, w> = <u, H^T w> with jax's vjp, and check_grads in both modes; the adjoint
    adds each ghost's cotangent to the cell it copies and zeroes the ghost."""
    mesh = _mesh((2, 4), kind)
    rng = np.random.default_rng(6)
    u = _put(rng.standard_normal((16, 16, 4)), mesh)
    w = _put(rng.standard_normal((16, 16, 4)), mesh)

    def h(v):
        return djd.halo_exchange(v, ((1, 2), 1), (True, False))

    with jax.enable_x64(True), jax.set_mesh(mesh):
        u64, w64 = u.astype(jnp.float64), w.astype(jnp.float64)
        hu, vjp = jax.vjp(h, u64)
        (htw,) = vjp(w64)
        lhs, rhs = float(jnp.sum(hu * w64)), float(jnp.sum(u64 * htw))
        assert abs(lhs - rhs) <= 1e-12 * (abs(lhs) + 1), (lhs, rhs)
        check_grads(h, (u64,), order=1, modes=("fwd", "rev"))
    # the adjoint by hand: each cell's cotangent goes to the cell it copies (1-based
    # sources through the exchange itself; 0: a zero ghost, which copies nothing)
    src = halo_reference(
        np.arange(1, u.size + 1).reshape(u.shape), (2, 4, 1), [(1, 2), (1, 1)], (True, False)
    ).astype(int)
    ref = np.zeros(u.size)
    np.add.at(ref, src[src > 0] - 1, np.asarray(w)[src > 0])
    np.testing.assert_allclose(np.asarray(htw).reshape(-1), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1)], ids=_ids)
def test_halo_exchange_moves_only_the_halos(mesh_shape, partitioner):
    """Per device: two ppermutes per exchanged axis, each of one ghost slab of the block
    as the earlier axes left it: (lo + hi) * block / L * itemsize bytes."""
    mesh = _mesh(mesh_shape, "explicit")
    shape, extents = (32, 64, 16), ((1, 2), (3, 1))
    x = _put(np.zeros(shape, np.float32), mesh)
    c = distla.cost(lambda v: djd.halo_exchange(v, extents, (True, True)), x)
    local = (shape[0] // mesh_shape[0], shape[1] // mesh_shape[1], shape[2])
    block = np.prod(local) * 4
    model = sum(
        (lo + hi) * block // local[d] for d, (lo, hi) in enumerate(extents) if mesh_shape[d] > 1
    )
    assert c.total_collective_bytes == c.collective_bytes["collective-permute"] == model
    assert c.collective_counts["collective-permute"] == 2 * sum(p > 1 for p in mesh_shape)


def test_halo_exchange_vmap():
    mesh = _mesh((2, 4))
    x = _rand((3, 16, 16, 4), seed=7)
    xs = _put(x, mesh, P(None, "z", "y"))
    got = jax.vmap(lambda v: djd.halo_exchange(v, (1, 1), (True, True)))(xs)
    want = djd.halo_exchange(xs, (1, 1), (True, True))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_halo_exchange_errors():
    mesh = _mesh((2, 4), "explicit")
    x = _put(np.zeros((8, 8, 4), np.float32), mesh)
    with pytest.raises(ValueError, match="3-D volumes"):
        djd.halo_exchange(np.zeros((8, 8)), (1, 1), (True, True))
    djd.halo_exchange(x, (0, 1), (True, True))  # blocks of 2 along Y: room for 1 + 1
    with pytest.raises(ValueError, match="blocks of 2 cells .* fewer than its 2 \\+ 2"):
        djd.halo_exchange(x, (1, 2), (True, True))
    with pytest.raises(ValueError, match="one bool per entry"):
        djd.halo_exchange(x, (1, 1), (True,))
    with pytest.raises(ValueError, match="non-negative"):
        djd.halo_exchange(x, (-1, 1), (True, True))
    with pytest.raises(ValueError, match="backend"):
        djd.halo_exchange(x, (1, 1), (True, True), backend="mpi")
    auto = _mesh((2, 4))
    with pytest.raises(ValueError, match="does not split into 4 equal blocks"):
        jax.jit(lambda v: djd.halo_exchange(v, (1, 1), (True, True)))(
            _put(np.zeros((8, 6, 4)), auto, P())
        )


# --- the pencil transposes --------------------------------------------------------------

CHAINS = {
    True: [["x_y", "y_z", "z_y", "y_x"], ["x_z", "z_x"]],
    False: [["x_y", "y_z", "z_y", "y_x"]],
}
NAMES = {
    "x_y": "transposeXtoY",
    "y_z": "transposeYtoZ",
    "z_y": "transposeZtoY",
    "y_x": "transposeYtoX",
    "x_z": "transposeXtoZ",
    "z_x": "transposeZtoX",
}


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "not-contiguous"])
@pytest.mark.parametrize("mesh_shape", MESHES, ids=_ids)
def test_transposes_as_jaxdecomp(mesh_shape, contiguous, contiguous_setting):
    jd = contiguous_setting
    _set_contiguous(jd, contiguous)
    mesh = _mesh(mesh_shape)
    x = _put(_rand((8, 16, 32), seed=8), mesh)
    for chain in CHAINS[contiguous]:
        ours = theirs = x
        for kind in chain:
            ours = getattr(djd, NAMES[kind])(ours)
            theirs = getattr(jd, NAMES[kind])(theirs)
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=kind)
            assert has_layout(ours, mesh, theirs.sharding.spec), (kind, ours.sharding.spec)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(x))  # there and back


def _order(kind):
    """jaxdecomp's global transpose of each kind (transpose_axis_contiguous=True)."""
    return (2, 0, 1) if kind in ("x_y", "y_z", "z_x") else (1, 2, 0)


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "not-contiguous"])
def test_transposes_explicit_uneven_and_one_all_to_all(contiguous):
    """Explicit meshes, a shape the mesh does not divide, X<->Z not contiguous (which
    jaxdecomp refuses): values are numpy's transposes, one all_to_all each."""
    mesh = _mesh((2, 4), "explicit")
    x = _rand((6, 12, 10), seed=9)
    xs = _put(x, mesh, P("z", "y"))
    for chain in [["x_y", "y_z", "z_y", "y_x"], ["x_z", "z_x"]]:
        cur, ref = xs, x
        for kind in chain:
            fn = getattr(djd, NAMES[kind])
            c = distla.cost(lambda v, fn=fn: fn(v, transpose_axis_contiguous=contiguous), cur)
            cur = fn(cur, transpose_axis_contiguous=contiguous)
            ref = ref.transpose(_order(kind) if contiguous else (0, 1, 2))
            np.testing.assert_array_equal(np.asarray(cur), ref, err_msg=kind)
            assert c.collective_counts["all-gather"] == 0, kind
            assert c.collective_counts["all-to-all"] <= 2, kind  # one, or one more to fit
        np.testing.assert_array_equal(np.asarray(cur), x)


def test_transposes_move_one_block_each():
    """On shapes the mesh divides: exactly one all_to_all of (p-1)/p of the block."""
    mesh = _mesh((2, 4), "explicit")
    x = _put(np.zeros((16, 32, 64), np.float32), mesh)
    block = 16 * 32 * 64 * 4 // 8
    cur = x
    for kind, parts in [("x_y", 4), ("y_z", 2), ("z_y", 2), ("y_x", 4)]:
        fn = getattr(djd, NAMES[kind])
        c = distla.cost(lambda v, fn=fn: fn(v, transpose_axis_contiguous=True), cur)
        assert c.collective_counts["all-to-all"] == 1, kind
        assert c.total_collective_bytes == block * (parts - 1) // parts, kind
        cur = fn(cur, transpose_axis_contiguous=True)


def test_transposes_on_one_device_and_derivatives():
    jd = _jd()
    x = _rand((4, 6, 8), seed=10)
    for kind, name in NAMES.items():
        np.testing.assert_array_equal(
            np.asarray(getattr(djd, name)(x)), np.asarray(getattr(jd, name)(jnp.asarray(x)))
        )
    mesh = _mesh((2, 4), "explicit")
    with jax.enable_x64(True), jax.set_mesh(mesh):
        xs = _put(_rand((4, 8, 6), seed=10, dtype=np.float64), mesh)
        check_grads(djd.transposeXtoY, (xs,), order=1, modes=("fwd", "rev"))


# --- pfft3d's output layout -----------------------------------------------------------


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "not-contiguous"])
def test_output_specs_as_jaxdecomp(contiguous, contiguous_setting):
    jd = contiguous_setting
    _set_contiguous(jd, contiguous)
    specs = [P("z", "y"), P("z"), P(None, "y"), P(None, "z", "y"), P("z", "y", None)]
    for shape in MESHES:
        mesh = _mesh(shape)
        for spec in specs:
            ours = djd.get_fft_output_sharding(NamedSharding(mesh, spec))
            theirs = jd.get_fft_output_sharding(NamedSharding(mesh, spec))
            assert ours.spec == theirs.spec, (shape, spec)
        for fft_type in list(jax.lax.FftType):
            for pt in ("PENCILS", "SLAB_XY", "SLAB_YZ"):
                for spec in specs[:3]:
                    args = (fft_type, getattr(jd, pt), spec)
                    assert djd.get_output_specs(*args) == jd.get_output_specs(*args), args
                    assert djd.get_output_specs(fft_type, getattr(djd, pt), spec) == (
                        jd.get_output_specs(*args)
                    )
    # and pfft3d's own result is laid out as it says
    for shape in MESHES:
        mesh = _mesh(shape, "explicit")
        x = _put(np.zeros((8, 16, 8), np.complex64), mesh)
        k = djd.pfft3d(x)
        assert has_layout(k, mesh, djd.get_fft_output_sharding(x.sharding).spec), shape
    with pytest.raises(TypeError, match="pencil type"):
        djd.get_output_specs(jax.lax.FftType.FFT, "SLABS", P("z"))


def test_validate_spec_matches_mesh_as_jaxdecomp():
    jd = _jd()
    mesh = _mesh((2, 4))
    for spec in [P("z", "y"), P("y", "z"), P("z"), P(None, "y"), P("z", "y", "z")]:
        try:
            jd.validate_spec_matches_mesh(spec, mesh)
            theirs = None
        except ValueError as e:
            theirs = str(e)
        if theirs is None:
            djd.validate_spec_matches_mesh(spec, mesh)
        else:
            with pytest.raises(ValueError, match="does not match mesh axis names"):
                djd.validate_spec_matches_mesh(spec, mesh)


# --- prfft3d / pirfft3d -------------------------------------------------------------------


@pytest.mark.parametrize("z", [16, 14, 9], ids=["Z16", "Z14", "Z9"])
@pytest.mark.parametrize("mesh_shape", MESHES, ids=_ids)
def test_prfft3d_is_the_half_of_pfft3d(mesh_shape, z):
    """Values: pfft3d's first Z//2 + 1 frequencies (both orders); round trip; layout:
    jaxdecomp's rule for pfft3d where the mesh divides Z//2 + 1 (Z = 14), else Zt whole."""
    mesh = _mesh(mesh_shape, "explicit")
    x = _rand((8, 24, z), seed=11)
    xs = _put(x, mesh)
    zt = z // 2 + 1
    for contiguous in (True, False):
        k = djd.fft.prfft3d(xs, transpose_axis_contiguous=contiguous)
        full = djd.fft.pfft3d(xs, transpose_axis_contiguous=contiguous)
        half = np.asarray(full)[:, :zt] if contiguous else np.asarray(full)[..., :zt]
        assert fft_ratio(k, half.astype(np.complex128)) <= THRESHOLD
        ref = np.fft.rfftn(x.astype(np.float64))
        assert fft_ratio(k, ref.transpose(1, 2, 0) if contiguous else ref) <= THRESHOLD
        split = mesh_shape[1] if mesh_shape[1] > 1 else mesh_shape[0]
        if zt % split == 0:  # jaxdecomp's rule, which pfft3d follows where it fits
            if contiguous:
                assert has_layout(k, mesh, djd.get_fft_output_sharding(xs.sharding).spec)
        else:  # Zt whole, the devices along Y (pb <= pa) or X
            spec = (tuple(jax.typeof(k).sharding.spec) + (None,) * 3)[:3]
            assert spec[1 if contiguous else 2] is None, spec
        back = djd.fft.pirfft3d(k, s=x.shape, transpose_axis_contiguous=contiguous)
        assert fft_ratio(back, x.astype(np.float64)) <= THRESHOLD
        assert has_layout(back, mesh, P("z", "y"))


@pytest.mark.parametrize("mesh_shape", [(4, 2), (2, 4), (8, 1)], ids=_ids)
def test_prfft3d_moves_about_half_the_bytes(mesh_shape):
    """256^3-like shapes (power-of-two Z, so Z//2 + 1 is odd): against pfft3d's bytes."""
    mesh = _mesh(mesh_shape, "explicit")
    x = _put(np.zeros((64, 64, 64), np.float32), mesh)
    real = distla.cost(djd.fft.prfft3d, x)
    full = distla.cost(djd.fft.pfft3d, x.astype(np.complex64))
    ratio = real.total_collective_bytes / full.total_collective_bytes
    assert real.collective_counts["all-gather"] == 0
    assert ratio <= 0.57, ratio  # 33/64 of the bytes per exchange; (P-1)/P in the second
    inverse = distla.cost(lambda k: djd.fft.pirfft3d(k), djd.fft.prfft3d(x))
    assert inverse.total_collective_bytes == real.total_collective_bytes


def test_prfft3d_one_device_grad_and_errors():
    jd = _jd()
    x = _rand((6, 8, 10), seed=12)
    k = djd.fft.prfft3d(x)
    np.testing.assert_allclose(
        np.asarray(k), np.fft.rfftn(x).transpose(1, 2, 0), rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(np.asarray(djd.fft.pirfft3d(k)), x, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="Not implemented"):  # what jaxdecomp 0.3.1 does
        jd.fft.prfft3d(jnp.asarray(x))
    mesh = _mesh((2, 4), "explicit")
    xs = _put(x.astype(np.float64), mesh, P(None, "y"))
    with jax.enable_x64(True), jax.set_mesh(mesh):
        check_grads(djd.fft.prfft3d, (xs.astype(jnp.float64),), order=1, modes=("fwd", "rev"))
    with pytest.raises(TypeError):
        djd.fft.prfft3d(x.astype(np.complex64))
    with pytest.raises(ValueError, match="s must be"):
        djd.fft.pirfft3d(k, s=(6, 8, 12))
