"""Benchmark harness: the same 8 simulated CPU devices as the tests.

Run: pytest benchmarks/bench_matmul.py --benchmark-json=out/matmul.json
then: python benchmarks/report.py out/matmul.json
"""

import os

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)  # jax's own switch, before its backend starts

ROUNDS = int(os.environ.get("DISTLA_BENCH_ROUNDS", "7"))


def cost_info(fn, args, *, grid, useful_flops, model_bytes):
    """What ``distla.cost`` reads from ``fn``'s program, for a benchmark's extra info.

    Flop efficiency is docs/lu.md's: useful flops over the flops all devices
    execute, where the panel work under ``lax.cond``
    (``Cost.conditional_flops``) runs on the owner mesh column only (``grid[0]``
    devices) and everything else on every device.
    """
    import distla

    cost = distla.cost(fn, *args)
    unconditional = cost.flops - cost.conditional_flops
    executed = cost.num_devices * unconditional + grid[0] * cost.conditional_flops
    return dict(
        mesh="x".join(map(str, grid)),
        collective_bytes=cost.total_collective_bytes,
        collective_ops=sum(cost.collective_counts.values()),
        peak_bytes=cost.peak_memory_bytes,
        model_bytes=model_bytes,
        flop_efficiency=useful_flops / executed,
    )


@pytest.fixture
def run(benchmark):
    """Time ``fn(*args)`` (compiled and warmed up first) and tag the result."""

    def _run(fn, args, **info):
        jax.block_until_ready(fn(*args))  # compile
        benchmark.extra_info.update(info, jax=jax.__version__, devices=jax.device_count())
        return benchmark.pedantic(
            lambda: jax.block_until_ready(fn(*args)), rounds=ROUNDS, iterations=1, warmup_rounds=1
        )

    return _run
