"""Cases timed in turn: each round calls every case once, each call waited for, so that
a shared machine's load falls on every case alike; medians over the rounds.

Used by the scripts that compare a few eager calls (``matmul_small.py``,
``fft_interleaved.py``, ``svd_interleaved.py``). Every call is waited for: eager
calls on simulated CPU devices left running while the next is dispatched can
deadlock XLA's in-process collectives.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax


def waited(fn: Callable[[], object]) -> float:
    """Seconds of one call of ``fn``, to ``jax.block_until_ready`` of its result."""
    t = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t


def medians(
    cases: dict[str, Callable[[], object]], rounds: int, warmups: int = 2
) -> dict[str, float]:
    """Median seconds per case over ``rounds`` rounds, after ``warmups`` calls of each
    case (the first compiles)."""
    for fn in cases.values():
        for _ in range(warmups):
            waited(fn)
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            times[name].append(waited(fn))
    return {name: statistics.median(t) for name, t in times.items()}
