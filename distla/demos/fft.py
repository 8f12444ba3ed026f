"""Demo rows for this capability (filled in when the capability lands)."""

from __future__ import annotations


def rows(size_scale: float = 1.0, rounds: int = 5) -> list:
    return []
