"""Mixed-precision solves (``distla/_refine.py``).

- ``solve(a, b, factor_dtype=...)``: an LU in float32/complex64 refined to
  the float64/complex128 solve ratio, with no hidden gathers; GMRES-IR where
  classical refinement stalls; NaN where neither converges.
- Its derivatives (forward, reverse, second order) equal the float64 solve's.
- ``lu_solve``/``cho_solve`` with a lower-precision factor and ``a=``: the
  second half of dsgesv, one float32 factor for many right-hand sides.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, place, solve_ratio
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import _refine


def _abstract(mesh, shape, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))



def _system(rng, n, dtype, k=None):
    shape = (n,) if k is None else (n, k)
    a = rng.standard_normal((n, n))
    b = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
        b = b + 1j * rng.standard_normal(shape)
    return a.astype(dtype), b.astype(dtype)


@pytest.mark.parametrize(
    "dtype,factor,k,kind",
    [
        pytest.param(np.float64, np.float32, None, "auto", id="float64-vector-auto"),
        pytest.param(np.complex128, np.complex64, 3, "explicit", id="complex128-3rhs-explicit"),
    ],
)
def test_mixed_solve_reaches_the_input_precision(x64, dtype, factor, k, kind):
    mesh = build_mesh((2, 4), kind)
    n = 90  # the 2x4 mesh does not divide it
    a_np, b_np = _system(np.random.default_rng(n), n, dtype, k)
    a = place(a_np, mesh)
    b = place(b_np, mesh, P("x") if k is None else P("x", None))
    res = _refine.refine(a, b, factor_dtype=np.dtype(factor))
    x = res.x
    assert x.dtype == dtype and x.shape == b.shape
    # corrections from x = 0, the first being the low-precision solve
    assert bool(res.converged) and 2 <= int(res.iterations) <= 6
    assert int(res.gmres_steps) == 0  # classical refinement was enough
    # the float64 ratio (eps 2.2e-16), which the low-precision solve alone misses by ~1e8
    assert solve_ratio(a_np, x, b_np) <= THRESHOLD
    want = distla.linalg.solve(a, b)  # same layout as the plain solve
    assert x.sharding.is_equivalent_to(want.sharding, x.ndim)
    np.testing.assert_allclose(np.asarray(x), np.asarray(want), rtol=1e-9, atol=1e-9)
    # the public hook runs the same program
    public = distla.linalg.solve(a, b, factor_dtype=factor)
    np.testing.assert_array_equal(np.asarray(public), np.asarray(x))


def _conditioned(n, cond, seed=1):
    """A random ``n x n`` float64 matrix with singular values logspaced from 1 to ``1/cond``."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return u @ np.diag(np.logspace(0, -np.log10(cond), n)) @ v.T, rng.standard_normal(n)


def test_gmres_ir_converges_where_classical_refinement_stalls(x64):
    # cond(a) = 2e8: the float32 LU's corrections no longer shrink the residual
    # (cond * eps(float32) > 1), but it still preconditions GMRES well
    mesh = build_mesh((2, 4), "auto")
    n = 90  # the float64 case's program above, from the cache
    a_np, b_np = _conditioned(n, 2e8)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    res = _refine.refine(a, b, factor_dtype=np.dtype(np.float32))
    assert bool(res.converged)
    # classical refinement stopped on a stall (not on its step limit) ...
    assert 1 <= int(res.iterations) < _refine.MAX_ITERATIONS
    # ... and GMRES-IR reached the float64 ratio
    assert 1 <= int(res.gmres_steps) <= 3
    assert solve_ratio(a_np, res.x, b_np) <= THRESHOLD
    # the same on one device (jax's LU, the generic refinement)
    one = _refine.refine(jnp.asarray(a_np), jnp.asarray(b_np), factor_dtype=np.dtype(np.float32))
    assert bool(one.converged) and int(one.gmres_steps) >= 1
    assert solve_ratio(a_np, one.x, b_np) <= THRESHOLD


def test_mixed_solve_reports_nan_where_refinement_cannot_converge(x64):
    # cond(a) = 1e10 > 1/eps(float32): the float32 LU has no correct digit, and
    # GMRES(m) preconditioned by it stagnates too
    mesh = build_mesh((2, 4), "auto")
    n = 90  # the float64 case's program above, from the cache
    a_np, b_np = _conditioned(n, 1e10)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    res = _refine.refine(a, b, factor_dtype=np.dtype(np.float32))
    assert not bool(res.converged)
    assert np.isnan(np.asarray(res.x)).all()
    assert int(res.iterations) < _refine.MAX_ITERATIONS  # the stall stops it early
    assert 1 <= int(res.gmres_steps) < _refine.GMRES_STEPS  # GMRES-IR tried, and stalled
    # the fallback the docstring names: the plain float64 solve
    assert solve_ratio(a_np, distla.linalg.solve(a, b), b_np) <= THRESHOLD


def test_mixed_solve_one_device_and_errors(x64):
    rng = np.random.default_rng(2)
    a_np, b_np = _system(rng, 40, np.float64, 2)
    x = _refine.solve_mixed(jnp.asarray(a_np), jnp.asarray(b_np), factor_dtype=jnp.float32)
    assert solve_ratio(a_np, x, b_np) <= THRESHOLD
    with pytest.raises(TypeError, match="float64 -> float32"):
        distla.linalg.solve(a_np, b_np, factor_dtype=jnp.float16)
    with pytest.raises(TypeError, match="float32 system"):
        _refine.solve_mixed(a_np.astype(np.float32), b_np.astype(np.float32),
                            factor_dtype=jnp.float64)


