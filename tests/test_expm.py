"""distla.linalg.expm and expm_frechet against scipy, on Auto and Explicit meshes.

Each (mesh, size, dtype) compiles one program; every matrix of that size runs
through it (the Padé degree and the number of squarings are traced values).
"""

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import hlo as _hlo
from distla._core import plan as _plan

L = distla.linalg
# scipy's own test_matfuncs compares expm with rtol 1e-13 on well-conditioned
# double-precision cases; single precision gets the same margin in units of eps.
RTOL64 = 1e-13
EPS32 = float(np.finfo(np.float32).eps)
RTOL32 = 1e-13 / float(np.finfo(np.float64).eps) * EPS32  # about 450 eps


@pytest.fixture(scope="module")
def auto24():
    return build_mesh((2, 4), "auto")


@pytest.fixture(scope="module")
def explicit24():
    return build_mesh((2, 4), "explicit")


@pytest.fixture(scope="module")
def auto22():
    return build_mesh((2, 2), "auto")


@pytest.fixture(scope="module")
def explicit22():
    return build_mesh((2, 2), "explicit")


def _with_norm(x, norm1):
    return x * (norm1 / np.linalg.norm(x, 1))


def _cases(n, rng, complex_=False):
    """Matrices that take every branch: each Padé degree (by Higham's thetas for
    double precision), scaling (norm 1e2: s = 5 squarings), nilpotent, diagonal, zero."""

    def gauss():
        g = rng.standard_normal((n, n))
        return g + 1j * rng.standard_normal((n, n)) if complex_ else g

    cases = {f"norm{v:g}": _with_norm(gauss(), v) for v in (0.01, 0.2, 0.9, 2.0, 5.0, 1e2)}
    cases["nilpotent"] = np.triu(gauss(), 1) * 2.0
    cases["diagonal"] = np.diag(np.linspace(-3.0, 4.0, n)).astype(gauss().dtype)
    cases["zero"] = np.zeros((n, n), gauss().dtype)
    return cases


def _rel_err(x, ref):
    return np.linalg.norm(np.asarray(x) - ref, 1) / np.linalg.norm(ref, 1)


def _check_all(mesh, n, rng, rtol, complex_=False):
    for name, a in _cases(n, rng, complex_).items():
        x = distla.shard(a, mesh)
        out = L.expm(x)
        assert out.dtype == a.dtype and out.shape == (n, n), name
        ref = sl.expm(a)
        assert _rel_err(out, ref) <= rtol, (name, _rel_err(out, ref))
        if name == "diagonal":  # exact zeros off the diagonal, exp on it
            np.testing.assert_allclose(
                np.asarray(out), np.diag(np.exp(np.diag(a))), rtol=rtol, atol=0
            )
        if name == "nilpotent":  # the exact finite series
            series, term = np.eye(n, dtype=a.dtype), np.eye(n, dtype=a.dtype)
            for k in range(1, n):
                term = term @ a / k
                series = series + term
            assert _rel_err(out, series) <= rtol, name
        if name == "zero":
            np.testing.assert_array_equal(np.asarray(out), np.eye(n))


def test_float64_every_degree_auto(auto24, x64):
    """Every degree, scaling, nilpotent, diagonal and zero matrices; NaN where jax gives
    NaN (more squarings than max_squarings allows, or a NaN entry). One program."""
    rng = np.random.default_rng(0)
    _check_all(auto24, 16, rng, RTOL64)
    a = _cases(16, rng)["norm2"]
    out = L.expm(distla.shard(a, auto24))
    assert out.sharding.spec == P("x", "y")  # the mesh's 2D block layout
    huge = _with_norm(a, 1e6)  # 5.37 * 2^16 < 1e6: 18 squarings needed, 16 allowed
    assert np.isnan(np.asarray(L.expm(distla.shard(huge, auto24)))).all()
    assert np.isnan(np.asarray(jsl.expm(huge))).all()
    bad = a.copy()
    bad[3, 5] = np.nan
    assert np.isnan(np.asarray(L.expm(distla.shard(bad, auto24)))).all()


