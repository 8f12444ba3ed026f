"""The one table formatter of the tools: aligned text or markdown."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    markdown: bool = False,
    right: Sequence[int] = (),
) -> str:
    """``rows`` under ``header`` as aligned text (a dashed rule under the header) or markdown.

    Args:
      header: the column titles.
      rows: one sequence of cell texts per row, as many as ``header``.
      markdown: a GitHub markdown table (``|`` in cells escaped) instead of text.
      right: indices of the columns to align right (markdown: ``--:``).
    """
    rows = [tuple(map(str, r)) for r in rows]
    if any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row needs {len(header)} cells")
    if markdown:
        rule = "|" + "|".join("--:" if i in right else "---" for i in range(len(header))) + "|"
        body = ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
        return "\n".join(["| " + " | ".join(header) + " |", rule, *body])
    table = [tuple(header), *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def line(cells):
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return "\n".join([line(table[0]), "  ".join("-" * w for w in widths), *map(line, rows)])
