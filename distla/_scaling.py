"""``python -m distla scaling``: the scaling study (issue 7)."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    raise SystemExit("python -m distla scaling is not implemented yet")
