"""A 1-device mesh takes jnp's path: no shard_map, no padding, jnp's values.

Every row of the public-function table (``test_no_empty_operands.CASES``) is
traced on a one-device mesh (2-axis Explicit, 1-axis Auto) and must hold no
``shard_map`` and no ``pad`` at any depth (polar: jax's own QDWH pads, so only
its shard_maps are counted); a few are run and compared with jnp.
"""

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import PartitionSpec as P
from test_no_empty_operands import CASES, _inputs

import distla
from distla._core import eager


def primitives(closed) -> set[str]:
    """Every primitive in ``closed``, at any depth."""
    found = set()

    def walk(jaxpr):
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive.name)
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(closed)
    return found


@pytest.fixture(
    scope="module",
    params=[((1, 1), "explicit"), ((1,), "auto")],
    ids=["1x1-explicit", "1-auto"],
)
def one(request):
    shape, kind = request.param
    mesh = build_mesh(shape, kind)
    return mesh, _inputs(mesh, 8)


@pytest.mark.parametrize("name", list(CASES))
def test_no_shard_map_no_padding(name, one):
    mesh, x = one
    with jax.set_mesh(mesh):
        prims = primitives(jax.make_jaxpr(CASES[name][0])(x))
    assert "shard_map" not in prims, (name, sorted(prims))
    assert "pad" not in prims or name in JNP_PADS, (name, sorted(prims))


JNP_PADS = {"polar"}  # jax.scipy.linalg.polar's QDWH pads on its own


def test_checker_sees_a_shard_map():
    mesh = build_mesh((2, 4), "explicit")
    x = _inputs(mesh, 8)
    with jax.set_mesh(mesh):
        assert "shard_map" in primitives(jax.make_jaxpr(CASES["solve"][0])(x))


def test_fft_layouts_are_jnps_on_a_one_device_explicit_mesh():
    """A transform's result on a 1x1 Explicit mesh carries jnp's layout, so that shard_map
    over that mesh takes it back in the caller's specs (the particle-mesh example runs
    the same code there); distla's layout without the size-1 axes was refused."""
    import distla.scipy.fft

    mesh = build_mesh((1, 1), "explicit")
    x = jax.device_put(np.ones((4, 4, 4), np.complex64), jax.NamedSharding(mesh, P("x", "y")))
    pairs = [
        (distla.fft.fftn(x), jnp.fft.fftn(x)),
        (distla.fft.pfft3d(x), jnp.fft.fftn(x).transpose(1, 2, 0)),
        (distla.fft.pifft3d(x), jnp.fft.ifftn(x.transpose(2, 0, 1))),
    ]
    try:
        pairs.append((distla.scipy.fft.dctn(x.real), jax.scipy.fft.dctn(x.real)))
    except Exception as err:  # jax 0.11 refuses it (jnp.roll along a split axis)
        assert type(err).__name__ == "ShardingTypeError", err
        ours = distla.scipy.fft.dctn(x.real)
        np.testing.assert_allclose(ours, jax.scipy.fft.dctn(np.asarray(x.real)), atol=1e-5)
        assert jax.typeof(ours).sharding.spec == P("x", "y", None)  # x's layout, as 0.10 gave
    for ours, theirs in pairs:
        assert jax.typeof(ours).sharding.spec == jax.typeof(theirs).sharding.spec
    with jax.set_mesh(mesh):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))(
            distla.fft.pifft3d(distla.fft.pfft3d(x))
        )


def test_values_are_jnps(one):
    mesh, x = one
    a, b = (np.asarray(x[k]) for k in ("a", "b"))
    vol = np.asarray(x["cvol"])
    with jax.set_mesh(mesh):
        pairs = [
            (distla.matmul(x["a"], x["b"]), jnp.matmul(a, b)),
            (distla.linalg.solve(x["a"], x["b"]), jnp.linalg.solve(a, b)),
            (distla.linalg.cholesky(x["spd"]), jnp.linalg.cholesky(np.asarray(x["spd"]))),
            (distla.fft.fftn(x["cvol"]), jnp.fft.fftn(vol)),
        ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-5)


# --- eager calls: one compiled program each ------------------------------------------------

F = distla.fft
L = distla.linalg

