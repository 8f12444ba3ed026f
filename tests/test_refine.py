"""Mixed-precision solves (``distla/linalg/_refine.py``; the LU from ``_lu/rules.py``).

- ``solve(a, b, factor_dtype=...)``: an LU in float32/complex64 refined to
  the float64/complex128 solve ratio, with no hidden gathers; GMRES-IR where
  classical refinement stalls; NaN where neither converges.
- Its derivatives (forward, reverse, second order) equal the float64 solve's.
- ``lu_solve``/``cho_solve`` with a lower-precision factor and ``a=``: the
  second half of dsgesv, one float32 factor for many right-hand sides.
"""

import functools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import threadpoolctl
from conftest import CACHE_SETTINGS, build_mesh
from helpers import THRESHOLD, place, solve_ratio
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core.block_cyclic import blocking
from distla._core.plan import resolve
from distla.linalg import _refine, _refine_loop
from distla.linalg._lu.rules import LU


def _plan(*xs):
    """The plan distla.linalg resolves for these operands (``None``: one device)."""
    names = tuple(f"x{i}" for i in range(len(xs)))
    return resolve(*xs, names=names, dtype=jnp.result_type(*xs))


def refine(a, b, **kw):
    """``_refine.refine`` with the LU, on the operands' plan."""
    return _refine.refine(a, b, plan=_plan(a, b), factorisation=LU, **kw)


def solve_mixed(a, b, *, factor_dtype):
    """``solve_mixed`` with the LU, on the operands' plan."""
    a, b = jnp.asarray(a), jnp.asarray(b)
    return _refine.solve_mixed(_plan(a, b), a, b, factorisation=LU, factor_dtype=factor_dtype)


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
    res = refine(a, b, factor_dtype=np.dtype(factor))
    x = res.x
    assert x.dtype == dtype and x.shape == b.shape
    # Work bounds that hold for any BLAS: a random 90 x 90 matrix has cond(A)
    # near 1e2 (asserted), so each classical step shrinks the error by about
    # cond(A) * eps(float32) <= 1e-3: far below the switch to GMRES-IR (1/4),
    # and the low-precision solve (1e-4 off or better) reaches float64's 1e-16
    # in 4 steps at most; 6 leaves two of margin. At least 2: the
    # low-precision solve alone misses the float64 test by about 1e8.
    assert np.linalg.cond(a_np) * np.finfo(factor).eps <= 1e-3
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


def test_gmres_ir_takes_over_where_classical_refinement_is_slow(x64):
    # cond(a) = 2e8 > 1/eps(float32): a classical step shrinks the residual by
    # a factor near cond(A) * eps(float32) ~ 1 (0.24 to 6 in the first two steps
    # on 40 such matrices), more than the 1/4 at which refinement hands over to
    # GMRES-IR; the float32 LU still preconditions GMRES well (one GMRES-IR step
    # shrinks the residual by 2.4e-8 or less). Outcomes and work bounds only:
    # the exact counts depend on the BLAS kernels' rounding.
    mesh = build_mesh((2, 4), "auto")
    n = 90  # the float64 case's program above, from the cache
    a_np, b_np = _conditioned(n, 2e8)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    res = refine(a, b, factor_dtype=np.dtype(np.float32))
    assert bool(res.converged)
    assert solve_ratio(a_np, res.x, b_np) <= THRESHOLD  # the float64 ratio
    _assert_handed_over_early(res, "2x4 mesh")
    # the same on one device (jax's LU, the generic refinement)
    one = refine(jnp.asarray(a_np), jnp.asarray(b_np), factor_dtype=np.dtype(np.float32))
    assert bool(one.converged)
    assert solve_ratio(a_np, one.x, b_np) <= THRESHOLD
    _assert_handed_over_early(one, "one device")


def _assert_handed_over_early(res, where):
    # the counts and the BLAS they ran on, for `pytest -rP` (docs/benchmarks-log.md)
    blas = {
        (p["architecture"], p["num_threads"])
        for p in threadpoolctl.threadpool_info()
        if p["internal_api"] == "openblas"
    }
    print(
        f"cond 2e8, {where}: {int(res.iterations)} classical, {int(res.gmres_steps)} "
        f"GMRES-IR steps; OpenBLAS (core type, threads): {sorted(blas)}"
    )
    # At most 6 classical steps: for a 7th, each of the first six refined
    # residuals would have had to shrink by 1/4 or more at this condition
    # number, where the first two shrink by 0.24 to 6 (40 matrices); measured
    # here: 1 step on the mesh, 2 on one device, under every OpenBLAS core type
    # and BLAS thread count this machine runs (docs/benchmarks-log.md).
    assert 1 <= int(res.iterations) <= 6
    # GMRES-IR was needed (classical refinement at rate 1/4 or slower cannot
    # reach float64 in 6 steps), and two of its steps (1e-15 or better) reach
    # dsgesv's test from wherever classical refinement left off.
    assert 1 <= int(res.gmres_steps) <= 2


