"""What users read cites only public names, and the library stays on public jax.

Cheap text checks over the repository (no jax, no compile): docs, README and
benchmarks name no private distla module (``distla._x``, ``distla.linalg._x``,
``distla.fft._x``) and no file under ``distla/_core``, ``distla/linalg/_x.py``
or ``distla/fft/_x.py``; no module of the library or the kernels imports
``jax._src`` outside the allow-list below (each entry with its reason); no
issue or item numbers in code, docs, benchmarks or tests.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Private names as users would read them: dotted module paths and file paths.
PRIVATE = re.compile(
    r"distla\.(?:_[a-z]|linalg\._|fft\._)|distla/(?:_core/|linalg/_|fft/_)|distla/_[a-z][a-z_]*\.py"
)
# Modules that import jax._src, and why (jax offers no public equivalent).
JAX_SRC_ALLOWED = {
    # get_axis_env: the mesh axes a surrounding vmap(spmd_axis_name=...) took on
    # an Explicit mesh; shard_map reads the same field and jax has no public query.
    "distla/_core/mesh.py",
}
# Benchmarks that time or label an internal step import its private module;
# they are measurement code, not something users call.
PRIVATE_IMPORT_ALLOWED = {
    "benchmarks/bench_mixed.py",  # times the refinement loop apart from the factorisation
    "benchmarks/bench_qr.py",  # labels each row with the QR kernel the call picked
    "benchmarks/bench_spectral.py",  # times each QDWH and divide-and-conquer step alone
    "benchmarks/bench_geneig.py",  # counts the divide levels and leaves each call ran
}
NUMBERS = re.compile(r"[Ii]ssue [0-9]|\bitem [0-9]")


def user_facing() -> list[Path]:
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").rglob("*.md"))
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    return files


def library() -> list[Path]:
    return sorted((ROOT / "distla").rglob("*.py")) + sorted((ROOT / "kernels").glob("*.py"))


def hits(path: Path, pattern: re.Pattern) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(text.splitlines(), 1)
        if pattern.search(line)
    ]


def test_patterns_catch_what_they_should():
    assert PRIVATE.search("see `distla._core.mesh.fitting_spec`")
    assert PRIVATE.search("see ``distla.linalg._batched.vmap_rule``")
    assert PRIVATE.search("(`distla/fft/_route.py`)")
    assert PRIVATE.search("(distla/_refine.py)")
    assert not PRIVATE.search("distla.linalg.solve, distla.fft.fftn, distla.__version__")
    assert NUMBERS.search("# issue 16, item 3") and not NUMBERS.search("items of a list")


def test_docs_readme_and_benchmarks_cite_only_public_names():
    found = [h for f in user_facing() for h in hits(f, PRIVATE)]
    imports = re.compile(r"from distla\.?\w* import _")
    found += [
        h
        for f in user_facing()
        if str(f.relative_to(ROOT)) not in PRIVATE_IMPORT_ALLOWED
        for h in hits(f, imports)
    ]
    assert not found, "private names in what users read:\n" + "\n".join(found)


def test_no_jax_src_outside_the_allow_list():
    pattern = re.compile(r"^\s*(?:from|import)\s+jax\._src")
    found = [
        h
        for f in library()
        if str(f.relative_to(ROOT)) not in JAX_SRC_ALLOWED
        for h in hits(f, pattern)
    ]
    assert not found, "jax._src imported:\n" + "\n".join(found)


def test_no_issue_or_item_numbers():
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "benchmarks").glob("*.py")]
    files += [*(ROOT / "tests").glob("*.py"), *library()]
    found = [h for f in files if f.name != "test_architecture.py" for h in hits(f, NUMBERS)]
    assert not found, "issue or item numbers:\n" + "\n".join(found)
