"""Right-looking blocked LU with partial pivoting on a 2D block-cyclic matrix.

The algorithm of ScaLAPACK's PDGETRF (Choi, Dongarra, Walker et al., 1996),
written as one SPMD program for ``jax.shard_map``. The matrix is ``n x n``
with ``n = nbr·nb``, in block-cyclic order on a ``pr x pc`` grid (see
``cyclic.py``): device ``(i, j)`` holds the blocks ``(I, J)`` with
``I ≡ i (mod pr)`` and ``J ≡ j (mod pc)``. For each block column ``K``:

1. **Panel** (the ``pr`` devices of mesh column ``K mod pc`` only, under
   ``lax.cond``): all-gather the panel ``A[K·nb:, K-th block column]`` along
   the mesh column and factor it with LAPACK's ``getrf``
   (``lax.linalg.lu``), which chooses LAPACK's pivots: the entry of largest
   magnitude in the column (``|re| + |im|`` for complex), first on ties.
2. **Broadcast** the factored panel rows each device row needs (its part of
   ``L21``), ``L11\\U11`` and the pivots along the mesh row (a masked psum).
3. **Row interchanges** of the panel's pivots, applied to every local column
   (LAPACK's ``laswp`` on the left and right): the at most ``2·nb`` rows
   involved (computed on the panel's owners from LAPACK's permutation) are
   exchanged with one psum along the mesh column.
4. **U12** ``= L11^-1 A12``: every device of a mesh column already holds the
   interchanged top rows from step 3; each solves for ``1/pr`` of its
   columns and an all-gather along the mesh column completes ``U12``.
5. **Trailing update** ``A22 -= L21 U12``: one local GEMM, the bulk of the
   flops.

The loop over ``K`` is unrolled in Python so that each step's trailing
matrix has a static shape: on device ``(i, j)`` it is a suffix of the local
block rows and columns. The suffix is taken for the device that has the
most of it, and rows/columns that already left the trailing matrix are masked
(zero rows of ``L21``, zero columns of ``U12``), wasting at most one block
row and column per step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size
from .cyclic import global_blocks, local_row


def exchange_rows(
    x: jax.Array,
    targets: jax.Array,
    sources: jax.Array,
    *,
    axis_name: str | None,
    nb: int,
) -> tuple[jax.Array, jax.Array]:
    """``x[targets[s]] = x[sources[s]]`` for global rows of a block-cyclic (by rows) matrix.

    Each device puts the source rows it holds into a ``(len, cols)`` buffer
    (zeros elsewhere) that one psum along ``axis_name`` completes; then each
    device writes the target rows it holds. Repeated targets must have equal
    sources.

    Returns:
      ``(x, rows)``: the updated local rows, and the moved rows on every device.
    """
    p = axis_size(axis_name)
    me = axis_index(axis_name)
    src_owner, src_local = local_row(sources, p=p, nb=nb)
    rows = jnp.take(x, src_local, axis=0, mode="clip")
    rows = jnp.where((src_owner == me)[:, None], rows, jnp.zeros_like(rows))
    if axis_name is not None:
        # psum along the mesh column -> (len, cols): every moved row, everywhere
        rows = lax.psum(rows, axis_name)
    tgt_owner, tgt_local = local_row(targets, p=p, nb=nb)
    # rows this device does not hold get an out-of-range index and are dropped
    tgt_local = jnp.where(tgt_owner == me, tgt_local, x.shape[0])
    return x.at[tgt_local].set(rows, mode="drop"), rows


def swap_sources(pivots: jax.Array, perm: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Rows moved by a panel's interchanges, relative to the panel's first row.

    ``pivots`` (``len``) are LAPACK's (row ``r`` swapped with ``pivots[r]``, in
    order) and ``perm`` the resulting permutation of the window (new row ``w``
    holds old row ``perm[w]``). Returns ``(targets, sources)`` of length
    ``2·len``: the first ``len`` targets are the panel's own rows.
    """
    moved = jnp.concatenate([jnp.arange(pivots.shape[0], dtype=jnp.int32), pivots])
    return moved, perm[moved].astype(jnp.int32)


