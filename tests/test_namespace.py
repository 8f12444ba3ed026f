"""distla.linalg, distla.fft and distla.scipy.fft have every public name of jnp.linalg,
jnp.fft and jax.scipy.fft.

Name for name and signature for signature; values of the names distla builds
against numpy on the 2x4 mesh (Auto and Explicit, a size the mesh does not
divide); and the communication of the names that are jnp's own, read from the
compiled program: none of them gathers a whole operand.
"""

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.fft
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.fft
import distla.linalg
import distla.scipy.fft


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


NAMESPACES = [
    pytest.param(distla.linalg, jnp.linalg, id="linalg"),
    pytest.param(distla.fft, jnp.fft, id="fft"),
    pytest.param(distla.scipy.fft, jax.scipy.fft, id="scipy.fft"),
]


@pytest.mark.parametrize("ours, theirs", NAMESPACES)
def test_every_jnp_name_is_there(ours, theirs):
    missing = _public(theirs) - _public(ours)
    assert not missing, f"{ours.__name__} lacks {sorted(missing)}"
    for name in sorted(_public(theirs)):
        assert callable(getattr(ours, name)) == callable(getattr(theirs, name)), name


@pytest.mark.parametrize("ours, theirs", NAMESPACES)
def test_signatures_include_jnps(ours, theirs):
    for name in sorted(_public(theirs)):
        try:
            sig_j = inspect.signature(getattr(theirs, name))
        except (TypeError, ValueError):  # classes and constants without one
            continue
        sig_d = inspect.signature(getattr(ours, name))
        params = list(sig_d.parameters.values())
        for pname, pj in sig_j.parameters.items():
            assert pname in sig_d.parameters, f"{ours.__name__}.{name} lacks {pname!r}"
            pd = sig_d.parameters[pname]
            assert pd.kind == pj.kind, (name, pname, pd.kind, pj.kind)
            assert pd.default == pj.default or (pd.default is None and pj.default is None), (
                name,
                pname,
                pd.default,
                pj.default,
            )
        extra = [p for p in params if p.name not in sig_j.parameters]
        assert all(
            p.default is not inspect.Parameter.empty
            or p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            for p in extra
        ), name


def _put(x, mesh, spec):
    """``x`` on ``mesh`` in ``spec`` where the mesh divides it, replicated otherwise."""
    ok = all(s is None or x.shape[i] % mesh.shape[s] == 0 for i, s in enumerate(spec))
    return jax.device_put(x, NamedSharding(mesh, spec if ok else P()))


