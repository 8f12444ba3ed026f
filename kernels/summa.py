"""SUMMA: C = A @ B on a ``pr x pc`` grid (van de Geijn & Watts, 1997).

Layout (all three operands in 2D blocks ``P(row, col)``): device ``(i, j)``
holds ``A[i, j]`` of shape ``(m/pr, k/pc)``, ``B[i, j]`` of shape
``(k/pr, n/pc)`` and computes ``C[i, j]`` of shape ``(m/pr, n/pc)``.

The contraction index k is split into ``L = lcm(pr, pc)`` chunks, so each
local block of A holds ``L/pc`` whole chunks and each local block of B holds
``L/pr``. Each chunk is cut into ``panels`` slices. Step ``s`` of the loop
works on slice ``s`` of every chunk: every device contributes its slices of A
to an ``all_gather`` along its mesh row and its slices of B to an
``all_gather`` along its mesh column, which leaves the same ``k/panels``
contraction indices, in the same order, in the A-panel ``(m/pr, k/panels)``
and the B-panel ``(k/panels, n/pc)``; one local GEMM adds their product into
C. The permutation of k this implies is harmless: a sum does not care in
which order its terms come.

Cost per device: the bytes ``distla.matmul.model_bytes`` gives (A's block
row and B's block column less the device's own share); it holds the
operands' blocks, C's block, one panel pair and one row chunk of the step's
product.

The loop is a real loop, one gather pair per step, with nothing carried but
C: carrying the next step's panels (double buffering) makes XLA copy both
panels in and out of the loop state every step, and on CPU, where a
collective runs on the device's own thread, it overlaps nothing. A's slices
are read where they lie (a rearranged copy of A would be one more share of
memory) and gathered along a new leading axis, whose result is contiguous
(gathered along its columns, XLA lays out the A-panel column-major and then
copies it, or copies all of A). The product is added into C in
``ROW_CHUNKS`` row chunks by an inner loop, each a plain row-major
``(m/pr/ROW_CHUNKS, k/panels) @ (k/panels, n/pc)`` GEMM (XLA:CPU hands that to
its fastest GEMM; a transposed operand it does not) written into C in place:
the whole product of a step would be one more share of C. A loop, not a data
dependence that orders unrolled chunks (``_axes.after``): the kernel stays
linear in A and in B, so ``jax.linear_transpose`` (``lax.custom_linear_solve``'s
transpose of a product) can transpose it.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import all_gather, axis_index, axis_size, fori

#: The product of a step is added into C in this many row chunks, so that the
#: step holds a quarter of C's block for it rather than all of it.
ROW_CHUNKS = 4


def summa_k_multiple(pr: int, pc: int, panels: int) -> int:
    """The contraction length must be a multiple of this (pad k with zeros)."""
    return math.lcm(pr, pc) * panels


def summa_local(
    a_blk: jax.Array,
    b_blk: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    panels: int,
    precision: lax.PrecisionLike,
    c: jax.Array | None = None,
) -> jax.Array:
    """Local SUMMA body: ``C[i, j] = sum_k A[i, k] B[k, j]`` (plus ``c``).

    Args:
      a_blk: ``(m/pr, k/pc)`` block of A.
      b_blk: ``(k/pr, n/pc)`` block of B.
      row_axis: mesh axis along which the grid's rows are split (size pr),
        ``None`` for pr = 1.
      col_axis: mesh axis along which the grid's columns are split (size pc),
        ``None`` for pc = 1.
      panels: number of loop steps; each moves ``1/panels`` of the A block row
        and of the B block column. ``k`` must be a multiple of
        ``summa_k_multiple(pr, pc, panels)``.
      precision: passed to every local dot.
      c: ``(m/pr, n/pc)`` block the product is added to, panel by panel, in its
        own buffer (the loop's carry) when nothing else reads it; ``None``: zeros.

    Returns:
      ``(m/pr, n/pc)`` block of C.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    chunks = math.lcm(pr, pc)
    ca, cb = chunks // pc, chunks // pr  # k-chunks in a local block of A / of B
    mb, ka = a_blk.shape
    kb, nb = b_blk.shape
    w = ka // (ca * panels)  # width of one chunk's slice
    if ka != ca * panels * w or kb != cb * panels * w:
        raise ValueError(
            f"summa_local: local blocks {a_blk.shape} and {b_blk.shape} do not split into "
            f"{chunks} chunks x {panels} panels"
        )
    b_r = b_blk.reshape(cb, panels, w, nb)
    # row chunks of the product (one step, the one-gather product of small operands: one)
    q = 1 if panels == 1 else max(d for d in range(1, ROW_CHUNKS + 1) if mb % d == 0)
    mq = mb // q

    def step(s, c):
        # slice s of each of A's k-chunks, read in place: (m/pr, ca*w)
        pieces = [
            lax.dynamic_slice_in_dim(a_blk, (t * panels + s) * w, w, axis=1) for t in range(ca)
        ]
        a_piece = pieces[0] if ca == 1 else jnp.concatenate(pieces, axis=1)
        b_piece = lax.dynamic_index_in_dim(b_r, s, 1, keepdims=False).reshape(cb * w, nb)
        # all_gather over col -> (pc, m/pr, ca*w): the A-panel, slice s of every k-chunk,
        # device by device (contiguous; read below as (m/pr, L*w), k in chunk order)
        a_pan = all_gather(a_piece, col_axis, axis=0, tiled=False)
        # all_gather over row -> (L*w, n/pc): B-panel, the same k indices in the same order
        b_pan = all_gather(b_piece, row_axis, axis=0, tiled=True)

        def add_rows(r, c):  # C[rows] += A-panel[rows] @ B-panel, in place
            lo = r * mq
            rows = lax.dynamic_slice_in_dim(a_pan, lo, mq, axis=1)
            rows = rows.transpose(1, 0, 2).reshape(mq, chunks * w)
            part = lax.dynamic_slice_in_dim(c, lo, mq, axis=0)
            prod = jnp.dot(rows, b_pan, precision=precision)
            return lax.dynamic_update_slice_in_dim(c, part + prod, lo, axis=0)

        # a loop over the row chunks, so that one chunk's product is added before the
        # next is computed (unrolled, XLA computes every chunk's GEMM first and holds
        # their products at once)
        return add_rows(0, c) if q == 1 else fori(0, q, add_rows, c)

    # A real loop (not unrolled): XLA would otherwise hoist every gather to the
    # start and hold all panels at once.
    axes = tuple(x for x in (row_axis, col_axis) if x is not None)
    dtype = jnp.result_type(a_blk, b_blk)
    if c is not None:
        c = c.astype(dtype)
        return step(0, c) if panels == 1 else fori(0, panels, step, c)
    c = jnp.zeros((mb, nb), dtype)
    if axes:
        # C's zeros made once B is there: XLA makes an operand-free zeros first thing
        # in the program, and a product at its end (eigh's Q Z) would hold its C
        # from the start. B's first entry, selected where no device is, keeps the
        # kernel linear in B.
        c = lax.pcast(c, axes, to="varying")
        first = jnp.broadcast_to(b_blk[0, 0].astype(dtype), (mb, nb))
        c = jnp.where(axis_index(axes[0]) < 0, first, c)
    return step(0, c) if panels == 1 else fori(0, panels, step, c)
