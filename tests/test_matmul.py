"""distla.matmul against numpy: values, layouts, dtypes, meshes, jit, grad, errors, cost."""

import functools

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, has_layout, matmul_ratio, place, random_matrix
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla.matmul import model_bytes

SHAPES = [
    pytest.param((64, 48, 40), id="64x48x40"),
    pytest.param((100, 123, 77), id="100x123x77-uneven"),
]


def _operands(mesh, m, k, n, dtype=np.float32, seed=0, spec=P("x", "y")):
    rng = np.random.default_rng(seed)
    a = random_matrix(rng, (m, k), dtype)
    b = random_matrix(rng, (k, n), dtype)
    return a, b, place(a, mesh, spec), place(b, mesh, spec)


def _expected_spec(shape, mesh):
    return distla._core.mesh.fitting_spec(shape, mesh.abstract_mesh, P("x", "y"))


@pytest.mark.parametrize("shape", SHAPES)
def test_summa_every_mesh(mesh, shape):
    a, b, da, db = _operands(mesh, *shape)
    c = distla.matmul(da, db, algorithm="summa")
    assert c.shape == (shape[0], shape[2]) and c.dtype == np.float32
    assert matmul_ratio(c, a, b) <= THRESHOLD
    assert c.sharding.mesh == mesh
    assert has_layout(c, mesh, _expected_spec(c.shape, mesh))


def test_divisible_result_is_2d_block_layout(mesh24):
    _, _, da, db = _operands(mesh24, 64, 32, 48)
    c = distla.matmul(da, db)
    assert has_layout(c, mesh24, P("x", "y"))


def test_uneven_result_layout_spreads_over_the_mesh(mesh24):
    # 100 rows split over 4 ('y'), 77 columns over nothing: the largest even layout
    _, _, da, db = _operands(mesh24, 100, 30, 77)
    c = distla.matmul(da, db)
    assert has_layout(c, mesh24, P("y", None))


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("shape", SHAPES)
def test_cannon_square_mesh(kind, shape):
    mesh = build_mesh((2, 2), kind)
    a, b, da, db = _operands(mesh, *shape)
    c = distla.matmul(da, db, algorithm="cannon")
    assert matmul_ratio(c, a, b) <= THRESHOLD
    assert has_layout(c, mesh, _expected_spec(c.shape, mesh))


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_odd_sizes_1000x1023x777(kind):
    mesh = build_mesh((2, 4), kind)
    a, b, da, db = _operands(mesh, 1000, 1023, 777)
    c = distla.matmul(da, db)
    assert matmul_ratio(c, a, b) <= THRESHOLD


@pytest.mark.parametrize(
    "dtype",
    [
        pytest.param(np.float32, id="float32"),
        pytest.param(np.complex64, id="complex64"),
        pytest.param(np.float64, id="float64"),
        pytest.param(np.complex128, id="complex128"),
    ],
)
def test_dtypes(mesh24, dtype):
    with jax.enable_x64(np.dtype(dtype) in (np.float64, np.complex128)):
        a, b, da, db = _operands(mesh24, 72, 40, 56, dtype=dtype)
        c = distla.matmul(da, db)
        assert c.dtype == dtype
        assert matmul_ratio(c, a, b) <= THRESHOLD


def test_mixed_dtypes_promote(mesh24):
    rng = np.random.default_rng(1)
    a = random_matrix(rng, (16, 8), np.float32)
    b = random_matrix(rng, (8, 24), np.complex64)
    c = distla.matmul(place(a, mesh24), place(b, mesh24))
    assert c.dtype == np.complex64
    assert matmul_ratio(c, a, b) <= THRESHOLD


