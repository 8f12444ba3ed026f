"""docs/benchmarks.md is what benchmarks/summary.py makes of the recorded data.

Cheap: the page's text is regenerated (no plot drawn, nothing measured) and
compared; each family's plot exists. After new data: ``python benchmarks/summary.py``.
"""

from __future__ import annotations

import importlib.util

from docstring_check import ROOT

spec = importlib.util.spec_from_file_location("summary", ROOT / "benchmarks" / "summary.py")
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)


def test_the_page_is_the_scripts():
    text, plotted = summary.page()
    assert (ROOT / "docs" / "benchmarks.md").read_text() == text, (
        "docs/benchmarks.md is stale: run python benchmarks/summary.py"
    )
    for family, rows in plotted.items():
        assert rows, family
        assert (ROOT / "docs" / "img" / f"bench-{family}.png").is_file(), family
        assert f"(img/bench-{family}.png)" in text


def test_the_page_names_the_machine_and_the_convention():
    text, _ = summary.page()
    assert "8 simulated CPU devices sharing those 2 cores" in text
    assert "lower is better" in text and "1.00x is the best possible here" in text
    assert "(benchmarks-log.md)" in text
    assert len(text.splitlines()) < 250  # a page for users, not a log