def test_complex128_odd_size_explicit(explicit24, x64):
    """complex128, n = 13 (no mesh axis divides it) on an Explicit mesh: the result
    keeps the input's layout and combines with it."""
    rng = np.random.default_rng(1)
    _check_all(explicit24, 13, rng, RTOL64, complex_=True)
    a = distla.shard(_cases(13, rng, complex_=True)["norm5"], explicit24)
    out = L.expm(a)
    assert out.sharding == a.sharding
    _ = out - a


def test_float32_and_integer_input(auto24):
    """float32 stays float32 (degrees 3, 5, 7 and scaling), ints promote as jax's expm."""
    rng = np.random.default_rng(4)
    for norm in (0.1, 1.0, 3.0, 40.0):
        a = _with_norm(rng.standard_normal((16, 16)), norm).astype(np.float32)
        out = L.expm(distla.shard(a, auto24))
        assert out.dtype == np.float32
        assert _rel_err(out, sl.expm(a.astype(np.float64))) <= RTOL32, norm
    ints = np.triu(rng.integers(-2, 3, (16, 16)), 1).astype(np.int32)
    out = L.expm(distla.shard(ints, auto24))
    assert out.dtype == jsl.expm(ints).dtype
    assert _rel_err(out, sl.expm(ints.astype(np.float64))) <= RTOL32


def test_upper_triangular_and_max_squarings(auto24, x64):
    """upper_triangular=True (triangular solve) with max_squarings=3: s = 0 and s = 3
    match scipy; a matrix that needs 5 squarings gives NaN, as jax."""
    rng = np.random.default_rng(5)
    for norm in (0.5, 30.0, 100.0):
        a = _with_norm(np.triu(rng.standard_normal((16, 16))), norm)
        out = L.expm(distla.shard(a, auto24), upper_triangular=True, max_squarings=3)
        if norm == 100.0:
            assert np.isnan(np.asarray(out)).all()
            assert np.isnan(np.asarray(jsl.expm(a, upper_triangular=True, max_squarings=3))).all()
            continue
        assert _rel_err(out, sl.expm(a)) <= RTOL64, norm
        np.testing.assert_array_equal(np.tril(np.asarray(out), -1), 0.0)


def test_stack_sharded_along_batch(auto24):
    rng = np.random.default_rng(7)
    stack = rng.standard_normal((8, 6, 6)).astype(np.float32)
    x = distla.shard(stack, auto24, P(("x", "y"), None, None))
    out = L.expm(x)
    assert out.shape == stack.shape and out.dtype == np.float32
    for i in range(8):
        assert _rel_err(out[i], sl.expm(stack[i].astype(np.float64))) <= RTOL32


def test_one_device_plan(explicit24, x64):
    """Below the budget and the crossover, "auto" runs jax's expm on one device and
    shards the result back in the distributed plan's layout; "one_device" forces it."""
    rng = np.random.default_rng(10)
    a = _with_norm(rng.standard_normal((16, 16)), 7.0)
    x = jax.device_put(a, NamedSharding(explicit24, P("x", None)))
    with _plan.budget(2**20), _plan.recording() as notes:
        auto = L.expm(x)
    assert notes == [_plan.Chosen("expm", "one_device", 2 * a.nbytes)]
    forced = L.expm(x, plan="one_device")
    assert auto.sharding == forced.sharding == x.sharding
    np.testing.assert_array_equal(np.asarray(auto), np.asarray(forced))
    assert _rel_err(auto, sl.expm(a)) <= RTOL64


def test_empty_and_one_device():
    for shape in ((0, 0), (3, 0, 0)):
        out = L.expm(jnp.zeros(shape))
        ref = jsl.expm(jnp.zeros(shape))
        assert out.shape == ref.shape and out.dtype == ref.dtype
    a = np.eye(3, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(L.expm(a)), np.asarray(jsl.expm(a)), rtol=1e-6)