def pivots_to_permutation(piv: jax.Array, nb: int) -> jax.Array:
    """``lax.linalg.lu_pivots_to_permutation(piv, n)`` for pivots made ``nb`` rows at a time.

    ``piv`` (``n``, a multiple of ``nb``) are the pivots of a blocked LU:
    ``piv[g] >= g``, and panel ``K`` swaps only rows ``>= K·nb``. jax's
    generic lowering (the one on CPU) swaps one row per loop iteration, ``n``
    iterations; here each panel's swaps touch at most ``2·nb`` rows, so they
    are replayed on those rows only (``nb`` iterations for all panels at once)
    and the ``n/nb`` resulting sparse permutations are composed in order.

    Returns:
      ``perm`` (``n``, int32): row ``g`` of ``P A`` is row ``perm[g]`` of ``A``.
    """
    n = piv.shape[0]
    nbr = n // nb
    starts = (jnp.arange(nbr, dtype=jnp.int32) * nb)[:, None]
    rel = piv.astype(jnp.int32).reshape(nbr, nb) - starts  # window rows, all >= own row
    own = jnp.broadcast_to(jnp.arange(nb, dtype=jnp.int32), (nbr, nb))
    # each touched row gets a compact index: r for the panel's own rows r < nb,
    # nb + (first r' with the same pivot) for the rows below them
    first = jnp.argmax(rel[:, :, None] == rel[:, None, :], axis=2).astype(jnp.int32)
    compact = jnp.where(rel < nb, rel, nb + first)
    cperm = jax.vmap(lambda p: lax.linalg.lu_pivots_to_permutation(p, 2 * nb))(compact)
    row_of = jnp.concatenate([own, rel], axis=1)  # compact index -> window row
    targets = row_of + starts
    sources = jnp.take_along_axis(
        row_of, jnp.take_along_axis(cperm, jnp.concatenate([own, compact], axis=1), axis=1), axis=1
    ) + starts

    def compose(k, perm):  # apply panel k after panels 0..k-1: perm[t] <- perm[s]
        return perm.at[targets[k]].set(perm[sources[k]])

    return lax.fori_loop(0, nbr, compose, jnp.arange(n, dtype=jnp.int32))


def apply_panel_swaps(
    x: jax.Array,
    pivots: jax.Array,
    start: int,
    *,
    axis_name: str | None,
    nb: int,
    n: int,
    inverse: bool = False,
) -> jax.Array:
    """Apply (or undo) one panel's row interchanges to a block-cyclic (by rows) matrix.

    Row ``start + r`` is swapped with row ``pivots[r]`` for ``r = 0..len-1``,
    in order (LAPACK's ``laswp``); ``inverse`` applies them in reverse order.

    Args:
      x: ``(n/P, cols)`` local rows, block-cyclic with block size ``nb`` over
        the ``P`` devices of ``axis_name``.
      pivots: ``(len,)`` global row indices, all ``>= start``.
      start: global index of the panel's first row (static).
      axis_name, nb: as in :func:`exchange_rows`.
      n: global number of rows.
      inverse: undo the interchanges.
    """
    rel = (pivots - start).astype(jnp.int32)
    perm = lax.linalg.lu_pivots_to_permutation(rel, n - start)
    targets, sources = swap_sources(rel, perm)
    if inverse:  # new[w] = old[perm[w]]; the inverse puts old[w] at perm[w]
        targets, sources = sources, targets
    x, _ = exchange_rows(x, targets + start, sources + start, axis_name=axis_name, nb=nb)
    return x


