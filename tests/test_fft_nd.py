"""distla.fft for any rank and any axes: values against numpy, batch axes, vmap, cost, layouts."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, has_layout, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla

NUMPY = {"fftn": np.fft.fftn, "ifftn": np.fft.ifftn, "rfftn": np.fft.rfftn, "irfftn": np.fft.irfftn}


def fft_ratio(y, ref) -> float:
    """||y - y_ref||_2 / (||y_ref||_2 log2(N) eps), DESIGN's FFT ratio (N points)."""
    y, ref = np.asarray(y), np.asarray(ref)
    eps = np.finfo(y.dtype).eps
    err = np.linalg.norm(y.astype(ref.dtype) - ref)
    return float(err / (np.linalg.norm(ref) * np.log2(max(ref.size, 2)) * eps))


def _data(rng, shape, complex_):
    x = rng.standard_normal(shape)
    if complex_:
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(np.complex64 if complex_ else np.float32)


def _names(entry):
    return (entry,) if isinstance(entry, str) else tuple(entry or ())


def _check_all_four(x_real, x_cplx, mesh, spec, **kw):
    """fftn, ifftn, rfftn, irfftn of ``x`` laid out ``spec`` against numpy in float64."""
    for name, fn in NUMPY.items():
        x = x_real if name == "rfftn" else x_cplx
        y = getattr(distla.fft, name)(place(x, mesh, spec), **kw)
        ref_kw = dict(kw)
        if "s" in kw and "axes" not in kw:  # numpy 2 asks for them explicitly
            ref_kw["axes"] = tuple(range(x.ndim - len(kw["s"]), x.ndim))
        ref = fn(x.astype(np.float64 if name == "rfftn" else np.complex128), **ref_kw)
        assert y.shape == ref.shape, (name, y.shape, ref.shape)
        assert y.dtype == (np.float32 if name == "irfftn" else np.complex64), (name, y.dtype)
        assert fft_ratio(y, ref) <= THRESHOLD, name


# --- the core case on every mesh: a batch of volumes, the batch sharded --------------------


def test_batch_of_volumes_every_mesh(mesh):
    """(B, X, Y, Z): B on the first mesh axis, X on the second; sizes the mesh does not divide."""
    rng = np.random.default_rng(0)
    a, b = mesh.axis_names
    shape = (8, 10, 12, 9)
    x = _data(rng, shape, True)
    xs = place(x, mesh, P(a, b, None, None))
    y = distla.fft.fftn(xs, axes=(1, 2, 3))
    assert fft_ratio(y, np.fft.fftn(x.astype(np.complex128), axes=(1, 2, 3))) <= THRESHOLD
    # the batch keeps its mesh axes (a mesh axis the input left unused may join them)
    before = [n for n in _names(xs.sharding.spec[0]) if mesh.shape[n] > 1]
    after = [n for n in _names(y.sharding.spec[0]) if mesh.shape[n] > 1]
    assert after[: len(before)] == before
    r = _data(rng, shape, False)
    back = distla.fft.irfftn(distla.fft.rfftn(place(r, mesh, P(a, b)), axes=(1, 2, 3)), s=shape[1:])
    assert back.shape == shape
    assert fft_ratio(back, r.astype(np.float64)) <= THRESHOLD


# --- every argument, ranks 1..5, against numpy -----------------------------------------------

CASES = [
    # (shape, spec on a mesh ('x', 'y'), kwargs, mesh shape, mesh kind)
    pytest.param((40,), P("x"), {}, (4, 2), "explicit", id="rank1-sharded"),
    pytest.param((37,), P(), {"s": (48,)}, (2, 4), "auto", id="rank1-s-pads"),
    pytest.param((16, 24), P("x", "y"), {}, (4, 2), "explicit", id="rank2-both-sharded"),
    pytest.param((21, 30), P(None, "y"), {"axes": (0,)}, (2, 4), "auto", id="rank2-one-axis"),
    pytest.param(
        (12, 16, 10), P("y", None, "x"), {"axes": (2, 0)}, (2, 4), "explicit", id="rank3-axes-20"
    ),
    pytest.param(
        (12, 16, 10), P("x", "y"), {"axes": (-1, -2)}, (4, 2), "auto", id="rank3-negative-axes"
    ),
    pytest.param((9, 16, 10), P(None, "x", "y"), {"s": (7, 12)}, (4, 2), "explicit", id="rank3-s"),
    pytest.param(
        (8, 6, 10, 12),
        P("x", None, "y"),
        {"axes": (1, 2, 3), "norm": "ortho"},
        (4, 2),
        "explicit",
        id="rank4-ortho",
    ),
    pytest.param(
        (4, 8, 6, 10),
        P(None, "y", "x"),
        {"axes": (0, 3), "norm": "forward"},
        (2, 4),
        "auto",
        id="rank4-forward",
    ),
    pytest.param(
        (4, 6, 8, 10, 2),
        P(None, "x", None, "y"),
        {"axes": (0, 3, 1), "s": (5, 7, 6)},
        (4, 2),
        "explicit",
        id="rank5-s-axes",
    ),
    pytest.param(
        (2, 3, 8, 4, 6), P(None, None, ("x", "y")), {"axes": (2, 4)}, (8,), "explicit", id="r5-1d"
    ),
]