def test_preferred_element_type_and_out_sharding_as_jnp(mesh24):
    """jnp.matmul's two keywords: int8 operands with int32 sums (jnp's values exactly, no
    wrap-around), a narrower result rounded, and the result resharded as asked."""
    rng = np.random.default_rng(2)
    a = rng.integers(-100, 100, (16, 8)).astype(np.int8)
    b = rng.integers(-100, 100, (8, 24)).astype(np.int8)
    c = distla.matmul(place(a, mesh24), place(b, mesh24), preferred_element_type=jnp.int32)
    want = jnp.matmul(a, b, preferred_element_type=jnp.int32)
    assert c.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(c), np.asarray(want))
    f = random_matrix(rng, (16, 16), np.float32)
    h = distla.matmul(place(f, mesh24), place(f, mesh24), preferred_element_type=jnp.bfloat16)
    assert h.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(h, np.float32), f @ f, rtol=2e-2, atol=2e-2)
    # mixed operands that both widen to it: jnp takes them even under strict promotion
    k = rng.integers(-5, 5, (16, 16)).astype(np.int32)
    with jax.numpy_dtype_promotion("strict"):
        mixed = distla.matmul(
            place(f, mesh24), place(k, mesh24), preferred_element_type=jnp.float32
        )
        np.testing.assert_allclose(
            np.asarray(mixed),
            np.asarray(jnp.matmul(f, k, preferred_element_type=jnp.float32)),
            rtol=1e-5,
            atol=1e-5,
        )
    # jnp's algorithm presets, as objects and by name
    for preset in (jax.lax.DotAlgorithmPreset.F32_F32_F32, "F32_F32_F32"):
        g = distla.matmul(place(f, mesh24), place(f, mesh24), precision=preset)
        np.testing.assert_allclose(np.asarray(g), f @ f, rtol=1e-4, atol=1e-4)
    if mesh24.axis_types[0] == jax.sharding.AxisType.Explicit:
        rows = distla.matmul(place(f, mesh24), place(f, mesh24), out_sharding=P("x", None))
        assert rows.sharding.spec == P("x", None)
        with jax.set_mesh(mesh24):
            jitted = jax.jit(lambda x: distla.matmul(x, x, out_sharding=P("x", None)))
            assert jitted(place(f, mesh24)).sharding.spec == P("x", None)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(P("x", None), id="row-blocks"),
        pytest.param(P(None, "y"), id="column-blocks"),
        pytest.param(P(), id="replicated"),
        pytest.param(P("y", "x"), id="transposed-blocks"),
        pytest.param(P(("x", "y"), None), id="rows-over-both-axes"),
    ],
)
def test_any_input_layout(mesh24, spec):
    a, b, da, db = _operands(mesh24, 64, 64, 32, spec=spec)
    c = distla.matmul(da, db)
    assert matmul_ratio(c, a, b) <= THRESHOLD
    assert has_layout(c, mesh24, P("x", "y"))


def test_one_axis_mesh():
    mesh = jax.make_mesh((8,), ("d",), devices=jax.devices()[:8])
    rng = np.random.default_rng(2)
    a, b = random_matrix(rng, (64, 40), np.float32), random_matrix(rng, (40, 24), np.float32)
    spec = P("d", None)
    c = distla.matmul(
        jax.device_put(a, NamedSharding(mesh, spec)), jax.device_put(b, NamedSharding(mesh, spec))
    )
    assert matmul_ratio(c, a, b) <= THRESHOLD
    assert has_layout(c, mesh, P("d", None))


def test_one_device_falls_back_to_jnp():
    rng = np.random.default_rng(3)
    a, b = random_matrix(rng, (20, 10), np.float32), random_matrix(rng, (10, 5), np.float32)
    c = distla.matmul(jnp.asarray(a), b)
    np.testing.assert_allclose(np.asarray(c), a @ b, rtol=1e-5, atol=1e-5)
    assert len(c.devices()) == 1


def test_inside_jit(mesh24):
    a, b, da, db = _operands(mesh24, 64, 48, 40)

    @jax.jit
    def f(x, y):
        return distla.matmul(x * 2.0, y) + 1.0

    c = f(da, db)
    assert matmul_ratio(c - 1.0, 2.0 * a, b) <= THRESHOLD
    assert has_layout(c, mesh24, P("x", "y"))


def test_precision_names_accepted(mesh24):
    a, b, da, db = _operands(mesh24, 32, 32, 32)
    for precision in ("highest", jax.lax.Precision.HIGHEST, "float32"):
        assert matmul_ratio(distla.matmul(da, db, precision=precision), a, b) <= THRESHOLD