def _rand(shape, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("kind, n", [("auto", 16), ("explicit", 13)])
def test_products_match_numpy(kind, n):
    """Auto with a size the mesh divides, Explicit with one it does not."""
    mesh24 = build_mesh((2, 4), kind)
    a_np = _rand((n, n), 1, np.float32) / np.sqrt(n) + np.eye(n, dtype=np.float32)
    b_np = _rand((n, n + 3), 2, np.float32)
    c_np = _rand((n + 3, 5), 3, np.float32)
    a, b, c = (_put(jnp.asarray(x), mesh24, P("x", "y")) for x in (a_np, b_np, c_np))
    tol = dict(rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(distla.linalg.matmul(a, b), a_np @ b_np, **tol)
    np.testing.assert_allclose(distla.linalg.multi_dot([a, b, c]), a_np @ b_np @ c_np, **tol)
    np.testing.assert_allclose(
        distla.linalg.multi_dot([a_np[0], b, c]), a_np[0] @ b_np @ c_np, **tol
    )
    for k in (0, 3) + ((-1,) if kind == "explicit" else ()):  # inv's program compiled once
        want = np.linalg.matrix_power(a_np.astype(np.float64), k)
        np.testing.assert_allclose(
            distla.linalg.matrix_power(a, k), want, rtol=1e-3, atol=1e-3 * np.abs(want).max()
        )
    np.testing.assert_allclose(distla.linalg.tensordot(a, b, axes=1), a_np @ b_np, **tol)
    np.testing.assert_allclose(distla.linalg.tensordot(a, a, axes=([0], [0])), a_np.T @ a_np, **tol)
    if kind == "explicit":  # the distributed LU's programs: one compile each
        x = distla.linalg.tensorsolve(a, jnp.asarray(a_np[:, 0]))
        np.testing.assert_allclose(a_np @ np.asarray(x), a_np[:, 0], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(distla.linalg.tensorinv(a, ind=1) @ a_np, np.eye(n), atol=1e-4)
    # ord 2 and "nuc" are distla.linalg.norm's svdvals, tested with norm itself
    for ord in ("fro", 1, -np.inf):
        np.testing.assert_allclose(
            distla.linalg.matrix_norm(a, ord=ord), np.linalg.norm(a_np, ord=ord), rtol=1e-4
        )


def test_products_promote_and_broadcast_as_jnp():
    ia = jnp.arange(12, dtype=jnp.int32).reshape(3, 4)
    ib = jnp.arange(8, dtype=jnp.int32).reshape(4, 2)
    for got, want in [
        (distla.linalg.matmul(ia, ib), jnp.linalg.matmul(ia, ib)),
        (
            distla.linalg.matmul(ia, ib, preferred_element_type=jnp.float32),
            jnp.linalg.matmul(ia, ib, preferred_element_type=jnp.float32),
        ),
        (distla.linalg.matrix_power(ia[:, :3], 3), jnp.linalg.matrix_power(ia[:, :3], 3)),
        (distla.linalg.matrix_power(ia[:, :3] > 4, 2), jnp.linalg.matrix_power(ia[:, :3] > 4, 2)),
        (distla.linalg.multi_dot([ia, ib, ib.T]), jnp.linalg.multi_dot([ia, ib, ib.T])),
        (
            distla.linalg.matmul(jnp.ones((2, 1, 3, 4)), jnp.ones((5, 4, 2))),
            jnp.linalg.matmul(jnp.ones((2, 1, 3, 4)), jnp.ones((5, 4, 2))),
        ),
        (
            distla.linalg.matmul(jnp.ones((0, 4)), jnp.ones((4, 2))),
            jnp.linalg.matmul(jnp.ones((0, 4)), jnp.ones((4, 2))),
        ),
        (
            distla.linalg.matrix_power(jnp.ones((0, 0)), -2),
            jnp.linalg.matrix_power(jnp.ones((0, 0)), -2),
        ),
        (
            distla.linalg.matrix_norm(jnp.ones((2, 3, 4)), ord=2, keepdims=True),
            jnp.linalg.matrix_norm(jnp.ones((2, 3, 4)), ord=2, keepdims=True),
        ),
        (
            distla.linalg.tensorsolve(jnp.eye(6).reshape(2, 3, 6), jnp.ones((2, 3))),
            jnp.linalg.tensorsolve(jnp.eye(6).reshape(2, 3, 6), jnp.ones((2, 3))),
        ),
        (
            distla.linalg.tensorinv(jnp.eye(6).reshape(2, 3, 6), ind=2),
            jnp.linalg.tensorinv(jnp.eye(6).reshape(2, 3, 6), ind=2),
        ),
    ]:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(TypeError):
        distla.linalg.matrix_power(ia[:, :3], 1.5)
    with pytest.raises(ValueError, match="square"):
        distla.linalg.matrix_power(ia, 2)


def test_matmul_of_stacks(mesh24):
    """Batch-sharded stacks stay batch-sharded; stacks of 2D blocks run SUMMA per member."""
    x_np = _rand((4, 8, 8), 7, np.float32)
    for spec in (P("x"), P(None, "x", "y")):
        x = _put(jnp.asarray(x_np), mesh24, spec)
        y = _put(jnp.asarray(x_np[:1]), mesh24, P())  # broadcast along the batch
        got = distla.linalg.matmul(x, y)
        np.testing.assert_allclose(got, x_np @ x_np[:1], rtol=1e-5, atol=1e-5)
        if spec == P("x"):
            assert got.sharding.spec[0] == "x"


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_matmul_of_a_stack_and_a_sharded_matrix(kind):
    # a stack split on its batch against one matrix split on its own dimensions: one
    # SUMMA product over the stacked rows (or columns), in jnp's layout; it raised
    # (the broadcast matrix and the stack reached jax.vmap with different batch layouts)
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(11)
    cases = [
        (((2, 6, 6), P("x")), ((6, 6), P("x", None))),
        (((4, 8, 8), P("x")), ((8, 8), P("x", "y"))),
        (((8, 8), P("x", "y")), ((4, 8, 8), P("x"))),
        (((8, 8), P("y", None)), ((3, 8, 4), P(None, None, "y"))),
    ]
    for (sa, pa), (sb, pb) in cases:
        a_np, b_np = (rng.standard_normal(s).astype(np.float32) for s in (sa, sb))
        a, b = _put(jnp.asarray(a_np), mesh, pa), _put(jnp.asarray(b_np), mesh, pb)
        for got in (distla.linalg.matmul(a, b), jax.jit(distla.linalg.matmul)(a, b)):
            np.testing.assert_allclose(np.asarray(got), a_np @ b_np, rtol=1e-5, atol=1e-5)
        if kind == "explicit" and len(sa) == 3:  # jnp runs these: the same type
            want = jnp.linalg.matmul(a, b)
            assert jax.typeof(got).sharding.spec == jax.typeof(want).sharding.spec
            (got - want).block_until_ready()


def test_strict_promotion_and_x64_as_jnp():
    with jax.enable_x64(True):
        i64 = jnp.arange(6, dtype=jnp.int64).reshape(2, 3)
        f32 = jnp.ones((3, 2), jnp.float32)
        for ours, theirs in [
            (distla.linalg.matmul, jnp.linalg.matmul),
            (
                lambda a, b: distla.linalg.multi_dot([a, b]),
                lambda a, b: jnp.linalg.multi_dot([a, b]),
            ),
        ]:
            assert ours(i64, f32).dtype == theirs(i64, f32).dtype
            with jax.numpy_dtype_promotion("strict"):
                with pytest.raises(jax.dtypes.TypePromotionError):
                    theirs(i64, f32)
                with pytest.raises(jax.dtypes.TypePromotionError):
                    ours(i64, f32)
        assert distla.linalg.matrix_power(i64[:, :2], 2).dtype == jnp.int64
        assert distla.fft.hfft(jnp.ones(5, jnp.complex128)).dtype == jnp.float64


def test_matrix_power_and_matmul_derivatives():
    a = jnp.asarray(_rand((6, 6), 4)) / 4 + jnp.eye(6)
    for f, g in [
        (
            lambda a: distla.linalg.matrix_power(a, 3).sum(),
            lambda a: jnp.linalg.matrix_power(a, 3).sum(),
        ),
        (
            lambda a: distla.linalg.multi_dot([a, a.T, a]).sum(),
            lambda a: jnp.linalg.multi_dot([a, a.T, a]).sum(),
        ),
    ]:
        np.testing.assert_allclose(jax.grad(f)(a), jax.grad(g)(a), rtol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_eager_products_on_a_mesh_are_one_program(kind):
    """Eager matrix_power and multi_dot on a mesh: one compiled program each, traced once
    per shapes, with the value and layout of the call under ``jax.jit``."""
    from distla.linalg._products import _compiled_chain, _compiled_power

    mesh = build_mesh((2, 4), kind)
    a_np = _rand((24, 24), 7) / 5
    a = _put(jnp.asarray(a_np, jnp.float32), mesh, P("x", "y"))
    calls = [
        (distla.linalg.matrix_power, (a, 3), _compiled_power, np.linalg.matrix_power(a_np, 3)),
        (
            distla.linalg.multi_dot,
            ([a, a.T, a],),
            _compiled_chain,
            np.linalg.multi_dot([a_np, a_np.T, a_np]),
        ),
    ]
    for fn, args, program, want in calls:
        first = fn(*args)
        traced = program._cache_size()
        again = fn(*args)
        assert program._cache_size() == traced > 0
        jitted = jax.jit(fn, static_argnums=(1,) if fn is distla.linalg.matrix_power else ())(*args)
        assert again.sharding == jitted.sharding == first.sharding
        np.testing.assert_allclose(np.asarray(again), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_array_equal(np.asarray(again), np.asarray(jitted))


def test_multi_dot_order():
    split = distla.linalg._products.chain_order([(10, 100), (100, 5), (5, 50)])
    assert split[0][2] == 1  # (A B) C: 10*100*5 + 10*5*50 = 7500 flops, against 75000


def test_hermitian_ffts_match_numpy(mesh24):
    x_np = _rand((8, 12), 5) + 1j * _rand((8, 12), 6)
    x = _put(jnp.asarray(x_np, jnp.complex64), mesh24, P("x", "y"))
    for norm in (None, "ortho", "forward"):
        np.testing.assert_allclose(
            distla.fft.hfft(x, norm=norm), np.fft.hfft(x_np, norm=norm), rtol=1e-4, atol=1e-4
        )
        np.testing.assert_allclose(
            distla.fft.ihfft(x.real, n=7, axis=0, norm=norm),
            np.fft.ihfft(x_np.real, n=7, axis=0, norm=norm),
            rtol=1e-4,
            atol=1e-5,
        )


def _gathered_bytes(fn, *args):
    c = distla.cost(fn, *args)
    return c.collective_bytes["all-gather"], c


_JNP_OWN = {
    "matrix_transpose": (jnp.linalg.matrix_transpose, "m"),
    "trace": (jnp.linalg.trace, "m"),
    "vector_norm": (jnp.linalg.vector_norm, "m"),
    "matrix_norm": (distla.linalg.matrix_norm, "m"),
    "diagonal": (distla.linalg.diagonal, "m"),  # jnp's, typed on Explicit meshes
    "vecdot": (distla.linalg.vecdot, "mm"),  # jnp's, typed on Explicit meshes
    "outer": (distla.linalg.outer, "vv"),  # jnp's, typed on Explicit meshes
    "cross": (distla.linalg.cross, "33"),  # jnp's, a one-device operand moved onto the mesh
    "fftshift": (distla.fft.fftshift, "m"),  # jnp's roll, typed back on Explicit meshes
    "ifftshift": (distla.fft.ifftshift, "m"),
}
_SHIFTS = ("fftshift", "ifftshift")
# distla's forms of jnp's where jax's sharding rules refuse jnp's on Explicit meshes
_EXPLICIT_TOO = (*_SHIFTS, "diagonal", "vecdot", "outer")


@pytest.mark.parametrize("name", sorted(_JNP_OWN))
def test_jnps_own_names_gather_no_operand(name):
    """Elementwise and batch-only names: no all-gather of any operand's shard set.

    fftshift/ifftshift roll every sharded axis by half its length: XLA sends
    block halves to the device that owns their destination (collective
    permutes), at most one block per sharded axis.
    """
    assert getattr(distla.linalg if name not in _SHIFTS else distla.fft, name) is _JNP_OWN[name][0]
    kinds = [jax.sharding.AxisType.Auto] + (
        [jax.sharding.AxisType.Explicit] if name in _EXPLICIT_TOO else []
    )
    for kind in kinds:
        _gathers_nothing(name, distla.make_mesh((2, 4), axis_types=kind))


def _gathers_nothing(name, mesh):
    n = 64
    shapes = {
        "m": [((n, n), P("rows", "cols"))],
        "mm": [((n, n), P("rows", "cols"))] * 2,
        "vv": [((n,), P("cols")), ((n,), P("rows"))],
        "33": [((n, 3), P("rows")), ((n, 3), P("rows"))],
    }[_JNP_OWN[name][1]]
    args = [
        jax.device_put(jnp.ones(s, jnp.float32), NamedSharding(mesh, spec)) for s, spec in shapes
    ]
    gathered, c = _gathered_bytes(_JNP_OWN[name][0], *args)
    block = n * n * 4 // 8
    assert gathered == 0, (name, c.collectives)
    assert c.total_collective_bytes <= 2 * block, (name, c.collectives)
    if name in _SHIFTS:
        assert c.collective_counts["collective-permute"] > 0


def test_tensordot_and_matmul_gather_no_operand():
    """jnp's tensordot of two 2D-block matrices gathers block rows; distla's does not."""
    mesh = distla.make_mesh((2, 4), axis_types=jax.sharding.AxisType.Auto)
    n = 64
    a = jax.device_put(jnp.ones((n, n), jnp.float32), NamedSharding(mesh, P("rows", "cols")))
    jnp_bytes = distla.cost(lambda x, y: jnp.linalg.tensordot(x, y, axes=1), a, a)
    ours = distla.cost(lambda x, y: distla.linalg.tensordot(x, y, axes=1), a, a)
    model = (
        distla.matmul.model_bytes(n, n, n, (2, 4), 4)
        if hasattr(distla.matmul, "model_bytes")
        else None
    )
    assert ours.total_collective_bytes < jnp_bytes.total_collective_bytes
    if model is not None:
        assert ours.total_collective_bytes <= 1.2 * model
