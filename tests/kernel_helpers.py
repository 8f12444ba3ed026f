"""Running one kernel of ``distla.kernels`` under ``jax.shard_map``, and numpy references.

The kernel tests call the per-device programs directly, without the
global-view API around them: a global numpy array is put on a small mesh,
the kernel runs on its local blocks, and the result is read back as a global
array (``out_specs`` name how the local blocks tile it).
"""

from __future__ import annotations

import jax
import numpy as np
from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic
from jax.sharding import NamedSharding


def run_local(body, mesh, in_specs, out_specs, *args):
    """``body`` on each device's blocks of ``args`` (numpy, laid out as ``in_specs``)."""
    f = jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    )
    placed = [jax.device_put(x, NamedSharding(mesh, s)) for x, s in zip(args, in_specs)]
    out = f(*placed)
    return jax.tree.map(np.asarray, out)


def cyclic_order(n: int, p: int, nb: int) -> np.ndarray:
    """Global indices in block-cyclic storage order: device 0's blocks, then device 1's, ...

    Block ``u`` of device ``d`` is global block ``u·p + d``: ``x[cyclic_order(...)]`` is
    what :func:`to_block_cyclic` gives when the contiguous blocks tile ``x`` in order.
    """
    blocks = n // nb
    owned = [range(d, blocks, p) for d in range(p)]
    return np.concatenate([np.arange(g * nb, (g + 1) * nb) for d in owned for g in d])


def to_cyclic_2d(x, *, row_axis, col_axis, nb):
    """Local block in ``P(row, col)`` -> block-cyclic over both axes (inside shard_map)."""
    x = to_block_cyclic(x, axis=0, axis_name=row_axis, nb=nb)
    return to_block_cyclic(x, axis=1, axis_name=col_axis, nb=nb)


def from_cyclic_2d(x, *, row_axis, col_axis, nb):
    """Inverse of :func:`to_cyclic_2d`."""
    x = from_block_cyclic(x, axis=1, axis_name=col_axis, nb=nb)
    return from_block_cyclic(x, axis=0, axis_name=row_axis, nb=nb)
