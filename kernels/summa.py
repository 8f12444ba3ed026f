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

Cost per device: receives ``(m/pr)·k·(pc-1)/pc + k·(n/pc)·(pr-1)/pr``
elements; holds the operands' blocks, C's block, and one panel pair. Every
device sends at every step (no idle owner), and step ``s+1``'s gathers are
issued before step ``s``'s GEMM so XLA may overlap them.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import all_gather, axis_size


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
) -> jax.Array:
    """Local SUMMA body: ``C[i, j] = sum_k A[i, k] B[k, j]``.

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
    # A is kept transposed so that its panel slices are contiguous rows and the
    # gather concatenates along the major axis; the GEMM reads A^T directly.
    a_t = a_blk.T.reshape(ca, panels, w, mb)
    b_r = b_blk.reshape(cb, panels, w, nb)

    def gather(s):
        a_piece = lax.dynamic_index_in_dim(a_t, s, 1, keepdims=False).reshape(ca * w, mb)
        b_piece = lax.dynamic_index_in_dim(b_r, s, 1, keepdims=False).reshape(cb * w, nb)
        # all_gather over col -> (L*w, m/pr): A^T-panel, slice s of every k-chunk
        a_pan = all_gather(a_piece, col_axis, axis=0, tiled=True)
        # all_gather over row -> (L*w, n/pc): B-panel, the same k indices in the same order
        b_pan = all_gather(b_piece, row_axis, axis=0, tiled=True)
        return a_pan, b_pan

    def product(a_pan, b_pan):
        return lax.dot_general(a_pan, b_pan, (((0,), (0,)), ((), ())), precision=precision)

    # A real loop (not unrolled): XLA would otherwise hoist every gather to the
    # start and hold all panels at once. The next step's panels are gathered
    # while this step's product runs (double buffering).
    def step(s, carry):
        acc, a_pan, b_pan = carry
        a_next, b_next = gather(s + 1)
        return acc + product(a_pan, b_pan), a_next, b_next

    a_pan, b_pan = gather(0)
    if panels == 1:
        return product(a_pan, b_pan)
    acc = jnp.zeros((mb, nb), jnp.result_type(a_blk, b_blk))
    acc = lax.pcast(acc, tuple(ax for ax in (row_axis, col_axis) if ax), to="varying")
    acc, a_pan, b_pan = lax.fori_loop(0, panels - 1, step, (acc, a_pan, b_pan))
    return acc + product(a_pan, b_pan)
