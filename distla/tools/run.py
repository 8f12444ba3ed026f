"""Running a study: the cases of each (shape, mesh), timed in interleaved rounds.

Every case is compiled once; the same executable is timed (``time_calls``)
and measured (``distla.cost.cost_of_compiled``, what [`distla.cost`][distla.cost.cost]
reports), and the distla variants' results are checked with LAPACK's
scaled ratios. Used by the scaling study and the demo.
"""

from __future__ import annotations

import dataclasses
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from .ops import Impl, Operation
from .ops.base import dims
from .timing import time_calls

MIB = 2.0**20


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What to run: one operation, its sizes and meshes, and how."""

    op: str
    sizes: tuple[tuple[int, ...], ...]
    meshes: tuple[tuple[int, int], ...]
    mode: str = "strong"
    dtype: str = "float32"
    rounds: int = 3
    baselines: str = "all"
    check: bool = True
    quiet: bool = True

    @property
    def devices_needed(self) -> int:
        return max(r * c for r, c in self.meshes)

    def shape_on(self, op: Operation, size: tuple[int, ...], grid: tuple[int, int]):
        """The problem shape of ``size`` on ``grid`` (grown with the devices in weak mode)."""
        return op.weak(size, grid[0] * grid[1]) if self.mode == "weak" else size


def to_host(x: Any) -> Any:
    """The whole of ``x`` (a tuple of arrays too) on this host, also across processes."""
    if isinstance(x, tuple | list):
        return tuple(to_host(t) for t in x)
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def all_blas_threads(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with the BLAS threads back that distla took for its CPU devices."""

    def call(*args):
        import jax

        from distla._core.blas import every_blas_thread

        with every_blas_thread():
            return jax.block_until_ready(fn(*args))

    return call


def grid_mesh(grid: tuple[int, int], auto: bool = False):
    """A ``grid`` mesh on the first devices, ``Explicit`` axes (``Auto`` with ``auto``)."""
    import jax
    from jax.sharding import AxisType

    import distla

    kind = AxisType.Auto if auto else AxisType.Explicit
    return distla.make_mesh(grid, devices=jax.devices()[: grid[0] * grid[1]], axis_types=kind)


def place(op: Operation, host: tuple[np.ndarray, ...], mesh) -> tuple[Any, ...]:
    """The host inputs on ``mesh`` in the operation's layouts (``distla.shard``)."""
    import distla

    return tuple(distla.shard(x, mesh, spec) for x, spec in zip(host, op.specs(mesh)))


class _Group:
    """The inputs of one (shape, mesh) group, placed lazily where impls want them."""

    def __init__(self, op: Operation, host: tuple[np.ndarray, ...], grid: tuple[int, int]):
        self.op, self.host, self.grid = op, host, grid
        self._placed: dict[str, tuple[Any, ...]] = {}

    def args(self, on: str) -> tuple[Any, ...]:
        import jax

        if on == "host":
            return self.host
        if on not in self._placed:
            if on == "device":
                d0 = jax.devices()[0]
                self._placed[on] = tuple(jax.device_put(x, d0) for x in self.host)
            else:
                self._placed[on] = place(self.op, self.host, grid_mesh(self.grid, on == "auto"))
        return self._placed[on]


@dataclasses.dataclass
class _Case:
    impl: Impl
    role: str  # "distla" or "baseline"
    shape: tuple[int, ...]
    grid: tuple[int, int]  # (1, 1) for one-device baselines
    series: int  # index of the --sizes entry this case belongs to
    base: tuple[int, ...]  # the shape whose one-device reference it is compared with
    plot_devices: int  # where the plot puts it
    reference: bool = False
    group: _Group | None = None
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    compiled: Any = None
    plans: tuple[str, ...] = ()  # the plans its distla calls chose (distla.cost's ``plans``)


