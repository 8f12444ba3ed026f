"""``python -m distla SUBCOMMAND --help`` shows every option's default and choices."""

import re

import pytest

from distla.tools import cli

# option -> what its help must show
EXPECTED = {
    "demo": {
        "--scale": "(default: 1.0)",
        "--rounds": "(default: 3)",
        "--plan": "{auto,distributed}",
        "--only": "matmul, solve, batched, fft, cholesky, qr, spectral",
        "--compile-cache": "default:",
    },
    "doctor": {
        "--sizes": "(default: [512])",
        "--dtype": "{float32,float64,complex64,complex128}",
        "--repeat": "(default: 3)",
        "--devices": "(default: all)",
        "--only": "matmul, solve, lu_factor",
    },
    "scaling": {
        "--op": "matmul | solve | lu",
        "--meshes": "(default: 1x1,1x2,2x2,2x4)",
        "--mode": "(default: strong)",
        "--rounds": "(default: 3)",
        "--baselines": "(default: all)",
        "--families": "matmul, solve, lu_factor, cholesky, inv, qr, eigh, svd, expm",
        "--device-memory": "else 16GiB)",
    },
    "launch": {
        "--num-processes": "(default: 2)",
        "--devices-per-process": "(default: 4)",
        "--grace": "(default: 3.0)",
        "--timeout": "(default: no limit)",
        "--port": "(default: a free one)",
    },
}


@pytest.mark.parametrize("tool", sorted(EXPECTED))
def test_help_shows_defaults_and_choices(tool, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([tool, "--help"])
    assert e.value.code == 0
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    for option, shown in EXPECTED[tool].items():
        assert option in text, (tool, option)
        after = text[text.index(option) :]
        assert shown in after, (tool, option, shown)
    assert "(default: None)" not in text and "(default: False)" not in text