@pytest.mark.parametrize("shape, spec, kw, mesh_shape, kind", CASES)
def test_against_numpy(shape, spec, kw, mesh_shape, kind):
    mesh = build_mesh(mesh_shape, kind, names=("x", "y")[: len(mesh_shape)])
    if len(mesh_shape) == 1:
        spec = P(*[("x" if e else None) for e in spec])
    rng = np.random.default_rng(len(shape))
    _check_all_four(_data(rng, shape, False), _data(rng, shape, True), mesh, spec, **kw)


def test_one_and_two_axis_wrappers():
    mesh = build_mesh((4, 2), "explicit")
    rng = np.random.default_rng(5)
    xc, xr = _data(rng, (8, 12, 10), True), _data(rng, (8, 12, 10), False)
    c, r = place(xc, mesh, P("x", "y")), place(xr, mesh, P("x", "y"))
    c128, r64 = xc.astype(np.complex128), xr.astype(np.float64)
    pairs = [
        (distla.fft.fft(c, n=9, axis=1), np.fft.fft(c128, n=9, axis=1)),
        (distla.fft.ifft(c, axis=0, norm="ortho"), np.fft.ifft(c128, axis=0, norm="ortho")),
        (distla.fft.fft2(c), np.fft.fft2(c128)),
        (distla.fft.ifft2(c, axes=(0, 2)), np.fft.ifft2(c128, axes=(0, 2))),
        (distla.fft.rfft2(r, s=(10, 6)), np.fft.rfft2(r64, s=(10, 6))),
        (distla.fft.irfft2(c, axes=(1, 0)), np.fft.irfft2(c128, axes=(1, 0))),
    ]
    for y, ref in pairs:
        assert y.shape == ref.shape
        assert fft_ratio(y, ref) <= THRESHOLD


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_a_sharded_vector_comes_back_in_its_layout(kind):
    """A 1-D transform gathers the vector (no axis to swap with) and returns it laid out
    as it came, as jnp does, so that ``fft(x) * x`` works on an Explicit mesh."""
    mesh = build_mesh((2, 4), kind)
    x = _data(np.random.default_rng(9), (16,), True)
    for spec in (P("x"), P(("x", "y"))):
        xs = place(x, mesh, spec)
        for fn, ref in ((distla.fft.fft, np.fft.fft), (distla.fft.ifft, np.fft.ifft)):
            y = fn(xs)
            assert y.sharding.spec == spec, (fn, spec, y.sharding)
            assert fft_ratio(y * xs, ref(x.astype(np.complex128)) * x) <= THRESHOLD


# --- batch axes cost nothing; a batch of pencils moves B pencil FFTs' bytes ------------------


def test_batch_moves_exactly_the_bytes_of_b_pencil_ffts():
    """(B, X, Y, Z): B over 'x' (4), X over 'y' (2): one all_to_all over 'y' only."""
    mesh = build_mesh((4, 2), "explicit")
    B, n = 8, 16
    x = place(np.ones((B, n, n, n), np.complex64), mesh, P("x", "y", None, None))
    c = distla.cost(lambda v: distla.fft.fftn(v, axes=(1, 2, 3)), x)
    assert c.collective_counts["all-to-all"] == 1
    assert not any(v for k, v in c.collective_counts.items() if k != "all-to-all")
    assert {op.group_size for op in c.collectives} == {2}  # never over the batch's 'x'
    per_field = distla.fft.model_bytes((n, n, n), (2,))  # one slab FFT over 'y'
    assert c.collective_bytes["all-to-all"] == B // 4 * per_field
    assert c.peak_memory_bytes <= 6 * x.nbytes / 8  # O(N/p): a few local blocks


