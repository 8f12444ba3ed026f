"""The scaling plot: time, efficiency, collective and peak MiB per device against devices."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .ops import OPERATIONS
from .ops.base import dims

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
_STYLES = ["-", "--", ":", "-."]
_MARKERS = ["o", "s", "^", "D", "v"]
_PANELS = [
    ((0, 0), "time_s", "time per call (s)", True),
    ((0, 1), "efficiency", "parallel efficiency", False),
    ((1, 0), "collective_mib", "collective MiB received per device", True),
    ((1, 1), "peak_mib", "peak MiB per device", True),
]


def plot(doc: dict[str, Any], path: Path) -> None:
    """``scaling.png``: time, efficiency, collective and peak MiB against devices.

    One colour per implementation; in strong scaling one line style per size.
    One-device baselines are horizontal lines in strong scaling (what one
    device does with the whole problem); in weak scaling they sit at the
    device count whose problem they solve. Black bars: the model.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = [r for r in doc["rows"] if r["time_s"] is not None]
    impls = list(dict.fromkeys(r["impl"] for r in doc["rows"]))
    color = {name: _COLORS[i % len(_COLORS)] for i, name in enumerate(impls)}
    series: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        series.setdefault((r["impl"], r["series"]), []).append(r)
    meshes: dict[int, list[str]] = {1: []}
    for r in doc["rows"]:
        if r["role"] == "distla" or r["on"] == "auto":
            meshes.setdefault(r["devices"], []).append(r["mesh"])
    strong = doc["mode"] == "strong"

    fig = Figure(figsize=(12, 9), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    for (i, j), key, label, log in _PANELS:
        _panel(axes[i, j], key, label, log, series, color, strong, meshes)
    axes[1, 0].set_title("black bars: the algorithm's communication model", fontsize=9)
    simulated = doc["machine"]["simulated_cpu_devices"]
    axes[0, 1].set_title(
        "1 = ideal: "
        + ("the one-device throughput (simulated devices share the cores)" if simulated else "")
        + ("" if simulated else "p times the one-device throughput"),
        fontsize=9,
    )
    _legend(fig, doc, impls, color, strong)
    m = doc["machine"]
    fig.suptitle(
        f"distla scaling: {doc['op']} {doc['dtype']}, {doc['mode']} scaling; "
        f"{m['device_count']} {m['platform']} devices"
        f"{' (simulated)' if simulated else ''}, jax {doc['versions']['jax']}"
    )
    fig.savefig(path, dpi=100)


def _panel(ax, key, label, log, series, color, strong, meshes) -> None:
    """One panel: every implementation's series of ``key`` against the device count."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    for (impl, si), rs in series.items():
        rs = sorted(rs, key=lambda r: (r["plot_devices"], r["mesh"]))
        style, mark = _STYLES[si % len(_STYLES)], _MARKERS[si % len(_MARKERS)]
        pts = [(r["plot_devices"], r[key]) for r in rs if r[key] is not None]
        pts = [(x, y) for x, y in pts if y > 0 or not log]
        if pts:
            xs, ys = zip(*pts)
            if strong and rs[0]["on"] in ("device", "host"):
                ax.axhline(ys[0], color=color[impl], ls=style, lw=1, alpha=0.7)
                ax.plot(xs, ys, ls="none", marker=mark, color=color[impl], ms=5)
            else:
                ax.plot(xs, ys, ls=style, marker=mark, color=color[impl], ms=5)
        model = [(r["plot_devices"], r["model_mib"]) for r in rs if r["model_mib"]]
        if key == "collective_mib" and model:
            ax.plot(*zip(*model), ls="none", marker="_", color="black", ms=16, mew=2)
    if key == "efficiency":
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_ylim(bottom=0)
    devices = sorted(meshes)
    ax.set_xscale("log", base=2)
    ax.set_xticks(devices)
    ax.set_xticklabels([f"{d}\n{' '.join(dict.fromkeys(meshes[d]))}" for d in devices])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(devices[0] / 1.4, devices[-1] * 1.4)
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
    ax.set_ylabel(label)
    ax.set_xlabel("devices (meshes)")
    ax.grid(True, which="major", alpha=0.3)


def _legend(fig, doc, impls, color, strong) -> None:
    """One colour per implementation; a line style per size where there are several."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=color[n], lw=2, label=n) for n in impls]
    describe = OPERATIONS[doc["op"]]().describe if doc.get("op") in OPERATIONS else dims
    if len(doc["sizes"]) > 1:
        handles += [
            Line2D(
                [],
                [],
                color="gray",
                ls=_STYLES[i % len(_STYLES)],
                marker=_MARKERS[i % len(_MARKERS)],
                label=("size " if strong else "1-device size ") + describe(s),
            )
            for i, s in enumerate(doc["sizes"])
        ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=9)
