"""``python -m distla demo``: every capability's row, small, in a subprocess of its own.

The demo is the scaling study's operation table (distla/tools/ops) run at one
mesh and one size per operation; every row's scaled ratio must pass.
"""

import subprocess
import sys

from helpers import THRESHOLD


def test_demo_prints_a_row_per_operation_that_passes():
    proc = subprocess.run(
        [sys.executable, "-m", "distla", "demo", "--scale", "0.05", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("operation"))
    rows = []
    for line in lines[header + 2 :]:  # the table ends where the notes begin
        if not line or line.startswith(" "):
            break
        rows.append(line.split())
    ops = [r[0] for r in rows]
    for op in ("matmul", "solve", "batched", "fftn", "rfftn", "cholesky", "qr", "eigh", "svd"):
        assert op in ops, proc.stdout
    assert len(rows) == 9, proc.stdout
    for r in rows:
        # columns from the right: vs XLA, vs 1 dev, peak, coll, err ratio
        assert float(r[-5]) <= THRESHOLD, r
        assert r[-2].endswith("x") and r[-1].endswith("x"), r  # both baselines ran
    notes = [line for line in lines if line.startswith("  ")]
    assert any("solve (LU): vs 1 dev: one device: scipy.linalg.solve" in n for n in notes)
    assert any("the model of docs/matmul.md" in n for n in notes), notes
