"""Blocked triangular solves ``T X = B`` on a 2D block-cyclic triangular ``T``.

``T`` is ``n x n`` in block-cyclic order with block size ``nb`` on a
``pr x pc`` grid (device ``(i, j)`` holds blocks ``I ≡ i``, ``J ≡ j``); the
rows of ``B`` are block-cyclic over the same mesh rows. The solve walks the
block rows in order (forward for lower ``T``, backward for upper), and at
each step solves one ``nb``-row block with a small local triangular solve and
updates the rest with a GEMM. Two data movements are possible, and which is
cheaper depends on the number of right-hand sides ``k``:

- :func:`trsm_few` (``k`` small, ``B`` replicated along mesh rows): ``T``
  stays where it is and the solved blocks move. Each device accumulates
  ``T[I, J] x_J`` for the blocks it holds; before block ``K`` is solved its
  partial sums are reduced along the mesh row and the solution ``x_K`` is
  broadcast. Per step two ``nb x k`` collectives: ``O(n·k)`` words in all.
  ScaLAPACK's PDTRSV moves data the same way.
- :func:`trsm_many` (``k`` large, ``B``'s columns split over mesh columns):
  ``B`` stays and ``T``'s block column ``K`` is broadcast along mesh rows,
  SUMMA-like: ``O(n²/pr)`` words, independent of ``k``, with every device
  updating its own columns of ``B``.

For ``trans`` solves the caller passes the local transpose of ``T`` and
swaps the two axis names: the transpose of a block-cyclic matrix is
block-cyclic on the transposed grid.

Compile time independent of ``n``: the steps run in at most ``MAX_PHASES``
``lax.fori_loop`` phases (:func:`phases`), as the LU's do (``FEW_PHASES``
for :func:`trsm_few`). A step of a phase
updates the static local rows still to solve after the phase's first step
(:func:`_rest`, the largest range of the phase) and masks the rows already
solved; the collectives are the same as one step at a time.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import (
    add_block,
    add_product,
    all_gather,
    axis_index,
    axis_size,
    fori,
    solve_left,
)
from .cyclic import global_blocks, to_block_cyclic
from .phases import cut
from .pivots import apply_all_panel_swaps, pivots_to_permutation

# Most loops (phases) per triangular solve with many right-hand sides: the
# program does not grow with n (read when a solve is traced). Each loop is
# compiled once (about 35 XLA kernels on CPU), so few loops keep the first call
# short; the masked work they leave is measured in docs/benchmarks-log.md.
MAX_PHASES = 4
# With few right-hand sides a substitution is O(n^2 k) flops next to the
# factorisation's O(n^3): one loop over every step, on the rows of the first
# step, costs at most twice those flops and compiles one body.
FEW_PHASES = 1


@functools.cache
def phases(
    nbr: int, pr: int, *, lower: bool, max_phases: int = MAX_PHASES
) -> tuple[tuple[int, int], ...]:
    """The steps ``[s0, s1)`` of each loop of a solve with ``nbr`` block rows over ``pr`` rows.

    Step ``s`` solves block row ``k = s`` (``lower``) or ``nbr - 1 - s``
    (upper). A loop updates the static row range of its first step
    (:func:`_rest`), the largest of the loop, and masks the rows that are
    already solved; the boundaries minimise the rows all steps touch over at
    most ``max_phases`` loops (dynamic programming, as the LU's phases).
    """
    mb = nbr // pr

    def work(s0: int) -> float:  # local block rows a step of a loop from s0 updates, + 1 solve
        k0 = s0 if lower else nbr - 1 - s0
        lo, hi = _rest(k0, lower=lower, p=pr, nb=1, mloc=mb)
        return max(hi - lo, 0) + 1

    return cut(nbr, max_phases, work)


def _rest(k: int, *, lower: bool, p: int, nb: int, mloc: int) -> tuple[int, int]:
    """Static local row range that holds every block row still to update after step k.

    Lower (forward): global blocks > k; upper (backward): blocks < k. The
    range is the one of the device that has the most such rows; the others
    mask the rows outside. Later steps of a loop need a sub-range of their
    first step's.
    """
    if lower:
        return ((k + 1) // p) * nb, mloc
    return 0, ((k - 1) // p + 1) * nb if k >= 1 else 0


def _solve_block(tkk, rhs, *, lower, unit_diagonal):
    return solve_left(tkk, rhs, lower=lower, unit_diagonal=unit_diagonal)


def _block_of(s, *, lower: bool, nbr: int):
    """Global block row solved at step ``s`` (a traced loop index)."""
    return s if lower else nbr - 1 - s


def trsm_few(
    t: jax.Array,
    b: jax.Array,
    *,
    lower: bool,
    unit_diagonal: bool,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    precision: lax.PrecisionLike,
) -> jax.Array:
    """Solve ``T X = B`` moving the solution, for few right-hand sides.

    Args:
      t: ``(n/pr, n/pc)`` local block of triangular ``T``, block-cyclic.
      b: ``(n/pr, k)`` local rows of ``B``, block-cyclic over ``row_axis`` and
        the same on every device of a mesh row.
      lower: whether ``T`` is the lower triangle of ``t`` (else the upper).
      unit_diagonal: whether ``T``'s diagonal is ones (implied, not read).
      row_axis: mesh axis of the grid's rows.
      col_axis: mesh axis of the grid's columns.
      nb: block size.
      precision: for the local products.

    Returns:
      ``X`` in ``b``'s layout.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    i, j = axis_index(row_axis), axis_index(col_axis)
    mloc = b.shape[0]
    nbr = mloc * pr // nb
    row_g = jnp.repeat(global_blocks(mloc // nb, row_axis), nb)
    axes = tuple(a for a in (row_axis, col_axis) if a is not None)

    def step(s, carry, *, lo, hi):
        b, acc = carry  # acc: sum over the blocks J this device holds of T[I, J] x_J
        k = _block_of(s, lower=lower, nbr=nbr)
        kr, kc = k % pr, k % pc
        r, c = (k // pr) * nb, (k // pc) * nb
        s_k = lax.dynamic_slice_in_dim(acc, r, nb)  # (zeros at the first step)
        if col_axis is not None:
            # psum along the mesh row -> the whole sum for block row k (used on mesh row kr)
            s_k = lax.psum(s_k, col_axis)
        rhs = lax.dynamic_slice_in_dim(b, r, nb) - s_k
        tkk = lax.dynamic_slice(t, (r, c), (nb, nb))
        xk = _solve_block(tkk, rhs, lower=lower, unit_diagonal=unit_diagonal)
        xk = jnp.where((i == kr) & (j == kc), xk, jnp.zeros_like(xk))
        if axes:
            # psum over the grid -> x_k on every device (only device (kr, kc) adds non-zeros)
            xk = lax.psum(xk, axes)
        old = lax.dynamic_slice_in_dim(b, r, nb)
        b = lax.dynamic_update_slice_in_dim(b, jnp.where(i == kr, xk, old), r, axis=0)
        if hi > lo:  # acc[lo:hi] += T[rows still to solve, block column k] x_k
            rows = (row_g[lo:hi] > k) if lower else (row_g[lo:hi] < k)
            tk = lax.dynamic_slice(t, (lo, c), (hi - lo, nb))
            tk = jnp.where(rows[:, None] & (j == kc), tk, jnp.zeros_like(tk))
            acc = add_block(acc, (lo,), jnp.dot(tk, xk, precision=precision))
        return b, acc

    acc = jnp.zeros_like(b)
    for s0, s1 in phases(nbr, pr, lower=lower, max_phases=FEW_PHASES):
        lo, hi = _rest(_block_of(s0, lower=lower, nbr=nbr), lower=lower, p=pr, nb=nb, mloc=mloc)
        b, acc = fori(s0, s1, functools.partial(step, lo=lo, hi=hi), (b, acc))
    return b


def _gathered_column(t, k, *, op: int, row_axis, col_axis, nb: int):
    """``op(t)``'s block column ``k``, rows block-cyclic over ``row_axis``, from ``t``'s
    block row ``k`` on the same grid (``t`` contiguous: ``trsm_many(same_grid=True)``)."""
    pr, i = axis_size(row_axis), axis_index(row_axis)
    row_blocks = t.shape[0] // nb  # t's local block rows: mesh row k // row_blocks has k
    nbr = row_blocks * pr
    kr, c = k // row_blocks, (k % row_blocks) * nb
    col = lax.dynamic_slice_in_dim(t, c, nb, axis=0).T  # (n/pc, nb): its rows over col_axis
    col = col.conj() if op == 2 else col
    col = jnp.where(i == kr, col, jnp.zeros_like(col))
    col = all_gather(col, col_axis, axis=0, tiled=True)  # (n, nb), global row order
    # rows grouped by the device of row_axis that holds them, block-cyclic (global block
    # u·pr + d is device d's local block u), then each device's group summed onto it: only
    # mesh row kr adds non-zeros
    col = col.reshape(nbr // pr, pr, nb, nb).swapaxes(0, 1).reshape(nbr * nb, nb)
    if row_axis is None:
        return col
    return lax.psum_scatter(col, row_axis, scatter_dimension=0, tiled=True)


def trsm_many(
    t: jax.Array,
    b: jax.Array,
    *,
    lower: bool,
    unit_diagonal: bool,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    precision: lax.PrecisionLike,
    contiguous: bool = False,
    op: int = 0,
    same_grid: bool = False,
) -> jax.Array:
    """Solve ``T X = B`` moving ``T``'s block columns, for many right-hand sides.

    Args:
      t: ``(n/pr, n/pc)`` local block of triangular ``T``, block-cyclic (or, with
        ``contiguous``, ``op(t)`` is the local block of ``T`` in the contiguous 2D
        block order).
      b: ``(n/pr, k/pc)`` local block of ``B``: rows block-cyclic over
        ``row_axis``, columns contiguous over ``col_axis``.
      lower: as in :func:`trsm_few`.
      unit_diagonal: as in :func:`trsm_few`.
      row_axis: as in :func:`trsm_few`.
      col_axis: as in :func:`trsm_few`.
      nb: as in :func:`trsm_few`.
      precision: as in :func:`trsm_few`.
      contiguous: ``T`` is in the contiguous 2D block order, not block-cyclic (``B``
        still is): each step moves the rows of its block column to block-cyclic
        order (one ``all_to_all`` of ``n/pr x nb`` along ``row_axis``), so that no
        block-cyclic copy of ``T`` is made (one more share of memory per device).
      op: ``T`` is ``op(t)`` (``contiguous`` only): 0 ``t``, 1 its transpose, 2 its
        conjugate transpose, read a block column at a time (no transposed copy).
      same_grid: with ``op`` 1 or 2, ``t`` and ``B`` share the grid: ``row_axis`` splits
        ``t``'s rows and ``B``'s, ``col_axis`` their columns (without it the caller swaps
        the axis names and ``B`` lies on the transposed grid). Each step gathers ``t``'s
        block row along ``col_axis`` and scatters its columns, block-cyclic, over
        ``row_axis`` (an ``all_gather`` and a ``psum_scatter`` of ``n x nb``), so that
        ``B`` is not moved to the transposed grid and back (two more shares).

    Returns:
      ``X`` in ``b``'s layout.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    i, j = axis_index(row_axis), axis_index(col_axis)
    mloc = b.shape[0]
    nbr = mloc * pr // nb
    row_g = jnp.repeat(global_blocks(mloc // nb, row_axis), nb)
    if contiguous:
        col_blocks = (t.shape[1] if op == 0 else t.shape[0]) // nb  # local block columns

    def column(k, top, bot):
        """Rows ``[top, bot)`` (block-cyclic) of ``T``'s block column ``k``, on every device."""
        if same_grid:
            col = _gathered_column(t, k, op=op, row_axis=row_axis, col_axis=col_axis, nb=nb)
            return col[top:bot]
        if contiguous:
            kc, c = k // col_blocks, (k % col_blocks) * nb
            if op == 0:
                col = lax.dynamic_slice_in_dim(t, c, nb, axis=1)
            else:  # a block row of t, transposed: op(t)'s block column
                col = lax.dynamic_slice_in_dim(t, c, nb, axis=0).T
                col = col.conj() if op == 2 else col
        else:
            kc, c = k % pc, (k // pc) * nb
            col = lax.dynamic_slice(t, (top, c), (bot - top, nb))
        col = jnp.where(j == kc, col, jnp.zeros_like(col))
        if contiguous:  # its rows in block-cyclic order, as B's (then only the live ones move)
            col = to_block_cyclic(col, axis=0, axis_name=row_axis, nb=nb)[top:bot]
        if col_axis is not None:
            # psum along the mesh row -> T's block column k on every device of the row
            col = lax.psum(col, col_axis)
        return col

    def step(s, b, *, lo, hi, top, bot):
        k = _block_of(s, lower=lower, nbr=nbr)
        kr, r = k % pr, (k // pr) * nb
        # the rows of T's block column k this loop reads: the diagonal blocks and the rest
        col = column(k, top, bot)
        tkk = lax.dynamic_slice_in_dim(col, r - top, nb)
        xk = _solve_block(
            tkk, lax.dynamic_slice_in_dim(b, r, nb), lower=lower, unit_diagonal=unit_diagonal
        )
        xk = jnp.where(i == kr, xk, jnp.zeros_like(xk))
        if row_axis is not None:
            # psum along the mesh column -> x_k for this device's columns of B
            xk = lax.psum(xk, row_axis)
        old = lax.dynamic_slice_in_dim(b, r, nb)
        b = lax.dynamic_update_slice_in_dim(b, jnp.where(i == kr, xk, old), r, axis=0)
        if hi > lo:  # B[rows still to solve] -= T[those rows, block column k] x_k
            rows = (row_g[lo:hi] > k) if lower else (row_g[lo:hi] < k)
            tk = jnp.where(rows[:, None], col[lo - top : hi - top], 0)
            b = add_product(b, (lo, 0), tk, xk, precision=precision, subtract=True)
        return b

    for s0, s1 in phases(nbr, pr, lower=lower, max_phases=MAX_PHASES):
        k0 = _block_of(s0, lower=lower, nbr=nbr)
        lo, hi = _rest(k0, lower=lower, p=pr, nb=nb, mloc=mloc)
        r0 = (k0 // pr) * nb  # the loop's later diagonal blocks lie between r0 and the rest
        window = dict(lo=lo, hi=hi, top=min(lo, r0), bot=max(hi, r0 + nb))
        b = fori(s0, s1, functools.partial(step, **window), b)
    return b


def _permute_rows_gathered(b, perm, *, axis_name, nb):
    """``new[g] = old[perm[g]]`` for every global row ``g`` (few right-hand sides).

    One all-gather along ``axis_name`` gives every device all ``n`` rows of
    ``B`` (``n x k``, cheap for small ``k``), then each device picks its own.
    """
    p = axis_size(axis_name)
    mloc, k = b.shape
    full = b if axis_name is None else lax.all_gather(b, axis_name, axis=0)
    # (P, mloc, k) in block-cyclic order -> global row order
    full = full.reshape(p, mloc // nb, nb, k).swapaxes(0, 1).reshape(p * mloc, k)
    mine = jnp.repeat(global_blocks(mloc // nb, axis_name), nb) * nb + jnp.tile(
        jnp.arange(nb, dtype=jnp.int32), mloc // nb
    )
    return full[perm[mine]]


def lu_solve_block_cyclic(
    lu: jax.Array,
    piv: jax.Array,
    b: jax.Array,
    *,
    trans: int,
    few: bool,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    precision: lax.PrecisionLike,
) -> jax.Array:
    """Solve ``A X = B`` (``trans=0``), ``A^T X = B`` (1) or ``A^H X = B`` (2) from ``P A = L U``.

    Args:
      lu: ``(n/pr, n/pc)`` local block of ``L\\U``, block-cyclic.
      piv: ``(n,)`` global pivots, on every device.
      b: local rows of ``B``, block-cyclic over ``row_axis`` (``trans=0``) or
        over ``col_axis`` (``trans`` 1, 2); ``(rows, k)`` replicated along the
        other axis when ``few``, else ``(rows, k/P)`` split over it.
      trans: 0, 1 or 2, as in ``scipy.linalg.lu_solve``.
      few: use :func:`trsm_few` (and one gather for the pivots) instead of
        :func:`trsm_many` (and the panel-by-panel interchanges).
      row_axis, col_axis, nb, precision: as for the factorisation.

    Returns:
      ``X`` in ``b``'s layout.
    """
    trsm = trsm_few if few else trsm_many
    if trans == 0:
        rows, cols, t = row_axis, col_axis, lu
    else:
        # A^T = U^T L^T P: the transposed factors on the transposed grid
        rows, cols, t = col_axis, row_axis, (lu.T.conj() if trans == 2 else lu.T)
    solve = dict(row_axis=rows, col_axis=cols, nb=nb, precision=precision)

    def permute(x, inverse):
        if few:
            perm = pivots_to_permutation(piv, nb)
            return _permute_rows_gathered(
                x, jnp.argsort(perm) if inverse else perm, axis_name=rows, nb=nb
            )
        return apply_all_panel_swaps(x, piv, axis_name=rows, nb=nb, inverse=inverse)

    if trans == 0:
        b = permute(b, inverse=False)  # P B
        b = trsm(t, b, lower=True, unit_diagonal=True, **solve)  # L Y = P B
        return trsm(t, b, lower=False, unit_diagonal=False, **solve)  # U X = Y
    b = trsm(t, b, lower=True, unit_diagonal=False, **solve)  # U^T Z = B
    b = trsm(t, b, lower=False, unit_diagonal=True, **solve)  # L^T W = Z
    return permute(b, inverse=True)  # X = P^T W
