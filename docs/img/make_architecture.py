"""The picture of distla's layers on docs/architecture.md, drawn from the code's own imports.

    python docs/img/make_architecture.py      # writes architecture.png beside this file

The rooms and the arrows between the families are read from the source files
(the import graph of tests/test_architecture.py, which fails on a cycle or an
import that goes up): a family in a package (``linalg/_lu/``, ``linalg/_eigh/``)
is one room; a module is one room. Within the families' floor a room stands
above the rooms it imports (its height in the graph), so every arrow there
points down or sideways. The route in the floor calls back the functions an op
declares (the dashed arrow): the only way up, and never an import.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from test_architecture import import_graph, layer  # noqa: E402

PNG = {"dpi": 110, "metadata": {"Software": None}}  # no version or date: reproducible files
FLOORS = {  # layer -> (title, colour)
    3: ("public modules: the names users call, re-exported", (0.85, 0.90, 0.98)),
    2: ("families: one room each, named for what it holds", (0.88, 0.95, 0.86)),
    1: ("the floor (_core): the route, the plan, what every family stands on", (0.98, 0.93, 0.82)),
    0: ("kernels: what one device computes, and its collectives", (0.97, 0.86, 0.86)),
}


def room(module: str) -> str:
    """The room a module is drawn in: a family package is one room, and so is a mirror of
    another namespace (``distla.scipy.linalg``)."""
    parts = module.split(".")
    if parts[1:2] in (["linalg"], ["fft"], ["scipy"]) and len(parts) > 3:
        return ".".join(parts[:3])
    return module


def label(name: str) -> str:
    parts = name.split(".")
    if parts[1:2] == ["kernels"]:
        return parts[-1]
    if len(parts) == 1:
        return "distla"
    short = "/".join(parts[1:])
    packages = {"distla.linalg._lu", "distla.linalg._eigh", "distla.scipy.linalg"}
    return short + "/" if name in packages else short


def rooms_and_arrows():
    """``{layer: [room, ...]}`` and the arrows between the families' rooms, from the code."""
    graph = import_graph()
    faces = {"distla._core", "distla.kernels"}  # the packages' __init__: only a docstring
    modules = [m for m in graph if layer(m) <= 3 and m not in faces]
    rooms = defaultdict(set)
    for m in modules:
        rooms[layer(m)].add(room(m))
    arrows = set()
    for m in modules:
        for t, _, _ in graph[m]:
            a, b = room(m), room(t)
            if layer(m) == layer(t) == 2 and a != b and b in rooms[2]:
                arrows.add((a, b))
    return {k: sorted(v) for k, v in rooms.items()}, sorted(arrows)


def heights(names, arrows):
    """Each family room's height: 1 + the highest room it imports (0: imports none)."""
    below = defaultdict(set)
    for a, b in arrows:
        below[a].add(b)
    h = {}

    def height(n):
        if n not in h:
            h[n] = 1 + max((height(b) for b in below[n]), default=-1)
        return h[n]

    for n in names:
        height(n)
    return h