@pytest.mark.parametrize(
    "spec, axes",
    [
        pytest.param(P(("x", "y")), (1, 2), id="batch-over-both"),
        pytest.param(P("x", None, "y"), (1,), id="one-axis-batch-sharded"),
        pytest.param(P(None, "y", None, "x"), (0, 2), id="two-batch-axes-sharded"),
    ],
)
def test_batch_axes_never_communicate(spec, axes):
    mesh = build_mesh((4, 2), "explicit")
    shape = (8, 4, 6, 4)[: max(len(spec), 3)]
    x = place(np.ones(shape, np.complex64), mesh, spec)
    c = distla.cost(lambda v: distla.fft.fftn(v, axes=axes), x)
    assert c.total_collective_bytes == 0, c


def test_vmap_over_a_sharded_batch_has_no_collective_along_it():
    mesh = build_mesh((4, 2), "explicit")
    rng = np.random.default_rng(7)
    x = _data(rng, (8, 8, 12, 6), True)
    xs = place(x, mesh, P("x", "y", None, None))
    f = jax.vmap(distla.fft.fftn)
    c = distla.cost(f, xs)
    assert {op.group_size for op in c.collectives} <= {2}  # only the pencils' 'y'
    assert c.collective_counts["all-gather"] == 0
    y = f(xs)
    assert fft_ratio(y, np.fft.fftn(x.astype(np.complex128), axes=(1, 2, 3))) <= THRESHOLD
    assert y.sharding.spec[0] == "x"
    g = jax.vmap(distla.fft.irfftn, in_axes=1, out_axes=1)(xs)  # a vmapped axis that is not 0
    ref = np.fft.irfftn(x.astype(np.complex128), axes=(0, 2, 3))
    assert fft_ratio(g, ref) <= THRESHOLD


@pytest.mark.parametrize("name", ["rfft", "irfft", "hfft", "ihfft", "rfftn", "irfftn"])
def test_vmap_of_a_member_split_along_its_transformed_axis(name):
    # vmap over the rows of a P('x', 'y') matrix on an Explicit mesh: each member is split
    # over 'y' along the transformed axis, whose output length (7 or 22) 'y' does not
    # divide; the direct batched call works, and so does the vmapped one (jnp's refuses)
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(12)
    real = name in ("rfft", "ihfft", "rfftn")
    x = _data(rng, (8, 12), not real)
    xs = place(x, mesh, P("x", "y"))
    ref = (
        getattr(np.fft, name)(x.astype(np.float64 if real else np.complex128), axis=-1)
        if not name.endswith("n")
        else getattr(np.fft, name)(x.astype(np.float64 if real else np.complex128), axes=(-1,))
    )
    with jax.set_mesh(mesh):
        for wrap in (jax.vmap, lambda f: jax.jit(jax.vmap(f))):
            y = wrap(getattr(distla.fft, name))(xs)
            assert y.shape == ref.shape, (name, y.shape)
            assert fft_ratio(y, ref) <= THRESHOLD, name
            assert y.sharding.spec[0] is not None, y.sharding  # the batch stays split


def test_grad_and_jvp_of_the_general_plan():
    mesh = build_mesh((4, 2), "explicit")
    rng = np.random.default_rng(8)
    x = place(_data(rng, (8, 6, 10), False), mesh, P("x", "y"))

    def loss(f):
        return lambda v: jnp.sum(jnp.abs(f(v, axes=(1, 2))) ** 2)

    with jax.set_mesh(mesh):
        got = jax.grad(loss(distla.fft.rfftn))(x)
        want = jax.grad(loss(jnp.fft.rfftn))(jnp.asarray(np.asarray(x)))
        t = jax.jvp(lambda v: distla.fft.fftn(v, axes=(0, 2)), (x,), (x,))[1]
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-3)
    np.testing.assert_allclose(
        np.asarray(t), np.fft.fftn(np.asarray(x), axes=(0, 2)), rtol=1e-4, atol=1e-4
    )