def test_mixed_solve_reports_nan_where_refinement_cannot_converge(x64):
    # cond(a) = 1e10 > 1/eps(float32): the float32 LU has no correct digit, and
    # GMRES(m) preconditioned by it stagnates too
    mesh = build_mesh((2, 4), "auto")
    n = 90  # the float64 case's program above, from the cache
    a_np, b_np = _conditioned(n, 1e10)
    a, b = place(a_np, mesh), place(b_np, mesh, P("x"))
    res = refine(a, b, factor_dtype=np.dtype(np.float32))
    assert not bool(res.converged)
    assert np.isnan(np.asarray(res.x)).all()
    # Early, whatever the rounding: the first refined residual is 1.6 times
    # ||b|| or more at this condition number (40 random matrices), so
    # classical refinement stops after one step (two on one device, which
    # counts the first correction); GMRES-IR is tried and gives up once a step
    # shrinks the residual by less than 1/2: its second step does so on most
    # such matrices, its third on every one measured (0.64 or more); 4 leaves
    # one step of margin, half of GMRES_STEPS.
    assert 1 <= int(res.iterations) <= 2
    assert 1 <= int(res.gmres_steps) <= 4 < _refine.GMRES_STEPS
    # the fallback the docstring names: the plain float64 solve
    assert solve_ratio(a_np, distla.linalg.solve(a, b), b_np) <= THRESHOLD


# The switch criterion alone, on operators whose rates are exact in binary
# (A = I with M^-1 = c I: every residual is (1 - c)^k b, no rounding at all),
# so exact step counts are safe here on any machine.


def _scaled_identity_ops(c, n=8, matvec=None):
    column_max = functools.partial(jnp.max, axis=-1)
    return _refine_loop.Ops(
        precond=lambda v: c * v,
        matvec=matvec or (lambda v: v),
        dot=lambda u, v: jnp.sum(jnp.conj(u) * v, axis=-1),
        spread=lambda s: s[..., None],
        measure=_refine_loop.dsgesv_test(1.0, n, jnp.float64, column_max),
        same=lambda v: v,
    )


def _iterate(ops, n=8):
    b = jnp.zeros(n).at[0].set(1.0)  # e_1
    return _refine_loop.iterate(ops, b, max_iterations=30, gmres_steps=8, m=4)


def test_classical_refinement_continues_while_it_contracts_fast_enough(x64):
    # rate 1/8 (better than 1/4): classical steps only, until dsgesv's test
    # passes: 8^-k <= sqrt(8) eps(float64) from k = 17 on
    x, its, converged, steps = _iterate(_scaled_identity_ops(7 / 8))
    assert bool(converged) and int(its) == 17 and int(steps) == 0
    np.testing.assert_array_equal(np.asarray(x)[1:], 0)


def test_classical_refinement_hands_over_below_the_switch_rate(x64):
    # rate 3/8 (worse than 1/4): one classical step, then GMRES-IR, which
    # solves M^-1 A = (5/8) I in one Krylov step
    x, its, converged, steps = _iterate(_scaled_identity_ops(5 / 8))
    assert bool(converged) and int(its) == 1 and int(steps) == 1
    np.testing.assert_allclose(np.asarray(x), np.eye(8)[0], rtol=0, atol=1e-15)


def test_gmres_ir_gives_up_when_it_stagnates(x64):
    # A = the cyclic shift, M = I: classical steps leave ||r||inf at 1, and
    # GMRES(4) from e_1 stagnates exactly (A K_4(A, e_1) is orthogonal to e_1)
    x, its, converged, steps = _iterate(_scaled_identity_ops(1.0, matvec=lambda v: jnp.roll(v, 1)))
    assert not bool(converged) and int(its) == 1 and int(steps) == 1
    assert np.isnan(np.asarray(x)).all()


def test_mixed_solve_one_device_and_errors(x64):
    rng = np.random.default_rng(2)
    a_np, b_np = _system(rng, 40, np.float64, 2)
    x = solve_mixed(jnp.asarray(a_np), jnp.asarray(b_np), factor_dtype=jnp.float32)
    assert solve_ratio(a_np, x, b_np) <= THRESHOLD
    with pytest.raises(TypeError, match="float64 -> float32"):
        distla.linalg.solve(a_np, b_np, factor_dtype=jnp.float16)
    with pytest.raises(TypeError, match="float32 system"):
        solve_mixed(a_np.astype(np.float32), b_np.astype(np.float32), factor_dtype=jnp.float64)