# name -> the public call, its operands and options, built from ``_inputs`` (outside the
# counted call: lu_solve's factors, cho_solve's, the inverse transforms' spectra).
ONE_CALL = {
    "matmul": lambda x: (distla.matmul, (x["a"], x["b"]), {}),
    "linalg.matmul": lambda x: (L.matmul, (x["a"], x["b"]), {}),
    "lu_factor": lambda x: (L.lu_factor, (x["a"],), {}),
    "lu_solve": lambda x: (L.lu_solve, (L.lu_factor(x["a"]), x["b"]), {}),
    "lu": lambda x: (L.lu, (x["a"],), {}),
    "solve": lambda x: (L.solve, (x["a"], x["b"]), {}),
    "solve_pos": lambda x: (L.solve, (x["spd"], x["b"]), {"assume_a": "pos"}),
    "batched_solve": lambda x: (L.solve, (x["stack"], x["stack_b"]), {}),
    "det": lambda x: (L.det, (x["a"],), {}),
    "slogdet": lambda x: (L.slogdet, (x["a"],), {}),
    "inv": lambda x: (L.inv, (x["a"],), {}),
    "cholesky": lambda x: (L.cholesky, (x["spd"],), {}),
    "cho_factor": lambda x: (L.cho_factor, (x["spd"],), {"lower": True}),
    "cho_solve": lambda x: (L.cho_solve, (L.cho_factor(x["spd"]), x["b"]), {}),
    "solve_triangular": lambda x: (L.solve_triangular, (x["low"], x["b"]), {"lower": True}),
    "qr": lambda x: (L.qr, (x["tall"],), {"mode": "reduced"}),
    "eigh": lambda x: (L.eigh, (x["sym"],), {}),
    "eigh_pencil": lambda x: (L.eigh, (x["sym"], x["spd"]), {"type": 1}),
    "eigvalsh": lambda x: (L.eigvalsh, (x["sym"],), {}),
    "svd": lambda x: (L.svd, (x["a"],), {"full_matrices": False}),
    "svdvals": lambda x: (L.svdvals, (x["a"],), {}),
    "polar": lambda x: (L.polar, (x["a"],), {}),
    "lstsq": lambda x: (L.lstsq, (x["tall"], x["tall_b"]), {}),
    "pinv": lambda x: (L.pinv, (x["a"],), {}),
    "matrix_rank": lambda x: (L.matrix_rank, (x["a"],), {}),
    "cond": lambda x: (L.cond, (x["a"],), {}),
    "norm": lambda x: (L.norm, (x["a"], 2), {}),
    "matrix_norm": lambda x: (L.matrix_norm, (x["a"],), {"ord": "nuc"}),
    "matrix_power": lambda x: (L.matrix_power, (x["a"], 3), {}),
    "multi_dot": lambda x: (L.multi_dot, ([x["a"], x["a"], x["b"]],), {}),
    "tensordot": lambda x: (L.tensordot, (x["a"], x["b"]), {"axes": 1}),
    "tensorinv": lambda x: (L.tensorinv, (x["a"],), {"ind": 1}),
    "tensorsolve": lambda x: (L.tensorsolve, (x["a"], x["tall_b"][:8, 0]), {}),
    "expm": lambda x: (L.expm, (x["a"],), {}),
    "expm_frechet": lambda x: (L.expm_frechet, (x["a"], x["sym"]), {}),
    "eig": lambda x: (L.eig, (x["a"],), {}),
    "eigvals": lambda x: (L.eigvals, (x["a"],), {}),
    "fftn": lambda x: (F.fftn, (x["cvol"],), {}),
    "fftn_axes": lambda x: (F.fftn, (x["cvol"],), {"axes": [0, 2], "norm": "ortho"}),
    "ifftn": lambda x: (F.ifftn, (x["cvol"],), {}),
    "rfftn": lambda x: (F.rfftn, (x["vol"],), {}),
    "irfftn": lambda x: (F.irfftn, (F.rfftn(x["vol"]),), {"s": (8, 8, 8)}),
    "fft": lambda x: (F.fft, (x["cvol"],), {"axis": 1}),
    "rfft2": lambda x: (F.rfft2, (x["vol"],), {}),
    "ifft": lambda x: (F.ifft, (x["cvol"],), {"n": 6}),
    "rfft": lambda x: (F.rfft, (x["vol"],), {}),
    "irfft": lambda x: (F.irfft, (x["cvol"],), {"axis": 0}),
    "fft2": lambda x: (F.fft2, (x["cvol"],), {}),
    "ifft2": lambda x: (F.ifft2, (x["cvol"],), {"axes": (0, 1)}),
    "irfft2": lambda x: (F.irfft2, (x["cvol"],), {}),
    "hfft": lambda x: (F.hfft, (x["cvol"],), {"axis": 0}),
    "ihfft": lambda x: (F.ihfft, (x["vol"],), {}),
    "pfft3d": lambda x: (F.pfft3d, (x["cvol"],), {}),
    "pifft3d": lambda x: (F.pifft3d, (x["cvol"],), {}),
    "prfft3d": lambda x: (F.prfft3d, (x["vol"],), {}),
    "pirfft3d": lambda x: (F.pirfft3d, (x["cvol"],), {}),
}


