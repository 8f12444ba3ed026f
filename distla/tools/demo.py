"""``python -m distla demo``: every capability once, checked, timed and costed, in about a minute.

Each row is an operation of the scaling study's table (``distla.tools.ops``)
with a demo row (``Operation.demo``), run by the study's runner on one mesh of
every device present at one size: distla against the one-device reference
and against XLA's own partitioning of the jnp call on the same sharded inputs
(``Auto`` mesh), checked with LAPACK's scaled residual ratio, with collective
bytes and peak memory per device read from the compiled program. Across
processes the one-device baselines cannot run (no device holds the operands)
and the table is process 0's.

The default sizes are the full ones (those of the scaling study's tables)
times ``QUICK``: every device holds a share of every operand, and the whole
run takes about a minute on 2 CPU cores with 8 simulated devices. ``--full``
runs the full sizes, ``--scale`` multiplies the default ones.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from typing import Any

from .argtypes import positive_float, positive_int
from .ops import OPERATIONS, Operation
from .ratios import THRESHOLD
from .run import RunSpec, run_cases
from .table import format_table

# The default sizes as a fraction of the full ones (matmul 512 of 4096, solve and
# Cholesky 256 of 2048, FFTs 32³ of 256³, ...): about a minute here, compiles included.
QUICK = 0.125
WIDTH = 100  # the table and its notes fit this many columns
HEADER = (
    "operation", "shape", "mesh", "time", "err ratio", "coll MiB", "peak MiB", "vs 1 dev",
    "vs XLA",
)  # fmt: skip
RIGHT = range(3, len(HEADER))
DESCRIPTION = (
    "Run each distla capability once on a mesh of every device here (8 simulated CPU "
    "devices when there are fewer than 2) and print one row per operation: its residual "
    "check, its time against one device and against XLA's partitioning of the jnp call, "
    "and the collective bytes and peak memory per device of its compiled program. The "
    "default sizes take about a minute on 2 CPU cores; --full runs the scaling study's "
    "sizes (several minutes), --scale grows or shrinks the default ones."
)
RATIOS = (
    "vs 1 dev, vs XLA: distla's time / the other's time (lower is better; 0.50x is twice "
    "as fast): the one-device reference, and jnp's function on the same sharded inputs, "
    "partitioned by XLA."
)


def demo_ops() -> list[Operation]:
    """The operations with a demo row, in the table's order."""
    return [op for op in (build() for build in OPERATIONS.values()) if op.demo is not None]


def groups() -> list[str]:
    """The ``--only`` names: each operation's demo group."""
    return list(dict.fromkeys(op.demo.group for op in demo_ops()))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m distla demo``."""
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--scale",
        type=positive_float,
        default=1.0,
        metavar="S",
        help="multiply every default size by S (0.5: quicker; 2: larger, slower)",
    )
    size.add_argument(
        "--full",
        action="store_true",
        help=f"the scaling study's sizes, {1 / QUICK:g}x the default ones (several minutes)",
    )
    p.add_argument(
        "--rounds", type=positive_int, default=3, metavar="R", help="timed rounds per case"
    )
    p.add_argument(
        "--plan",
        choices=("auto", "distributed"),
        default="auto",
        help="auto: what distla.linalg does by default (below a crossover size a matrix goes "
        "to one device and back); distributed: always the distributed algorithms, to see "
        "their communication (slower here, several compiles more)",
    )
    names = ("matmul", "solve", "batched", "fft", "cholesky", "qr", "spectral")  # demo groups
    p.add_argument(
        "--only",
        nargs="+",
        choices=names,
        metavar="GROUP",
        help="run only these: " + ", ".join(names) + " (default: all)",
    )


def size_factor(args: argparse.Namespace) -> float:
    """The fraction of the full sizes that ``args`` ask for."""
    return 1.0 if getattr(args, "full", False) else QUICK * args.scale


def _note(op: Operation, rows: list[dict[str, Any]], mine: dict[str, Any]) -> str:
    parts = []
    ref = next((r for r in rows if r["reference"]), None)
    if ref is not None:
        parts.append(f"vs 1 dev: {ref['impl']}")
    if mine["plan"] == "one_device":
        parts.append(
            "plan='auto' took the one-device plan at this size (the matrix to one device and "
            "back; plan='distributed' runs the distributed algorithm)"
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


def _x(ratio: float) -> str:
    return f"{ratio:.2f}x" if math.isfinite(ratio) else "-"


def op_row(op: Operation, scale: float, rounds: int) -> tuple[tuple[str, ...], str, bool]:
    """Run ``op``'s demo row at ``scale`` of its full size: (table cells, note, passed)."""
    import jax

    p = jax.device_count()
    grid = op.demo.grid(p)
    size = op.expand(op.demo.size(scale, p))
    plan = RunSpec(op=op.name, sizes=(size,), meshes=(grid,), dtype=op.dtypes[0], rounds=rounds)
    with jax.enable_x64(False):
        rows = run_cases(op, plan)
    mine = next(r for r in rows if r["role"] == "distla")
    shape = op.demo.shape_text(size)
    if mine["error"]:
        cells = (op.demo.label, shape, mine["mesh"], "failed", *["-"] * 5)
        return cells, f"failed: {mine['error']}", False
    ref = next((r for r in rows if r["reference"]), None)
    xla = _xla(rows)
    ok = mine["error_ratio"] is not None and mine["error_ratio"] <= THRESHOLD
    cells = (
        op.demo.label,
        shape,
        mine["mesh"],
        f"{mine['time_s'] * 1e3:.1f} ms",
        f"{mine['error_ratio']:.2g}",
        f"{mine['collective_mib']:.2f}",
        f"{mine['peak_mib']:.1f}",
        _x(_ratio(mine["time_s"], ref and ref["time_s"])),
        _x(_ratio(mine["time_s"], xla and xla["time_s"])),
    )
    return cells, _note(op, rows, mine), ok