def plan_cases(op: Operation, plan: RunSpec) -> list[tuple[tuple[int, ...], tuple[int, int], list]]:
    """The cases, grouped by the (shape, mesh) whose inputs they share.

    A group times the distla variants on its mesh and the per-mesh baselines
    (not on 1x1, where they are the one-device call); the one-device
    baselines run once per distinct shape, in the first group of that shape
    (not across processes: no device holds the operands there). In weak mode
    the 1-device shape of each series is measured too: it is the reference of
    the whole series.
    """
    import jax

    wanted = op.baselines if plan.baselines == "all" else op.baselines[:1]
    one_device = jax.process_count() == 1
    seen: set[tuple[int, ...]] = set()
    groups = []
    for si, size in enumerate(plan.sizes):
        base = plan.shape_on(op, size, (1, 1))
        for gi, grid in enumerate(plan.meshes):
            shape = plan.shape_on(op, size, grid)
            p = grid[0] * grid[1]
            ref = shape if plan.mode == "strong" else base
            cases = [
                _Case(v, "distla", shape, grid, si, ref, p) for v in op.variants if v.applies(grid)
            ]
            if p > 1:
                cases += [
                    _Case(b, "baseline", shape, grid, si, ref, p) for b in wanted if b.per_mesh
                ]
            one = [(shape, p)] + ([(base, 1)] if gi == 0 and base != shape else [])
            for s, x in one if one_device else ():
                if s in seen:
                    continue
                seen.add(s)
                cases += [
                    _Case(
                        b,
                        "baseline",
                        s,
                        (1, 1),
                        si,
                        ref if s == shape else base,
                        x,
                        reference=b is op.baselines[0],
                    )
                    for b in wanted
                    if not b.per_mesh
                ]
            groups.append((shape, grid, cases))
    return groups