@pytest.mark.parametrize("algorithm", ["summa", "cannon"])
def test_grad_matches_jnp(algorithm):
    mesh = build_mesh((2, 2), "explicit")
    rng = np.random.default_rng(4)
    a, b = random_matrix(rng, (24, 20), np.float32), random_matrix(rng, (20, 12), np.float32)
    da, db = place(a, mesh), place(b, mesh)
    w = random_matrix(rng, (24, 12), np.float32)

    def loss(mm, x, y):
        return jnp.sum(jnp.sin(mm(x, y)) * w)

    with jax.set_mesh(mesh):
        got = jax.grad(
            functools.partial(loss, functools.partial(distla.matmul, algorithm=algorithm)), (0, 1)
        )(da, db)
    want = jax.grad(functools.partial(loss, jnp.matmul), (0, 1))(jnp.asarray(a), jnp.asarray(b))
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=2e-5, atol=2e-5)


def test_check_grads_jvp_and_vjp(x64):
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(5)
    a, b = random_matrix(rng, (16, 12), np.float64), random_matrix(rng, (12, 8), np.float64)
    jax.test_util.check_grads(
        distla.matmul, (place(a, mesh), place(b, mesh)), order=2, modes=("fwd", "rev")
    )


class TestErrors:
    def test_rank(self, mesh24):
        v = place(np.ones(16, np.float32), mesh24, P("x"))
        m = place(np.ones((16, 16), np.float32), mesh24)
        with pytest.raises(ValueError, match=r"2-D matrices.*\(16,\)"):
            distla.matmul(v, m)
        with pytest.raises(ValueError, match=r"2-D matrices.*\(2, 16, 16\)"):
            distla.matmul(m, jnp.ones((2, 16, 16)))

    def test_inner_dimensions(self, mesh24):
        a = place(np.ones((16, 8), np.float32), mesh24)
        b = place(np.ones((16, 8), np.float32), mesh24)
        with pytest.raises(ValueError, match=r"inner dimensions differ.*\(16, 8\).*\(16, 8\)"):
            distla.matmul(a, b)

    def test_cannon_needs_square_mesh(self, mesh24):
        a = place(np.ones((16, 16), np.float32), mesh24)
        with pytest.raises(ValueError, match=r"square mesh; got a 2x4 mesh"):
            distla.matmul(a, a, algorithm="cannon")

    def test_unknown_algorithm(self, mesh24):
        a = place(np.ones((16, 16), np.float32), mesh24)
        with pytest.raises(ValueError, match="algorithm must be one of"):
            distla.matmul(a, a, algorithm="strassen")

    def test_different_meshes(self):
        m1 = build_mesh((2, 4), "explicit")
        m2 = build_mesh((4, 2), "explicit")
        a = place(np.ones((16, 16), np.float32), m1)
        b = place(np.ones((16, 16), np.float32), m2)
        with pytest.raises(ValueError, match="different meshes"):
            distla.matmul(a, b)

    def test_same_shape_meshes_on_different_devices(self):
        devs = jax.devices()
        m1 = jax.make_mesh((2, 2), ("x", "y"), devices=devs[:4])
        m2 = jax.make_mesh((2, 2), ("x", "y"), devices=devs[4:8])
        a = place(np.ones((16, 16), np.float32), m1)
        b = place(np.ones((16, 16), np.float32), m2)
        with pytest.raises(ValueError, match="different meshes"):
            distla.matmul(a, b)

    def test_three_axis_mesh(self):
        mesh = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
        a = jax.device_put(np.ones((16, 16), np.float32), NamedSharding(mesh, P("a", "b")))
        with pytest.raises(ValueError, match=r"1- or 2-axis mesh; got a 2x2x2 mesh"):
            distla.matmul(a, a)

    def test_integer_dtype_stays_integer(self, mesh24):
        a = place(np.arange(256, dtype=np.int32).reshape(16, 16) % 5, mesh24)
        c = distla.matmul(a, a)
        assert c.dtype == np.int32  # as jnp.matmul
        np.testing.assert_array_equal(np.asarray(c), np.asarray(a) @ np.asarray(a))

    def test_unknown_precision(self, mesh24):
        a = place(np.ones((16, 16), np.float32), mesh24)
        with pytest.raises(ValueError, match="precision must be.*'bogus'"):
            distla.matmul(a, a, precision="bogus")