def test_mixed_solve_moves_no_whole_matrix(x64):
    mesh = build_mesh((2, 4), "explicit")
    n = 256
    a = _abstract(mesh, (n, n), P("x", "y"), jnp.float64)
    b = _abstract(mesh, (n,), P("x"), jnp.float64)
    cost = distla.cost(functools.partial(_refine.solve_mixed, factor_dtype=jnp.float32), a, b)
    whole = n * n * 8
    assert cost.largest() < whole / 4
    # a float64 local block, its float32 copy and factors, and panel buffers
    nb, _ = distla._lu.plan(distla._mesh.grid_of(mesh.abstract_mesh, what="test"), n)
    assert cost.peak_memory_bytes <= 4 * (whole / 8 + n * nb * 8)


# ------------------------------------------------------------------ derivatives


def _reference_derivatives(a_np, b_np, w_np):
    """``d/da, d/db`` of ``sum(w * solve(a, b))`` in float64 numpy."""
    x = np.linalg.solve(a_np, b_np)
    gb = np.linalg.solve(a_np.T, w_np)
    return -np.outer(gb, x) if x.ndim == 1 else -gb @ x.T, gb


def test_mixed_solve_derivatives_one_device(x64):
    rng = np.random.default_rng(5)
    n = 24
    a_np = rng.standard_normal((n, n)) + n ** 0.5 * np.eye(n)
    b_np, w_np = rng.standard_normal(n), rng.standard_normal(n)
    a, b = jnp.asarray(a_np), jnp.asarray(b_np)

    def f(solve):
        return lambda a, b: jnp.sum(jnp.asarray(w_np) * solve(a, b))

    mixed = f(functools.partial(distla.linalg.solve, factor_dtype=jnp.float32))
    plain = f(distla.linalg.solve)
    # reverse mode equals the float64 solve's to float64 accuracy
    got, want = jax.grad(mixed, (0, 1))(a, b), jax.grad(plain, (0, 1))(a, b)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-11, atol=1e-12)
    # forward mode too
    da, db = rng.standard_normal((n, n)), rng.standard_normal(n)
    _, t_mixed = jax.jvp(mixed, (a, b), (jnp.asarray(da), jnp.asarray(db)))
    _, t_plain = jax.jvp(plain, (a, b), (jnp.asarray(da), jnp.asarray(db)))
    np.testing.assert_allclose(float(t_mixed), float(t_plain), rtol=1e-11)


@pytest.mark.parametrize("kind", ["explicit"])
def test_mixed_solve_gradient_on_a_mesh(x64, kind):
    mesh = build_mesh((2, 4), kind)
    n = 40  # padded to the block grid
    rng = np.random.default_rng(6)
    a_np = rng.standard_normal((n, n)) + n ** 0.5 * np.eye(n)
    b_np, w_np = rng.standard_normal(n), rng.standard_normal(n)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    w = place(w_np, mesh, P("x"))

    def loss(a, b):
        x = distla.linalg.solve(a, b, factor_dtype=jnp.float32)
        return jnp.sum(w * x)

    with jax.set_mesh(mesh):
        ga, gb = jax.jit(jax.grad(loss, (0, 1)))(a, b)
    want_a, want_b = _reference_derivatives(a_np, b_np, w_np)
    np.testing.assert_allclose(np.asarray(ga), want_a, rtol=0, atol=1e-12 * np.abs(want_a).max())
    np.testing.assert_allclose(np.asarray(gb), want_b, rtol=0, atol=1e-12 * np.abs(want_b).max())


# ------------------------------------------- lu_solve / cho_solve with a float32 factor


@pytest.mark.parametrize("kind", ["auto"])
def test_lu_solve_refines_a_float32_factor_against_a(x64, kind):
    mesh = build_mesh((4, 2), kind)
    n, k = 48, 3
    rng = np.random.default_rng(7)
    a_np = rng.standard_normal((n, n))
    b_np = rng.standard_normal((n, k))
    a, b = place(a_np, mesh), place(b_np, mesh)
    lu_piv = distla.linalg.lu_factor(a.astype(jnp.float32))  # made once, for many solves
    # (trans=1 runs in the reverse-mode test above: the transpose solve of solve's derivative)
    x = distla.linalg.lu_solve(lu_piv, b, a=a)
    assert x.dtype == np.float64 and x.shape == (n, k)
    # the largest even layout of the 2D block layout, as lu_solve gives it (3 columns on 2)
    assert x.sharding.is_equivalent_to(NamedSharding(mesh, P(("x", "y"))), 2)
    assert solve_ratio(a_np, x, b_np) <= THRESHOLD
    with pytest.raises(ValueError, match="must match"):
        distla.linalg.lu_solve(lu_piv, b, a=a[:, :-1])
    # a factor that is not of lower precision: a is ignored, as the docstring says
    assert _refine.lu_solve_mixed(*lu_piv, b.astype(jnp.float32), trans=0,
                                  a=a.astype(jnp.float32)) is None


def test_cho_solve_refines_a_float32_factor_against_a(x64):
    mesh = build_mesh((4, 2), "auto")
    n = 48
    rng = np.random.default_rng(8)
    g = rng.standard_normal((n, n))
    a_np = g @ g.T + np.eye(n)
    b_np = rng.standard_normal(n)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    c = distla.linalg.cho_factor(a.astype(jnp.float32), lower=True)
    x = distla.linalg.cho_solve(c, b, a=a)
    assert x.dtype == np.float64 and x.shape == (n,)
    assert solve_ratio(a_np, x, b_np) <= THRESHOLD
