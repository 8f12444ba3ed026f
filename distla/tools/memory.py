"""``python -m distla scaling --memory``: peak memory per device against n, and the largest n.

For each family asked for, every size and the largest mesh asked for, this
compiles (never runs) distla's distributed call and jnp's call on the same
input sharded in 2D blocks on an ``Auto`` mesh (where jnp's call is
partitioned by XLA) and reads ``distla.cost(...).peak_memory_bytes`` of each: what
one device holds at the high-water mark. It then states the largest ``n`` each
can run with a given memory per device, extrapolating the peak of the largest
size as ``c·n²`` (the operand's ``n²``-sized blocks dominate both), and writes::

    DIR/memory.json   every figure, the device memory, the largest n
    DIR/memory.md     the same as a table
    DIR/memory.png    peak MiB per device against n, one panel per family
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .ops import ScalingError

#: Families the memory study knows, in the order it runs them.
FAMILIES = ("matmul", "solve", "lu_factor", "cholesky", "inv", "qr", "eigh", "svd", "expm")
#: A short default run: three families, three sizes.
DEFAULT_FAMILIES = ("matmul", "cholesky", "eigh")
DEFAULT_SIZES = (256, 512, 1024)
#: Memory per device assumed when jax reports none (CPU devices): 16 GiB.
DEFAULT_DEVICE_MEMORY = 16 * 2**30

_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 10**3, "kib": 2**10, "m": 2**20, "mb": 10**6}
_UNITS.update({"mib": 2**20, "g": 2**30, "gb": 10**9, "gib": 2**30, "t": 2**40, "tb": 10**12})
_UNITS["tib"] = 2**40


def parse_bytes(text: str) -> int:
    """``"16GiB"``, ``"512MB"``, ``"1e9"`` as bytes (``ScalingError`` otherwise)."""
    found = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = found and _UNITS.get(found.group(2).lower())
    if not found or unit is None:
        raise ScalingError(
            f"bad --device-memory {text!r}: write bytes with a unit, for example 16GiB or 80GB"
        )
    value = float(found.group(1)) * unit
    if value < 1:
        raise ScalingError(f"--device-memory must be positive; got {text!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class MemorySpec:
    """What ``--memory`` measures: families, sizes, one mesh, dtype, memory per device."""

    families: tuple[str, ...]
    sizes: tuple[int, ...]
    mesh: tuple[int, int]
    dtype: str
    device_memory: int | None  # None: the device's own, else DEFAULT_DEVICE_MEMORY


def spec_of(args: Any, split: Callable[[Any], list[str]]) -> tuple[MemorySpec, Path]:
    """Validate ``--memory``'s arguments (no devices needed): its spec and output folder."""
    families = tuple(split(args.families)) or DEFAULT_FAMILIES
    for f in families:
        if f not in FAMILIES:
            raise ScalingError(f"unknown family {f!r}; choose from {', '.join(FAMILIES)}")
    sizes = []
    for text in split(args.sizes):
        if not re.fullmatch(r"\d+", text) or int(text) < 2:
            raise ScalingError(f"bad size {text!r}: --memory takes sizes n >= 2 (n x n)")
        sizes.append(int(text))
    meshes = []
    for text in split(args.meshes):
        parts = text.lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ScalingError(f"bad mesh {text!r}: write meshes as ROWSxCOLS, for example 2x4")
        meshes.append((int(parts[0]), int(parts[1])))
    if not meshes:
        raise ScalingError("--meshes is empty")
    dtype = args.dtype or "float32"
    if dtype not in ("float32", "float64", "complex64", "complex128"):
        raise ScalingError("--memory takes --dtype float32, float64, complex64, complex128")
    memory = None if args.device_memory is None else parse_bytes(args.device_memory)
    spec = MemorySpec(
        families=tuple(dict.fromkeys(families)),
        sizes=tuple(sorted(set(sizes))) or DEFAULT_SIZES,
        mesh=max(meshes, key=lambda m: (m[0] * m[1], m)),
        dtype=dtype,
        device_memory=memory,
    )
    return spec, Path(args.out or "scaling-memory")


def _calls(family: str) -> tuple[Callable[..., Any], Callable[..., Any], int]:
    """``(distla's call, jnp's call, operands)`` of ``family`` on ``n x n`` operands."""
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    import distla
    import distla.linalg as dl

    d = "distributed"
    table = {
        "matmul": (lambda a, b: distla.matmul(a, b), jnp.matmul, 2),
        "solve": (lambda a, b: dl.solve(a, b, plan=d), jnp.linalg.solve, 2),
        "lu_factor": (lambda a: dl.lu_factor(a, plan=d), jsl.lu_factor, 1),
        "cholesky": (lambda a: dl.cholesky(a, plan=d), jnp.linalg.cholesky, 1),
        "inv": (lambda a: dl.inv(a, plan=d), jnp.linalg.inv, 1),
        "qr": (lambda a: dl.qr(a), jnp.linalg.qr, 1),
        "eigh": (lambda a: dl.eigh(a, plan=d), jnp.linalg.eigh, 1),
        "svd": (lambda a: dl.svd(a, plan=d), jnp.linalg.svd, 1),
        "expm": (lambda a: dl.expm(a, plan=d), jsl.expm, 1),
    }
    return table[family]