def test_signatures_are_jaxs():
    """Every parameter of jax.scipy.linalg's expm and expm_frechet, same kind and default."""
    for name in ("expm", "expm_frechet"):
        ours = inspect.signature(getattr(L, name)).parameters
        for pname, theirs in inspect.signature(getattr(jsl, name)).parameters.items():
            assert pname in ours, (name, pname)
            assert (ours[pname].kind, ours[pname].default) == (theirs.kind, theirs.default)


def test_bad_input(auto24):
    x = distla.shard(np.ones((8, 16), np.float32), auto24)
    with pytest.raises(ValueError, match=r"square.*\(8, 16\)"):
        L.expm(x)
    with pytest.raises(ValueError, match=r"\(8,\)"):
        L.expm(jnp.ones(8))
    with pytest.raises(TypeError, match="float16"):
        L.expm(jnp.ones((4, 4), jnp.float16))
    with pytest.raises(ValueError, match="plan must be one of"):
        L.expm(distla.shard(np.eye(8, dtype=np.float32), auto24), plan="gpu")
    with pytest.raises(TypeError, match="max_squarings"):
        L.expm(jnp.ones((4, 4)), max_squarings=2.5)
    with pytest.raises(ValueError, match="same shape"):
        L.expm_frechet(jnp.ones((4, 4)), jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="square"):
        L.expm_frechet(jnp.ones((4, 3)), jnp.ones((4, 3)))


def test_grad_matches_jax(auto22, x64):
    """jax.grad through the distributed algorithm equals jax.grad of jax's expm."""
    rng = np.random.default_rng(8)
    a = _with_norm(rng.standard_normal((8, 8)), 6.0)  # degree 13 with one squaring
    w = rng.standard_normal((8, 8))
    x = distla.shard(a, auto22)
    with jax.set_mesh(auto22):
        g = jax.grad(lambda x: jnp.sum(L.expm(x) * w))(x)
    ref = jax.grad(lambda x: jnp.sum(jsl.expm(x) * w))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(ref), rtol=1e-12, atol=1e-12)


def test_expm_frechet_matches_scipy(explicit22, x64):
    """jvp of the distributed expm; on an Explicit mesh both results keep ``A``'s layout."""
    rng = np.random.default_rng(9)
    a = _with_norm(rng.standard_normal((8, 8)), 1.5)
    e = rng.standard_normal((8, 8))
    x = jax.device_put(a, NamedSharding(explicit22, P("x", None)))
    ex = jax.device_put(e, NamedSharding(explicit22, P("x", None)))
    with jax.set_mesh(explicit22):
        value, deriv = L.expm_frechet(x, ex)
        only = L.expm_frechet(x, ex, compute_expm=False)
    ref_value, ref_deriv = sl.expm_frechet(a, e)
    assert _rel_err(value, ref_value) <= RTOL64
    assert _rel_err(deriv, ref_deriv) <= RTOL64
    np.testing.assert_array_equal(np.asarray(only), np.asarray(deriv))
    assert deriv.sharding == x.sharding and value.sharding == x.sharding


def _largest_array(cost) -> int:
    """Bytes of the largest single array any collective returns (XLA combines several
    all-reduces into one instruction with a tuple result; each member is counted alone)."""
    return max((a.nbytes for op in cost.collectives for a in _hlo.arrays_in(op.shape)), default=0)


def test_no_whole_matrix_moves(explicit24):
    """Compiled for n = 256 on 2x4: no collective returns as much as half the matrix
    (SUMMA panels, the LU's panels and pivots: at most a quarter of it), and a
    device's peak memory is a fixed number of local blocks."""
    n = 256
    a = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=NamedSharding(explicit24, P("x", "y")))
    cost = distla.cost(L.expm, a)
    whole = n * n * 4
    assert cost.collective_counts["all-gather"] > 0  # the products ran on SUMMA
    assert _largest_array(cost) <= whole / 4, cost
    assert cost.peak_memory_bytes <= 16 * whole / 8, cost
