"""``python -m distla scaling``: the three files, their figures, and one-line errors.

Tiny sizes on a couple of meshes: the point is that every figure is there and
right where it can be checked exactly (collective bytes against the model,
the accuracy ratio), not the timings.
"""

import json
import os
import subprocess
import sys

import pytest

from distla.tools import cli
from distla.tools.ops import OPERATIONS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OPS = list(OPERATIONS)


def _scaling(argv):
    """``python -m distla scaling ARGV`` in this process (devices as they are)."""
    return cli.main(["scaling", *argv])


def _run(argv, capsys):
    rc = _scaling(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _load(out_dir):
    return json.loads((out_dir / "results.json").read_text())


@pytest.fixture(scope="module")
def matmul_run(tmp_path_factory):
    """One in-process strong-scaling run of matmul on 1x1, 1x2 and 2x2 (8 devices)."""
    out = tmp_path_factory.mktemp("matmul")
    argv = ["--op", "matmul", "--sizes", "32,48x16x40", "--meshes", "1x1,1x2,2x2"]
    rc = _scaling([*argv, "--rounds", "1", "--out", str(out), "--quiet"])
    return rc, out


def test_matmul_writes_three_files(matmul_run):
    rc, out = matmul_run
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "results.md", "scaling.png"]
    png = (out / "scaling.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 20_000


def test_matmul_json_context(matmul_run):
    doc = _load(matmul_run[1])
    assert doc["command"].startswith("python -m distla scaling --op matmul --sizes 32,48x16x40")
    assert doc["op"] == "matmul" and doc["mode"] == "strong" and doc["dtype"] == "float32"
    assert doc["sizes"] == [[32, 32, 32], [48, 16, 40]]
    assert doc["meshes"] == ["1x1", "1x2", "2x2"]
    assert doc["versions"]["jax"] == __import__("jax").__version__
    assert doc["versions"]["distla"] == __import__("distla").__version__
    assert doc["machine"]["device_count"] == 8 and doc["machine"]["cores"] >= 1
    assert doc["model"]["source"] == "docs/matmul.md"


def test_matmul_rows_cover_every_case(matmul_run):
    rows = _load(matmul_run[1])["rows"]
    cases = {(r["impl"], r["mesh"], r["shape_text"]) for r in rows}
    for shape in ("32x32x32", "48x16x40"):
        for mesh in ("1x1", "1x2", "2x2"):
            assert ("distla.matmul summa", mesh, shape) in cases
        for mesh in ("1x2", "2x2"):  # per-mesh baseline: XLA on the same sharded input
            assert ("jnp.matmul on the sharded input (XLA)", mesh, shape) in cases
        assert ("distla.matmul cannon", "2x2", shape) in cases  # square meshes only
        assert ("distla.matmul cannon", "1x2", shape) not in cases
        assert ("one device: jnp.matmul", "1x1", shape) in cases
    assert len(rows) == 2 * (3 + 1 + 2 + 1)
    for r in rows:
        assert r["error"] is None, r
        assert r["time_s"] > 0 and len(r["times_s"]) == 1 and r["compile_s"] > 0
        assert r["gflops"] > 0 and r["speedup"] > 0 and r["efficiency"] > 0
        assert r["peak_mib"] > 0
        assert r["collective_mib"] is not None


def test_matmul_model_matches_measured_bytes(matmul_run):
    """SUMMA and Cannon move exactly their model where the mesh divides the sizes."""
    rows = _load(matmul_run[1])["rows"]
    checked = 0
    for r in rows:
        if r["role"] != "distla" or r["devices"] == 1:
            continue
        m, k, n = r["shape"]
        pr, pc = map(int, r["mesh"].split("x"))
        if "summa" in r["impl"]:
            elements = (m / pr) * k * (pc - 1) / pc + k * (n / pc) * (pr - 1) / pr
        else:
            elements = (m * k + k * n) / pr
        assert r["model_mib"] == pytest.approx(elements * 4 / 2**20)
        assert r["model_ratio"] == pytest.approx(1.0, rel=1e-6)
        assert r["collective_mib"] == pytest.approx(r["model_mib"], rel=1e-6)
        assert r["error_ratio"] <= 30
        checked += 1
    assert checked == 6
    one = [r for r in rows if r["reference"]]
    assert len(one) == 2 and all(r["collective_mib"] == 0 and r["speedup"] == 1 for r in one)


def test_matmul_markdown_table(matmul_run):
    md = (matmul_run[1] / "results.md").read_text()
    assert "python -m distla scaling --op matmul" in md
    assert "| impl | shape | mesh | dev | time ms |" in md
    assert "model MiB/dev" in md and "meas/model" in md and "peak MiB/dev" in md
    table = [line for line in md.splitlines() if line.startswith("| distla.matmul summa")]
    assert len(table) == 6
    assert all(" 1.000 " in line for line in table if "| 1x1 |" not in line)


def test_weak_scaling_grows_the_problem(tmp_path, capsys):
    argv = ["--op", "matmul", "--sizes", "32", "--meshes", "1x1,2x2", "--mode", "weak"]
    rc, _, err = _run([*argv, "--rounds", "1", "--out", str(tmp_path), "--quiet"], capsys)
    assert rc == 0, err
    doc = _load(tmp_path)
    shapes = {r["mesh"]: r["shape"] for r in doc["rows"] if r["impl"] == "distla.matmul summa"}
    assert shapes == {"1x1": [32, 32, 32], "2x2": [64, 64, 64]}  # sqrt(4) x: memory/device
    assert "sqrt(p)" in doc["weak_rule"]
    ref = [r for r in doc["rows"] if r["reference"]]
    assert {tuple(r["shape"]) for r in ref} == {(32, 32, 32), (64, 64, 64)}
    grown = next(r for r in doc["rows"] if r["mesh"] == "2x2" and r["role"] == "distla")
    assert grown["reference_shape"] == [32, 32, 32]


@pytest.mark.parametrize("op", [o for o in OPS if o != "matmul"])
def test_other_ops_end_to_end(op, tmp_path, capsys):
    sizes = {"solve": "24", "lu": "24", "batched-solve": "8x6", "fft": "8", "rfft": "8",
             "cholesky": "24", "qr": "40x24", "eigh": "24", "svd": "24"}[op]  # fmt: skip
    argv = ["--op", op, "--sizes", sizes, "--meshes", "2x2", "--rounds", "1"]
    rc, _, err = _run(
        [*argv, "--baselines", "reference", "--out", str(tmp_path), "--quiet"], capsys
    )
    assert rc == 0, err
    doc = _load(tmp_path)
    distla_rows = [r for r in doc["rows"] if r["role"] == "distla"]
    assert [r["mesh"] for r in distla_rows] == ["2x2"]
    assert [r["impl"] for r in doc["rows"] if r["reference"]] == [_ref_name(op)]
    for r in distla_rows:
        assert r["error"] is None and r["time_s"] > 0 and r["error_ratio"] <= 30, r
        if r["model_ratio"] is not None:
            assert r["model_ratio"] <= 1.2, r
    assert (tmp_path / "scaling.png").read_bytes().startswith(PNG_MAGIC)


def test_rows_say_which_plan_ran_and_compare_only_the_distributed_one_with_the_model():
    """Under the library's default budget a small solve takes the one-device plan: its row
    says so and is not compared with the distributed LU's byte model; at budget 0 (the
    harness's) the row is the distributed LU, compared with its model."""
    from distla._core import plan as _plan
    from distla.tools.run import RunSpec, run_cases

    op = OPERATIONS["solve"]()
    spec = RunSpec(
        op="solve",
        sizes=((24, 0),),
        meshes=((2, 2),),
        dtype="float32",
        rounds=1,
        baselines="reference",
        quiet=True,
    )
    for budget, plan in ((512 * 2**20, "one_device"), (0, "distributed")):
        with _plan.budget(budget):
            mine = next(r for r in run_cases(op, spec) if r["role"] == "distla")
        assert mine["plan"] == plan and mine["error_ratio"] <= 30, mine
        assert (mine["model_ratio"] is None) == (plan == "one_device"), mine


def _ref_name(op):
    return OPERATIONS[op]().baselines[0].name


@pytest.mark.parametrize(
    "argv, message",
    [
        pytest.param(
            ["--op", "lstsq"], r"unknown op 'lstsq'; choose one of matmul, ", id="unknown-op"
        ),
        pytest.param(["--sizes", "64"], r"--op is required \(or --memory\)", id="no-op"),
        pytest.param(
            ["--op", "matmul", "--meshes", "4x4"],
            r"a mesh of 16 devices is bigger than the 8 cpu devices of this process",
            id="mesh-bigger-than-devices",
        ),
        pytest.param(
            ["--op", "matmul", "--sizes", "3", "--meshes", "2x4"],
            r"matmul size 3x3x3 is too small for the 2x4 mesh",
            id="size-too-small",
        ),
        pytest.param(
            ["--op", "matmul", "--sizes", "2000000"],
            r"matmul size 2000000x2000000x2000000 does not fit: it needs about \d+",
            id="size-does-not-fit-memory",
        ),
        pytest.param(
            ["--op", "batched-solve", "--sizes", "12x8", "--meshes", "2x4"],
            r"batch 12 does not fit the 2x4 mesh: .* multiple of 8",
            id="batch-not-divisible",
        ),
        pytest.param(
            ["--op", "matmul", "--sizes", "64x64"],
            r"matmul sizes are N \(square\) or MxKxN; got 64x64",
            id="size-wrong-form",
        ),
        pytest.param(["--op", "matmul", "--sizes", "0"], r"bad size '0'", id="size-zero"),
        pytest.param(["--op", "matmul", "--meshes", "2by4"], r"bad mesh '2by4'", id="bad-mesh"),
        pytest.param(["--op", "matmul", "--meshes", "2x2x2"], r"ROWSxCOLS", id="3d-mesh"),
        pytest.param(
            ["--op", "rfft", "--dtype", "complex64"],
            r"--op rfft takes --dtype float32, float64; got 'complex64'",
            id="dtype-not-for-op",
        ),
        pytest.param(["--op", "fft", "--mode", "fast"], r"unknown mode 'fast'", id="bad-mode"),
        pytest.param(
            ["--op", "matmul", "--rounds", "0"], r"--rounds must be at least 1", id="rounds"
        ),
    ],
)
def test_argument_errors_are_one_line(argv, message, capsys, tmp_path):
    rc, out, err = _run([*argv, "--out", str(tmp_path / "never")], capsys)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("python -m distla scaling: error: ")
    assert __import__("re").search(message, lines[0]), lines[0]
    assert not (tmp_path / "never").exists()


def _cli(*args, timeout=240):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run(
        [sys.executable, "-m", "distla", "scaling", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_cli_simulates_devices_and_writes_files(tmp_path):
    """The real command line: one CPU device here, so it re-runs itself on 2 simulated ones."""
    out = tmp_path / "cli"
    proc = _cli("--op", "matmul", "--sizes", "16", "--meshes", "1x1,1x2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "running on 2 simulated CPU devices" in proc.stderr
    assert "| distla.matmul summa | 16x16x16 | 1x2 | 2 |" in proc.stdout
    doc = _load(out)
    assert doc["machine"]["device_count"] == 2 and doc["machine"]["simulated_cpu_devices"]
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)


def test_cli_errors_are_one_line_without_traceback():
    proc = _cli("--op", "matmul", "--meshes", "16x16", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "python -m distla scaling: error: a mesh of 256 devices is bigger than the 1 cpu "
        "devices here, and distla simulates at most 64 CPU devices"
    ]
