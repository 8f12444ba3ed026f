"""The command-line tools apart from the library, and the facts they keep in one place.

``distla.tools`` holds the demo, the scaling study, the launcher, their
timing, tables and device set-up; the library never imports it. Here: that
separation, the one parser, the operation table, the table formatter, the
scaled ratios every test and tool uses, the device request, and the
communication model that ``distla.matmul`` publishes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh

import distla
from distla.tools import cache, cli, demo, devices, ratios
from distla.tools.ops import OPERATIONS
from distla.tools.ops.base import round_to
from distla.tools.table import format_table

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ library and tools apart


def test_import_distla_does_not_import_the_tools():
    code = (
        "import sys, distla\n"
        "tools = sorted(m for m in sys.modules if m.startswith('distla.tools'))\n"
        "assert not tools, tools\n"
        "assert 'distla.kernels' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _imports(path: Path) -> set[str]:
    """Every module a file imports (relative imports resolved against distla)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "distla." * (node.level > 0) + (node.module or "")
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("folder", ["distla", "kernels"])
def test_library_modules_never_name_the_tools(folder):
    files = [p for p in (ROOT / folder).glob("*.py") if p.name != "__main__.py"]
    assert files
    for path in files:
        used = [m for m in _imports(path) if "tools" in m.split(".")]
        assert not used, (path.name, used)


def test_old_tool_modules_are_gone():
    for name in ("_scaling.py", "_demo.py", "_launch.py", "_timing.py", "demos"):
        assert not (ROOT / "distla" / name).exists(), name


# ------------------------------------------------------------------ the one parser


def test_one_parser_with_three_subcommands(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for tool in ("demo", "scaling", "launch"):
        assert tool in out
    args = cli.parse(["demo", "--scale", "0.5", "--rounds", "2", "--only", "fft", "solve"])
    assert (args.tool, args.scale, args.rounds, args.only) == ("demo", 0.5, 2, ["fft", "solve"])
    args = cli.parse(["scaling", "--op", "lu", "--sizes", "64", "--meshes", "1x2"])
    assert (args.tool, args.op, args.sizes) == ("scaling", "lu", ["64"])
    assert args.argv[:2] == ["--op", "lu"]  # what results.json records


def test_the_tools_switch_the_compilation_cache_on_unless_told(monkeypatch, tmp_path):
    set_ = {}
    monkeypatch.setattr(jax.config, "update", lambda name, value: set_.__setitem__(name, value))
    for tool in (["demo"], ["scaling", "--op", "lu"]):
        assert cache.enable(cli.parse([*tool, "--no-compile-cache"])) is None
        assert set_ == {}
        where = tmp_path / tool[0]
        assert cache.enable(cli.parse([*tool, "--compile-cache", str(where)])) == where
        assert where.is_dir() and set_["jax_compilation_cache_dir"] == str(where)
        assert set_["jax_persistent_cache_min_compile_time_secs"] == cache.MIN_COMPILE_SECS
        set_.clear()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.default_dir() == tmp_path / "distla" / "jax"


def test_unknown_subcommand_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench"])
    assert e.value.code == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


# ------------------------------------------------------------------ the operation table


def test_every_operation_builds_and_the_demo_groups_are_its_choices():
    ops = {name: build() for name, build in OPERATIONS.items()}
    for name, op in ops.items():
        assert op.name == name
        assert op.baselines[0].on in ("device", "host"), name  # the one-device reference
        assert op.variants and all(v.on == "mesh" for v in op.variants), name
    only = next(a for a in cli.parser()[1]["demo"]._actions if a.dest == "only")
    groups = ["matmul", "solve", "batched", "fft", "cholesky", "qr", "spectral"]
    assert list(only.choices) == demo.groups() == groups
    labels = [op.demo.label for op in demo.demo_ops()]
    assert labels == [
        "matmul (summa)", "solve (LU)", "batched solve", "fftn", "rfftn", "cholesky", "qr",
        "eigh", "svd",
    ]  # fmt: skip


def test_demo_sizes_round_to_their_multiples():
    assert round_to(4096 * 0.05, 64) == 192 and round_to(10, 64) == 64
    sizes = {op.name: op.demo.size(0.05, 8) for op in demo.demo_ops()}
    assert sizes == {
        "matmul": (192,), "solve": (128,), "batched-solve": (208, 64), "fft": (16,), "rfft": (16,),
        "cholesky": (128,), "qr": (64, 64), "eigh": (64,), "svd": (64,),
    }  # fmt: skip
    grids = {op.name: op.demo.grid(8) for op in demo.demo_ops()}
    assert grids["matmul"] == (2, 4) and grids["fft"] == (4, 2)


# ------------------------------------------------------------------ one table formatter


def test_table_formatter():
    text = format_table(["name", "n"], [["ab", "1"], ["c", "100"]], right=[1])
    assert text.splitlines() == ["name    n", "----  ---", "ab      1", "c     100"]
    md = format_table(["a", "b"], [["x|y", "2"]], markdown=True, right=[1])
    assert md.splitlines() == ["| a | b |", "|---|--:|", "| x\\|y | 2 |"]
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        format_table(["a", "b"], [["x"]])


# ------------------------------------------------------------------ the scaled ratios


def test_matmul_ratio_sees_an_error_of_its_own_size():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 20)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert ratios.matmul_ratio(exact.astype(np.float32), a, b) < 1
    # one entry off by 100 * eps * ||A|| ||B|| k: the ratio reads 100
    off = exact.copy()
    scale = np.linalg.norm(a.astype(np.float64)) * np.linalg.norm(b.astype(np.float64)) * 30
    off[3, 4] += 100 * ratios.eps(np.float64) * scale  # eps of the result's dtype
    assert ratios.matmul_ratio(off, a, b) == pytest.approx(100, rel=1e-3)


