"""Small helpers for kernels that run on 1- or 2-axis grids."""

from __future__ import annotations

import jax
from jax import lax


def axis_size(name: str | None) -> int:
    """Size of mesh axis ``name`` inside ``shard_map``; 1 for ``None``."""
    return 1 if name is None else lax.axis_size(name)


def axis_index(name: str | None) -> jax.Array | int:
    """This device's index along mesh axis ``name``; 0 for ``None``."""
    return 0 if name is None else lax.axis_index(name)


def all_gather(x: jax.Array, name: str | None, *, axis: int, tiled: bool) -> jax.Array:
    """``lax.all_gather`` that is the identity (with the new axis) over ``None``."""
    if name is None:
        return x if tiled else jax.numpy.expand_dims(x, axis)
    return lax.all_gather(x, name, axis=axis, tiled=tiled)