# --- pencils over (cols, rows) stay where they are ------------------------


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_swapped_pencils_are_not_relaid_out(kind):
    mesh = distla.make_mesh((4, 2))
    if kind == "auto":
        mesh = build_mesh((4, 2), "auto", names=("rows", "cols"))
    rng = np.random.default_rng(9)
    x = _data(rng, (16, 16, 8), True)
    xs = jax.device_put(x, NamedSharding(mesh, P("cols", "rows", None)))
    y = distla.fft.fftn(xs)
    assert has_layout(y, mesh, P(None, "cols", "rows"))
    assert fft_ratio(y, np.fft.fftn(x.astype(np.complex128))) <= THRESHOLD
    back = distla.fft.ifftn(y)
    assert has_layout(back, mesh, P("cols", "rows", None))
    if kind == "auto":  # inside a jit an Auto mesh's operand has no layout to read
        return
    c = distla.cost(distla.fft.fftn, xs)
    assert c.collective_counts["all-to-all"] == 2  # no re-layout before the transform
    assert c.total_collective_bytes == c.collective_bytes["all-to-all"]


# --- wavenumbers, and the Poisson solve of the tutorial --------------------------------------


@pytest.mark.parametrize("real", [False, True], ids=["fftfreq3d", "rfftfreq3d"])
def test_freqs_as_jaxdecomp_sharded_like_the_spectrum(real):
    jd = pytest.importorskip("jaxdecomp")
    mesh = build_mesh((4, 2), "explicit")
    k = distla.fft.fftn(place(np.ones((16, 8, 12), np.complex64), mesh, P("x", "y")))
    ours = (distla.fft.rfftfreq3d if real else distla.fft.fftfreq3d)(k, 0.5)
    theirs = (jd.fft.rfftfreq3d if real else jd.fft.fftfreq3d)(jnp.zeros(k.shape, k.dtype), 0.5)
    for o, t in zip(ours, theirs, strict=True):
        assert o.shape == t.shape and o.dtype == t.dtype
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
    kz, ky, kx = ours
    # sharded as k's axis 1 (rfftfreq3d: 8//2 + 1 = 5 values, which 'x' does not divide)
    assert has_layout(kx, mesh, P(None, None if real else "x", None))
    assert has_layout(ky, mesh, P())  # k's axis 0 is whole
    assert has_layout(kz, mesh, P(None, None, "y"))


def test_poisson_solve_needs_no_gather(partitioner):
    # under both partitioners: fftfreq3d's vectors are constants in the program, since
    # jax 0.10.2's GSPMD splits the iota arithmetic of the replicated [16, 1, 1] one
    # along 'x' and all-gathers it
    mesh = build_mesh((4, 2), "explicit")
    n = 16
    rng = np.random.default_rng(10)
    delta = rng.standard_normal((n, n, n)).astype(np.float32)

    def solve(d):
        dk = distla.fft.fftn(d)
        kz, ky, kx = distla.fft.fftfreq3d(dk)
        k2 = kx**2 + ky**2 + kz**2
        phik = jnp.where(k2 > 0, -dk / jnp.where(k2 > 0, k2, 1), 0)
        return distla.fft.ifftn(phik).real

    ds = place(delta, mesh, P("x", "y"))
    phi = solve(ds)
    f = 2 * np.pi * np.fft.fftfreq(n)
    k2 = f[:, None, None] ** 2 + f[None, :, None] ** 2 + f[None, None, :] ** 2
    ref_k = -np.fft.fftn(delta.astype(np.float64)) / np.where(k2 > 0, k2, 1)
    ref_k[0, 0, 0] = 0
    assert fft_ratio(phi, np.fft.ifftn(ref_k).real) <= THRESHOLD
    assert has_layout(phi, mesh, P("x", "y", None))
    c = distla.cost(jax.jit(solve), ds)
    assert c.collective_counts["all-gather"] == 0
    assert c.collective_counts["all-to-all"] == 4  # two forward, two inverse


# --- a round trip ends where it began ------------------------------------------------------

