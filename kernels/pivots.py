"""Row interchanges of a partially pivoted LU on block-cyclic rows (LAPACK's ``laswp``).

The helpers the LU (``lu.py``) and the triangular solves (``trsm.py``) share:
moving a panel's pivot rows between the devices of a mesh column with one
psum, turning LAPACK's pivots into the window permutation they make, and
composing a blocked LU's pivots into one permutation panel by panel.

Naming: ``rel`` indices are relative to a panel's first row, ``targets`` /
``sources`` are global rows (``x[targets[s]] = x[sources[s]]``), ``perm`` maps a
new row to the old row it holds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size
from .cyclic import local_row


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


def panel_swaps(piv: jax.Array, nb: int) -> tuple[jax.Array, jax.Array]:
    """Every panel's row interchanges of a blocked LU as ``(targets, sources)``.

    ``piv`` (``n``, a multiple of ``nb``) are the pivots of a blocked LU:
    ``piv[g] >= g``, and panel ``K`` swaps only rows ``>= K·nb``, at most
    ``2·nb`` of them. Its swaps are replayed on those rows only (``nb``
    iterations for all panels at once).

    Returns:
      ``(targets, sources)``, each ``(n/nb, 2·nb)`` global rows: panel ``K``
      sets ``x[targets[K, s]] = x[sources[K, s]]`` (LAPACK's ``laswp`` of its
      rows, in the form of :func:`exchange_rows`; repeated targets have equal
      sources).
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
    sources = (
        jnp.take_along_axis(
            row_of,
            jnp.take_along_axis(cperm, jnp.concatenate([own, compact], axis=1), axis=1),
            axis=1,
        )
        + starts
    )
    return targets, sources


def pivots_to_permutation(piv: jax.Array, nb: int) -> jax.Array:
    """``lax.linalg.lu_pivots_to_permutation(piv, n)`` for pivots made ``nb`` rows at a time.

    jax's generic lowering (the one on CPU) swaps one row per loop iteration,
    ``n`` iterations; here the ``n/nb`` sparse permutations of
    :func:`panel_swaps` are composed in order.

    Returns:
      ``perm`` (``n``, int32): row ``g`` of ``P A`` is row ``perm[g]`` of ``A``.
    """
    n = piv.shape[0]
    targets, sources = panel_swaps(piv, nb)

    def compose(k, perm):  # apply panel k after panels 0..k-1: perm[t] <- perm[s]
        return perm.at[targets[k]].set(perm[sources[k]])

    return lax.fori_loop(0, n // nb, compose, jnp.arange(n, dtype=jnp.int32))


def apply_all_panel_swaps(
    x: jax.Array,
    piv: jax.Array,
    *,
    axis_name: str | None,
    nb: int,
    inverse: bool = False,
) -> jax.Array:
    """Apply (or undo) a blocked LU's interchanges, panel by panel, in one loop.

    ``P x`` (``inverse``: ``P^T x``) for ``P`` of ``piv`` (``n``), on rows
    block-cyclic over ``axis_name``: one :func:`exchange_rows` per panel (a
    ``2·nb``-row psum), in a ``lax.fori_loop`` whatever ``n``.

    Args:
      x: ``(n/P, cols)`` local rows, block-cyclic with block size ``nb``.
      piv: ``(n,)`` global pivots of the blocked LU, on every device.
      axis_name: the mesh axis that splits the rows.
      nb: block size (the LU's panel width).
      inverse: undo the interchanges (last panel first).
    """
    nbr = piv.shape[0] // nb
    targets, sources = panel_swaps(piv, nb)
    if inverse:  # new[w] = old[perm[w]]; the inverse puts old[w] at perm[w]
        targets, sources = sources, targets

    def swap(s, x):
        k = nbr - 1 - s if inverse else s
        x, _ = exchange_rows(x, targets[k], sources[k], axis_name=axis_name, nb=nb)
        return x

    return lax.fori_loop(0, nbr, swap, x)


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
