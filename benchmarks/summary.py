"""docs/benchmarks.md and its plots, from the recorded data in docs/data/.

    python benchmarks/summary.py          # writes docs/benchmarks.md and docs/img/bench-*.png

One table and one plot per family, from the runs recorded in ``docs/data/``
(``bench_vs_jnp.py``'s and ``bench_batched.py``'s JSON). Nothing is measured
here: to refresh a family, rerun its command (in the page) and this script.
The measurement log, with every run and its notes, is docs/benchmarks-log.md.
tests/test_benchmarks_page.py checks that the page is what this script writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"
PAGE = ROOT / "docs" / "benchmarks.md"
IMG = ROOT / "docs" / "img"


def _vs_jnp(*files: str) -> tuple[list[dict], dict]:
    rows, machine = [], {}
    for name in files:
        doc = json.loads((DATA / name).read_text())
        machine = {"machine": doc["machine"], "cpus": doc["cpus"], "file": name}
        rows += [dict(r, source=name) for r in doc["rows"]]
    return rows, machine


# family: (title, the runs, the functions, what the rows say, the command)
FAMILIES = {
    "matmul": (
        "Matmul",
        ("vs-jnp-2048.json", "vs-jnp-4096.json"),
        ("matmul",),
        "On `Auto` meshes `distla.matmul` is level with jnp's product (XLA's partitioning "
        "of `P(x, y) @ P(x, y)` is itself a one-step SUMMA) and within 1.15-1.6x of one "
        "device. On `Explicit` meshes jnp refuses the sharded product; what a user must "
        "write instead gathers the result onto every device, and distla is 8x faster.",
        "--sizes 2048 / 4096",
    ),
    "lu": (
        "LU, solve, inv, slogdet",
        ("vs-jnp-plans.json",),
        ("solve", "lu_factor", "inv", "slogdet"),
        "jnp's own partitioning gathers the matrix onto every device and solves it 8 times "
        "over: distla takes 0.14-0.47x its time. `solve` takes the one-device plan up to "
        "4096 here and runs at one device's speed; the distributed LU runs from 2048 up "
        "(`lu_factor`, `inv`, `slogdet`) at 1.7-3.5x one device on these shared cores.",
        "--sizes 1024 2048 4096 --only solve lu_factor inv slogdet",
    ),
    "cholesky": (
        "Cholesky",
        ("vs-jnp-2048.json", "vs-jnp-4096.json"),
        ("cholesky",),
        "The distributed Cholesky: 0.21-0.27x jnp's time on the sharded input, 1.8x one "
        "device on these shared cores.",
        "--sizes 2048 / 4096",
    ),
    "qr": (
        "QR",
        ("vs-jnp-2048.json", "vs-jnp-4096.json"),
        ("qr",),
        "Blocked Householder QR on the block-cyclic layout: faster than one device "
        "(0.65-0.73x) and 0.14-0.17x jnp's time.",
        "--sizes 2048 / 4096",
    ),
    "spectral": (
        "Eigh, SVD, polar",
        ("vs-jnp-2048.json", "vs-jnp-4096.json"),
        ("eigh", "eigvalsh", "svd", "svdvals", "polar"),
        "Up to 4096 `plan='auto'` sends the matrix to one device and back: one device's "
        "speed (0.97-1.08x), 0.17-0.28x jnp's, which repeats the whole LAPACK call on "
        "each of the 8 devices. `plan='distributed'` runs QDWH and the tridiagonal eigh; "
        "on 8 devices sharing 2 cores they lose to one device at these sizes.",
        "--sizes 2048 / 4096",
    ),
    "fft": (
        "FFT",
        ("vs-jnp-fft.json", "vs-jnp-2048.json"),
        ("fftn", "rfftn", "fft2"),
        "The pencil and slab-pencil plans: 0.08-0.55x jnp's time on the same sharded "
        "volume. `fftn` at 128³ and 256³ takes 1.3-1.5x one device's time (two all_to_alls "
        "and their copies on top of one device's three passes, on the same two cores); "
        "smaller volumes, the real and the 2-D transforms 2.2-4.8x, where the exchanges' "
        "fixed costs dominate. n is the volume's side (n³ points; `fft2`: n planes "
        "of n x n).",
        "--sizes 64 128 (FFTs), --sizes 2048 (fftn at 256³)",
    ),
}
# `python -m distla demo` with no arguments, timed on the machine above
DEMO_TIME = (
    "on this machine, idle, 2026-11-29, a fresh clone, `--no-compile-cache`: 12 s of wall "
    "time, 17 s of CPU time; on 2026-11-28 with other jobs keeping its load average at "
    "12-14 on 2 cores: 78 s of wall time, 22 s of CPU time"
)


def _rows(family: str) -> tuple[list[dict], dict]:
    _, files, functions, _, _ = FAMILIES[family]
    rows, machine = _vs_jnp(*files)
    keep = [r for r in rows if r["function"] in functions]
    keep.sort(key=lambda r: (functions.index(r["function"]), r["n"], r["mesh"]))
    return keep, machine


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f}" if s < 10 else f"{s * 1e3:.0f}"


def table(rows: list[dict]) -> str:
    head = (
        "| function | n | mesh | plan | distla ms | jnp ms (sharded) | one device ms "
        "| vs jnp | vs one device |\n|---|--:|---|---|--:|--:|--:|--:|--:|"
    )
    body = []
    for r in rows:
        kind = r["mesh"].split()[-1]
        body.append(
            f"| `{r['function']}` | {r['n']} | 2x4 {kind} | {r['plan'].replace('_', '-')} "
            f"| {_ms(r['distla'])} | {_ms(r['jnp'])} | {_ms(r['1dev'])} "
            f"| {r['distla'] / r['jnp']:.2f}x | {r['distla'] / r['1dev']:.2f}x |"
        )
    return "\n".join([head, *body])


def plot(rows: list[dict], title: str, path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    labels = [f"{r['function']}\n{r['n']}\n{r['mesh'].split()[-1]}" for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(max(5.5, 0.62 * len(rows) + 1.5), 3.6))
    vs_jnp = [r["distla"] / r["jnp"] for r in rows]
    vs_one = [r["distla"] / r["1dev"] for r in rows]
    ax.bar(x - 0.2, vs_jnp, 0.4, label="distla / jnp on the sharded input", color="tab:blue")
    ax.bar(x + 0.2, vs_one, 0.4, label="distla / one device", color="tab:orange")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    ticks = [
        v for v in (0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10) if 0.5 * min(vs_jnp) < v < 2 * max(vs_one)
    ]
    ax.set_yticks(ticks, [f"{v:g}x" for v in ticks])
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylabel("time ratio (lower is better)")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_title(f"{title}: 8 simulated CPU devices on 2 cores", fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 1), ncol=2, frameon=False)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)


def _batched() -> tuple[str, str]:
    doc = json.loads((DATA / "bench-batched.json").read_text())
    cases: dict[tuple[int, int], dict[str, float]] = {}
    for b in doc["benchmarks"]:
        e = b["extra_info"]
        key = (e["batch"], e["n"])
        cases.setdefault(key, {})[e["name"]] = b["stats"]["median"]
    lines = [
        "| stack | mesh | distla ms | jnp ms (sharded) | one device ms | vs jnp | vs one device |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for (batch, n), t in sorted(cases.items(), reverse=True):
        one, xla = t["one device: jnp.linalg.solve"], t["XLA: jnp.linalg.solve, sharded"]
        for mesh in ("2x4 explicit", "2x4 auto", "8 explicit", "8 auto"):
            mine = t[f"distla.linalg.solve {mesh}"]
            kind = mesh.replace("explicit", "Explicit").replace("auto", "Auto")
            lines.append(
                f"| {batch} x {n}x{n} | {kind} "
                f"| {_ms(mine)} | {_ms(xla)} | {_ms(one)} | {mine / xla:.2f}x | {mine / one:.2f}x |"
            )
    cpu = doc["machine_info"]["cpu"]["brand_raw"]
    return "\n".join(lines), f"{cpu}, 2 cores, {doc['datetime'][:10]}"


def page() -> tuple[str, dict[str, list[dict]]]:
    """The page's markdown, and the rows each family's plot draws."""
    _, machine = _vs_jnp("vs-jnp-2048.json")
    out = [
        "# Benchmarks",
        "",
        "What is fast and what is not, on one small machine: a "
        f"{machine['cpus']}-core x86-64 virtual machine (`{machine['machine']}` in the data) "
        "with **8 simulated CPU devices sharing those 2 cores**, jax 0.10.2, float32, a 2 x 4 "
        "mesh, idle, 2026-11-26 and 27. Medians after a compile and a warm-up call.",
        "",
        "- **vs jnp**: distla's time / the time of jnp's own function on the same sharded "
        "input, partitioned by XLA (lower is better; 0.50x is twice as fast).",
        "- **vs one device**: distla's time / jnp's function on one device. Simulated "
        "devices share the machine's cores, so **1.00x is the best possible here**; on "
        "real devices the same programs divide the work by the number of devices.",
        "- **plan**: what `plan='auto'` chose: the distributed algorithm, or the matrix to "
        "one device and back (one-device) where that is faster at this size "
        "([Plans](api.md#plans)).",
        "- Collective bytes and peak memory per device, which do not depend on the machine, "
        "are on each capability's page, checked against its communication model.",
        "",
        "The tables and plots are generated by `python benchmarks/summary.py` from the runs "
        "recorded in [`docs/data/`](data/vs-jnp-2048.json); the command of each run is "
        "under its table. Every run, with its notes, the GPU runs (jax 0.11.2 on an NVIDIA "
        "H200) and the compile times, is in the [measurement log](benchmarks-log.md).",
        "",
        f"The main job on your machine: `python -m distla demo` ({DEMO_TIME}).",
        "",
    ]
    plotted = {}
    for family, (title, files, _, says, sizes) in FAMILIES.items():
        rows, _ = _rows(family)
        plotted[family] = rows
        out += [
            f"## {title}",
            "",
            says,
            "",
            table(rows),
            "",
            f"![{title}: distla's time over jnp's and over one device's](img/bench-{family}.png)",
            "",
            f"Data: {', '.join(f'[`{f}`](data/{f})' for f in files)}; "
            f"`python benchmarks/bench_vs_jnp.py {sizes}`.",
            "",
        ]
    text, where = _batched()
    out += [
        "## Batched solves",
        "",
        "A stack sharded along its members: each device solves its own, with no "
        "communication at all (0 collectives): 0.69-0.98x one device's time, level with "
        "jnp (0.76-1.09x), which partitions a stack the same way.",
        "",
        text,
        "",
        f"Data: [`bench-batched.json`](data/bench-batched.json) ({where}, 15 rounds); "
        "`DISTLA_BENCH_ROUNDS=15 pytest benchmarks/bench_batched.py "
        "--benchmark-json=out/batched.json`. Read these ratios to about ±30%: two runs of "
        "5 rounds just before put the same case at 0.82x and 1.28x jnp's time.",
        "",
    ]
    out += _fft_side()
    return "\n".join(out), plotted


def _fft_side() -> list[str]:
    """The FFT side's contracts: dctn within 1.3x of fftn, prfft3d at most 0.7x of pfft3d."""
    doc = json.loads((DATA / "fft-side.json").read_text())
    lines = [
        "| mesh | n³ | fftn ms | dctn ms | dctn / fftn | pfft3d ms | prfft3d ms "
        "| prfft3d / pfft3d | bytes prfft3d / pfft3d | jaxdecomp pfft3d ms | halo ms "
        "| jaxdecomp halo ms |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in doc["rows"]:
        lines.append(
            f"| {r['mesh']} | {r['n']} | {r['fftn_ms']:.1f} | {r['dctn_ms']:.1f} "
            f"| {r['dctn_ms'] / r['fftn_ms']:.2f}x | {r['pfft3d_ms']:.1f} "
            f"| {r['prfft3d_ms']:.1f} | {r['prfft3d_ms'] / r['pfft3d_ms']:.2f}x "
            f"| {r['bytes_ratio']:.3f} | {r['jaxdecomp_pfft3d_ms']:.1f} | {r['halo_ms']:.1f} "
            f"| {r['jaxdecomp_halo_ms']:.1f} |"
        )
    return [
        "## The FFT side: DCTs, prfft3d, halo_exchange",
        "",
        "`distla.scipy.fft.dctn` of a float32 volume against `distla.fft.fftn` of a "
        "complex64 one of the same size (the target: within 1.3x), `prfft3d` against "
        "`pfft3d` (the target: at most 0.7x of its time and about half its bytes), "
        "jaxdecomp's own `pfft3d` and `halo_exchange` (2 ghost cells per side) beside "
        "distla's. Each case is called in turn, round after round; medians.",
        "",
        *lines,
        "",
        f"Data: [`fft-side.json`](data/fft-side.json) ({doc['date']}, {doc['machine']}; "
        f"{doc['load']}); `{doc['command']}`.",
        "",
    ]


def main(argv: list[str]) -> int:
    text, plotted = page()
    if argv[:1] == ["--check"]:
        return 0 if PAGE.read_text() == text else 1
    PAGE.write_text(text)
    for family, rows in plotted.items():
        plot(rows, FAMILIES[family][0], IMG / f"bench-{family}.png")
    print(f"wrote {PAGE} and {len(plotted)} plots in {IMG}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
