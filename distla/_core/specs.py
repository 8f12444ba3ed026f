"""``PartitionSpec`` entries as tuples of mesh axes, and back (private).

The one spelling rule the layout code shares: an entry is ``None`` (whole), a
mesh axis name, or a tuple of names (major first).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jax.sharding import PartitionSpec as P


def entry_axes(entry: Any) -> tuple[str, ...]:
    """A ``PartitionSpec`` entry as the tuple of mesh axes it names (``None``: ``()``)."""
    if entry is None:
        return ()
    if isinstance(entry, str):
        return (entry,)
    return tuple(entry)


def layout_spec(layout: Sequence[Sequence[str]]) -> P:
    """One tuple of mesh axes per dimension as a ``PartitionSpec`` (the inverse of
    :func:`entry_axes`, dimension by dimension)."""
    return P(*[None if not e else (e[0] if len(e) == 1 else tuple(e)) for e in layout])
