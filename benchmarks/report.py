"""Turn a pytest-benchmark JSON file into the ratio tables of docs/benchmarks-log.md.

    python benchmarks/report.py out/matmul.json [more.json ...]

Within each benchmark group, every ``role="distla"`` case is divided by
every ``role="baseline"`` case of the same group (medians of one run), and
its collective bytes by its communication model where the case records one.
"""

from __future__ import annotations

import json
import sys

from distla.tools.table import format_table


def _fmt_time(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 10 else f"{s:.2f} s"


def report(paths: list[str]) -> str:
    groups: dict[str, list[dict]] = {}
    machine = None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        machine = machine or data.get("machine_info", {})
        for b in data["benchmarks"]:
            groups.setdefault(b.get("group") or b["name"], []).append(b)
    out = []
    if machine:
        cpu = machine.get("cpu", {})
        out.append(
            f"Machine: {cpu.get('brand_raw', '?')}, {cpu.get('count', '?')} cores; "
            f"python {machine.get('python_version')}."
        )
    for group, rows in groups.items():
        base = [r for r in rows if r["extra_info"].get("role") == "baseline"]
        mine = [r for r in rows if r["extra_info"].get("role") != "baseline"]
        out.append(f"\n### {group}\n")
        cols = [
            "case",
            "median",
            "GFLOP/s",
            *[f"vs {b['extra_info']['name']}" for b in base],
            "coll. bytes / model",
            "peak MiB/dev",
        ]
        efficiency = any("flop_efficiency" in r["extra_info"] for r in rows)
        if efficiency:
            cols.append("flop efficiency")
        table = []
        for r in base + mine:
            info, med = r["extra_info"], r["stats"]["median"]
            flops = info.get("flops")
            cells = [
                info.get("name", r["name"]),
                _fmt_time(med),
                f"{flops / med / 1e9:.1f}" if flops else "-",
            ]
            for b in base:
                cells.append("-" if r is b or r in base else f"{med / b['stats']['median']:.2f}x")
            model = info.get("model_bytes")
            cells.append(f"{info['collective_bytes'] / model:.3f}" if model else "-")
            peak = info.get("peak_bytes")
            cells.append(f"{peak / 2**20:.1f}" if peak else "-")
            if efficiency:
                eff = info.get("flop_efficiency")
                cells.append(f"{eff:.2f}" if eff else "-")
            table.append(cells)
        out.append(format_table(cols, table, markdown=True))
    return "\n".join(out)


if __name__ == "__main__":
    print(report(sys.argv[1:]))