def test_solve_ratio_of_stacks_is_the_worst_member():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 16, 16))
    b = rng.standard_normal((3, 16, 2))
    x = np.linalg.solve(a, b).astype(np.float32)
    each = [ratios.solve_ratio(a[i], x[i], b[i]) for i in range(3)]
    assert ratios.solve_ratio(a, x, b) == max(each) <= ratios.THRESHOLD
    x[1, 5, 1] *= 1.1  # one member wrong
    assert ratios.solve_ratio(a, x, b) > 1e3 > max(each)
    v = x[0, :, 0]  # a vector right-hand side
    assert ratios.solve_ratio(a[0], v, b[0, :, 0]) == pytest.approx(
        ratios.solve_ratio(a[0], v[:, None], b[0, :, :1])
    )


def test_lu_ratios_against_scipy():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((24, 24)).astype(np.float32)
    lu, piv = scipy.linalg.lu_factor(a)
    assert ratios.lu_factor_ratio(a, lu, piv) <= ratios.THRESHOLD
    p, l_, u = scipy.linalg.lu(a)
    assert ratios.lu_ratio(p.T @ a, l_, u, a) <= ratios.THRESHOLD
    bad = piv.copy()
    bad[0] = (bad[0] + 1) % 24  # a wrong interchange
    assert ratios.lu_factor_ratio(a, lu, bad) > 1e3
    assert list(ratios.perm_of(np.array([2, 2, 2]))) == [2, 0, 1]


def test_fft_ratio_counts_the_transform_points():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 8, 8))
    ref = np.fft.rfftn(x)
    y = ref.astype(np.complex64)
    assert ratios.fft_ratio(y, ref, points=x.size) < 1
    assert ratios.fft_ratio(y, ref, points=x.size) < ratios.fft_ratio(y, ref)  # log2 of fewer


def test_helpers_reexport_the_ratios():
    import helpers

    assert helpers.matmul_ratio is ratios.matmul_ratio and helpers.THRESHOLD == 30.0
    assert helpers.eps is ratios.eps and helpers.random_matrix is ratios.random_matrix


