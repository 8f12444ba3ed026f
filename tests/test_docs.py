"""The documentation cannot drift from the code.

- ``mkdocs build --strict`` succeeds (CI runs only pytest, so the build is a test).
- Every fenced ``python`` block of ``docs/**/*.md`` and ``README.md`` runs. Pages
  run in one subprocess on 8 simulated CPU devices, each page in a fresh
  namespace, its blocks in order (a block may use what earlier blocks of its
  page defined). A block preceded by ``<!-- docs-test: skip REASON -->`` is
  not run (for what needs several processes, say); keep those rare. A block
  followed by ``<!-- docs-test: prints -->`` and a fenced ``text`` block must
  print that text (doctest's rules: ``...`` matches anything, whitespace is
  normalised), so that what a page says a block prints is what it prints.
- The names documented in ``docs/api.md`` are exactly the public API:
  ``distla.__all__``, ``distla.linalg.__all__``, ``distla.fft``'s and
  ``distla.scipy.fft``'s public functions, ``distla.scipy.linalg``'s own (not
  re-exported) functions and ``distla.jaxdecomp``'s own, each
  rendered from the object it names.

Run as a script (``python tests/test_docs.py PAGES.json RESULTS.json``) it is the
block runner the tests start.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SKIP_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s+(.+?)\s*-->\s*$")
PRINTS_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*prints\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MAX_EXPLICIT_SKIPS = 3
RUNNER_TIMEOUT_S = 900  # for one runner's share of the pages (about 130 s idle here)


def doc_pages() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
    return [*pages, ROOT / "README.md"]


def python_blocks(path: Path) -> list[dict]:
    """Fenced python blocks of a markdown file: line, code, and skip reason (or None)."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            line = lines[i]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            i += 1
        i += 1
        if lang.lower() not in ("python", "py"):
            continue
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = SKIP_MARK.match(prev)
        blocks.append(
            {
                "line": start + 1,
                "code": "\n".join(body) + "\n",
                "skip": skip and skip.group(1),
                "prints": _printed(lines, i),
            }
        )
    return blocks


def _printed(lines: list[str], i: int) -> str | None:
    """The text block after a ``<!-- docs-test: prints -->`` mark that follows line ``i``."""
    rest = [(j, line) for j, line in enumerate(lines[i:], i) if line.strip()][:2]
    if len(rest) < 2 or not PRINTS_MARK.match(rest[0][1]):
        return None
    j, fence = rest[1]
    m = FENCE.match(fence)
    if not m:
        return None
    end = next(k for k in range(j + 1, len(lines)) if lines[k].strip().startswith(m.group(2)))
    return "\n".join(lines[j + 1 : end]) + "\n"


# --------------------------------------------------------------------------
# The runner (in a subprocess with 8 simulated CPU devices)
# --------------------------------------------------------------------------


