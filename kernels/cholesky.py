"""Blocked right-looking Cholesky ``A = L Lᴴ`` on a 2D block-cyclic matrix.

ScaLAPACK's PDPOTRF written as one SPMD program for ``jax.shard_map``. The
matrix is ``n x n`` with ``n = nbr·nb``, in block-cyclic order on a
``pr x pc`` grid (see ``cyclic.py``): device ``(i, j)`` holds the blocks
``(I, J)`` with ``I ≡ i (mod pr)``, ``J ≡ j (mod pc)``. Only the lower
triangle is read and written (the upper one is left as garbage that the
caller masks).

Names (beside those of ``distla.kernels``): ``H`` the local rows still in play.

The panels are taken ``w`` at a time (a *segment* of ``W = w·nb`` columns,
``w`` a multiple of ``lcm(pr, pc)`` so that a segment starts at the same
local row and column on every device). Within a segment, ``lax.fori_loop``
runs over its panels ``k``:

1. **Diagonal block** ``A[k, k]`` (on device ``(k mod pr, k mod pc)``) is
   summed along the owner mesh column (a masked psum) and factored there
   with LAPACK's ``potrf`` (``lax.linalg.cholesky``): ``L11``.
2. **Panel** ``L21 = A21 L11⁻ᴴ`` on the owner mesh column (``trsm``), under
   ``lax.cond`` so the other columns skip it.
3. **Broadcast** the panel along mesh rows (psum over ``col_axis``): every
   device gets the rows of ``L[:, k]`` it holds.
4. **Transpose** ``L[J, k]ᴴ`` for the device's columns ``J`` in the segment:
   block ``J`` sits on mesh row ``J mod pr``, which sends it along the mesh
   column (a masked psum over ``row_axis``, ScaLAPACK's "transpose through
   the diagonal").
5. **Update the segment's columns** ``A[:, J] -= L[:, k] L[J, k]ᴴ`` for
   ``J > k`` in the segment (rank ``nb``).

After the segment, one **trailing update** ``A22 -= L_seg L_segᴴ`` of rank
``W`` (the segment's rows are already on every device of their mesh row;
their transposes go along mesh columns, psums as in step 4), restricted to the
lower triangle and cut into chunks along the longer local dimension (one
chunk's operands and product at a time, a fraction of the local block). On a
grid with ``pr < pc`` the local rows are cut, the transposes for the trailing
columns are made in a few pieces (a psum each, as the first chunk that reads a
piece starts), and each chunk's GEMMs, one per piece made so far, end at the
last local column that can be on or below the diagonal on any device (or its
last piece's); otherwise the
local columns are cut, each chunk makes the transposes for its own columns, and
its GEMM starts at the first local row that can be on or below the diagonal.

The program grows with the number of segments (at most ``max_segments``),
not with ``n``: the loop over panels is a ``fori_loop``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import add_block, after, axis_index, axis_size, fori, set_block, zeros_after
from .cyclic import global_blocks

# The trailing update of a segment is cut into at most this many row chunks.
MAX_CHUNKS = 8
# Where the row chunks are cut (pr < pc), the segment's transpose is made in at most this
# many pieces, each chunk multiplying by the pieces made so far (a GEMM each).
MAX_PIECES = 4


def _psum(x, axis_name):
    return x if axis_name is None else lax.psum(x, axis_name)


def transpose_rows(
    x: jax.Array,
    cols_g: jax.Array,
    *,
    first_block: int,
    row_axis: str | None,
    nb: int,
) -> jax.Array:
    """Rows of a block-cyclic (by rows) panel, indexed by this device's columns instead.

    ``x`` holds, on device ``(i, j)``, the panel rows of the global blocks
    ``I ≡ i (mod pr)`` from ``first_block`` on (local rows ``r`` of ``x`` are
    local rows ``first_block/pr·nb + r`` of the matrix); every device of a
    mesh row holds the same ``x``. The result holds, for each local column
    ``c`` (global block ``cols_g[c]``), the panel row of global row
    ``cols_g[c]·nb + c mod nb``: the diagonal device of each block sends it
    along the mesh column (one psum over ``row_axis``). Columns whose block
    is before ``first_block`` get zeros.

    Args:
      x: ``(H, w)`` local panel rows, ``H`` a multiple of ``nb``.
      cols_g: ``(C,)`` global block of each wanted local column (static length).
      first_block: global block of ``x``'s first local row block on mesh row 0;
        a multiple of ``pr``.
      row_axis: the mesh axis over rows.
      nb: block size.

    Returns:
      ``(C, w)``: the panel rows for the columns, the same on every device of
      a mesh column.
    """
    src, mine = _sources(cols_g, first_block=first_block, row_axis=row_axis, nb=nb)
    return _send_rows(x, src, mine, row_axis)


def _sources(cols_g: jax.Array, *, first_block: int, row_axis: str | None, nb: int):
    """``transpose_rows``' local row of ``x`` for each column, and whether this device sends it."""
    pr = axis_size(row_axis)
    i = axis_index(row_axis)
    within = jnp.arange(cols_g.shape[0], dtype=jnp.int32) % nb
    src = (cols_g // pr - first_block // pr) * nb + within
    mine = (cols_g % pr == i) & (cols_g >= first_block)
    return src, mine


def _send_rows(x: jax.Array, src: jax.Array, mine: jax.Array, row_axis: str | None) -> jax.Array:
    """``transpose_rows`` from its ``_sources``: rows ``src`` of ``x`` where ``mine``, summed."""
    rows = jnp.take(x, jnp.clip(src, 0, x.shape[0] - 1), axis=0)
    rows = jnp.where(mine[:, None], rows, jnp.zeros_like(rows))
    # psum along the mesh column -> (C, w): each row from its diagonal device
    return _psum(rows, row_axis)


def _row_chunks(r1: int, c1: int, mloc: int, nloc: int, *, nb: int, pr: int, pc: int):
    """Row chunks ``[lo, hi)`` of the local trailing rows, each with its last column.

    The trailing columns of a chunk end at the last local column that can be on
    or below the diagonal for one of its rows on some device (device ``(pr-1, 0)``
    has the most): the GEMM of the chunk skips the columns wholly above it.
    """
    blocks = (mloc - r1) // nb
    if blocks <= 0 or c1 >= nloc:
        return []
    count = min(MAX_CHUNKS, blocks)
    edges = [r1 // nb + (blocks * t) // count for t in range(count + 1)]
    out = []
    for u0, u1 in zip(edges[:-1], edges[1:]):
        last_row_block = (u1 - 1) * pr + pr - 1  # the largest global block row of the chunk
        end = min(nloc, (last_row_block // pc + 1) * nb)
        if end > c1:
            out.append((u0 * nb, u1 * nb, end))
    return out


def _column_chunks(r1: int, c1: int, mloc: int, nloc: int, *, nb: int, pr: int, pc: int):
    """Column chunks ``[lo, hi)`` of the local trailing columns, each with its first row.

    The trailing rows of a chunk start at the first local row that can be on or
    below the diagonal for one of its columns on some device (device ``(pr-1, 0)``
    has the most: its rows ``u·pr + pr - 1`` reach block column ``v·pc`` from
    ``u = ⌊v·pc/pr⌋`` on): the GEMM of the chunk skips the rows wholly above it.
    """
    blocks = (nloc - c1) // nb
    if blocks <= 0 or r1 >= mloc:
        return []
    count = min(MAX_CHUNKS, blocks)
    edges = [c1 // nb + (blocks * t) // count for t in range(count + 1)]
    return [
        (max(r1, (v0 * pc // pr) * nb), v0 * nb, v1 * nb) for v0, v1 in zip(edges[:-1], edges[1:])
    ]


class _Grid(NamedTuple):
    """This device's place on the grid, and what every step of the factorisation shares."""

    row_axis: str | None
    col_axis: str | None
    pr: int
    pc: int
    i: jax.Array  # this device's mesh row
    j: jax.Array  # this device's mesh column
    nb: int
    precision: lax.PrecisionLike


class _Segment(NamedTuple):
    """One segment of ``w`` panels from block column ``k0``, as this device holds it."""

    k0: int
    r0: int  # the segment's first local row
    c0: int  # its first local column
    wc: int  # its local columns
    rows_g: jax.Array  # global block of each local row from r0
    cols_g: jax.Array  # global block of each of its local columns


def _diagonal_and_panel(col, *, k, kr, uk, g: _Grid, rows_g):
    """Steps 1-2 on the owner mesh column: ``L11 = potrf(A[k, k])``, ``L21 = A21 L11⁻ᴴ``.

    ``col`` is block column ``k`` from the segment's first row (``(H, nb)``);
    ``kr = k mod pr`` the mesh row of block row ``k``, ``uk`` its offset in ``col``.
    Returns the panel (``L11`` in block row ``k``'s place on the diagonal device, rows
    ``<= k`` zero) and whether ``potrf`` failed.
    """
    d = lax.dynamic_slice_in_dim(col, uk, g.nb, axis=0)
    d = jnp.where(g.i == kr, d, jnp.zeros_like(d))
    # psum along the mesh column -> (nb, nb): A[k, k] on the owner column
    d = _psum(d, g.row_axis)
    l11 = lax.linalg.cholesky(d, symmetrize_input=False)
    # potrf stops at a pivot <= 0 (jax then returns NaN for the whole
    # block); a NaN pivot passes and propagates. So the block failed
    # exactly when L[0, 0] is NaN although A[k, k]'s first entry is not.
    failed = jnp.isnan(jnp.real(l11[0, 0])) & ~jnp.isnan(jnp.real(d[0, 0]))
    l21 = lax.linalg.triangular_solve(
        l11, col, left_side=False, lower=True, transpose_a=True, conjugate_a=True
    )  # A21 L11^-H for every local row; rows <= k masked below
    l21 = jnp.where((rows_g > k)[:, None], l21, jnp.zeros_like(l21))
    diag = lax.dynamic_slice_in_dim(l21, uk, g.nb, axis=0)
    l21 = lax.dynamic_update_slice_in_dim(l21, jnp.where(g.i == kr, l11, diag), uk, axis=0)
    return l21, failed


def _panel_step(t, carry, *, g: _Grid, seg: _Segment):
    """Panel ``k = k0 + t`` of a segment: steps 1 to 5 of the module docstring."""
    a, lseg, bad = carry
    nb = g.nb
    k = seg.k0 + t
    kr, kc = k % g.pr, k % g.pc
    uk = (k // g.pr) * nb - seg.r0  # block row k's local offset in rows r0: (mesh row k mod pr)
    vk = (k // g.pc) * nb  # block column k's local column (mesh column k mod pc)
    col = lax.dynamic_slice(a, (seg.r0, vk), (a.shape[0] - seg.r0, nb))

    def owner(col):
        return _diagonal_and_panel(col, k=k, kr=kr, uk=uk, g=g, rows_g=seg.rows_g)

    def bystander(col):
        return jnp.zeros_like(col), jnp.zeros((), bool)

    panel, failed = lax.cond(g.j == kc, owner, bystander, col)
    # psum along the mesh row -> (h, nb): L[:, k] for this device's rows (rows < k: 0)
    panel = _psum(panel, g.col_axis)
    keep = (seg.rows_g >= k)[:, None] & (g.j == kc)
    a = lax.dynamic_update_slice(a, jnp.where(keep, panel, col), (seg.r0, vk))
    lseg = lax.dynamic_update_slice_in_dim(lseg, panel, t * nb, axis=1)
    # L[J, k]^H for this device's columns J > k of the segment
    lt = transpose_rows(panel, seg.cols_g, first_block=seg.k0, row_axis=g.row_axis, nb=nb)
    lt = jnp.where((seg.cols_g > k)[:, None], lt, jnp.zeros_like(lt))
    # A[:, J] -= L[:, k] L[J, k]^H on the segment's columns J > k (rank nb); the
    # select keeps the finished columns J <= k out of the product, whose zero
    # factors would turn a NaN or inf of L[:, k] into NaN there (LAPACK's order)
    upd = jnp.dot(panel, lt.conj().T, precision=g.precision)
    blk = a[seg.r0 :, seg.c0 : seg.c0 + seg.wc]
    a = set_block(a, (seg.r0, seg.c0), jnp.where((seg.cols_g > k)[None, :], blk - upd, blk))
    return a, lseg, bad | failed


def _trailing_update(a, lseg, col_g, *, k1: int, seg: _Segment, g: _Grid):
    """``A22 -= L_seg L_segᴴ`` (rank ``W``) on the lower triangle from block ``k1`` on.

    In chunks along the longer local dimension, so that the operand each chunk
    slices (a copy XLA makes for the GEMM) is the shorter one. By row chunks
    (``pr < pc``: the local block is taller than wide) the segment's transpose for
    the trailing columns is made in up to ``MAX_PIECES`` pieces, each as the first
    chunk that reads it starts, and each chunk multiplies its rows of ``L_seg`` by
    every piece made so far (a GEMM each, written in place); by column chunks each
    chunk makes the transpose for its own columns and reads its rows of ``L_seg``
    from its first one on. On a 4x2 mesh the transpose of all the trailing columns,
    the select each device fills and the psum's result, was 1.5 shares at once
    (cholesky's peak there, 4.07 shares at n = 4096; 3.50 by column chunks); on 2x4
    the column chunks' rows of ``L_seg`` would be as large (3.9 shares at n = 2048
    by row chunks, 4.1 by column chunks). On 2x4 the transpose made in one psum,
    its select beside the result, and the prefix of it that each chunk read (a
    copy, as large at the last chunk) were 3.89 shares at n = 4096 (3.52 in pieces).
    """
    mloc, nloc = a.shape
    nb = g.nb
    r1, c1 = (k1 // g.pr) * nb, (k1 // g.pc) * nb
    src, mine = _sources(col_g[c1:], first_block=seg.k0, row_axis=g.row_axis, nb=nb)
    if g.pr < g.pc:
        chunks = _row_chunks(r1, c1, mloc, nloc, nb=nb, pr=g.pr, pc=g.pc)
        groups = min(MAX_PIECES, len(chunks))
        # the chunks of each piece: its columns end where its last chunk's do
        edges = [len(chunks) * p // groups for p in range(groups + 1)]
        pieces = []  # (first column from c1, L_seg^H of the columns to the next piece)
        for t, (lo, hi, _) in enumerate(chunks):
            # the piece a group of chunks reads last, made as its first chunk starts (one
            # psum along mesh columns -> (its columns, W)) once the previous chunk is
            # written: XLA otherwise slices and sends every chunk's operands first
            last = a
            made = pieces[-1][0] + pieces[-1][1].shape[0] if pieces else 0
            end = chunks[edges[edges.index(t) + 1] - 1][2] - c1 if t in edges[:-1] else made
            if end > made:
                last = _send_rows(lseg, src[made:end] + after(0, a), mine[made:end], g.row_axis)
                pieces.append((made, last))
            # the chunk's rows of L_seg, read once the new piece exists: every GEMM of
            # the chunk (so its writes into A) then waits for the piece's select, which
            # reads A (else XLA copies A). A piece's columns past the chunk's last one
            # are above the diagonal (garbage) on every device.
            rows = lax.dynamic_slice_in_dim(lseg, after(lo - seg.r0, last), hi - lo, axis=0)
            for start, lt in pieces:
                upd = jnp.dot(rows, lt.conj().T, precision=g.precision)
                a = add_block(a, (lo, c1 + start), -upd)
        return a
    for start, lo, hi in _column_chunks(r1, c1, mloc, nloc, nb=nb, pr=g.pr, pc=g.pc):
        # the L_seg^H of the chunk's columns (one psum along mesh columns -> (hi - lo, W))
        # and its rows of L_seg, made once the previous chunk is written (as above)
        now = after(0, a)
        cut = slice(lo - c1, hi - c1)
        lt = _send_rows(lseg, src[cut] + now, mine[cut], g.row_axis)
        rows = lax.dynamic_slice_in_dim(lseg, now + start - seg.r0, mloc - start, axis=0)
        upd = jnp.dot(rows, lt.conj().T, precision=g.precision)
        a = add_block(a, (start, lo), -upd)
    return a


def cholesky_block_cyclic(
    a: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    w: int,
    precision: lax.PrecisionLike,
) -> tuple[jax.Array, jax.Array]:
    """Factor ``A = L Lᴴ`` in place on a block-cyclic matrix (lower triangle).

    Args:
      a: ``(n/pr, n/pc)`` local block of Hermitian ``A`` (only its lower
        triangle is read), block-cyclic with block size ``nb``; ``n/nb`` must
        be a multiple of ``w``, and ``w`` of ``pr`` and ``pc``.
      row_axis, col_axis: mesh axes of the grid's rows and columns.
      nb: block size (panel width).
      w: panels per segment.
      precision: for the GEMMs.

    Returns:
      ``(l, ok)``: the local block of ``L`` on and below the diagonal (the
      upper triangle holds garbage), and whether no ``potrf`` of a diagonal
      block on this device stopped at a pivot ``<= 0`` (LAPACK's ``info > 0``;
      the caller then fills ``L`` with NaN, as jax does). NaN and inf entries
      of ``A`` do not count as failures: they propagate as in LAPACK's
      ``potrf`` (columns before the first affected one stay finite and exact).
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    g = _Grid(row_axis, col_axis, pr, pc, axis_index(row_axis), axis_index(col_axis), nb, precision)
    mloc, nloc = a.shape
    n = mloc * pr
    nbr = n // nb
    if n != nloc * pc or nbr % w or w % pr or w % pc:
        raise ValueError(
            f"cholesky_block_cyclic: local block {a.shape} with nb={nb}, w={w} does not fit "
            f"a {pr}x{pc} grid"
        )
    row_g = jnp.repeat(global_blocks(mloc // nb, row_axis), nb)  # global block of each local row
    col_g = jnp.repeat(global_blocks(nloc // nb, col_axis), nb)
    bad = jnp.zeros((), bool)  # a potrf of a diagonal block met a pivot <= 0
    for k0 in range(0, nbr, w):
        r0, c0 = (k0 // pr) * nb, (k0 // pc) * nb  # the segment's first local row / column
        wc = (w // pc) * nb  # local columns of the segment
        seg = _Segment(k0, r0, c0, wc, row_g[r0:], col_g[c0 : c0 + wc])
        # the segment's panels, made once the previous segment is done (else at the start)
        lseg = zeros_after((mloc - r0, w * nb), a.dtype, a)
        step = functools.partial(_panel_step, g=g, seg=seg)
        a, lseg, bad = fori(0, w, step, (a, lseg, bad))
        if k0 + w < nbr:  # the trailing update of the columns after the segment
            a = _trailing_update(a, lseg, col_g, k1=k0 + w, seg=seg, g=g)
    return a, ~bad