ROUND_TRIPS = [
    # (shape, spec, axes, real, the forward's layout): where the plan's own layout does not
    # come back to spec, the forward returns spec, as jnp keeps it; where it does, the
    # forward leaves its result there (the fewest exchanges)
    pytest.param((16, 16), P("x", "y"), None, False, P("x", "y"), id="2d-blocks"),
    pytest.param((16, 16, 8), P("x", "y"), (0, 1), False, P("x", "y"), id="3d-axes-01"),
    pytest.param((16, 16, 8), P("x", "y"), (0,), False, P("x", "y"), id="3d-one-sharded-axis"),
    pytest.param((8, 16), P(None, ("y", "x")), None, False, P(("y", "x")), id="mesh-axes-reversed"),
    pytest.param((4, 16, 16), P("x", "y"), (1, 2), False, P("x", None, "y"), id="batch-of-2d"),
    pytest.param((8, 16, 14), P("x", "y"), (1, 2), True, P("x", "y"), id="rfft-batch-of-2d"),
    pytest.param((16, 16, 8), P("x", "y"), (0, 2), True, P("x", "y"), id="rfft-axes-02"),
    pytest.param((16, 16), P(("x", "y")), None, False, P(None, ("x", "y")), id="2d-rows"),
]


@pytest.mark.parametrize("shape, spec, axes, real, y_spec", ROUND_TRIPS)
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_round_trip_ends_in_the_input_layout(shape, spec, axes, real, y_spec, kind):
    """``ifftn(fftn(x))`` (and ``irfftn(rfftn(x))``) is laid out as ``x``, so that
    ``z - x`` works on an Explicit mesh; values against numpy."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(len(shape))
    x = _data(rng, shape, not real)
    xs = place(x, mesh, spec)
    if real:
        y = distla.fft.rfftn(xs, axes=axes)
        z = distla.fft.irfftn(y, s=[shape[a] for a in axes], axes=axes)
        ref = np.fft.rfftn(x.astype(np.float64), axes=axes)
    else:
        y = distla.fft.fftn(xs, axes=axes)
        z = distla.fft.ifftn(y, axes=axes)
        ref = np.fft.fftn(x.astype(np.complex128), axes=axes)
    assert fft_ratio(y, ref) <= THRESHOLD
    assert has_layout(y, mesh, y_spec), y.sharding.spec
    assert has_layout(z, mesh, spec), (z.sharding.spec, spec)
    assert fft_ratio(z, x.astype(np.complex128)) <= THRESHOLD
    if kind == "explicit":
        assert float(jnp.max(jnp.abs(z - xs))) < 1e-4  # combines with x as it came


def test_round_trip_costs():
    """The plan's layout comes back in one exchange; a 2-D block layout costs one more
    reshard (all_to_all, no gather)."""
    mesh = build_mesh((2, 4), "explicit")
    ones = np.ones((16, 16, 16), np.complex64)

    def counts(spec, axes):
        c = distla.cost(lambda v: distla.fft.fftn(v, axes=axes), place(ones, mesh, spec))
        return {k: v for k, v in c.collective_counts.items() if v}

    assert counts(P("x", "y"), (1, 2)) == {"all-to-all": 1}
    assert counts(P("x", "y"), (0,)) == {"all-to-all": 2}  # out and back
    assert set(counts(P("x", "y"), (0, 1))) == {"all-to-all"}


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_unused_mesh_axes_share_the_work_and_keep_it(kind):
    """An input that leaves mesh axes unused (replicated, or split over one axis of two)
    is still transformed by every device, and its result stays in the largest even layout
    (DESIGN): a batch-only transform moves nothing, and nothing is gathered back."""
    mesh = build_mesh((2, 4), kind)
    x = _data(np.random.default_rng(3), (16, 8, 8), True)
    # the unused axes join the batch axis, after the input's own (the larger first)
    spread = {P(None, None, "x"): P(None, None, ("x", "y")), P(): P(None, None, ("y", "x"))}
    for spec, y_spec in spread.items():
        xs = place(x, mesh, spec)
        y = distla.fft.fftn(xs, axes=(0, 1))
        assert fft_ratio(y, np.fft.fftn(x.astype(np.complex128), axes=(0, 1))) <= THRESHOLD
        assert has_layout(y, mesh, y_spec), (spec, y.sharding.spec)
        if kind == "explicit":
            c = distla.cost(lambda v: distla.fft.fftn(v, axes=(0, 1)), xs)
            assert c.total_collective_bytes == 0, c.collective_counts


@pytest.mark.parametrize(
    "shape, axes",
    [
        pytest.param((16, 16, 16), (0, 1), id="planes-of-pencils"),
        pytest.param((8, 16, 16, 16), (0, 1, 2), id="rank4-leading"),
        pytest.param((8, 16, 16, 16), (0, 1, 3), id="rank4-skip"),
        pytest.param((32, 32), (0, 1), id="2d-blocks"),
        pytest.param((4, 16, 16), (1, 2), id="batch-of-2d"),
    ],
)
def test_under_jit_on_auto_no_gather(shape, axes):
    """Inside a jit on an Auto mesh the operand's layout is not visible: distla assumes
    distla.shard's (pencils, 2D blocks) and no re-layout gathers the operand."""
    mesh = build_mesh((2, 4), "auto")
    x = distla.shard(np.ones(shape, np.complex64), mesh)
    c = distla.cost(lambda v: distla.fft.ifftn(distla.fft.fftn(v, axes=axes), axes=axes), x)
    assert c.collective_counts["all-gather"] == 0, c.collective_counts
    assert c.collective_counts["all-to-all"] >= 1  # distla's exchanges, not a local jnp call


