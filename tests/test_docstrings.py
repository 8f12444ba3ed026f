"""Every public docstring renders as written and its examples run.

- The docstring of each name on the API page (docs/api.md) has no raw Sphinx role, no
  section header griffe would read as prose, an ``Args`` section when the function
  takes arguments, and nothing else griffe warns about (tests/docstring_check.py
  says what and why); no docs page has a raw role either.
- Its ``Examples`` run as doctests, on the suite's 8 simulated CPU devices, each
  docstring in a fresh namespace (examples import what they use, as a reader
  pasting them would). The sizes are small: the whole set compiles in well under a
  minute.

``PENDING`` names the public functions whose docstrings are not yet in that form
(distla.linalg's are being rewritten). Their checks are skipped; a listed name that
passes them fails here, so that the list only shrinks. Empty it as they are done.
"""

from __future__ import annotations

import doctest
import importlib

import jax
import pytest
from docstring_check import ROOT, api_entries, has_args_section, page_problems, problems_of

# distla.linalg functions whose docstrings are still to be put in the documented form
# (raw roles converted, an Args section, an Examples section). Empty this list.
PENDING: frozenset[str] = frozenset()
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
ENTRIES = api_entries()


def runtime_object(name: str):
    """What a user gets for ``name`` (``distla.matmul`` is the function, not the module)."""
    parts = name.split(".")
    obj = importlib.import_module(parts[0])
    for i, p in enumerate(parts[1:], 1):
        if not hasattr(obj, p):
            try:  # a subpackage the package does not import (distla.jaxdecomp)
                obj = importlib.import_module(".".join(parts[: i + 1]))
                continue
            except ImportError:  # a module's member where the package exports a function
                obj = importlib.import_module(".".join(parts[:i]))
                return getattr(obj, ".".join(parts[i:]))
        obj = getattr(obj, p)
    return obj


def is_jnp_own(name: str) -> bool:
    """Names distla re-exports from jnp unchanged: jnp's objects, jnp's docstrings."""
    module = getattr(runtime_object(name), "__module__", None) or ""
    return not module.startswith("distla")


def examples_of(name: str) -> list[doctest.Example]:
    return doctest.DocTestParser().get_examples(runtime_object(name).__doc__ or "")


def _params(names):
    return [pytest.param(n, id=n) for n in sorted(names)]


def test_pending_names_are_public():
    assert PENDING <= set(ENTRIES), sorted(PENDING - set(ENTRIES))


@pytest.mark.parametrize("name", _params(ENTRIES))
def test_docstring_renders(name):
    if is_jnp_own(name):
        pytest.skip("jnp's own object (its docstring is jnp's)")
    found = problems_of(ENTRIES[name])
    if not has_args_section(ENTRIES[name]):
        found.append(f"{name}: takes arguments, has no Args section")
    if name in PENDING:
        if not found and examples_of(name):
            pytest.fail(f"{name} is in the documented form now: remove it from PENDING")
        pytest.skip("PENDING")
    assert not found, "\n".join(found)


def test_docs_pages_have_no_raw_roles():
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    found = [p for page in pages for p in page_problems(page)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", _params(ENTRIES))
def test_examples_run(name):
    if is_jnp_own(name):
        pytest.skip("jnp's own object (its examples are jnp's)")
    obj = runtime_object(name)
    test = doctest.DocTestParser().get_doctest(obj.__doc__ or "", {}, name, None, 0)
    if not test.examples:
        if name in PENDING:
            pytest.skip("PENDING")
        pytest.fail(f"{name}: no Examples in its docstring")
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = []
    with jax.enable_x64(False):
        result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)
