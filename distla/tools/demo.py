"""``python -m distla demo``: the operation table run at one mesh and one size per operation.

Each row is an operation of :mod:`distla.tools.ops` that has a demo row
(``Operation.demo``), run by the scaling study's runner on one mesh at one
size: distla against the one-device reference and against XLA's own
partitioning of the jnp call on the same sharded inputs (``Auto`` mesh),
checked with LAPACK's scaled residual ratio, with collective bytes and peak memory
per device from the compiled program. Across processes the one-device
baselines cannot run (no device holds the operands) and the table is
process 0's.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from .ops import OPERATIONS, Operation
from .ratios import THRESHOLD
from .run import RunSpec, run_cases
from .table import format_table

HEADER = (
    "operation", "shape", "mesh", "dtype", "time", "GFLOP/s", "err ratio", "coll MB/dev",
    "peak MB/dev", "vs 1 dev", "vs XLA",
)  # fmt: skip


def demo_ops() -> list[Operation]:
    """The operations with a demo row, in the table's order."""
    return [op for op in (build() for build in OPERATIONS.values()) if op.demo is not None]


def groups() -> list[str]:
    """The ``--only`` names: each operation's demo group."""
    return list(dict.fromkeys(op.demo.group for op in demo_ops()))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m distla demo``."""
    p.add_argument("--scale", type=float, default=1.0, help="problem size factor (0.25 = quick)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds per case")
    names = ("matmul", "solve", "batched", "fft", "cholesky", "qr", "spectral")  # demo groups
    p.add_argument("--only", nargs="+", choices=names, help="run only these")


def _note(op: Operation, rows: list[dict[str, Any]], mine: dict[str, Any]) -> str:
    parts = []
    ref = next((r for r in rows if r["reference"]), None)
    if ref is not None:
        parts.append(f"vs 1 dev: {ref['impl']}")
    if mine["plan"] == "one_device":
        parts.append(
            "plan='auto' took the one-device plan (the matrix to one device and back; "
            "plan='distributed' runs the distributed algorithm)"
        )
    if mine["model_ratio"] is not None:
        parts.append(f"collective bytes {mine['model_ratio']:.2f}x the model of {op.model_source}")
    elif mine["model_mib"] == 0 and mine["collective_counts"] is not None:
        parts.append(f"{sum(mine['collective_counts'].values())} collectives (the model: none)")
    xla = _xla(rows)
    for r in rows:  # the other baselines (jaxdecomp, a second one-device call)
        if r["role"] == "baseline" and not r["reference"] and r is not xla and r["time_s"]:
            parts.append(
                f"{r['impl']} {r['time_s'] * 1e3:.1f} ms (distla / it "
                f"{mine['time_s'] / r['time_s']:.2f}x)"
            )
    return "; ".join(parts)


def _xla(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """XLA's partitioning of the jnp call: the operation's first ``Auto``-mesh baseline."""
    return next((r for r in rows if r["role"] == "baseline" and r["on"] == "auto"), None)


def _ratio(a: float | None, b: float | None) -> float:
    return a / b if a and b else math.nan


def op_row(op: Operation, scale: float, rounds: int) -> tuple[tuple[str, ...], str, bool]:
    """Run ``op``'s demo row: (table cells, note, passed)."""
    import jax

    p = jax.device_count()
    grid = op.demo.grid(p)
    size = op.expand(op.demo.size(scale, p))
    plan = RunSpec(op=op.name, sizes=(size,), meshes=(grid,), dtype=op.dtypes[0], rounds=rounds)
    with jax.enable_x64(False):
        rows = run_cases(op, plan)
    mine = next(r for r in rows if r["role"] == "distla")
    if mine["error"]:
        cells = (op.demo.label, op.demo.shape_text(size), mine["mesh"], mine["dtype"],
                 f"failed: {mine['error']}", *["-"] * 6)  # fmt: skip
        return cells, "", False
    ref = next((r for r in rows if r["reference"]), None)
    xla = _xla(rows)
    vs_one = _ratio(mine["time_s"], ref and ref["time_s"])
    vs_xla = _ratio(mine["time_s"], xla and xla["time_s"])
    ok = mine["error_ratio"] is not None and mine["error_ratio"] <= THRESHOLD
    cells = (
        op.demo.label,
        op.demo.shape_text(size),
        mine["mesh"],
        mine["dtype"],
        f"{mine['time_s'] * 1e3:.1f} ms",
        f"{mine['gflops']:.1f}",
        f"{mine['error_ratio']:.3g}",
        f"{mine['collective_mib']:.2f}",
        f"{mine['peak_mib']:.1f}",
        f"{vs_one:.2f}x" if math.isfinite(vs_one) else "-",
        f"{vs_xla:.2f}x" if math.isfinite(vs_xla) else "-",
    )
    return cells, _note(op, rows, mine), ok


def run(scale: float = 1.0, rounds: int = 5, only: Sequence[str] | None = None) -> tuple[str, bool]:
    """Every demo row (those of ``only``'s groups): the table and whether every row passed."""
    table, notes, passed = [], [], True
    for op in demo_ops():
        if only and op.demo.group not in only:
            continue
        cells, note, ok = op_row(op, scale, rounds)
        table.append(cells)
        passed &= ok
        if note:
            notes.append(f"  {op.demo.label}: {note}")
    return "\n".join([format_table(HEADER, table), *notes]), passed


def main(args: argparse.Namespace, *, devices: bool = False) -> int:
    """``python -m distla demo``: the exit status (1 when a row fails its check).

    Under ``python -m distla launch`` (or srun/mpirun) this first joins the
    other processes; alone, with ``devices``, it asks for 8 simulated CPU
    devices when fewer than 2 devices exist.
    """
    from distla.distributed import init_distributed

    from .devices import ensure_devices

    # jax.distributed must start before anything else touches jax. Alone, a no-op.
    info = init_distributed(exit_on_uncaught_exception=True)
    if info.num_processes == 1 and devices:
        ensure_devices(2, ["demo", *args.argv], simulate=8)
    import jax

    lead = jax.process_index() == 0
    if lead:
        devs = jax.devices()
        where = f" in {jax.process_count()} processes" if jax.process_count() > 1 else ""
        print(
            f"distla demo: {len(devs)} {devs[0].platform} devices{where}, jax {jax.__version__}, "
            f"{args.rounds} timed rounds (medians)",
            flush=True,
        )
    text, passed = run(scale=args.scale, rounds=args.rounds, only=args.only)
    if lead:
        print(text)
        print(
            "vs 1 dev: distla time / the one-device reference's; vs XLA: distla time / the jnp "
            f"call on the same sharded inputs (Auto mesh); err ratio passes at <= {THRESHOLD:g}."
        )
        if jax.process_count() > 1:
            print(
                "Across processes the one-device baseline cannot run (no device holds the "
                "operands): '-' in vs 1 dev. Times are process 0's."
            )
    return 0 if passed else 1