def test_mixed_solve_moves_no_whole_matrix(x64):
    mesh = build_mesh((2, 4), "explicit")
    n = 256
    a = _abstract(mesh, (n, n), P("x", "y"), jnp.float64)
    b = _abstract(mesh, (n,), P("x"), jnp.float64)
    cost = distla.cost(functools.partial(solve_mixed, factor_dtype=jnp.float32), a, b)
    whole = n * n * 8
    assert cost.largest() < whole / 4
    # a float64 local block, its float32 copy and factors, and panel buffers
    nb, _ = blocking(distla._core.mesh.grid_of(mesh.abstract_mesh, what="test"), n)
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
    a_np = rng.standard_normal((n, n)) + n**0.5 * np.eye(n)
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
    a_np = rng.standard_normal((n, n)) + n**0.5 * np.eye(n)
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
    b32, a32 = b.astype(jnp.float32), a.astype(jnp.float32)
    assert _refine.lower_precision(np.float32) is None
    np.testing.assert_array_equal(
        np.asarray(distla.linalg.lu_solve(lu_piv, b32, a=a32)),
        np.asarray(distla.linalg.lu_solve(lu_piv, b32)),
    )


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


# ------------------------- many right-hand sides refined on every device at once


_MANY_RHS = """
import numpy as np
import jax, jax.numpy as jnp
import distla

jax.config.update("jax_enable_x64", True)
n = 96
rng = np.random.default_rng(1)
g = rng.standard_normal((n, n))
a_np = g @ g.T / n + 0.01 * np.eye(n)
for shape, kind in (((2, 4), "Auto"), ((4, 2), "Explicit")):
    kinds = (getattr(jax.sharding.AxisType, kind),) * 2
    mesh = jax.make_mesh(shape, ("x", "y"), axis_types=kinds)
    a = distla.shard(a_np, mesh)
    c = distla.linalg.cho_factor(a.astype(jnp.float32), lower=True)
    for k in (131, n):
        b_np = rng.standard_normal((n, k))
        b = distla.shard(b_np, mesh)
        with jax.set_mesh(mesh):
            for _ in range(3):
                x = np.asarray(distla.linalg.cho_solve(c, b, a=a))
                assert np.abs(a_np @ x - b_np).max() < 1e-9 * np.abs(b_np).max(), (shape, k)
print("finished", flush=True)
"""


def test_mixed_cho_solve_with_many_right_hand_sides_finishes():
    # The refinement with more than 128 right-hand sides runs GMRES's least squares on
    # every device at once; with the batched SVD it hung (3 runs of 3 on 2x4 Auto with
    # cho_solve's one-program sweeps, 1 of 2 before them): a process that does not
    # finish in time fails, it does not hang the suite.
    env = {**os.environ, "DISTLA_PLAN_BUDGET": "0"}
    env.update({k.upper(): str(v) for k, v in CACHE_SETTINGS.items()})  # the run's cache
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_MANY_RHS)],
        cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, (
        f"status {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    )
    assert "finished" in run.stdout


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_gmres_least_squares_by_givens_rotations(x64, dtype):
    # min ||beta e1 - H y|| per column, against numpy's lstsq: full rank, a breakdown
    # (H's columns zero from the 6th on: y's entries there 0), and all zero (classical)
    rng = np.random.default_rng(10)
    m, cols = _refine_loop.GMRES_BASIS, 5
    h = rng.standard_normal((cols, m + 1, m))
    if dtype == np.complex128:
        h = h + 1j * rng.standard_normal((cols, m + 1, m))
    h = np.triu(h, -1).astype(dtype)
    h[-1, :, 5:] = 0
    h[-1, 6, 4] = 0
    beta = rng.uniform(1, 2, cols).astype(dtype)
    y = np.asarray(_refine_loop._least_squares(jnp.asarray(np.moveaxis(h, 0, -1)), beta, m=m))
    for c in range(cols):
        want = np.linalg.lstsq(h[c], np.eye(m + 1, 1)[:, 0] * beta[c], rcond=None)[0]
        tol = 1e-15 * np.linalg.cond(h[c][:, : (5 if c == cols - 1 else m)]) * np.abs(want).max()
        np.testing.assert_allclose(y[:, c], want, rtol=0, atol=tol)
    zero = _refine_loop._least_squares(jnp.zeros((m + 1, m, 2), dtype), jnp.zeros(2, dtype), m=m)
    np.testing.assert_array_equal(np.asarray(zero), 0)
