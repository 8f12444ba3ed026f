"""Where to cut a sequence of block steps into a few loops (shared by the LU and trsm kernels).

A kernel whose steps shrink (the trailing matrix of an LU, the rows left in a
triangular solve) cannot loop over all of them with one static shape without
doing the first step's work at every step. It runs them instead in at most
``max_phases`` ``lax.fori_loop`` phases, each with the static shape of its
first step, so that the program does not grow with ``n`` and the masked work
stays small. :func:`cut` chooses the boundaries.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def cut(steps: int, max_phases: int, work: Callable[[int], float]) -> tuple[tuple[int, int], ...]:
    """Phases ``[k0, k1)`` covering ``range(steps)`` that minimise the total work.

    Args:
      steps: number of steps (block columns or block rows).
      max_phases: at most this many phases (fewer only when ``steps`` is smaller).
      work: cost of one step of a phase that starts at step ``k0``, which
        every step of that phase pays (the phase's static shape).

    Returns:
      ``min(max_phases, steps)`` consecutive ``(k0, k1)`` pairs, found by dynamic
      programming in ``O(max_phases·steps²)`` at trace time.
    """
    count = min(max_phases, steps)
    ends = np.arange(steps + 1)
    # best[k]: least work for steps k..steps-1 in f phases; nxt[f][k]: end of the first one
    best = np.where(ends == steps, 0.0, np.inf)
    nxt = np.full((count + 1, steps + 1), steps)
    for f in range(1, count + 1):
        new = best.copy()
        for k in range(steps):
            c = (ends[k + 1 :] - k) * work(k) + best[k + 1 :]
            e = int(np.argmin(c))
            new[k], nxt[f, k] = c[e], k + 1 + e
        best = new
    out, k, f = [], 0, count
    while k < steps:
        out.append((k, int(nxt[f, k])))
        k, f = int(nxt[f, k]), f - 1
    return tuple(out)