def _run_pages(pages_file: str, results_file: str) -> None:
    import contextlib
    import faulthandler
    import io
    import time
    import traceback

    import jax

    # One program at a time: with asynchronous dispatch a block can leave several
    # distributed programs in flight, and on simulated devices sharing few cores XLA's
    # CPU collectives can then deadlock (docs/caveats.md). What the pages compute is
    # unchanged.
    jax.config.update("jax_cpu_enable_async_dispatch", False)
    # If a block still hangs, every thread's stack goes to stderr before the test's
    # timeout kills the runner, so the failure says where.
    faulthandler.dump_traceback_later(RUNNER_TIMEOUT_S - 30, exit=True)
    results = {}
    for page in json.loads(Path(pages_file).read_text()):
        name, blocks = page["name"], page["blocks"]
        out = io.StringIO()
        status, detail, ran, seconds, printed = "ok", "", 0, {}, {}
        namespace = {"__name__": "__main__"}
        for block in blocks:
            if block["skip"]:
                continue
            code = compile(block["code"], f"{name}:{block['line']}", "exec")
            print(f"running {name}:{block['line']}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            block_out = io.StringIO()
            try:
                with contextlib.redirect_stdout(block_out):
                    exec(code, namespace)
                    # finish the block's asynchronous work before the next one, as a
                    # reader pasting blocks one by one would: many programs in flight on
                    # simulated devices can deadlock XLA's CPU collectives (docs/caveats.md)
                    jax.block_until_ready(
                        [v for v in namespace.values() if isinstance(v, jax.Array)]
                    )
                out.write(block_out.getvalue())
                printed[block["line"]] = block_out.getvalue()
                ran += 1
                seconds[block["line"]] = round(time.perf_counter() - t0, 2)
            except BaseException:  # noqa: BLE001 - reported as the test's failure
                out.write(block_out.getvalue())
                status = "fail"
                detail = f"{name}:{block['line']}\n{traceback.format_exc()}"
                detail += "\n--- output ---\n" + out.getvalue()[-3000:]
                break
        results[name] = {
            "status": status,
            "detail": detail,
            "ran": ran,
            "blocks": sum(1 for b in blocks if not b["skip"]),
            "seconds": seconds,
            "printed": printed,
        }
        jax.config.update("jax_enable_x64", False)  # pages must not leak config
        Path(results_file).write_text(json.dumps(results))


if __name__ == "__main__":
    _run_pages(sys.argv[1], sys.argv[2])
    sys.exit(0)


# --------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------

import pytest  # noqa: E402
from conftest import CACHE_SETTINGS  # noqa: E402


def _page_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


# Two block runners, in parallel when pytest runs alone (compiling is mostly
# single-threaded). The pages
# that compile the same distributed-LU programs (seconds each) share one, so
# that its jit cache serves them all; the other pages share the other.
LU_PAGES = ("docs/quickstart.md", "docs/tutorials/lu.md", "docs/lu.md")


@pytest.fixture(scope="module")
def block_results(tmp_path_factory):
    """Run every page's python blocks once, in two subprocesses (a page stays in one)."""
    pages = [{"name": _page_id(p), "blocks": python_blocks(p)} for p in doc_pages()]
    shares = [
        [p for p in pages if p["name"] in LU_PAGES],
        [p for p in pages if p["name"] not in LU_PAGES],
    ]
    env = dict(os.environ)
    env["JAX_NUM_CPU_DEVICES"] = "8"  # jax's own switch (jax_num_cpu_devices)
    # Two CI runs of five hung in a page, both just after it dropped the result of a
    # distributed call still in flight (`print(distla.linalg.solve(a, b).sharding)`),
    # every thread idle and the main one dispatching a tiny op to device 0. The pages
    # bind such results, and the runner waits for each block's arrays (above).
    env["JAX_PLATFORMS"] = "cpu"
    env["MPLBACKEND"] = "Agg"
    # the run's compilation cache (tests/conftest.py), so that a program a test or the
    # other runner compiled is loaded, not compiled again
    env.update({name.upper(): str(value) for name, value in CACHE_SETTINGS.items()})
    env.pop("DISTLA_SIMULATED_DEVICES", None)
    # the one-device budget as readers have it (the suite sets 0 for its own tests)
    env.pop("DISTLA_PLAN_BUDGET", None)
    # The pages compile with the suite's XLA flags (tests/conftest.py: LLVM level 0, the
    # elemental emitter), which change how fast a program runs, not what it computes:
    # every block of every page ran in 31 s here instead of 71 s at XLA's defaults, and
    # the pages load the programs the tests compiled from the run's cache.
    # Under pytest-xdist another worker already keeps a core busy: one runner at a time,
    # so that the simulated devices' collectives are not starved of CPU.
    one_at_a_time = "PYTEST_XDIST_WORKER" in os.environ
    runs, results, errors = [], {}, []

    def finish(tmp, out, proc):
        try:
            proc.wait(timeout=RUNNER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out.close()
        if (tmp / "results.json").exists():
            results.update(json.loads((tmp / "results.json").read_text()))
        errors.append((tmp / "stderr.txt").read_text()[-4000:])

    for i, share in enumerate(shares):
        tmp = tmp_path_factory.mktemp(f"docs-blocks-{i}")  # blocks that write files write here
        (tmp / "pages.json").write_text(json.dumps(share))
        cmd = [sys.executable, __file__, str(tmp / "pages.json"), str(tmp / "results.json")]
        out = open(tmp / "stderr.txt", "w")
        runs.append((tmp, out, subprocess.Popen(cmd, cwd=tmp, env=env, stdout=out, stderr=out)))
        if one_at_a_time:
            finish(*runs.pop())
    for run in runs:
        finish(*run)
    return "\n".join(errors), results


@pytest.mark.parametrize("page", doc_pages(), ids=_page_id)
def test_python_blocks_run(page, block_results):
    stderr, results = block_results
    if not python_blocks(page):
        pytest.skip("no python blocks")
    result = results.get(_page_id(page))
    if result is None:
        pytest.fail(f"the block runner died before this page:\n{stderr}")
    if result["status"] == "fail":
        pytest.fail(result["detail"], pytrace=False)
    if result["blocks"] == 0:
        pytest.skip("every block of the page is marked skip")
    assert result["ran"] == result["blocks"]
    import doctest

    checker = doctest.OutputChecker()
    options = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for block in python_blocks(page):
        want = block["prints"]
        if want is None or block["skip"]:
            continue
        got = result["printed"][str(block["line"])]
        assert checker.check_output(want, got, options), (
            f"{_page_id(page)}:{block['line']} prints\n{got}\nwhere the page says\n{want}"
        )


def test_explicit_skips_are_rare_and_explained():
    skips = [(p, b) for p in doc_pages() for b in python_blocks(p) if b["skip"]]
    assert len(skips) <= MAX_EXPLICIT_SKIPS, [f"{p}:{b['line']}" for p, b in skips]
    for _, b in skips:
        assert len(b["skip"]) > 10


def test_block_parser(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "text\n```python\nx = 1\n```\n\n<!-- docs-test: skip needs two processes -->\n"
        "```python\ny = 2\n```\n```bash\nls\n```\n!!! note\n    ```python\n    z = 3\n    ```\n"
    )
    blocks = python_blocks(page)
    assert [(b["line"], b["code"], b["skip"]) for b in blocks] == [
        (2, "x = 1\n", None),
        (7, "y = 2\n", "needs two processes"),
        (14, "z = 3\n", None),
    ]


def test_prints_mark_is_read(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        "```python\nprint(1)\n```\n\n<!-- docs-test: prints -->\n```text\n1\n```\n"
        "```python\nprint(2)\n```\n```text\n2\n```\n"
    )
    assert [b["prints"] for b in python_blocks(page)] == ["1\n", None]


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    import distla

    home = (tmp_path / "index.html").read_text()
    assert f"distla {distla.__version__}" in home  # from the package metadata
    assert "{{ distla_version }}" not in home
    api = (tmp_path / "api" / "index.html").read_text()
    for name in _public_names():
        assert f'id="{_api_targets()[name]}"' in api, name


def _api_entries() -> list[tuple[str, str]]:
    """``(documented name, target path)`` of every ``::: target`` in docs/api.md."""
    lines = (DOCS / "api.md").read_text().splitlines()
    entries = []
    for i, line in enumerate(lines):
        m = re.match(r"^:::\s+([\w.]+)\s*$", line)
        if not m:
            continue
        name = m.group(1)
        for opt in lines[i + 1 :]:
            if opt.strip() and not opt.startswith(" "):
                break
            h = re.match(r"^\s+heading:\s*(\S+)\s*$", opt)
            if h:
                name = h.group(1)
        entries.append((name, m.group(1)))
    return entries


def _api_targets() -> dict[str, str]:
    return dict(_api_entries())


def _public_names() -> set[str]:
    import inspect

    import distla

    names = set()
    for n in distla.__all__:
        if n != "__version__" and not inspect.ismodule(getattr(distla, n)):
            names.add(f"distla.{n}")
    names |= {f"distla.linalg.{n}" for n in distla.linalg.__all__}
    fft_names = getattr(distla.fft, "__all__", None)
    if fft_names is None:  # no __all__ yet: its public callables
        fft_names = [
            n
            for n, v in vars(distla.fft).items()
            if not n.startswith("_")
            and callable(v)
            and not inspect.ismodule(v)
            and getattr(v, "__module__", "").startswith("distla")
        ]
    names |= {f"distla.fft.{n}" for n in fft_names}
    # the scipy namespaces, and jaxdecomp's functions that distla.fft does not export
    names |= {f"distla.scipy.fft.{n}" for n in distla.scipy.fft.__all__}
    import distla.jaxdecomp

    exported = {id(getattr(distla.fft, n)) for n in distla.fft.__all__}
    names |= {
        f"distla.jaxdecomp.{n}"
        for n in distla.jaxdecomp.__all__
        if inspect.isfunction(getattr(distla.jaxdecomp, n))
        and id(getattr(distla.jaxdecomp, n)) not in exported
    }
    # distla.scipy.linalg's own functions (the names it re-exports from distla.linalg are
    # documented there)
    import distla.scipy.linalg as sla

    names |= {
        f"distla.scipy.linalg.{n}"
        for n in sla.__all__
        if getattr(distla.linalg, n, None) is not getattr(sla, n)
    }
    # the matmul module's communication model (``distla.matmul`` itself is the function)
    names.add("distla.matmul.model_bytes")
    return names


def _resolve_target(path: str):
    """What ``::: path`` renders: modules first (``distla.matmul`` is the module)."""
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)


def _resolve_name(name: str):
    """What a user gets for ``name``: attributes first (``distla.matmul`` is the function)."""
    import importlib

    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for p in parts[1:]:
        if not hasattr(obj, p):  # a module's member where the package exports a function
            return _resolve_target(name)
        obj = getattr(obj, p)
    return obj


def test_api_page_documents_exactly_the_public_api():
    entries = _api_entries()
    documented = [name for name, _ in entries]
    assert len(documented) == len(set(documented)), "a name is documented twice"
    public = _public_names()
    assert set(documented) == public, (
        f"undocumented: {sorted(public - set(documented))}; "
        f"documented but not public: {sorted(set(documented) - public)}"
    )
    for name, target in entries:  # each entry renders the object its name denotes
        assert _resolve_target(target) is _resolve_name(name), (name, target)


def test_public_api_of_design_is_exported():
    """DESIGN.md's top-level names, as the package exports them."""
    import distla

    for n in ("matmul", "linalg", "fft", "make_mesh", "shard", "cost", "Cost", "__version__"):
        assert hasattr(distla, n), n
    for n in ("lu_factor", "lu_solve", "lu", "solve", "det", "slogdet", "inv"):
        assert f"distla.linalg.{n}" in _public_names()
    for n in ("fftn", "ifftn", "rfftn", "irfftn", "pfft3d", "pifft3d"):
        assert f"distla.fft.{n}" in _public_names()