def draw(path: Path) -> None:
    rooms, arrows = rooms_and_arrows()
    fig, ax = plt.subplots(figsize=(15, 10.5))
    ax.set_xlim(0, 15)
    ax.set_ylim(0, 10.5)
    ax.axis("off")
    bands = {3: (9.2, 1.0), 2: (4.0, 5.0), 1: (1.7, 2.1), 0: (0.2, 1.3)}  # y, height
    centre = {}
    for lay, (y, hgt) in bands.items():
        title, colour = FLOORS[lay]
        ax.add_patch(
            FancyBboxPatch(
                (0.2, y), 14.6, hgt, boxstyle="round,pad=0.02", fc=colour, ec="0.5", lw=0.8
            )
        )
        ax.text(0.35, y + hgt - 0.22, title, fontsize=10, weight="bold", va="top")
    # public modules and kernels: one row each; the floor: two rows, the route first
    _row(ax, rooms[3], bands[3][0] + 0.18, 0.45, centre)
    kernels = rooms[0]
    half = (len(kernels) + 1) // 2
    _row(ax, kernels[:half], bands[0][0] + 0.55, 0.32, centre, small=True)
    _row(ax, kernels[half:], bands[0][0] + 0.12, 0.32, centre, small=True)
    floor = sorted(rooms[1], key=lambda n: (n != "distla._core.route", n))
    y, hgt = bands[1]
    half = (len(floor) + 1) // 2
    _row(ax, floor[:half], y + 1.0, 0.5, centre, bold={"distla._core.route"})
    _row(ax, floor[half:], y + 0.25, 0.5, centre)
    # families by height in their import graph, the highest on top: linalg's on the left,
    # fft's on the right; in a row, each room near the rooms it imports
    h = heights(rooms[2], arrows)
    y0, hgt = bands[2]
    for names, (left, right) in (
        ([n for n in rooms[2] if ".linalg." in n], (0.45, 10.3)),
        ([n for n in rooms[2] if ".fft." in n], (10.75, 14.5)),
    ):
        _families(ax, names, h, arrows, centre, left, right, y0 + 0.25, hgt - 1.0)
    for a, b in arrows:
        _arrow(ax, centre[a], centre[b], colour="0.45", width=0.7)
    for upper, lower in ((3, 2), (2, 1), (1, 0)):
        ya, yb = bands[upper][0], bands[lower][0] + bands[lower][1]
        _arrow(ax, (14.45, ya + 0.05), (14.45, yb - 0.02), colour="0.2", width=2.2)
    route = centre["distla._core.route"]
    _arrow(
        ax,
        (route[0] + 0.6, route[1] + 0.25),
        (route[0] + 0.6, bands[2][0] + 0.05),
        colour="tab:red",
        width=1.4,
        dashed=True,
    )
    ax.text(
        route[0] + 0.75,
        bands[2][0] - 0.25,
        "route.call runs each op's declared functions\n"
        "(checks, one-device function, driver, rules)",
        fontsize=8.5,
        color="tab:red",
        va="center",
    )
    ax.text(
        0.3,
        10.35,
        "distla's layers: imports go down only (thick arrows); grey arrows: a family room "
        "imports another",
        fontsize=11,
        va="center",
    )
    fig.savefig(path, bbox_inches="tight", **PNG)
    plt.close(fig)


def _families(ax, names, h, arrows, centre, left, right, y, hgt):
    """``names`` in rows by height, bottom up; a row ordered by where its targets stand."""
    below = defaultdict(list)
    for a, b in arrows:
        below[a].append(b)
    levels = defaultdict(list)
    for n in names:
        levels[h[n]].append(n)
    top = max(levels)
    for lvl in sorted(levels):

        def where(n):
            xs = [centre[b][0] for b in below[n] if b in centre]
            return (sum(xs) / len(xs) if xs else 0.0, n)

        row = sorted(levels[lvl], key=where)
        yy = y + hgt * lvl / max(top, 1)
        _row(ax, row, yy, 0.46, centre, left=left, right=right, widest=1.75)


def _row(ax, names, y, hgt, centre, *, small=False, bold=(), left=0.5, right=13.9, widest=2.0):
    if not names:
        return
    span = right - left
    width = min(widest, span / len(names) - 0.12)
    start = left + (span - len(names) * (width + 0.12)) / 2
    for i, name in enumerate(names):
        x = start + i * (width + 0.12)
        strong = name in bold
        ax.add_patch(
            FancyBboxPatch(
                (x, y),
                width,
                hgt,
                boxstyle="round,pad=0.02",
                fc="white" if not strong else (1.0, 0.85, 0.8),
                ec="tab:red" if strong else "0.35",
                lw=1.6 if strong else 0.7,
            )
        )
        ax.text(
            x + width / 2,
            y + hgt / 2,
            label(name),
            ha="center",
            va="center",
            fontsize=6.5 if small else 7.5,
            weight="bold" if strong else "normal",
        )
        centre[name] = (x + width / 2, y + hgt / 2)


def _arrow(ax, a, b, *, colour, width, dashed=False):
    ax.add_patch(
        FancyArrowPatch(
            a,
            b,
            arrowstyle="-|>",
            mutation_scale=9 + 2 * width,
            color=colour,
            lw=width,
            linestyle="--" if dashed else "-",
            shrinkA=9,
            shrinkB=9,
        )
    )


if __name__ == "__main__":
    draw(HERE / "architecture.png")
