"""``python -m distla scaling --memory``: peak memory per device against n, and the largest n.

Compile only, tiny sizes on a 2x2 mesh: every file is written, every figure is
``distla.cost``'s, the largest n follows from them, and bad options are one-line errors.
"""

import json
import math

import pytest

from distla.tools import cli, memory

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def memory_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("memory")
    argv = ["--memory", "--families", "matmul,cholesky", "--sizes", "32", "64"]
    rc = cli.main(
        ["scaling", *argv, "--meshes", "2x2", "--device-memory", "1GiB"]
        + ["--out", str(out), "--quiet"]
    )
    return rc, out, json.loads((out / "memory.json").read_text())


def test_memory_writes_its_files(memory_run):
    rc, out, doc = memory_run
    assert rc == 0
    assert (out / "memory.png").read_bytes().startswith(PNG_MAGIC)
    text = (out / "memory.md").read_text()
    assert "| cholesky | distla | distributed | 64 |" in text
    assert "Largest n with 1.0 GiB per device (--device-memory)" in text


def test_memory_rows_are_costs_and_largest_n_follows(memory_run):
    _, _, doc = memory_run
    assert (doc["mesh"], doc["dtype"], doc["device_memory"]) == ("2x2", "float32", 2**30)
    rows = {(r["family"], r["impl"], r["n"]): r for r in doc["rows"]}
    assert set(rows) == {
        (f, i, n) for f in ("matmul", "cholesky") for i in ("distla", "jnp") for n in (32, 64)
    }
    for (family, impl, n), r in rows.items():
        assert r["error"] is None and r["peak_bytes"] > 0, r
        share = n * n * 4 / 4
        assert r["shares"] == round(r["peak_bytes"] / share, 2)
        # at least the device's own share of each operand (and of the result)
        assert r["peak_bytes"] >= share, r
    for family in ("matmul", "cholesky"):
        for impl in ("distla", "jnp"):
            peak = rows[family, impl, 64]["peak_bytes"]
            assert doc["largest_n"][f"{family}/{impl}"] == int(64 * math.sqrt(2**30 / peak))
    # jnp's Cholesky of a sharded matrix gathers it; distla's keeps blocks
    assert rows["cholesky", "distla", 64]["peak_bytes"] < rows["cholesky", "jnp", 64]["peak_bytes"]


def test_device_memory_parses_units():
    assert memory.parse_bytes("16GiB") == 16 * 2**30
    assert memory.parse_bytes("80GB") == 80 * 10**9
    assert memory.parse_bytes("512 MiB") == 512 * 2**20
    assert memory.parse_bytes("1e9") == 10**9
    assert memory.largest_n([(64, 2**20)], 4 * 2**20) == 128
    assert memory.largest_n([], 2**30) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--device-memory", "lots"], r"bad --device-memory 'lots'"),
        (["--families", "lstsq"], r"unknown family 'lstsq'; choose from matmul, solve"),
        (["--sizes", "1"], r"bad size '1'"),
        (["--meshes", "2by2"], r"bad mesh '2by2'"),
        (["--meshes", "4x4"], r"a 4x4 mesh needs 16 devices; this process has 8"),
    ],
)
def test_memory_argument_errors_are_one_line(argv, message, capsys, tmp_path):
    rc = cli.main(["scaling", "--memory", *argv, "--out", str(tmp_path / "never")])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m distla scaling: error: "), err
    assert __import__("re").search(message, lines[0]), lines[0]
    assert not (tmp_path / "never").exists()