# ------------------------------------------------------------------ devices


def test_devices_once_the_backend_runs():
    jax.devices()  # this process's backend is up: the harness's 8 devices
    assert devices.request_cpu_devices(8)  # the same count: accepted
    assert not devices.request_cpu_devices(3)  # another: too late, no exception
    devices.ensure_devices(8, ["scaling"])  # enough: nothing happens
    with pytest.raises(devices.DeviceError, match="simulates at most 64 CPU devices"):
        devices.ensure_devices(65, ["scaling"])


# ------------------------------------------------------------------ the public SUMMA model


@pytest.mark.parametrize("algorithm, grid", [("summa", (2, 4)), ("cannon", (2, 2))])
def test_matmul_model_bytes_is_what_the_program_moves(algorithm, grid):
    from distla.matmul import model_bytes

    m, k, n = 64, 48, 80
    mesh = distla.make_mesh(grid, devices=jax.devices()[: grid[0] * grid[1]])
    rng = np.random.default_rng(4)
    a = distla.shard(rng.standard_normal((m, k), dtype=np.float32), mesh)
    b = distla.shard(rng.standard_normal((k, n), dtype=np.float32), mesh)
    cost = distla.cost(distla.matmul, a, b, algorithm=algorithm)
    model = model_bytes((m, k, n), grid, np.float32, algorithm=algorithm)
    assert cost.total_collective_bytes == pytest.approx(model, rel=1e-6)
    assert model < (m * k + k * n) * 4 / 1.9  # about half the operands at most, here


def test_cholesky_ratio_against_scipy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((20, 20)) + 1j * rng.standard_normal((20, 20))
    a = (x @ x.conj().T / 20 + np.eye(20)).astype(np.complex64)
    l_ = scipy.linalg.cholesky(a, lower=True)
    assert ratios.cholesky_ratio(a, l_) <= ratios.THRESHOLD
    assert ratios.cholesky_ratio(a, l_.conj()) > 1e3  # the conjugate is no factor


def test_qr_ratio_against_scipy():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((30, 12)).astype(np.float32)
    q, r = scipy.linalg.qr(a, mode="economic")
    assert ratios.qr_ratio(a, q, r) <= ratios.THRESHOLD
    assert ratios.qr_ratio(a, q * 1.01, r / 1.01) > 1e3  # A = QR still; Q not orthonormal


def test_doctor_checks_and_times_families():
    """``python -m distla doctor`` at a tiny size: a table row per family, status 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "distla", "doctor", "--sizes", "16", "--repeat", "1",
         "--only", "matmul", "solve", "fftn"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for family in ("matmul", "solve", "fftn"):
        assert family in proc.stdout
    assert "FAIL" not in proc.stdout and "ERROR" not in proc.stdout


def test_doctor_fails_a_bad_ratio():
    """A wrong result makes the row fail and the exit status non-zero."""
    from distla.tools import doctor

    rows = [{"family": "solve", "n": 8, "mesh": "2x4", "dtype": "float32", "ratio": 1e3,
             "distla_s": 1.0, "jnp_s": 1.0, "vs_jnp": 1.0, "ok": False}]  # fmt: skip
    assert "FAIL" in doctor.table(rows)
    mesh = build_mesh((2, 4), "auto")
    broken = doctor.run(mesh, [16], "float32", only=["matmul"], repeat=1)
    assert broken[0]["ok"]
    real = doctor._cases
    try:

        def wrong(n, dtype, rng):
            cases = real(n, dtype, rng)
            host, ours, theirs, ratio = cases["matmul"]
            cases["matmul"] = (host, lambda a, b: ours(a, b) * 1.01, theirs, ratio)
            return cases

        doctor._cases = wrong
        assert not doctor.run(mesh, [16], "float32", only=["matmul"], repeat=1)[0]["ok"]
    finally:
        doctor._cases = real
