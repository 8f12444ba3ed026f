"""Halo exchange: each block's ghost cells filled from its neighbours' edge cells.

The per-device body of ``distla.jaxdecomp.halo_exchange``. Along an exchanged
axis of local length ``L``, a block holds ``lo`` lower ghost cells, its own
cells, and ``hi`` upper ghost cells::

    [ lower ghosts (lo) | own cells ... | upper ghosts (hi) ]
      0 .. lo             lo .. L-hi      L-hi .. L

After the exchange the lower ghosts of block ``j`` hold the last ``lo`` own
cells of block ``j-1`` (its cells ``[L-hi-lo, L-hi)``) and the upper ghosts
hold the first ``hi`` own cells of block ``j+1`` (``[lo, lo+hi)``). Along a
periodic axis the first and last blocks are neighbours; otherwise the ghosts
beyond the ends are zeros. The blocks are numbered by the linear index over the
mesh axes that split the axis (major first, as ``lax.ppermute`` numbers a
tuple of axis names); an axis no mesh axis splits is one block, its own
neighbour when periodic.

Axes are exchanged one after the other, each over the whole block as the
previous ones left it, so the corner ghosts (lower in one axis, upper in
another) arrive from the diagonal neighbour through two hops, with no message
of their own. Each exchange is two ``ppermute``\\ s of one ghost slab each: a
device receives ``(lo + hi) * (its block's size / L)`` elements per axis.

Every step is linear and built from ``ppermute`` and slice updates, so jax's
own transpose of this body is the adjoint of the exchange: each ghost cell's
cotangent goes back to the cell it copies and is added there, and the
ghosts' own cotangent is zero (they are overwritten).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


class AxisExchange(NamedTuple):
    axis: int  # the local block's axis
    group: tuple[str, ...]  # the mesh axes that split it (major first); () when whole
    parts: int  # blocks along it: the product of those axes' sizes (1 when whole)
    lo: int  # lower ghost cells
    hi: int  # upper ghost cells
    periodic: bool
    mesh_order: tuple[str, ...] = ()  # group's axes in the mesh's order (() : group's)


def halo_local(x: jax.Array, *, exchanges: tuple[AxisExchange, ...]) -> jax.Array:
    """Fill the ghost cells of this device's block, one axis after another.

    Args:
      x: this device's block, ghost cells included (any rank).
      exchanges: one :class:`AxisExchange` per exchanged axis, in order.

    Returns:
      ``x`` with its ghost cells replaced (same shape and dtype).
    """
    for ex in exchanges:
        x = _exchange_along(x, ex)
    return x


def _exchange_along(x: jax.Array, ex: AxisExchange) -> jax.Array:
    length = x.shape[ex.axis]
    if ex.lo:
        # my last lo own cells go up, to the next block's lower ghosts
        edge = lax.slice_in_dim(x, length - ex.hi - ex.lo, length - ex.hi, axis=ex.axis)
        x = _set_along(x, ex.axis, 0, _shift(edge, ex, +1))  # (.., lo, ..)
    if ex.hi:
        # my first hi own cells go down, to the previous block's upper ghosts
        edge = lax.slice_in_dim(x, ex.lo, ex.lo + ex.hi, axis=ex.axis)
        x = _set_along(x, ex.axis, length - ex.hi, _shift(edge, ex, -1))  # (.., hi, ..)
    return x


def _shift(edge: jax.Array, ex: AxisExchange, step: int) -> jax.Array:
    """``edge`` of block ``j`` delivered to block ``j + step``; zeros past the ends
    of a non-periodic axis."""
    n = ex.parts
    if n == 1:  # one block: its own neighbour
        return edge if ex.periodic else jnp.zeros_like(edge)
    pairs = [(j, (j + step) % n) for j in range(n)]
    if not ex.periodic:
        pairs = [(j, k) for j, k in pairs if 0 <= j + step < n]
    # ppermute names its axes in the mesh's order (jax 0.11 requires it): the blocks'
    # numbers over the group, major first, become device numbers over that order
    order = ex.mesh_order or ex.group
    sizes = {name: lax.axis_size(name) for name in order}
    pairs = [(_renumber(j, ex.group, order, sizes), _renumber(k, ex.group, order, sizes))
             for j, k in pairs]  # fmt: skip
    # ppermute over the group -> the neighbour's edge, same local shape
    return lax.ppermute(edge, order if len(order) > 1 else order[0], pairs)


def _renumber(index: int, group: tuple[str, ...], order: tuple[str, ...], sizes) -> int:
    """A linear index over the axes ``group`` (major first) as one over ``order``."""
    digits = {}
    for name in reversed(group):
        index, digits[name] = divmod(index, sizes[name])
    out = 0
    for name in order:
        out = out * sizes[name] + digits[name]
    return out


def _set_along(x: jax.Array, axis: int, start: int, value: jax.Array) -> jax.Array:
    """``x`` with ``value`` written from ``start`` along ``axis`` (static offsets, no
    scatter: see ``_axes.set_block``)."""
    starts = [0] * x.ndim
    starts[axis] = start
    return lax.dynamic_update_slice(x, value.astype(x.dtype), tuple(starts))