class Progress:
    """A rich progress bar on stderr; plain lines without rich; nothing when quiet."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.done, self.quiet, self.bar = total, 0, quiet, None
        if quiet:
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
        except ImportError:  # rich comes with the `scaling` extra
            return
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.bar.start()
        self.task = self.bar.add_task("scaling", total=total)

    def say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def advance(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def run_cases(op: Operation, plan: RunSpec) -> list[dict[str, Any]]:
    """Every case of ``plan`` on the devices present: one row (a dict) per case."""
    import jax

    dtype = np.dtype(plan.dtype)
    groups = plan_cases(op, plan)
    progress = Progress(sum(len(cases) for _, _, cases in groups), plan.quiet)
    rows: list[dict[str, Any]] = []
    try:
        for shape, grid, cases in groups:
            rng = np.random.default_rng(0)
            inputs = {shape: _Group(op, op.make(shape, dtype, rng), grid)}
            for c in cases:  # in weak scaling, one-device references of other shapes
                if c.shape not in inputs:
                    inputs[c.shape] = _Group(op, op.make(c.shape, dtype, rng), (1, 1))
                c.group = inputs[c.shape]
            rows += _run_group(op, plan, cases, progress)
            del inputs, cases
            jax.clear_caches()
    finally:
        progress.close()
    derive(rows)
    return rows


def _run_group(op: Operation, plan: RunSpec, cases: list[_Case], progress) -> list[dict[str, Any]]:
    from distla.cost import cost_of_compiled

    rows = []
    live = []
    for c in cases:
        progress.say(f"compiling {op.describe(c.shape)} on {dims(c.grid)}: {c.impl.name}")
        row = _row(op, plan, c)
        rows.append(row)
        try:
            try:
                row["compile_s"] = _first_call(c, c.impl.on)
                row["plan"] = "/".join(c.plans) or None
            except Exception as e:
                if not (c.role == "distla" and c.grid == (1, 1)):
                    raise
                # A 1x1 mesh is one device: what the call does there matters little,
                # that it runs does. Say so, and time it on an Auto 1x1 mesh.
                row["note"] = f"on the 1x1 Explicit mesh: {_one_line(e)}; timed on Auto"
                row["compile_s"] = _first_call(c, "auto")
            live.append((c, row))
        except Exception as e:  # a failing case is recorded, the study goes on
            row["error"] = _one_line(e)
            if c.role == "distla":
                row["traceback"] = traceback.format_exc()
            progress.advance()
    if live:
        progress.say(f"timing {op.describe(cases[0].shape)} on {dims(cases[0].grid)}")
        times = time_calls(
            {str(i): (c.fn, c.args) for i, (c, _) in enumerate(live)}, rounds=plan.rounds
        )
    for i, (c, row) in enumerate(live):
        t = times[str(i)]
        row["time_s"] = t.median_s
        row["times_s"] = list(t.times_s)
        progress.say(f"cost of {c.impl.name}")
        try:
            if c.compiled is not None:
                cost = cost_of_compiled(c.compiled)
                row["collective_bytes"] = dict(cost.collective_bytes)
                row["collective_counts"] = dict(cost.collective_counts)
                row["collective_mib"] = cost.total_collective_bytes / MIB
                row["peak_mib"] = cost.peak_memory_bytes / MIB
                row["flops_per_device"] = cost.flops
                row["cost_exact"] = cost.exact
            if plan.check and c.role == "distla" and op.check is not None:
                row["error_ratio"] = op.check(c.group.host, to_host(c.fn(*c.args)))
        except Exception as e:
            row["error"] = _one_line(e)
        progress.advance()
    return rows


def _first_call(c: _Case, on: str) -> float:
    """Place the inputs, compile (once: the same executable is timed and costed) and run.

    One-device baselines get every BLAS thread. Returns the seconds the
    compile and the first run took.
    """
    import jax

    from distla._core.plan import recording

    c.args = c.group.args(on)
    t0 = time.perf_counter()
    if on == "host":
        c.fn = c.impl.fn
    else:
        with recording() as chosen:
            lowered = jax.jit(c.impl.fn).lower(*c.args)
        c.plans = tuple(dict.fromkeys(ch.plan for ch in chosen))
        c.compiled = lowered.compile()
        c.fn = c.compiled
    if on in ("host", "device"):
        c.fn = all_blas_threads(c.fn)
    jax.block_until_ready(c.fn(*c.args))
    return time.perf_counter() - t0


def _row(op: Operation, plan: RunSpec, c: _Case) -> dict[str, Any]:
    pr, pc = c.grid
    impl = c.impl
    model = None
    if impl.model is not None and c.role == "distla":
        model = impl.model(c.shape, c.grid, np.dtype(plan.dtype)) / MIB
    return {
        "impl": impl.name,
        "role": c.role,
        "series": c.series,
        "reference_shape": list(c.base),
        "plot_devices": c.plot_devices,
        "reference": c.reference,
        "on": impl.on,
        "shape": list(c.shape),
        "shape_text": op.describe(c.shape),
        "mesh": dims(c.grid),
        "devices": pr * pc,
        "dtype": plan.dtype,
        "flops": op.flops(c.shape, np.dtype(plan.dtype)),
        "time_s": None,
        "times_s": [],
        "compile_s": None,
        "gflops": None,
        "speedup": None,
        "efficiency": None,
        "vs_reference": None,
        "collective_bytes": None,
        "collective_counts": None,
        "collective_mib": 0.0 if impl.on == "device" else None,
        "model_mib": model,
        "model_ratio": None,
        "plan": None,
        "peak_mib": None,
        "flops_per_device": None,
        "cost_exact": None,
        "error_ratio": None,
        "error": None,
        "note": None,
    }


def ideal_speedup(devices: int, platform_name: str) -> int:
    """``devices`` on accelerators; 1 on simulated CPU devices, which share the cores."""
    return devices if platform_name != "cpu" else 1


def derive(rows: list[dict[str, Any]]) -> None:
    """GFLOP/s, speedup and efficiency against the reference; measured/model."""
    import jax

    plat = jax.default_backend()
    ref = {
        tuple(r["shape"]): r for r in rows if r["reference"] and r["time_s"] is not None
    }  # shape -> one-device reference row
    for r in rows:
        if r["time_s"] is None:
            continue
        r["gflops"] = r["flops"] / r["time_s"] / 1e9
        base = ref.get(tuple(r["reference_shape"]))
        if base is not None:
            speed = (r["flops"] / r["time_s"]) / (base["flops"] / base["time_s"])
            r["speedup"] = speed
            r["efficiency"] = speed / ideal_speedup(r["devices"], plat)
            r["vs_reference"] = r["time_s"] / base["time_s"]  # lower is better
        if r["plan"] == "one_device":  # the model is the distributed algorithm's
            r["model_mib"] = None
        if r["model_mib"] is not None and r["collective_mib"] is not None and r["model_mib"] > 0:
            r["model_ratio"] = r["collective_mib"] / r["model_mib"]