def _u12(l11: jax.Array, a12: jax.Array, *, row_axis: str | None) -> jax.Array:
    """``L11^-1 A12`` for this device's columns, the solve split over the mesh column.

    Every device of a mesh column holds the same ``A12`` (the interchanged
    top rows); each solves for ``1/pr`` of the columns and one all-gather
    along the column puts them together, instead of ``pr`` devices repeating
    the whole solve (``nb²·n/pc`` flops per panel each).
    """
    pr = axis_size(row_axis)
    cols = a12.shape[1]
    if pr == 1 or cols == 0:
        return lax.linalg.triangular_solve(l11, a12, left_side=True, lower=True, unit_diagonal=True)
    chunk = -(-cols // pr)
    a12 = jnp.pad(a12, ((0, 0), (0, pr * chunk - cols)))
    mine = lax.dynamic_slice_in_dim(a12, axis_index(row_axis) * chunk, chunk, axis=1)
    mine = lax.linalg.triangular_solve(l11, mine, left_side=True, lower=True, unit_diagonal=True)
    # all_gather along the mesh column -> the columns of every device row, in order
    return lax.all_gather(mine, row_axis, axis=1, tiled=True)[:, :cols]


def lu_block_cyclic(
    a: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    precision: lax.PrecisionLike,
) -> tuple[jax.Array, jax.Array]:
    """Factor ``P A = L U`` in place on a block-cyclic matrix.

    Args:
      a: ``(n/pr, n/pc)`` local block of ``A`` in block-cyclic order with block
        size ``nb``; ``n/nb`` must be a multiple of ``pr`` and ``pc``.
      row_axis, col_axis: mesh axes of the grid's rows and columns.
      nb: block size (panel width).
      precision: for the trailing-update GEMMs.

    Returns:
      ``(lu, piv)``: the local block of ``L\\U`` (unit ``L`` below the
      diagonal, ``U`` on and above it) in the same order, and the ``(n,)``
      global pivots (``piv[g]``: the row interchanged with row ``g``), the same
      on every device.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    i, j = axis_index(row_axis), axis_index(col_axis)
    mloc, nloc = a.shape
    n = mloc * pr
    nbr = n // nb
    if n != nloc * pc or nbr % pr or nbr % pc:
        raise ValueError(f"lu_block_cyclic: local block {a.shape} does not fit a {pr}x{pc} grid")
    row_g = jnp.repeat(global_blocks(mloc // nb, row_axis), nb)  # global block of each local row
    col_g = jnp.repeat(global_blocks(nloc // nb, col_axis), nb)
    piv = jnp.arange(n, dtype=jnp.int32)

    for k in range(nbr):
        kr, kc = k % pr, k % pc
        t0 = k // pr  # first local block row that can hold block rows >= k
        lc = k // pc  # the panel's local block column (on mesh column kc)
        height = mloc - t0 * nb
        drop = k - t0 * pr  # leading gathered blocks that are above the panel

        def factor_panel(panel, height=height, drop=drop):
            # all_gather over rows -> (pr, height, nb): the panel column of every device row
            g = panel[None] if row_axis is None else lax.all_gather(panel, row_axis, axis=0)
            # -> global row order: block t0·pr + u·pr + s for (u, s) ascending
            g = g.reshape(pr, height // nb, nb, nb).swapaxes(0, 1).reshape(pr * height, nb)
            lu_p, piv_p, perm_p = lax.linalg.lu(g[drop * nb :])
            targets, sources = swap_sources(piv_p.astype(jnp.int32), perm_p)
            # back to this device row's local order, blocks above the panel as zeros
            full = jnp.concatenate([jnp.zeros((drop * nb, nb), lu_p.dtype), lu_p])
            mine = lax.dynamic_index_in_dim(
                full.reshape(height // nb, pr, nb, nb), i, axis=1, keepdims=False
            )
            return mine.reshape(height, nb), lu_p[:nb], targets, sources

        def skip(panel, height=height):
            zeros = jnp.zeros((2 * nb,), jnp.int32)
            return jnp.zeros_like(panel), jnp.zeros((nb, nb), panel.dtype), zeros, zeros

        # only the owner column holds the panel; the others skip the gather and getrf
        panel = lax.cond(j == kc, factor_panel, skip, a[t0 * nb :, lc * nb : (lc + 1) * nb])
        if col_axis is not None:
            # psum along the mesh row: the owner column's results, everywhere (others add zeros)
            panel = lax.psum(panel, col_axis)
        mine, diag, targets, sources = panel
        piv = lax.dynamic_update_slice(piv, targets[nb:] + k * nb, (k * nb,))

        # row interchanges on every local column; `moved[:nb]` is the new block row k
        a, moved = exchange_rows(a, targets + k * nb, sources + k * nb, axis_name=row_axis, nb=nb)

        # the factored panel replaces rows >= k of the panel column (owner column)
        rows_in = (row_g[t0 * nb :] >= k)[:, None] & (j == kc)
        old = a[t0 * nb :, lc * nb : (lc + 1) * nb]
        a = a.at[t0 * nb :, lc * nb : (lc + 1) * nb].set(jnp.where(rows_in, mine, old))

        if k + 1 == nbr:
            break
        # U12 = L11^-1 A12 for this device's columns right of the panel
        cs = (k + 1) // pc
        cols_in = (col_g[cs * nb :] > k)[None, :]
        l11 = jnp.tril(diag, -1) + jnp.eye(nb, dtype=diag.dtype)
        u12 = _u12(l11, moved[:nb, cs * nb :], row_axis=row_axis)
        u12 = jnp.where(cols_in, u12, jnp.zeros_like(u12))
        # block row k of U lives on mesh row kr, local block row t0
        cur = a[t0 * nb : (t0 + 1) * nb, cs * nb :]
        a = a.at[t0 * nb : (t0 + 1) * nb, cs * nb :].set(jnp.where((i == kr) & cols_in, u12, cur))
        # trailing update A22 -= L21 U12 on the rows below block row k
        rs = (k + 1) // pr
        l21 = mine[(rs - t0) * nb :]
        l21 = jnp.where((row_g[rs * nb :] > k)[:, None], l21, jnp.zeros_like(l21))
        a = a.at[rs * nb :, cs * nb :].add(-jnp.dot(l21, u12, precision=precision))
    return a, piv