@pytest.mark.parametrize(
    "shape, spec, s, axes, real",
    [
        # the real axis is swapped away, halved, and swapped back: padded to its new length
        pytest.param((8, 12, 16), P("x", "y", None), (19, 5), (-1, 0), True, id="rfft-halved"),
        pytest.param((6, 10, 9), P("x", None, None), (12, 3), (-1, 0), True, id="rfft-halved-3"),
        pytest.param((16, 24), P("x", "y"), (5, 7), (1, 0), True, id="rfft2-reversed"),
        # an axis cropped to length 1 is not the one that takes the mesh axes
        pytest.param(
            (4, 8, 6, 8), P(None, None, "x", "y"), (9, 1, 11), (2, 0, 1), False, id="length-1-axis"
        ),
    ],
)
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_s_around_the_swaps(shape, spec, s, axes, real, kind):
    """Lengths that ``s`` sets, and the real axis's halving, as the swaps pad and crop them
    (these compiled to an all_to_all that XLA's verifier rejected)."""
    mesh = build_mesh((2, 4), kind)
    x = _data(np.random.default_rng(11), shape, not real)
    fn, ref = (distla.fft.rfftn, np.fft.rfftn) if real else (distla.fft.fftn, np.fft.fftn)
    y = fn(place(x, mesh, spec), s=s, axes=axes)
    wide = x.astype(np.float64 if real else np.complex128)
    assert fft_ratio(y, ref(wide, s=s, axes=axes)) <= THRESHOLD


@pytest.mark.parametrize(
    "mesh_shape, shape, spec, axes, real",
    [
        # a chain of plans that ends (the plan leaves its own result where it is, or the
        # inverse does not bring it back): the result is returned in the input's layout
        pytest.param((4, 2), (4, 8, 6, 8), P("x", "y"), (0, 2, 3), False, id="4x2-rank4"),
        pytest.param((2, 4), (3, 8, 5, 4), P(None, "x", None, "y"), (1, 3), False, id="2x4-13"),
        pytest.param(
            (2, 4), (4, 8, 6, 8), P("y", None, None, "x"), (0, 1, 2, 3), False, id="2x4-rank4-all"
        ),
        pytest.param((2, 2), (12, 10), P(("x", "y")), (1, 0), False, id="2x2-rows-reversed"),
        pytest.param((8,), (8, 16, 8), P("x"), (2, 0, 1), True, id="8-rfft"),
        pytest.param((8,), (4, 8, 6, 8), P(None, "x"), (1, 2, 3), False, id="8-batch-sharded"),
        # size-1 mesh axes keep the caller's spelling (Explicit compares it)
        pytest.param((1, 8), (8, 16, 8), P(("x", "y")), (2,), False, id="1x8-spelling"),
        pytest.param((8, 1), (8, 16, 8), P(None, None, ("x", "y")), (0,), False, id="8x1-spelling"),
    ],
)
def test_round_trip_on_every_mesh(mesh_shape, shape, spec, axes, real):
    names = ("x", "y")[: len(mesh_shape)]
    mesh = build_mesh(mesh_shape, "explicit", names=names)
    x = _data(np.random.default_rng(12), shape, not real)
    xs = place(x, mesh, spec)
    if real:
        z = distla.fft.irfftn(
            distla.fft.rfftn(xs, axes=axes), s=[shape[a] for a in axes], axes=axes
        )
    else:
        z = distla.fft.ifftn(distla.fft.fftn(xs, axes=axes), axes=axes)
    assert z.sharding.spec == xs.sharding.spec, (z.sharding.spec, xs.sharding.spec)
    assert float(jnp.max(jnp.abs(z - xs))) < 1e-4
