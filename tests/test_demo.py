"""``python -m distla demo``: every capability's row, small, in a subprocess of its own.

The demo is the scaling study's operation table (distla/tools/ops) run at one
mesh and one size per operation; every row's scaled ratio must pass. Its
output goes to a pipe here, as on a cluster or in CI: one progress line per row,
a table and notes of at most 100 columns.
"""

import subprocess
import sys

import pytest
from helpers import THRESHOLD

from distla.tools import cli, demo


def test_demo_prints_a_row_per_operation_that_passes():
    proc = subprocess.run(
        [sys.executable, "-m", "distla", "demo", "--scale", "0.4", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert max(map(len, lines)) <= demo.WIDTH, max(lines, key=len)
    progress = [line for line in lines if line.startswith("[")]
    assert [p.split("]")[0] for p in progress] == [f"[{i}/9" for i in range(1, 10)]
    assert all(p.endswith("passed") for p in progress), progress
    header = next(i for i, line in enumerate(lines) if line.startswith("operation"))
    assert progress and lines.index(progress[-1]) < header  # progress first, then the table
    assert "distla's time / the other's time (lower is better" in proc.stdout
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
        # columns from the right: err ratio, coll MiB, peak MiB, vs 1 dev, vs XLA
        assert float(r[-5]) <= THRESHOLD, r
        assert r[-2].endswith("x") and r[-1].endswith("x"), r  # both baselines ran
    notes = " ".join(line.strip() for line in lines if line.startswith("  "))
    assert "solve (LU): vs 1 dev: one device: scipy.linalg.solve" in notes
    assert "the model of docs/matmul.md" in notes, notes
    assert "demo finished in" in lines[-1]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scale", "-1"], "must be a positive number"),
        (["--scale", "0"], "must be a positive number"),
        (["--scale", "nan"], "must be a positive number"),
        (["--rounds", "0"], "must be at least 1"),
        (["--rounds", "two"], "expected a positive integer"),
        (["--only", "lstsq"], "invalid choice"),
        (["--full", "--scale", "2"], "not allowed with argument"),
    ],
    ids=["scale-negative", "scale-zero", "scale-nan", "rounds-zero", "rounds-text", "only", "both"],
)
def test_bad_arguments_exit_2_before_jax_starts(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["demo", *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_sizes_default_full_and_scaled():
    assert demo.size_factor(cli.parse(["demo"])) == demo.QUICK
    assert demo.size_factor(cli.parse(["demo", "--full"])) == 1.0
    assert demo.size_factor(cli.parse(["demo", "--scale", "2"])) == 2 * demo.QUICK
    sizes = {op.name: op.demo.size(demo.QUICK, 8) for op in demo.demo_ops()}
    # every device holds a share: each matrix dimension at least 32 rows per device
    assert sizes["matmul"] == (512,) and sizes["solve"] == (256,) and sizes["fft"] == (32,)


def test_progress_lines_and_a_table_that_fits(capsys):
    """The run loop with a stand-in row: a flushed line per row, notes wrapped to WIDTH."""

    def row(op, scale, rounds):
        cells = (op.demo.label, "4096x4096x4096", "2x4", "12345.6 ms", "0.31", "123.45", "1234.5")
        return (*cells, "1.23x", "0.45x"), "a long note " * 30, True

    class Pipe:
        def __init__(self):
            self.lines = []

        def isatty(self):
            return False

        def write(self, text):
            self.lines.append(text)

        def flush(self):
            pass

    out = Pipe()
    progress = demo.RowProgress(3, show=True, stream=out)
    text, passed = demo.run(1.0, 1, only=["fft", "qr"], progress=progress, row=row)
    assert passed
    shown = "".join(out.lines).splitlines()
    assert [s.split(":")[0] for s in shown] == ["[1/3] fftn", "[2/3] rfftn", "[3/3] qr"]
    lines = text.splitlines()
    assert lines[0].split() == " ".join(demo.HEADER).split()
    assert max(map(len, lines)) <= demo.WIDTH, max(lines, key=len)
    assert sum(line.startswith("  fftn: a long note") for line in lines) == 1
