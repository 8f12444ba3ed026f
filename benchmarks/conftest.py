"""Benchmark harness: the same 8 simulated CPU devices as the tests.

Run: pytest benchmarks/bench_matmul.py --benchmark-json=out/matmul.json
then: python benchmarks/report.py out/matmul.json
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

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
