"""``python -m distla launch``: N local processes on jax.distributed (issue 6)."""

from __future__ import annotations


def main(argv: list[str]) -> int:
    raise SystemExit("python -m distla launch is not implemented yet")
