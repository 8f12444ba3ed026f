"""Timing for the tools and the benchmarks: ``time_calls``.

Compile once, warm up, and time with ``block_until_ready`` inside the timed
region; candidates compared in one run are timed in interleaved rounds so
that slow drift of a shared machine hits them alike. Medians, not means.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

import jax


@dataclasses.dataclass(frozen=True)
class Timing:
    median_s: float
    times_s: tuple[float, ...]
    compile_s: float


def time_calls(
    cases: Mapping[str, tuple[Callable[..., Any], tuple[Any, ...]]],
    *,
    rounds: int = 5,
    inner: int = 1,
) -> dict[str, Timing]:
    """Time each ``fn(*args)`` of ``cases``, interleaving the cases round by round.

    The first call of each case (compile plus first run) is timed apart as
    ``compile_s`` and a second call warms it up before timing starts.
    """
    compile_s = {}
    for name, (fn, args) in cases.items():
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        compile_s[name] = time.perf_counter() - t0
        jax.block_until_ready(fn(*args))
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (fn, args) in cases.items():
            for _ in range(inner):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*args))
                samples[name].append(time.perf_counter() - t0)
    return {
        name: Timing(statistics.median(ts), tuple(ts), compile_s[name])
        for name, ts in samples.items()
    }
