"""Distributed LU: distla.linalg.solve and lu_factor on one matrix over a 2x4 mesh.

For n = 1024, 2048, 4096 (float32, one right-hand side), in one session:

- ``scipy.linalg.solve`` on one device with every core to its BLAS (the
  performance target: distla at most 1.5x at n = 4096);
- ``jax.scipy.linalg.lu_factor`` on one device;
- ``jnp.linalg.solve`` on the same sharded input (XLA's partitioning; target:
  distla at least 10x faster at n = 4096), as a fresh process runs it and with
  OpenBLAS at one thread per call (as distla sets it for its own devices);
- distla's ``solve`` and ``lu_factor``, recording collective bytes against the
  communication model of docs/lu.md (``distla.linalg.lu_model_bytes``) and the flop
  efficiency: useful flops (2/3·n³ + 2·n²) over the flops all devices
  execute together (each panel is factored only by its owner mesh column:
  ``distla.Cost.conditional_flops``).

    pytest benchmarks/bench_lu.py --benchmark-json=out/lu.json
    python benchmarks/report.py out/lu.json
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import threadpoolctl
from conftest import cost_info
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla

SIZES = [1024, 2048, 4096]
MESH = (2, 4)


def _problem(n):
    rng = np.random.default_rng(n)
    return rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal(n, dtype=np.float32)


def _sharded(n, axis_type=AxisType.Explicit):
    a, b = _problem(n)
    mesh = distla.make_mesh(MESH, ("rows", "cols"), axis_types=axis_type)
    return (
        jax.device_put(a, NamedSharding(mesh, P("rows", "cols"))),
        jax.device_put(b, NamedSharding(mesh, P("rows"))),
    )


def _info(role, name, n, *, flops, fn=None, args=None, rhs=0, **extra):
    info = dict(role=role, name=name, op="lu", n=n, dtype="float32", flops=flops, **extra)
    if fn is not None:
        model = distla.linalg.lu_model_bytes(n, MESH, np.float32, rhs=rhs)
        info.update(cost_info(fn, args, grid=MESH, useful_flops=flops, model_bytes=model))
    return info


def _solve_flops(n):
    return 2.0 / 3.0 * n**3 + 2.0 * n * n


@pytest.mark.parametrize("n", SIZES)
def test_scipy_solve(run, benchmark, n):
    benchmark.group = f"LU solve n={n}"
    a, b = _problem(n)

    def solve(a, b):  # every core to the BLAS, whatever distla set for its devices
        with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
            return scipy.linalg.solve(a, b)

    run(
        solve,
        (a, b),
        **_info("baseline", "one device: scipy.linalg.solve", n, flops=_solve_flops(n)),
    )


@pytest.mark.parametrize("n", SIZES)
def test_jax_lu_factor(run, benchmark, n):
    benchmark.group = f"LU solve n={n}"
    a, _ = _problem(n)
    fn = jax.jit(jax.scipy.linalg.lu_factor)
    args = (jax.device_put(a, jax.devices()[0]),)
    run(fn, args, **_info("baseline", "one device: jax lu_factor", n, flops=2.0 / 3.0 * n**3))


@pytest.mark.parametrize("n", SIZES)
def test_xla_sharded_solve(run, benchmark, n):
    benchmark.group = f"LU solve n={n}"
    args = _sharded(n, AxisType.Auto)
    fn = jax.jit(jnp.linalg.solve)
    run(
        fn,
        args,
        **_info("baseline", "XLA: jnp.linalg.solve, sharded", n, flops=_solve_flops(n), mesh="2x4"),
    )


@pytest.mark.parametrize("n", SIZES)
def test_xla_sharded_solve_one_blas_thread(run, benchmark, n):
    """The same, with OpenBLAS at one thread per call, as distla sets it for its devices.

    In a fresh process each of the 8 devices' LAPACK calls also starts
    OpenBLAS's own threads, which is what a user of jnp.linalg.solve gets
    (the case above); this one shows XLA's partitioning without that
    oversubscription.
    """
    benchmark.group = f"LU solve n={n}"
    args = _sharded(n, AxisType.Auto)
    fn = jax.jit(jnp.linalg.solve)

    def solve(a, b):
        with threadpoolctl.threadpool_limits(1, user_api="blas"):
            return jax.block_until_ready(fn(a, b))

    run(
        solve,
        args,
        **_info(
            "baseline",
            "XLA: jnp.linalg.solve, sharded, 1 BLAS thread",
            n,
            flops=_solve_flops(n),
            mesh="2x4",
        ),
    )


@pytest.mark.parametrize("n", SIZES)
def test_distla_solve(run, benchmark, n):
    benchmark.group = f"LU solve n={n}"
    args = _sharded(n)
    fn = jax.jit(distla.linalg.solve)
    run(
        fn,
        args,
        **_info(
            "distla", "distla.linalg.solve 2x4", n, flops=_solve_flops(n), fn=fn, args=args, rhs=0
        ),
    )


@pytest.mark.parametrize("n", SIZES)
def test_distla_lu_factor(run, benchmark, n):
    benchmark.group = f"LU solve n={n}"
    args = _sharded(n)[:1]
    fn = jax.jit(distla.linalg.lu_factor)
    run(
        fn,
        args,
        **_info(
            "distla",
            "distla.linalg.lu_factor 2x4",
            n,
            flops=2.0 / 3.0 * n**3,
            fn=fn,
            args=args,
            rhs=None,
        ),
    )


# ------------------------------------------------------------------ LU scale
# Compile time: the first call of lu_factor and solve on 2x4, compile only
# (``.lower().compile()`` on abstract operands, nothing runs), at n = 2048 and
# 16384. kernels/lu.py runs its block columns in at most MAX_PHASES loops, so
# the factorisation's program has the same size at both; the row for 2048 is
# each group's baseline. CPU seconds (all threads) are recorded beside the wall
# time, which a shared machine inflates.

COMPILE_SIZES = [2048, 16384]


def _abstract(n, dtype=np.float32, rhs=True):
    mesh = distla.make_mesh(MESH, ("rows", "cols"))
    a = jax.ShapeDtypeStruct((n, n), dtype, sharding=NamedSharding(mesh, P("rows", "cols")))
    b = jax.ShapeDtypeStruct((n,), dtype, sharding=NamedSharding(mesh, P("rows")))
    return (a, b) if rhs else (a,)


@pytest.mark.parametrize("op", ["lu_factor", "solve"])
@pytest.mark.parametrize("n", COMPILE_SIZES)
def test_compile_time(benchmark, op, n):
    import resource

    benchmark.group = f"LU compile: {op} 2x4"
    args = _abstract(n, rhs=op == "solve")

    def compile_once():
        fn = jax.jit(getattr(distla.linalg, op))  # a fresh program each round
        lowered = fn.lower(*args)
        return lowered, lowered.compile()

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    c0 = cpu()
    lowered, _ = benchmark.pedantic(compile_once, rounds=1, iterations=1)
    text = lowered.as_text()
    benchmark.extra_info.update(
        role="baseline" if n == COMPILE_SIZES[0] else "distla",
        name=f"compile {op} n={n}",
        op="lu",
        n=n,
        dtype="float32",
        mesh="x".join(map(str, MESH)),
        cpu_seconds=cpu() - c0,
        hlo_chars=len(text),
        getrf_call_sites=text.count("getrf"),
        max_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        jax=jax.__version__,
    )


# The mixed-precision float64 solve (factor in float32) is benchmarked in bench_mixed.py.