class RowProgress:
    """Where the demo is: rich's bar on a terminal, else one flushed line per finished row."""

    def __init__(self, total: int, *, show: bool, stream=None):
        self.total, self.done, self.show = total, 0, show
        self.stream = stream if stream is not None else sys.stdout
        self.bar = None
        if not show or not self.stream.isatty():
            return
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:  # rich comes with the `scaling` extra: plain lines then
            return
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=self.stream),
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task("demo", total=total)

    def start(self, label: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=label)

    def finish(self, label: str, detail: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.advance(self.task)
        elif self.show:
            print(f"[{self.done}/{self.total}] {label}: {detail}", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def run(
    scale: float = QUICK,
    rounds: int = 3,
    only: Sequence[str] | None = None,
    *,
    progress: RowProgress | None = None,
    row: Callable[..., tuple[tuple[str, ...], str, bool]] = op_row,
) -> tuple[str, bool]:
    """Every demo row (those of ``only``'s groups) at ``scale`` of the full sizes.

    Returns the table with its notes (every line at most ``WIDTH`` columns) and
    whether every row passed its check.
    """
    ops = [op for op in demo_ops() if not only or op.demo.group in only]
    progress = progress or RowProgress(len(ops), show=False)
    table, notes, passed = [], [], True
    try:
        for op in ops:
            progress.start(op.demo.label)
            t0 = time.perf_counter()
            cells, note, ok = row(op, scale, rounds)
            table.append(cells)
            passed &= ok
            verdict = f"err ratio {cells[4]}, passed" if ok else "FAILED"
            progress.finish(
                op.demo.label,
                f"{cells[1]} on {cells[2]}, {time.perf_counter() - t0:.1f} s, {verdict}",
            )
            if note:
                notes.append(_wrap(f"{op.demo.label}: {note}"))
    finally:
        progress.close()
    text = [format_table(HEADER, table, right=RIGHT)]
    return "\n".join([*text, *notes]), passed


def _wrap(text: str) -> str:
    return textwrap.fill(text, WIDTH, initial_indent="  ", subsequent_indent="    ")


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
    scale = size_factor(args)
    started = time.perf_counter()
    if lead:
        devs = jax.devices()
        kind = devs[0].platform
        simulated = kind == "cpu" and len(devs) > 1
        where = f" in {jax.process_count()} processes" if jax.process_count() > 1 else ""
        which = "full sizes" if scale == 1 else f"{scale:g} of the full sizes (--full: all)"
        which += f", plan={args.plan!r}"
        print(
            _wrap_plain(
                f"distla demo: {len(devs)} {'simulated ' if simulated else ''}{kind} devices"
                f"{where}, jax {jax.__version__}, float32, {which}; each row: one call "
                f"compiled, timed over {args.rounds} rounds (median), checked against "
                "float64 numpy/scipy."
            ),
            flush=True,
        )
    if args.plan == "distributed":
        import distla

        distla.linalg.set_plan_budget(0)  # no call fits the one-device plan's budget
    ops = [op for op in demo_ops() if not args.only or op.demo.group in args.only]
    progress = RowProgress(len(ops), show=lead)
    text, passed = run(scale=scale, rounds=args.rounds, only=args.only, progress=progress)
    if lead:
        print(text)
        print(_wrap_plain(RATIOS))
        print(
            _wrap_plain(
                f"err ratio: LAPACK's scaled residual ratio, passes at <= {THRESHOLD:g}. "
                "coll MiB, peak MiB: collective bytes received and peak memory per device, "
                "from the compiled program (exact, whatever the machine)."
            )
        )
        if simulated:
            print(
                _wrap_plain(
                    "Simulated CPU devices share this machine's cores: the best a mesh can do "
                    "here is one device's time (vs 1 dev near 1.00x); on real devices the same "
                    "programs divide the work. At these sizes compiling and per-call costs "
                    "dominate; --full or --scale for more."
                )
            )
        if jax.process_count() > 1:
            print(
                _wrap_plain(
                    "Across processes the one-device baseline cannot run (no device holds the "
                    "operands): '-' in vs 1 dev. Times are process 0's."
                )
            )
        print(f"demo finished in {time.perf_counter() - started:.0f} s", flush=True)
    return 0 if passed else 1


def _wrap_plain(text: str) -> str:
    return textwrap.fill(text, WIDTH)
