"""The results of a scaling study: the document (``results.json``) and its markdown table."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .ops import Operation
from .ops.base import dims
from .run import RunSpec
from .table import format_table


def machine() -> dict[str, Any]:
    """The CPU, cores, memory, platform and devices this process runs on."""
    import jax

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    mem = None
    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    devs = jax.devices()
    return {
        "system": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cores": cores,
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": jax.default_backend(),
        "device_kind": devs[0].device_kind,
        "device_count": len(devs),
        "simulated_cpu_devices": jax.default_backend() == "cpu" and len(devs) > 1,
    }


def versions() -> dict[str, str]:
    import jax
    import jaxlib

    import distla

    out = {"distla": distla.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__}
    out["numpy"] = np.__version__
    try:
        import scipy

        out["scipy"] = scipy.__version__
    except ImportError:
        pass
    return out


def document(
    op: Operation, plan: RunSpec, rows: list[dict[str, Any]], wall: float, argv: Sequence[str]
) -> dict[str, Any]:
    """Every figure of a study with its context: command, machine, versions, models."""
    models = {v.name: v.model_text or None for v in op.variants}
    return {
        "command": " ".join(["python -m distla scaling", *map(shlex.quote, argv)]),
        "argv": list(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "op": op.name,
        "api": op.api,
        "mode": plan.mode,
        "weak_rule": op.weak_rule if plan.mode == "weak" else None,
        "dtype": plan.dtype,
        "sizes": [list(s) for s in plan.sizes],
        "meshes": [dims(g) for g in plan.meshes],
        "rounds": plan.rounds,
        "baselines": plan.baselines,
        "machine": machine(),
        "versions": versions(),
        "model": {"source": op.model_source, "formulas": models},
        "efficiency": (
            "throughput relative to the one-device reference ("
            + op.baselines[0].name
            + ") divided by the ideal speedup: p devices on accelerators, 1 on simulated CPU "
            "devices, which share the machine's cores"
        ),
        "units": {"time_s": "seconds (median)", "mib": "2**20 bytes per device"},
        "wall_s": wall,
        "rows": rows,
    }


def _fmt(x: Any, spec: str, none: str = "–") -> str:
    return none if x is None else format(x, spec)


COLUMNS = (
    "impl", "shape", "mesh", "dev", "time ms", "GFLOP/s", "vs 1 dev", "coll MiB/dev",
    "model MiB/dev", "meas/model", "peak MiB/dev", "err ratio",
)  # fmt: skip


def markdown(doc: dict[str, Any]) -> str:
    """``results.md``: a header of context and one table row per case."""
    m = doc["machine"]
    v = doc["versions"]
    lines = [
        f"# distla scaling: {doc['op']} ({doc['mode']} scaling, {doc['dtype']})",
        "",
        f"- command: `{doc['command']}`",
        f"- machine: {m['cpu']}, {m['cores']} cores; {m['device_count']} {m['platform']} "
        f"devices{' (simulated: they share the cores)' if m['simulated_cpu_devices'] else ''}",
        f"- versions: distla {v['distla']}, jax {v['jax']}, jaxlib {v['jaxlib']}, "
        f"numpy {v['numpy']}",
        f"- efficiency: {doc['efficiency']}",
    ]
    if doc["weak_rule"]:
        lines.append(f"- weak scaling: {doc['weak_rule']}")
    formulas = [f"{k}: {f}" for k, f in doc["model"]["formulas"].items() if f]
    if formulas:
        lines.append(
            f"- model (received per device; {doc['model']['source']}): " + "; ".join(formulas)
        )
    else:
        lines.append(f"- model: **{doc['model']['source']}**")
    cells = []
    for r in doc["rows"]:
        time_ms = None if r["time_s"] is None else r["time_s"] * 1e3
        cells.append([
            r["impl"] + (" [one-device plan]" if r.get("plan") == "one_device" else "")
            + (f" (failed: {r['error']})" if r["error"] else ""),
            r["shape_text"],
            r["mesh"],
            str(r["devices"]),
            _fmt(time_ms, ".1f"),
            _fmt(r["gflops"], ".1f"),
            _fmt(r.get("vs_reference"), ".2f", "–") + ("x" if r.get("vs_reference") else ""),
            _fmt(r["collective_mib"], ".2f"),
            _fmt(r["model_mib"], ".2f"),
            _fmt(r["model_ratio"], ".3f"),
            _fmt(r["peak_mib"], ".1f"),
            _fmt(r["error_ratio"], ".3g"),
        ])  # fmt: skip
    lines += ["", format_table(COLUMNS, cells, markdown=True, right=range(3, len(COLUMNS)))]
    notes = [r for r in doc["rows"] if r["note"]]
    if notes:
        lines.append("")
        lines += [f"- note, {r['impl']} on {r['mesh']}: {r['note']}" for r in notes]
    lines += [
        "",
        "vs 1 dev: time / the one-device reference's time at the same size (weak scaling: at "
        "the 1-device size); lower is better, 0.50x is twice as fast. The parallel efficiency "
        "(results.json, the plot) is throughput relative to that reference over the ideal "
        "speedup. err ratio: LAPACK's scaled residual ratio, passes at <= 30. MiB per device "
        "from `distla.cost` (the compiled program).",
        "",
    ]
    return "\n".join(lines)


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """Write results.json, results.md and scaling.png into ``out``."""
    from .plot import plot

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md", out / "scaling.png"]
    paths[0].write_text(json.dumps(doc, indent=1, default=float) + "\n")
    paths[1].write_text(markdown(doc))
    plot(doc, paths[2])
    return paths