class _Counts:
    """Traces by the eager fast path, programs it calls and primitives bound in Python."""

    def __init__(self, monkeypatch):
        self.programs = self.binds = 0
        bind = jcore.Primitive.bind

        def counted(jitted):
            def call(*operands):
                self.programs += 1
                return jitted(*operands)

            return call

        def counted_bind(prim, *args, **params):
            self.binds += 1
            return bind(prim, *args, **params)

        # every compiled program the fast path may call (it calls `jitted` directly)
        for program in list(eager._TABLE.entries.values()):
            if isinstance(program, eager._Program):
                monkeypatch.setattr(program, "jitted", counted(program.jitted))
        monkeypatch.setattr(jcore.Primitive, "bind", counted_bind)

    def traces(self) -> int:
        return eager._TABLE.traces


@pytest.fixture(scope="module")
def one_explicit():
    """The 1x1 Explicit mesh only (the 1-axis Auto mesh: ``test_eager_results_...``)."""
    mesh = build_mesh((1, 1), "explicit")
    return mesh, _inputs(mesh, 8)


@pytest.mark.parametrize("name", list(ONE_CALL))
def test_eager_call_is_one_program(name, one_explicit, monkeypatch):
    """On one device a repeated eager call is traced once, then runs as one compiled
    program through jax's C++ dispatch: no retrace and no primitive bound in Python."""
    mesh, x = one_explicit
    with jax.set_mesh(mesh):
        fn, args, kwargs = ONE_CALL[name](x)
        first = fn(*args, **kwargs)  # traced here (or by an earlier test)
        counts = _Counts(monkeypatch)
        before = counts.traces()
        second = fn(*args, **kwargs)
        monkeypatch.undo()
    assert counts.traces() == before, f"{name}: the second eager call traced again"
    assert counts.programs == 1, (name, counts.programs)
    assert counts.binds == 0, (name, counts.binds)
    for u, v in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True):
        if not isinstance(u, jax.Array):  # cho_factor's lower flag
            assert u is v
            continue
        assert u.dtype == v.dtype and u.sharding == v.sharding
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))


def test_scalar_options_take_the_fast_look_up(one_explicit, monkeypatch):
    """A repeated call of arrays and scalar options skips the full key (no _freeze); the
    same option as another type (1 for True) is another key, as the full key has it."""
    mesh, x = one_explicit
    freeze, frozen = eager._freeze, []
    with jax.set_mesh(mesh):
        first = L.solve_triangular(x["low"], x["b"], lower=True)
        monkeypatch.setattr(eager, "_freeze", lambda *a: frozen.append(a) or freeze(*a))
        again = L.solve_triangular(x["low"], x["b"], lower=True)
        assert not frozen, "the repeated call built its full key"
        as_int = L.solve_triangular(x["low"], x["b"], lower=1)
        assert frozen, "lower=1 was looked up as lower=True"
    for y in (again, as_int):
        np.testing.assert_array_equal(np.asarray(y), np.asarray(first))


