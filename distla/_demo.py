"""``python -m distla demo``: run each capability once and print what it costs (private).

Each row times distla against one device and against XLA's own partitioning
of the jnp call on the same sharded inputs, checks the result with DESIGN.md's
scaled residual ratio, and reads collective bytes and peak memory per device
from the compiled program with ``distla.cost``.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from . import cost as distla_cost

# One module per capability under distla/demos/, each with
# `rows(size_scale: float, rounds: int) -> list[Row]`.
CAPABILITIES = ("matmul", "solve", "batched", "fft")


@dataclasses.dataclass(frozen=True)
class Row:
    operation: str
    shape: str
    mesh: str
    dtype: str
    time_s: float
    gflops: float | None  # useful GFLOP/s (None where flops are not the measure)
    error_ratio: float  # DESIGN.md's scaled ratio; passes when <= 30
    collective_mb: float  # per device
    peak_mb: float  # per device
    vs_one_device: float  # distla time / one-device time
    vs_xla: float | None  # distla time / jnp on the same sharded (Auto) inputs
    note: str = ""

    @classmethod
    def measured(
        cls,
        operation: str,
        shape: str,
        grid: tuple[int, int],
        dtype: str,
        *,
        times: dict,
        flops: float,
        error_ratio: float,
        cost: distla_cost.Cost,
        note: str = "",
    ) -> Row:
        """A row from ``time_calls`` results and ``distla.cost``.

        ``times`` has the cases ``"distla"`` and ``"xla"``, and ``"one"`` when a
        one-device run exists (not across processes: then "vs 1 dev" is nan).
        """
        mine = times["distla"].median_s
        one = times["one"].median_s if "one" in times else float("nan")
        return cls(
            operation=operation,
            shape=shape,
            mesh=f"{grid[0]}x{grid[1]}",
            dtype=dtype,
            time_s=mine,
            gflops=flops / mine / 1e9,
            error_ratio=error_ratio,
            collective_mb=cost.total_collective_bytes / 2**20,
            peak_mb=cost.peak_memory_bytes / 2**20,
            vs_one_device=mine / one,
            vs_xla=mine / times["xla"].median_s,
            note=note,
        )


def to_host(x: jax.Array) -> np.ndarray:
    """The whole of ``x`` on this host, also when it spans several processes."""
    if x.is_fully_addressable:
        return np.asarray(x)
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


HEADER = (
    "operation",
    "shape",
    "mesh",
    "dtype",
    "time",
    "GFLOP/s",
    "err ratio",
    "coll MB/dev",
    "peak MB/dev",
    "vs 1 dev",
    "vs XLA",
)


def format_rows(rows: Sequence[Row]) -> str:
    def fmt(r: Row) -> tuple[str, ...]:
        return (
            r.operation,
            r.shape,
            r.mesh,
            r.dtype,
            f"{r.time_s * 1e3:.1f} ms",
            "-" if r.gflops is None else f"{r.gflops:.1f}",
            f"{r.error_ratio:.3g}",
            f"{r.collective_mb:.2f}",
            f"{r.peak_mb:.1f}",
            f"{r.vs_one_device:.2f}x" if math.isfinite(r.vs_one_device) else "-",
            "-" if r.vs_xla is None or not math.isfinite(r.vs_xla) else f"{r.vs_xla:.2f}x",
        )

    table = [HEADER] + [fmt(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {r.operation}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + notes)


def run(size_scale: float = 1.0, rounds: int = 5, only: Sequence[str] | None = None) -> list[Row]:
    rows: list[Row] = []
    for name in only or CAPABILITIES:
        module = importlib.import_module(f"distla.demos.{name}")
        rows.extend(module.rows(size_scale=size_scale, rounds=rounds))
    return rows