class TestCost:
    """No hidden gathers: bytes and memory per device from the compiled program."""

    @pytest.mark.parametrize(
        "shape", [(2, 4), (4, 2), (1, 8), (8, 1)], ids=lambda s: f"{s[0]}x{s[1]}"
    )
    def test_summa_moves_the_model_volume(self, shape):
        mesh = build_mesh(shape, "explicit")
        m = k = n = 512
        _, _, da, db = _operands(mesh, m, k, n)
        cost = distla.cost(distla.matmul, da, db, algorithm="summa")
        pr, pc = shape
        model = model_bytes((m, k, n), shape, np.float32, algorithm="summa")
        assert cost.total_collective_bytes == pytest.approx(model, rel=0.2)
        assert cost.total_collective_bytes == cost.collective_bytes["all-gather"]
        # no collective result is a whole operand, and no device holds one
        assert cost.largest() < da.nbytes
        base = (m * k + k * n + m * n) * 4 / (pr * pc)
        assert cost.peak_memory_bytes <= 2.5 * base
        assert cost.flops == pytest.approx(2 * m * k * n / (pr * pc))

    def test_cannon_moves_the_model_volume(self):
        mesh = build_mesh((2, 2), "auto")
        m = k = n = 512
        _, _, da, db = _operands(mesh, m, k, n)
        cost = distla.cost(distla.matmul, da, db, algorithm="cannon")
        model = model_bytes((m, k, n), (2, 2), np.float32, algorithm="cannon")
        assert cost.collective_bytes["collective-permute"] == pytest.approx(model, rel=0.2)
        assert cost.total_collective_bytes == cost.collective_bytes["collective-permute"]
        assert cost.peak_memory_bytes <= 2.5 * (m * k + k * n + m * n) * 4 / 4

    def test_more_panels_hold_less(self):
        mesh = build_mesh((2, 4), "explicit")
        _, _, da, db = _operands(mesh, 512, 512, 512)
        peaks = [
            distla.cost(distla.matmul, da, db, panels=p).peak_memory_bytes for p in (1, 2, 4, 8)
        ]
        assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


def test_auto_takes_one_step_while_the_panels_are_small():
    """``algorithm="auto"``: one gather per operand (no loop) while A's block row and B's
    block column fit ONE_STEP_BYTES per device; above it, SUMMA's steps in a loop. The
    bytes are the model's either way."""
    mesh = build_mesh((2, 4), "explicit")
    _, _, da, db = _operands(mesh, 256, 256, 256)
    small = distla.cost(distla.matmul, da, db)
    assert {k: v for k, v in small.collective_counts.items() if v} == {"all-gather": 2}
    assert small.total_collective_bytes == model_bytes((256, 256, 256), (2, 4), np.float32)

    def lowered(n):
        spec = NamedSharding(mesh, P("x", "y"))
        x = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=spec)
        return jax.jit(distla.matmul).lower(x, x).as_text()

    assert "stablehlo.while" not in lowered(1024)  # 3 MiB of panels: one step
    assert "stablehlo.while" not in lowered(1792)  # 9.2 MiB: still one step
    assert "stablehlo.while" in lowered(2048)  # 12 MiB: max(pr, pc) steps


def test_eager_calls_on_a_mesh_are_one_program(mesh24):
    """An eager call on a mesh is one compiled program, traced once per shapes and
    options, with the same result and layout as the call under ``jax.jit``."""
    from distla.matmul import _compiled_product

    _, _, da, db = _operands(mesh24, 96, 64, 80)
    first = distla.matmul(da, db, panels=3)
    traced = _compiled_product._cache_size()
    again = distla.matmul(da, db, panels=3)
    assert _compiled_product._cache_size() == traced
    distla.matmul(da, db, panels=2)  # other options: another program
    assert _compiled_product._cache_size() == traced + 1
    jitted = jax.jit(functools.partial(distla.matmul, panels=3))(da, db)
    assert again.sharding == jitted.sharding == first.sharding
    np.testing.assert_array_equal(np.asarray(again), np.asarray(jitted))
