"""The package as it is built and installed: every subpackage listed, one version, typed.

Cheap checks, no jax compile. CI (``.ci/run``) builds the wheel, installs it (not
editable) in a fresh virtual environment and runs the suite from ``tests/``, where
``import distla`` finds the installed package: a subpackage missing from
``pyproject.toml``'s list then fails every test that imports it, and the test
below fails first.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# set by .ci/run, which installs the built wheel: the tests must import that copy
INSTALLED = os.environ.get("DISTLA_TEST_INSTALLED") == "1"


def source_packages() -> set[str]:
    """Every package of the source tree as it installs: ``kernels/`` is ``distla.kernels``."""
    found = set()
    for top, name in (("distla", "distla"), ("kernels", "distla.kernels")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *rel)))
    return found


def test_every_package_is_listed_in_pyproject():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    found = source_packages()
    assert {"distla", "distla.kernels", "distla.linalg", "distla.fft"} <= found
    assert found == listed, (
        f"add to pyproject.toml's packages: {sorted(found - listed)}; "
        f"listed but not in the tree: {sorted(listed - found)}"
    )


def test_package_dirs_map_kernels():
    dirs = PYPROJECT["tool"]["setuptools"]["package-dir"]
    assert dirs == {"distla": "distla", "distla.kernels": "kernels"}


def test_version_is_written_once():
    import distla

    text = (ROOT / "distla" / "_version.py").read_text()
    written = re.findall(r'^__version__ = "([^"]+)"$', text, re.M)
    assert written == [distla.__version__]
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    hits = [
        p.relative_to(ROOT)
        for p in [*(ROOT / "distla").rglob("*.py"), *(ROOT / "kernels").glob("*.py")]
        if p.name != "_version.py" and re.search(r"__version__\s*=", p.read_text())
    ]
    assert not hits, f"a second place writes the version: {hits}"


def test_installed_metadata_matches():
    from importlib import metadata

    import distla

    assert metadata.version("distla") == distla.__version__
    meta = metadata.metadata("distla")
    assert meta["License-Expression"] == "Apache-2.0"


def test_typed_marker_ships():
    import distla

    assert (Path(distla.__file__).parent / "py.typed").is_file()
    assert PYPROJECT["tool"]["setuptools"]["package-data"]["distla"] == ["py.typed"]


def test_licence_is_the_apache_text():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


@pytest.mark.skipif(not INSTALLED, reason="only where .ci/run installed the built wheel")
def test_the_installed_wheel_is_what_runs():
    """Under .ci/run, ``import distla`` is the installed wheel, not the source tree."""
    import distla

    where = Path(distla.__file__).resolve()
    assert ROOT not in where.parents, where
    assert "site-packages" in where.parts, where
    assert (where.parent / "kernels" / "summa.py").is_file()  # kernels/ installs inside
    assert str(ROOT) not in sys.path
