"""What a plan choice reads: shapes, dtype, mesh shape, the budget, and whether the call
is traced (nothing else).

Every family with a one-device plan decides in ``distla._core.plan.choose`` from the
problem's order ``n``, the bytes the one-device plan would move (its operands and
results: shapes and dtypes), the budget, and, for the few families with an eager
crossover (``EAGER_CROSSOVER``), whether the call is eager. Here each family's public
functions are called on the same operands on an ``Auto`` and an ``Explicit`` 2x4 mesh,
eagerly and traced, and the inputs of that decision are recorded (the call then stops
before any work): they must be the same on both mesh kinds, the eager flag must be the
only difference between an eager and a traced call, and the order and bytes must be
what the shapes and dtypes say. No program is compiled.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import plan as _plan

N = 64


class _Decided(Exception):
    """Raised by the recording ``choose``: the call stops once its plan is decided."""


def _spd(n):
    x = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return x @ x.T / n + np.eye(n, dtype=np.float32)


def _calls():
    """``(name, family, fn, operands, result shapes)``: the public calls and what the
    one-device plan would move for them (operands in, results back)."""
    la = distla.linalg
    n = N
    sq, vec, rhs = (n, n), (n,), (n, 4)
    f32 = np.float32
    c64 = np.complex64
    return [
        ("cholesky", "cholesky", la.cholesky, [(sq, f32)], [(sq, f32)]),
        ("solve", "solve", la.solve, [(sq, f32), (rhs, f32)], [(rhs, f32)]),
        ("lu_factor", "lu", la.lu_factor, [(sq, f32)], [(sq, f32), (vec, np.int32)]),
        ("lu", "lu", la.lu, [(sq, f32)], [(sq, f32)] * 3),
        ("det", "det", la.det, [(sq, f32)], [((), f32)]),
        ("slogdet", "det", la.slogdet, [(sq, f32)], [((), f32), ((), f32)]),
        ("inv", "inv", la.inv, [(sq, f32)], [(sq, f32)]),
        ("expm", "expm", la.expm, [(sq, f32)], [(sq, f32)]),
        (
            "lu_solve",
            "lu_solve",
            lambda lu, piv, b, **kw: la.lu_solve((lu, piv), b, **kw),
            [(sq, f32), (vec, np.int32), (rhs, f32)],
            [(rhs, f32)],
        ),
        (
            "cho_solve",
            "cho_solve",
            lambda c, b, **kw: la.cho_solve((c, True), b, **kw),
            [(sq, f32), (rhs, f32)],
            [(rhs, f32)],
        ),
        (
            "solve_triangular",
            "solve_triangular",
            functools.partial(la.solve_triangular, lower=True),
            [(sq, f32), (rhs, f32)],
            [(rhs, f32)],
        ),
        ("eigh", "eigh", la.eigh, [(sq, f32)], [(vec, f32), (sq, f32)]),
        ("eigvalsh", "eigh", la.eigvalsh, [(sq, f32)], [(vec, f32)]),
        ("svd", "svd", la.svd, [(sq, f32)], [(sq, f32), (vec, f32), (sq, f32)]),
        ("svdvals", "svd", la.svdvals, [(sq, f32)], [(vec, f32)]),
        ("polar", "polar", la.polar, [(sq, f32)], [(sq, f32), (sq, f32)]),
        ("eig", "eig", la.eig, [(sq, f32)], [(vec, c64), (sq, c64)]),
        ("eigvals", "eig", la.eigvals, [(sq, f32)], [(vec, c64)]),
    ]


def _operands(specs, mesh, traced):
    def one(shape, dtype, i):
        spec = P("x", "y") if len(shape) == 2 else P("x")
        sharding = NamedSharding(mesh, spec if len(shape) else P())
        if traced:
            return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
        value = _spd(shape[0]) if (i == 0 and len(shape) == 2) else np.ones(shape, dtype)
        return jax.device_put(np.asarray(value, dtype), sharding)

    return [one(shape, dtype, i) for i, (shape, dtype) in enumerate(specs)]


def _decision(monkeypatch, fn, operands, traced):
    """The ``choose`` inputs of ``fn(*operands)`` (eager, or traced by ``eval_shape``)."""
    seen = []

    def recording(family, plan, *, n, nbytes, what, eager=False, **peak):
        del peak  # the modelled peak: tests/test_plan_peak.py
        seen.append((family, plan, n, nbytes, eager))
        raise _Decided

    monkeypatch.setattr(_plan, "choose", recording)
    # a trace jax has cached (tests/test_plans.py jits distla.linalg.lu on the same
    # shapes) would not run the call again: the plan is read when a call is traced
    jax.clear_caches()
    with pytest.raises(_Decided):
        if traced:
            jax.eval_shape(fn, *operands)
        else:
            fn(*operands)
    assert len(seen) == 1, seen
    return seen[0]


@pytest.mark.parametrize("call", _calls(), ids=lambda c: c[0])
def test_the_plan_reads_only_shapes_dtypes_and_the_call_kind(monkeypatch, call):
    name, family, fn, operands, results = call
    seen = {}
    for kind in ("auto", "explicit"):
        mesh = build_mesh((2, 4), kind)
        for traced in (False, True):
            args = _operands(operands, mesh, traced)
            seen[kind, traced] = _decision(monkeypatch, fn, args, traced)
    for traced in (False, True):  # the same on both mesh kinds
        assert seen["auto", traced] == seen["explicit", traced], (name, traced, seen)
    eager, traced = seen["auto", False], seen["auto", True]
    # only the eager flag differs between an eager and a traced call
    assert eager[:4] == traced[:4] and eager[4] and not traced[4], (name, seen)
    family_seen, plan, n, nbytes, _ = eager
    assert (family_seen, plan, n) == (family, "auto", N), (name, eager)
    expected = sum(math.prod(s) * np.dtype(d).itemsize for s, d in operands + results)
    assert nbytes == expected, (name, nbytes, expected)


@pytest.mark.parametrize("family", sorted(_plan.CROSSOVER))
def test_choose_is_a_function_of_n_bytes_budget_and_call_kind(family):
    # the decision itself: one device exactly when the bytes fit the budget and n is at
    # most the crossover (the eager one, for an eager call), whatever else is true
    cross = _plan.CROSSOVER[family]
    eager_cross = max(cross, _plan.EAGER_CROSSOVER.get(family, 0))
    with _plan.budget(1000):
        for n in (1, min(cross, 2**20), min(eager_cross, 2**20) + 1):
            for nbytes in (1000, 1001):
                for eager in (False, True):
                    want = nbytes <= 1000 and n <= (eager_cross if eager else cross)
                    got = _plan.choose(family, "auto", n=n, nbytes=nbytes, what="t", eager=eager)
                    assert got == ("one_device" if want else "distributed"), (family, n, nbytes)


def test_matmul_takes_the_same_algorithm_on_both_mesh_kinds():
    # matmul's "auto" (one step or SUMMA's steps) reads the grid and the operands'
    # shapes and item size: the same product lowers to the same program on both kinds
    texts = {}
    for kind in ("auto", "explicit"):
        mesh = build_mesh((2, 4), kind)
        x = jax.ShapeDtypeStruct(
            (2048, 2048), jnp.float32, sharding=NamedSharding(mesh, P("x", "y"))
        )
        lowered = jax.jit(distla.matmul).lower(x, x).as_text()
        texts[kind] = (lowered.count("stablehlo.while"), lowered.count("all_gather"))
    assert texts["auto"] == texts["explicit"], texts