def device_memory(spec: MemorySpec) -> tuple[int, str]:
    """The memory per device the largest n is stated for, and where it came from."""
    import jax

    if spec.device_memory is not None:
        return spec.device_memory, "--device-memory"
    stats = jax.devices()[0].memory_stats() or {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"{jax.devices()[0].device_kind} (jax's bytes_limit)"
    return DEFAULT_DEVICE_MEMORY, "default (jax reports none for these devices)"


def largest_n(points: Sequence[tuple[int, int]], memory: int) -> int | None:
    """The largest ``n`` whose peak fits ``memory``: the peak of the largest size
    measured extrapolated as ``c·n²`` (``None`` with no measurement)."""
    if not points:
        return None
    n, peak = max(points)
    if peak <= 0:
        return None
    return int(n * math.sqrt(memory / peak))


def measure(spec: MemorySpec, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Compile every family at every size for distla and jnp; the results document."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import distla

    # an Auto mesh: jnp's call partitions itself there (XLA's own answer for a sharded
    # operand); distla's call works on both kinds
    devices = jax.devices()[: spec.mesh[0] * spec.mesh[1]]
    mesh = distla.make_mesh(spec.mesh, devices=devices, axis_types=jax.sharding.AxisType.Auto)
    dtype = np.dtype(spec.dtype)
    memory, source = device_memory(spec)
    rows = []
    for family in spec.families:
        ours, theirs, count = _calls(family)
        for n in spec.sizes:
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rows", "cols"))
            operands = [jax.ShapeDtypeStruct((n, n), dtype, sharding=sharding)] * count
            for impl, fn in (("distla", ours), ("jnp", theirs)):
                try:
                    with jax.set_mesh(mesh):
                        cost = distla.cost(fn, *operands)
                    peak, plan, error = cost.peak_memory_bytes, cost.plan, None
                except Exception as e:  # a failure is a row, not the end of the study
                    peak, plan, error = None, None, f"{type(e).__name__}: {str(e)[:200]}"
                share = n * n * dtype.itemsize / (spec.mesh[0] * spec.mesh[1])
                rows.append(
                    {
                        "family": family,
                        "impl": impl,
                        "n": n,
                        "peak_bytes": peak,
                        "shares": None if peak is None else round(peak / share, 2),
                        "plan": plan,
                        "error": error,
                    }
                )
                progress(
                    f"{family:10s} {impl:6s} n={n:<6d} "
                    + (f"{peak / 2**20:10.2f} MiB" if peak is not None else f"failed: {error}")
                )
    del jnp
    largest = {
        f"{f}/{impl}": largest_n(
            [
                (r["n"], r["peak_bytes"])
                for r in rows
                if r["family"] == f and r["impl"] == impl and r["peak_bytes"]
            ],
            memory,
        )
        for f in spec.families
        for impl in ("distla", "jnp")
    }
    return {
        "mesh": "x".join(map(str, spec.mesh)),
        "dtype": spec.dtype,
        "device_memory": memory,
        "device_memory_source": source,
        "rows": rows,
        "largest_n": largest,
    }


def markdown(doc: dict[str, Any]) -> str:
    """The study as text: peak MiB per device per size, and the largest n."""
    gib = doc["device_memory"] / 2**30
    lines = [
        f"Peak memory per device (distla.cost, compile only), {doc['dtype']} on a "
        f"{doc['mesh']} mesh; shares = peak / (n² · itemsize / devices).",
        "",
        "| family | impl | plan | n | peak MiB | shares |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        peak = "failed" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.2f}"
        lines.append(
            f"| {r['family']} | {r['impl']} | {r['plan'] or ''} | {r['n']} | {peak} "
            f"| {r['shares']} |"
        )
    lines += [
        "",
        f"Largest n with {gib:.1f} GiB per device ({doc['device_memory_source']}), "
        "the largest size's peak extrapolated as c·n²:",
        "",
        "| family | distla | jnp |",
        "|---|---|---|",
    ]
    families = dict.fromkeys(r["family"] for r in doc["rows"])
    for f in families:
        ours, theirs = doc["largest_n"][f"{f}/distla"], doc["largest_n"][f"{f}/jnp"]
        lines.append(f"| {f} | {ours} | {theirs} |")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> None:
    """``memory.png``: peak MiB per device against n, distla and jnp, one panel per family,
    the memory per device as a dashed line and the extrapolation to it dotted."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    families = list(dict.fromkeys(r["family"] for r in doc["rows"]))
    cols = min(3, len(families))
    rows = math.ceil(len(families) / cols)
    fig = Figure(figsize=(4.5 * cols, 3.6 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, family in zip(axes.flat, families):
        for impl, color, style in (("distla", "#1f77b4", "o-"), ("jnp", "#d62728", "s--")):
            pts = [
                (r["n"], r["peak_bytes"] / 2**20)
                for r in doc["rows"]
                if r["family"] == family and r["impl"] == impl and r["peak_bytes"]
            ]
            if pts:
                xs, ys = zip(*sorted(pts))
                best = doc["largest_n"][f"{family}/{impl}"]
                ax.plot(xs, ys, style, color=color, label=f"{impl} (largest n ≈ {best})")
                if best:  # the c·n² extrapolation up to the memory per device
                    top = doc["device_memory"] / 2**20
                    ax.plot([xs[-1], best], [ys[-1], top], ":", color=color)
        ax.axhline(doc["device_memory"] / 2**20, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set(title=family, xlabel="n (dotted: extrapolated as c·n²)")
        ax.set_ylabel("peak MiB per device")
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(families) :]:
        ax.set_visible(False)
    fig.suptitle(
        f"peak memory per device, {doc['dtype']} on {doc['mesh']} (compile only); dashed: "
        f"{doc['device_memory'] / 2**30:.1f} GiB per device"
    )
    fig.savefig(path, dpi=100)


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """``memory.json``, ``memory.md`` and ``memory.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "memory.json", out / "memory.md", out / "memory.png"]
    paths[0].write_text(json.dumps(doc, indent=1))
    paths[1].write_text(markdown(doc) + "\n")
    plot(doc, paths[2])
    return paths
