"""Right-looking blocked LU with partial pivoting on a 2D block-cyclic matrix.

The algorithm of ScaLAPACK's PDGETRF (Choi, Dongarra, Walker et al., 1996),
written as one SPMD program for ``jax.shard_map``. The matrix is ``n x n``
with ``n = nbr·nb``, in block-cyclic order on a ``pr x pc`` grid (see
``cyclic.py``): device ``(i, j)`` holds the blocks ``(I, J)`` with
``I ≡ i (mod pr)`` and ``J ≡ j (mod pc)``. For each block column ``k``
(the steps are named as in SLATE's ``getrf.cc``):

1. **panel** (the ``pr`` devices of mesh column ``k mod pc`` only, under
   ``lax.cond``): all-gather the panel ``A(k:, k)`` along the mesh column
   and factor it with LAPACK's ``getrf`` (``lax.linalg.lu``), which chooses
   LAPACK's pivots: the entry of largest magnitude in the column
   (``|re| + |im|`` for complex), first on ties.
2. **broadcast** the factored panel rows each device row needs (its part of
   ``L21``), ``L11\\U11`` and the pivots along the mesh row (a masked psum).
3. **swap** (LAPACK's ``laswp`` left and right of the panel): the at most
   ``2·nb`` rows the panel's pivots move are exchanged on every local column
   with one psum along the mesh column (``pivots.py``).
4. **U12** ``A(k, k+1:) = L11^-1 A(k, k+1:)``: every device of a mesh column
   holds the interchanged top rows from the swap; each solves for ``1/pr`` of
   its columns and an all-gather along the mesh column completes ``U12``.
5. **update** ``A(k+1:, k+1:) -= A(k+1:, k) A(k, k+1:)``: one local GEMM,
   the bulk of the flops.

Compile time independent of ``n``: the steps run in a ``lax.fori_loop``
over ``k``, in at most ``MAX_PHASES`` phases (:func:`phases`). Inside a
loop every array has a static shape, so each phase works on the local
trailing block that its first step needs (a static suffix of the local
block rows and columns, taken for the device that has the most of it), and
rows/columns that already left the trailing matrix are masked (zero rows of
``L21``, zero columns of ``U12``). The phase boundaries are chosen to
minimise that masked work; with one step per phase (``n/nb <= MAX_PHASES``)
the program is the unrolled algorithm.

Naming: ``_blk`` a device's local block, ``mloc x nloc`` its shape, ``k`` the
global block column of the step, ``kr, kc`` the mesh row and column that own
block ``(k, k)``, ``t0``/``lc`` the local block row/column of block row/column
``k`` on its owners; upper-case offsets (``T0``, ``R0``, ``C0``) are a phase's
static local block offsets.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import add_product, axis_index, axis_size, fori
from .cyclic import global_blocks
from .phases import cut
from .pivots import apply_panel_swaps, exchange_rows, pivots_to_permutation, swap_sources

# the pivot helpers are re-exported: they lived here before kernels/pivots.py
__all__ = ["MAX_PHASES", "apply_panel_swaps", "lu_block_cyclic", "phases", "pivots_to_permutation"]

# Most loops (phases) per factorisation: compile time and program size are
# bounded by this, whatever n. Each loop is compiled once (about 45 XLA
# kernels on CPU, ~1 CPU s), and the masked work four loops leave is 6% of the
# flops at n/nb = 8, 21% at 24 and 33% at 88 block columns (figures and the
# trade against compile time: docs/benchmarks-log.md, "First call").
MAX_PHASES = 4


@functools.cache
def phases(nbr: int, pr: int, pc: int, max_phases: int = MAX_PHASES) -> tuple[tuple[int, int], ...]:
    """The steps ``[k0, k1)`` of each loop of an LU with ``nbr`` block columns on ``pr x pc``.

    A phase works on the local trailing block of its first step, so a step
    ``k`` of the phase starting at ``k0`` updates ``(mloc/nb - (k0+1)//pr) x
    (nloc/nb - (k0+1)//pc)`` local blocks instead of its own ``k``'s (and
    factors a panel as tall as ``k0``'s). The boundaries minimise the flops
    all devices execute over at most ``max_phases`` phases (dynamic
    programming, ``O(max_phases·nbr²)`` steps at trace time).
    """
    mb, nbc = nbr // pr, nbr // pc

    def work(k0: int) -> float:  # flops/nb³ all devices execute in a step of a phase from k0
        rows, cols = mb - (k0 + 1) // pr, nbc - (k0 + 1) // pc
        update = 2 * rows * cols + cols / pr  # GEMM and the U12 solve, on every device
        return pr * pc * update + pr * (nbr - k0)  # + getrf on the owner column

    return cut(nbr, max_phases, work)


@dataclasses.dataclass(frozen=True)
class _Window:
    """A phase's static local offsets (in rows/columns, multiples of ``nb``).

    ``top``: first local row that can hold the panels of the phase
    (``T0·nb``); ``height``: rows from there to the end; ``rows``/``cols``:
    first local row/column of the trailing update (``R0·nb``, ``C0·nb``);
    ``skip``: gathered panel rows above the phase's first panel (block rows
    ``T0·pr .. k0-1``); ``spread``: the most rows a later panel of the phase
    starts below the first (``(k1-1-k0)·nb``).
    """

    top: int
    height: int
    rows: int
    cols: int
    skip: int
    spread: int

    @classmethod
    def of(cls, k0: int, k1: int, *, pr: int, pc: int, nb: int, mloc: int) -> _Window:
        top = (k0 // pr) * nb
        return cls(
            top=top,
            height=mloc - top,
            rows=((k0 + 1) // pr) * nb,
            cols=((k0 + 1) // pc) * nb,
            skip=(k0 - (k0 // pr) * pr) * nb,
            spread=(k1 - 1 - k0) * nb,
        )


def _panel(panel_blk, k, *, w: _Window, row_axis, pr: int, nb: int):
    """getrf of ``A(k:, k)``, run by the owner mesh column only.

    ``panel_blk``: this device's ``(height, nb)`` rows of the panel column
    from ``w.top``. Returns this device's rows of the factored panel in local
    order (zeros above block row ``k``), ``L11\\U11`` and the swap
    ``(targets, sources)`` relative to row ``k·nb``.
    """
    i = axis_index(row_axis)
    h = w.height
    # all_gather over rows -> (pr, height, nb): the panel column of every device row
    g = panel_blk[None] if row_axis is None else lax.all_gather(panel_blk, row_axis, axis=0)
    # -> global row order: block T0·pr + u·pr + s for (u, s) ascending; from row k0·nb on
    g = g.reshape(pr, h // nb, nb, nb).swapaxes(0, 1).reshape(pr * h, nb)[w.skip :]
    m = g.shape[0]  # n - k0·nb: the phase's first panel height
    below = (k - (w.top // nb) * pr) * nb - w.skip  # rows of block rows k0..k-1
    # rows k·nb.. first, the rows above them replaced by zeros at the end (never pivots:
    # a zero column picks its first row, and zero rows stay zero)
    g = jnp.concatenate([g, jnp.zeros((w.spread, nb), g.dtype)])
    lu_p, piv_p, perm_p = lax.linalg.lu(lax.dynamic_slice_in_dim(g, below, m))
    targets, sources = swap_sources(piv_p.astype(jnp.int32), perm_p)
    # back to this device row's local order, rows above the panel as zeros
    full = jnp.concatenate([jnp.zeros((w.spread, nb), lu_p.dtype), lu_p])
    full = lax.dynamic_slice_in_dim(full, w.spread - below, m)
    full = jnp.concatenate([jnp.zeros((w.skip, nb), lu_p.dtype), full])
    mine = lax.dynamic_index_in_dim(full.reshape(h // nb, pr, nb, nb), i, axis=1, keepdims=False)
    return mine.reshape(h, nb), lu_p[:nb], targets, sources


def _skip_panel(panel_blk, k, *, nb: int):
    zeros = jnp.zeros((2 * nb,), jnp.int32)
    return jnp.zeros_like(panel_blk), jnp.zeros((nb, nb), panel_blk.dtype), zeros, zeros


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


def _step(k, carry, *, w: _Window, row_axis, col_axis, nb: int, row_g, col_g, precision):
    """One block column ``k`` of the factorisation, on the static window ``w``."""
    a, piv = carry
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    i, j = axis_index(row_axis), axis_index(col_axis)
    kr, kc = k % pr, k % pc
    t0, lc = k // pr, k // pc  # local block row / column of block k on its owners

    # panel: getrf of A(k:, k) on the owner column; the others skip the gather and getrf
    panel_at = (w.top, lc * nb)
    panel_blk = lax.dynamic_slice(a, panel_at, (w.height, nb))
    panel = lax.cond(
        j == kc,
        functools.partial(_panel, w=w, row_axis=row_axis, pr=pr, nb=nb),
        functools.partial(_skip_panel, nb=nb),
        panel_blk,
        k,
    )
    # broadcast: psum along the mesh row -> the owner column's panel, everywhere
    if col_axis is not None:
        panel = lax.psum(panel, col_axis)
    l_blk, diag, targets, sources = panel
    piv = lax.dynamic_update_slice(piv, targets[nb:] + k * nb, (k * nb,))

    # swap: rows k·nb.. interchanged on every local column; `moved[:nb]` is the new block row k
    a, moved = exchange_rows(a, targets + k * nb, sources + k * nb, axis_name=row_axis, nb=nb)
    # the factored panel replaces rows >= k of the panel column (owner column)
    rows_in = (row_g[w.top :] >= k)[:, None] & (j == kc)
    old = lax.dynamic_slice(a, panel_at, (w.height, nb))
    a = lax.dynamic_update_slice(a, jnp.where(rows_in, l_blk, old), panel_at)

    # U12: A(k, k+1:) = L11^-1 A(k, k+1:) for this device's columns right of the panel
    cols_in = (col_g[w.cols :] > k)[None, :]
    l11 = jnp.tril(diag, -1) + jnp.eye(nb, dtype=diag.dtype)
    u12 = _u12(l11, moved[:nb, w.cols :], row_axis=row_axis)
    u12 = jnp.where(cols_in, u12, jnp.zeros_like(u12))
    # block row k of U lives on mesh row kr, local block row t0
    u_at = (t0 * nb, w.cols)
    cur = lax.dynamic_slice(a, u_at, u12.shape)
    a = lax.dynamic_update_slice(a, jnp.where((i == kr) & cols_in, u12, cur), u_at)

    # update: A(k+1:, k+1:) -= A(k+1:, k) A(k, k+1:) on the rows below block row k
    l21 = l_blk[w.rows - w.top :]
    l21 = jnp.where((row_g[w.rows :] > k)[:, None], l21, jnp.zeros_like(l21))
    a = add_product(a, (w.rows, w.cols), l21, u12, precision=precision, subtract=True)
    return a, piv


def lu_block_cyclic(
    a: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    precision: lax.PrecisionLike,
    max_phases: int = MAX_PHASES,
) -> tuple[jax.Array, jax.Array]:
    """Factor ``P A = L U`` in place on a block-cyclic matrix.

    Args:
      a: ``(n/pr, n/pc)`` local block of ``A`` in block-cyclic order with block
        size ``nb``; ``n/nb`` must be a multiple of ``pr`` and ``pc``.
      row_axis, col_axis: mesh axes of the grid's rows and columns.
      nb: block size (panel width).
      precision: for the trailing-update GEMMs.
      max_phases: most loops over block columns (static; see :func:`phases`).

    Returns:
      ``(lu, piv)``: the local block of ``L\\U`` (unit ``L`` below the
      diagonal, ``U`` on and above it) in the same order, and the ``(n,)``
      global pivots (``piv[g]``: the row interchanged with row ``g``), the same
      on every device.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    mloc, nloc = a.shape
    n = mloc * pr
    nbr = n // nb
    if n != nloc * pc or nbr % pr or nbr % pc:
        raise ValueError(f"lu_block_cyclic: local block {a.shape} does not fit a {pr}x{pc} grid")
    row_g = jnp.repeat(global_blocks(mloc // nb, row_axis), nb)  # global block of each local row
    col_g = jnp.repeat(global_blocks(nloc // nb, col_axis), nb)
    piv = jnp.arange(n, dtype=jnp.int32)
    for k0, k1 in phases(nbr, pr, pc, max_phases):
        w = _Window.of(k0, k1, pr=pr, pc=pc, nb=nb, mloc=mloc)
        step = functools.partial(
            _step,
            w=w,
            row_axis=row_axis,
            col_axis=col_axis,
            nb=nb,
            row_g=row_g,
            col_g=col_g,
            precision=precision,
        )
        a, piv = fori(k0, k1, step, (a, piv))
    return a, piv
