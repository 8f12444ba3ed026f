"""Contiguous blocks <-> 2D block-cyclic order, with one all_to_all per mesh axis.

A matrix in ``P(r, c)`` gives device ``(i, j)`` the contiguous rows
``[i·n/pr, (i+1)·n/pr)``. In block-cyclic order with block size ``nb``
(ScaLAPACK's distribution) device row ``i`` holds instead the row blocks
``G ≡ i (mod pr)``, in increasing ``G``; likewise for columns. The LU and the
triangular solves run on block-cyclic matrices so that every device keeps
working as the trailing matrix shrinks.

The conversion is a permutation of blocks done with one ``all_to_all`` per
axis, never a gather. When a device's ``B`` contiguous blocks split evenly
over the ``P`` devices of the axis (``B`` a multiple of ``P``), block ``t`` of
device ``s`` goes to device ``t mod P`` and the ``all_to_all`` needs no
bookkeeping. Otherwise each device sends ``ceil(B/P)`` block slots to every
device, some empty, chosen and compacted with small static index tables.
Each device sends ``(P-1)/P`` of its blocks (plus at most ``P-1`` empty slots).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._axes import after, axis_size

#: The 2D relayouts (:func:`to_block_cyclic_2d`) move a matrix this many row or
#: column chunks at a time, each overwriting its own rows or columns: a device
#: holds its block and a few chunks, never a second block.
RELAYOUT_CHUNKS = 4


@functools.cache
def _tables(blocks_per_device: int, p: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Index tables for contiguous -> cyclic when ``blocks_per_device % p != 0``.

    ``send[s, d, u]``: local block of source ``s`` in slot ``u`` for
    destination ``d`` (``blocks_per_device`` marks an empty slot);
    ``keep[d]``: the received slots (flattened ``(source, u)``) destination
    ``d`` keeps, in increasing global block order.
    """
    b = blocks_per_device
    slots = -(-b // p)
    send = np.full((p, p, slots), b, dtype=np.int32)
    keep = np.zeros((p, b), dtype=np.int32)
    filled = np.zeros((p, p), dtype=np.int32)
    received: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    for s in range(p):
        for t in range(b):
            g = s * b + t
            d = g % p
            u = filled[s, d]
            send[s, d, u] = t
            filled[s, d] += 1
            received[d].append((g, s * slots + u))
    for d in range(p):
        keep[d] = [slot for _, slot in sorted(received[d])]
    return send, keep, slots


@functools.cache
def _inverse_tables(blocks_per_device: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The tables of :func:`_tables` inverted, for the way back (gathers, no scatter).

    ``back[d, v]``: the local block of device ``d`` that goes in its send slot ``v``
    (flattened ``(source, u)``; ``blocks_per_device`` marks an empty slot);
    ``home[s, t]``: the received slot (flattened ``(destination, u)``) that brings
    local block ``t`` of device ``s`` home.
    """
    table, keep, slots = _tables(blocks_per_device, p)
    b = blocks_per_device
    back = np.full((p, p * slots), b, dtype=np.int32)
    for d in range(p):
        back[d, keep[d]] = np.arange(b, dtype=np.int32)
    home = np.zeros((p, b), dtype=np.int32)
    for s in range(p):
        for d in range(p):
            for u in range(slots):
                t = table[s, d, u]
                if t < b:
                    home[s, t] = d * slots + u
    return back, home


def relayout_fraction(blocks_per_device: int, p: int) -> float:
    """Share of a local block one device receives in a contiguous <-> cyclic relayout.

    The communication model of :func:`to_block_cyclic` (and its inverse) along
    one mesh axis of ``p`` devices that each hold ``blocks_per_device`` blocks:
    the all-to-all sends ``ceil(b/p)`` block slots to each of the ``p - 1``
    other devices (padded when ``p`` does not divide ``b``), so a device receives
    ``(p - 1)·ceil(b/p)/b`` of its block: ``(p - 1)/p`` when ``p`` divides
    ``b``. The LU, Cholesky and QR models use it.
    """
    b = blocks_per_device
    if p == 1 or b == 1:
        return 0.0
    return (p - 1) * -(-b // p) / b


def to_block_cyclic(x: jax.Array, *, axis: int, axis_name: str | None, nb: int) -> jax.Array:
    """Contiguous local block -> block-cyclic local block along ``axis``.

    Args:
      x: local block; ``x.shape[axis] = B·nb`` blocks of a dimension split
        contiguously over the ``P`` devices of ``axis_name``.
      axis: 0 (rows) or 1 (columns).
      axis_name: the mesh axis that splits this dimension (``None``: no-op).
      nb: block size.

    Returns:
      The local block in block-cyclic order: local block ``u`` of device ``d``
      is global block ``u·P + d``.
    """
    p = axis_size(axis_name)
    if p == 1:
        return x
    if x.shape[axis] == nb:  # one block per device: contiguous is block-cyclic
        return x
    x = jnp.moveaxis(x, axis, 0)
    b = x.shape[0] // nb
    rest = x.shape[1:]
    blocks = x.reshape(b, nb, *rest)
    if b % p == 0:
        # (B/P, P, nb, ...): axis 1 is the destination device, t mod P
        send = blocks.reshape(b // p, p, nb, *rest)
        # all_to_all over axis_name -> axis 1 is now the source device s
        recv = lax.all_to_all(send, axis_name, split_axis=1, concat_axis=1, tiled=True)
        # global block s·B + u·P + d increases with (s, u): put the source first
        out = jnp.swapaxes(recv, 0, 1)
    else:
        table, keep, slots = _tables(b, p)
        me = lax.axis_index(axis_name)
        padded = jnp.concatenate([blocks, jnp.zeros((1, nb, *rest), x.dtype)])
        send = padded[jnp.asarray(table)[me]]  # (P, slots, nb, ...): slots per destination
        recv = lax.all_to_all(send, axis_name, split_axis=0, concat_axis=0, tiled=True)
        out = recv.reshape(p * slots, nb, *rest)[jnp.asarray(keep)[me]]
    return jnp.moveaxis(out.reshape(b * nb, *rest), 0, axis)


def from_block_cyclic(x: jax.Array, *, axis: int, axis_name: str | None, nb: int) -> jax.Array:
    """Inverse of :func:`to_block_cyclic`."""
    p = axis_size(axis_name)
    if p == 1 or x.shape[axis] == nb:
        return x
    x = jnp.moveaxis(x, axis, 0)
    b = x.shape[0] // nb
    rest = x.shape[1:]
    if b % p == 0:
        # (P, B/P, nb, ...) ordered by (source s, u) -> (B/P, P, nb, ...) with axis 1 = s
        send = jnp.swapaxes(x.reshape(p, b // p, nb, *rest), 0, 1)
        # all_to_all over axis_name -> axis 1 is the sender d: local block t = u·P + d
        out = lax.all_to_all(send, axis_name, split_axis=1, concat_axis=1, tiled=True)
    else:
        table, keep, slots = _tables(b, p)
        back, home = _inverse_tables(b, p)
        me = lax.axis_index(axis_name)
        # the forward map's received slots, in order, are exactly this device's blocks:
        # put them back into their slots (a gather; empty slots read the zero block b)
        padded = jnp.concatenate([x.reshape(b, nb, *rest), jnp.zeros((1, nb, *rest), x.dtype)])
        send = padded[jnp.asarray(back)[me]].reshape(p, slots, nb, *rest)
        # send each slot to the device it came from
        recv = lax.all_to_all(send, axis_name, split_axis=0, concat_axis=0, tiled=True)
        # local block t came back in slot home[me, t] of the received ones
        out = recv.reshape(p * slots, nb, *rest)[jnp.asarray(home)[me]]
    return jnp.moveaxis(out.reshape(b * nb, *rest), 0, axis)


def _chunk_by_chunk(x: jax.Array, fn, *, axis: int, chunks: int) -> jax.Array:
    """``fn`` applied to ``chunks`` slices of ``x`` along ``axis``, each written back in place.

    ``fn`` must map a slice to one of the same shape that depends on that slice
    alone (a permutation along the other axis). Each slice is read once the
    previous one is written back (``after``), so a device holds ``x`` and the
    work of one slice, not a second ``x``.
    """
    size = x.shape[axis]
    chunks = max(1, min(chunks, size))
    edges = [size * c // chunks for c in range(chunks + 1)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        start = lo if lo == 0 else after(lo, x)
        part = lax.dynamic_slice_in_dim(x, start, hi - lo, axis=axis)
        x = lax.dynamic_update_slice_in_dim(x, fn(part), lo, axis=axis)
    return x


def _relayout_2d(x, row_fn, col_fn, *, row_axis, col_axis, nb, chunks, rows_first):
    def rows(x):  # the row permutation, column slice by column slice
        if axis_size(row_axis) == 1 or x.shape[0] == nb:
            return x
        fn = functools.partial(row_fn, axis=0, axis_name=row_axis, nb=nb)
        return _chunk_by_chunk(x, fn, axis=1, chunks=chunks)

    def cols(x):  # the column permutation, row slice by row slice
        if axis_size(col_axis) == 1 or x.shape[1] == nb:
            return x
        fn = functools.partial(col_fn, axis=1, axis_name=col_axis, nb=nb)
        return _chunk_by_chunk(x, fn, axis=0, chunks=chunks)

    return cols(rows(x)) if rows_first else rows(cols(x))


def to_block_cyclic_2d(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    chunks: int = RELAYOUT_CHUNKS,
) -> jax.Array:
    """:func:`to_block_cyclic` along rows and then columns, in place.

    The rows are permuted ``chunks`` column slices at a time and the columns
    ``chunks`` row slices at a time, each slice written back over itself: the
    same bytes as the two whole-block relayouts, in ``2·chunks`` all-to-alls, with
    a fraction of their memory (a whole-block relayout holds two or three copies
    of the block at once).
    """
    return _relayout_2d(
        x,
        to_block_cyclic,
        to_block_cyclic,
        row_axis=row_axis,
        col_axis=col_axis,
        nb=nb,
        chunks=chunks,
        rows_first=True,
    )


def from_block_cyclic_2d(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    chunks: int = RELAYOUT_CHUNKS,
) -> jax.Array:
    """Inverse of :func:`to_block_cyclic_2d` (columns first, then rows), in place."""
    return _relayout_2d(
        x,
        from_block_cyclic,
        from_block_cyclic,
        row_axis=row_axis,
        col_axis=col_axis,
        nb=nb,
        chunks=chunks,
        rows_first=False,
    )


def global_blocks(n_local_blocks: int, axis_name: str | None) -> jax.Array:
    """Global block index of each local block (block-cyclic) on this device."""
    p = axis_size(axis_name)
    me = 0 if axis_name is None else lax.axis_index(axis_name)
    return jnp.arange(n_local_blocks, dtype=jnp.int32) * p + me


def local_row(g: jax.Array, *, p: int, nb: int) -> tuple[jax.Array, jax.Array]:
    """(owner index, local index) of non-negative global row(s) ``g``, block-cyclic."""
    g = g.astype(jnp.int32)
    block = lax.div(g, jnp.int32(nb))
    owner = lax.rem(block, jnp.int32(p))
    local = lax.div(block, jnp.int32(p)) * nb + lax.rem(g, jnp.int32(nb))
    return owner, local