def test_fast_look_up_keeps_a_bounded_number_of_calls(one_explicit, monkeypatch):
    """Past eager.FAST_KEYS option sets per function, calls take the full key (a
    float option with a new value each call must not grow a table without bound)."""
    mesh, x = one_explicit
    monkeypatch.setattr(eager, "FAST_KEYS", 0)
    freeze, frozen = eager._freeze, []
    options = {"lower": True, "unit_diagonal": False, "trans": 0}  # a set no other test uses
    with jax.set_mesh(mesh):
        L.solve_triangular(x["low"], x["b"], **options)
        monkeypatch.setattr(eager, "_freeze", lambda *a: frozen.append(a) or freeze(*a))
        L.solve_triangular(x["low"], x["b"], **options)
    assert frozen, "a call was kept for the fast look-up past FAST_KEYS"


def test_every_public_function_is_covered(one):
    """Each public array function of distla.linalg / distla.fft has a row in ONE_CALL."""
    _, x = one
    called = {row(x)[0] for row in ONE_CALL.values()}
    for module in (L, F):
        for public in module.__all__:
            fn = getattr(module, public)
            if hasattr(fn, "__wrapped__"):
                assert fn in called, f"{module.__name__}.{public} has no row in ONE_CALL"
    assert distla.matmul in called


@pytest.mark.parametrize(
    "where",
    [None, ((1, 1), "explicit"), ((1,), "auto")],
    ids=["unsharded", "1x1-explicit", "1-auto"],
)
def test_eager_results_equal_the_functions_as_written(where):
    """Value, dtype, weak type and sharding as the undecorated function returns them."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 6)).astype(np.float32) + 6 * np.eye(6, dtype=np.float32)
    ints = np.arange(36, dtype=np.int32).reshape(6, 6) % 7 + 10 * np.eye(6, dtype=np.int32)
    mesh = None if where is None else build_mesh(*where)
    put = jnp.asarray if mesh is None else (lambda v: distla.shard(v, mesh))
    spd = a @ a.T
    a, ints, spd, b = put(a), put(ints), put(spd), put(np.ones((6, 2), np.float32))
    calls = [
        (L.solve, (ints, b)),
        (L.slogdet, (a,)),
        (L.inv, (ints,)),
        (distla.matmul, (ints, ints)),
        (L.cho_factor, (spd,)),
        (F.rfftn, (a,)),
        (L.svd, (a,)),
    ]
    for fn, args in calls:
        ours, theirs = fn(*args), fn.__wrapped__(*args)
        assert jax.tree.structure(ours) == jax.tree.structure(theirs), fn.__name__
        for u, v in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
            if not isinstance(v, jax.Array):  # cho_factor's flag
                assert u is v, fn.__name__
                continue
            assert (u.dtype, u.weak_type, u.sharding) == (v.dtype, v.weak_type, v.sharding), (
                fn.__name__,
                u.sharding,
                v.sharding,
            )
            np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-6, atol=1e-6)


def test_bad_input_raises_the_same_error_each_call():
    x = jnp.ones((3, 4), jnp.float32)
    for _ in range(2):
        with pytest.raises(ValueError, match="square"):
            L.solve(x, jnp.ones((3,)))
    with pytest.raises(TypeError, match="float16"):
        L.inv(jnp.eye(3, dtype=jnp.float16))


def test_traced_calls_keep_their_path():
    """Under a user's jit, grad and vmap distla traces as written (no program of its own)."""
    a = jnp.asarray(np.random.default_rng(2).standard_normal((5, 5)), jnp.float32) + 5 * jnp.eye(5)
    before = eager._TABLE.traces
    np.testing.assert_allclose(jax.jit(L.inv)(a), jnp.linalg.inv(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        jax.grad(lambda m: L.det(m))(a), jax.grad(jnp.linalg.det)(a), rtol=1e-4
    )
    stack = jnp.stack([a, a + 1])
    np.testing.assert_allclose(jax.vmap(L.inv)(stack), jnp.linalg.inv(stack), rtol=1e-5, atol=1e-6)
    assert eager._TABLE.traces == before
    jaxpr = jax.make_jaxpr(L.inv)(a)
    assert "_traced" not in str(jaxpr)


def test_the_table_is_bounded():
    table = eager._Table(2)
    for k in range(5):
        table.put(k, str(k))
    assert list(table.entries) == [3, 4]
    assert table.get(3) == "3" and list(table.entries) == [4, 3]
    assert table.get(0) is None
