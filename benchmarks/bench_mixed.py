"""Mixed precision: a float64 solve factored in float32 and refined to float64.

n = 4096, one right-hand side, 2x4 mesh, in one session:

- one device: ``scipy.linalg.solve`` in float64 with every core to its BLAS;
- distla's plain float64 ``distla.linalg.solve`` on the sharded matrix;
- ``distla.linalg.solve(a, b, factor_dtype=jnp.float32)``: LU in float32,
  refinement in float64 (classical, GMRES-IR where that stalls), one program;
- ``distla.linalg.lu_solve(lu_piv, b, a=a)`` with the float32 factor made
  once: the refinement half alone, what each further right-hand side costs.

Each distla case records its refinement steps, its solve ratio (float64 eps,
pass mark 30), collective bytes and peak memory per device.

    DISTLA_BENCH_ROUNDS=3 pytest benchmarks/bench_mixed.py --benchmark-json=out/mixed.json
    python benchmarks/report.py out/mixed.json
"""

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import threadpoolctl
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla

MIXED_N = 4096
MESH = (2, 4)
GROUP = f"LU mixed precision float64 n={MIXED_N}"


def _solve_flops(n):
    return 2.0 / 3.0 * n**3 + 2.0 * n * n


def _problem64(n):
    rng = np.random.default_rng(n)
    return rng.standard_normal((n, n)), rng.standard_normal(n)


def _info64(role, name, n, **extra):
    return dict(role=role, name=name, op="lu", n=n, dtype="float64", flops=_solve_flops(n), **extra)


def test_mixed_scipy_solve64(run, benchmark):
    benchmark.group = GROUP
    a, b = _problem64(MIXED_N)

    def solve(a, b):
        with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
            return scipy.linalg.solve(a, b)

    run(solve, (a, b), **_info64("baseline", "one device: scipy.linalg.solve float64", MIXED_N))


@pytest.mark.parametrize("case", ["float64", "factor float32", "lu_solve a= (factor made once)"])
def test_mixed_distla_solve64(run, benchmark, case):
    from distla import _core
    from distla.linalg import _lu, _refine
    from distla.tools.ratios import solve_ratio

    benchmark.group = GROUP
    with jax.enable_x64(True):
        a_np, b_np = _problem64(MIXED_N)
        mesh = distla.make_mesh(MESH, ("rows", "cols"))
        args = (
            jax.device_put(a_np, NamedSharding(mesh, P("rows", "cols"))),
            jax.device_put(b_np, NamedSharding(mesh, P("rows"))),
        )
        extra = {}
        if case == "float64":
            fn = jax.jit(distla.linalg.solve)
        elif case == "factor float32":
            fn = jax.jit(functools.partial(distla.linalg.solve, factor_dtype=jnp.float32))
            plan = _core.plan.resolve(*args, names=("a", "b"), dtype=np.float64)
            factorisation = _lu.rules.LU
            res = _refine.refine(
                *args, plan=plan, factorisation=factorisation, factor_dtype=np.dtype(np.float32)
            )
            extra = dict(
                iterations=int(res.iterations),
                gmres_steps=int(res.gmres_steps),
                converged=bool(res.converged),
            )
        else:
            lu, piv = jax.block_until_ready(distla.linalg.lu_factor(args[0].astype(jnp.float32)))
            args = (*args, lu, piv)
            fn = jax.jit(lambda a, b, lu, piv: distla.linalg.lu_solve((lu, piv), b, a=a))
        cost = distla.cost(fn, *args)
        x = fn(*args)
        run(
            fn,
            args,
            **_info64(
                "distla",
                f"distla {case} 2x4",
                MIXED_N,
                mesh="x".join(map(str, MESH)),
                collective_bytes=cost.total_collective_bytes,
                peak_bytes=cost.peak_memory_bytes,
                solve_ratio=solve_ratio(a_np, np.asarray(x), b_np),
                **extra,
            ),
        )
