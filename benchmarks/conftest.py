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
