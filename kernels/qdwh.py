"""QDWH's QR-based step, ``Q₁Q₂ᴴ`` of ``[√c X; I] = [Q₁; Q₂] R``, in about three blocks.

One SPMD program for ``jax.shard_map`` (Nakatsukasa, Bai & Gygi 2010; the driver is
``distla.linalg._qdwh``). ``X`` is ``m x n`` in the 2D block layout, ``m`` a multiple
of ``nb·pr`` and ``n`` of ``nb·lcm(pr, pc)``, so that the block-cyclic order of the
stack is this device's rows of ``X``'s block-cyclic order above its rows of ``I``'s:

1. **Stack** ``[√c X; I]`` on this device as ``[√c x; i_cyc]`` and move the top rows
   to block-cyclic order in place (``cyclic.py``'s relayout, chunk by chunk): the
   stack is the only ``2n x n`` matrix the step holds.
2. **QR** in place (``qr.py``: Householder, compact WY; rows of large norm on top,
   as row-wise stability needs, Powell & Reid) and ``Q`` formed over the
   reflectors, as LAPACK's ``orgqr`` overwrites ``A``. ``R`` is never formed. Only
   the taus are kept: each panel's ``T`` is made again from ``V`` as ``Q`` is
   formed (``qr.t_from_v``), and each panel's ``geqrf`` takes the ``m + nb`` rows of
   the stack that can be nonzero (``span``).
3. **Product** ``C = Q₁Q₂ᴴ`` straight from the block-cyclic ``Q``, into ``X``'s block
   layout: for each block column ``K`` of ``Q`` (ScaLAPACK's PDGEMM with the ``NT``
   form), its owner mesh column broadcasts its rows along the mesh row, the mesh
   column gathers them in global order (a ``2n x nb`` panel), and each device adds
   ``Q₁[its rows, K] · Q₂[its columns, K]ᴴ`` into its block of ``C``, a row chunk
   at a time. No ``Q`` is relaid out and no ``Q₂ᴴ`` is made.

A device holds ``X``, the stack and ``C`` (four blocks) and a panel.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import add_product, after, axis_index, axis_size, fori, zeros_after
from .cyclic import RELAYOUT_CHUNKS, to_block_cyclic
from .qr import _broadcast, _gather_rows, form_q, global_index, qr_block_cyclic


def _top_to_cyclic(s, rows, *, row_axis, col_axis, nb, chunks=RELAYOUT_CHUNKS):
    """``s`` with its first ``rows`` local rows moved to block-cyclic order, in place.

    As ``cyclic.to_block_cyclic_2d`` on ``s[:rows]``: the rows permuted column slice
    by column slice, then the columns row slice by row slice, each slice written back
    over itself once the previous one is (``after``)."""
    cols = s.shape[1]
    if axis_size(row_axis) > 1 and rows > nb:
        edges = [cols * c // chunks for c in range(chunks + 1)]
        for lo, hi in zip(edges[:-1], edges[1:]):
            if hi > lo:
                part = lax.dynamic_slice(s, (0, lo if lo == 0 else after(lo, s)), (rows, hi - lo))
                part = to_block_cyclic(part, axis=0, axis_name=row_axis, nb=nb)
                s = lax.dynamic_update_slice(s, part, (0, lo))
    if axis_size(col_axis) > 1 and cols > nb:
        edges = [rows * c // chunks for c in range(chunks + 1)]
        for lo, hi in zip(edges[:-1], edges[1:]):
            if hi > lo:
                part = lax.dynamic_slice(s, (lo if lo == 0 else after(lo, s), 0), (hi - lo, cols))
                part = to_block_cyclic(part, axis=1, axis_name=col_axis, nb=nb)
                s = lax.dynamic_update_slice(s, part, (lo, 0))
    return s


def qr_product(
    x: jax.Array,
    sqrt_c: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    stages: int,
    precision: lax.PrecisionLike,
) -> jax.Array:
    """``Q₁Q₂ᴴ`` of ``[√c X; I] = [Q₁; Q₂] R`` (Householder QR), in ``X``'s block layout.

    Args:
      x: ``(m/pr, n/pc)`` local block of ``X`` (2D block layout); ``m`` a multiple of
        ``nb·pr``, ``n`` of ``nb·pr`` and ``nb·pc``.
      sqrt_c: ``√c`` (a scalar of ``x``'s dtype, the same on every device).
      row_axis, col_axis: mesh axes of the grid's rows and columns.
      nb: block size (panel width).
      stages: fori_loops of the QR's panels (``qr.py``).
      precision: for every dot.

    Returns:
      The ``(m/pr, n/pc)`` local block of ``Q₁Q₂ᴴ`` (``m x n``), laid out as ``x``.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    i, j = axis_index(row_axis), axis_index(col_axis)
    mloc, nloc = x.shape
    n = nloc * pc
    iloc = n // pr  # this device's rows of I
    # I in block-cyclic order: global row == global column
    grow = global_index(iloc, row_axis, nb)
    gcol = global_index(nloc, col_axis, nb)
    ident = (grow[:, None] == gcol[None, :]).astype(x.dtype)
    stack = jnp.concatenate([sqrt_c.astype(x.dtype) * x, ident])
    stack = _top_to_cyclic(stack, mloc, row_axis=row_axis, col_axis=col_axis, nb=nb)
    panels = n // nb
    h, ts = qr_block_cyclic(
        stack,
        row_axis=row_axis,
        col_axis=col_axis,
        nb=nb,
        panels=panels,
        stages=stages,
        precision=precision,
        t_factors=False,  # each panel's T made again in Q's formation
        # column k of [√c X; I] is zero past row m + k·nb + nb: X's rows and the
        # identity's (filled in above its diagonal by the reflectors) down to row k·nb + nb
        span=mloc * pr + nb,
    )
    q = form_q(
        h, ts, nloc, row_axis=row_axis, col_axis=col_axis, nb=nb, stages=stages, precision=precision
    )

    def column(k, c):
        owner, lc = k % pc, k // pc
        # the owner mesh column's rows of Q's block column k, on every device of the row
        panel = lax.dynamic_slice(q, (0, lc * nb), (q.shape[0], nb))
        panel = _broadcast(panel, j, owner, col_axis)
        # ... and in global row order on every device of the mesh column
        q1 = _gather_rows(panel[:mloc], row_axis, pr, nb)
        q2 = _gather_rows(panel[mloc:], row_axis, pr, nb)
        a = lax.dynamic_slice_in_dim(q1, i * mloc, mloc)  # Q₁'s rows of this block of C
        b = lax.dynamic_slice_in_dim(q2, j * nloc, nloc)  # Q₂'s rows: C's columns here
        return add_product(c, (0, 0), a, jnp.conj(b).T, precision=precision)

    return fori(0, panels, column, zeros_after((mloc, nloc), x.dtype, q))
