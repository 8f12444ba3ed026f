"""Blocked Householder reduction to upper Hessenberg form on a 2D block-cyclic matrix.

ScaLAPACK's PDGEHRD (with PDLAHRD's panel), as one SPMD program for
``jax.shard_map``: ``Qᴴ A Q = H``, ``H`` zero below its first subdiagonal. The
matrix is ``n x n`` (``n`` a multiple of ``nb·pr`` and ``nb·pc``) in the
block-cyclic order of ``cyclic.py``; ``grow``/``gcol`` are the global indices of
the local rows/columns (``qr.global_index``), and the replicated ``n``-vectors
(``V``, ``Y``, a column) are in global order.

Panel ``k`` reduces the ``nb`` columns ``j = k·nb + i``, ``i < nb``, with
reflectors ``H_i = I − τ_i v_i v_iᴴ`` (``v_i`` zero above row ``j + 1``,
``xLARFG``'s), accumulated as ``Q_p = H_0···H_{nb−1} = I − V T Vᴴ`` (``xLARFT``)
and ``Y = A V T`` (``A`` as the panel found it, never updated inside it):

1. column ``j`` of ``A Q_i`` is ``A e_j − Y V[j, :]ᴴ``; ``Q_iᴴ`` applied from the left
   (``b − V Tᴴ Vᴴ b``) gives the column the reflector ``v_i`` annihilates below
   row ``j + 1`` (LAPACK's ``xLAHR2``); ``H``'s column ``j`` is ``b`` above, ``β``
   at row ``j + 1``, zeros below;
2. ``y_i = τ_i (A v_i − Y V_iᴴ v_i)``, ``T``'s new column ``−τ_i T V_iᴴ v_i``:
   ``A v_i`` is the step's one distributed product, a local matrix-vector product
   summed over the mesh row (psum over ``col_axis`` of two ``mloc``-vectors, with
   the next column's local rows) and gathered over the mesh column
   (all_gather over ``row_axis``);
3. after the panel, the columns right of it take ``A ← Q_pᴴ (A Q_p)``:
   ``A − Y Vᴴ`` (local), then ``− V Tᴴ (Vᴴ A)`` with ``Vᴴ A`` summed over the mesh
   column (psum over ``row_axis`` of ``nb x nloc``); the panel's columns become
   ``H``'s. ``Q ← Q Q_p`` the same way (psum of ``Q V`` over ``col_axis``).

The panels run in ``stages`` ``lax.fori_loop``s (``qr.stage_bounds``); each works on
the suffix of local block columns that can still hold trailing columns (every
row stays in play: the right update touches them all), so the products shrink
with the reduction and the program holds ``stages`` loop bodies whatever ``n``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ._axes import all_gather, axis_index, axis_size, fori, highest_precision, set_block
from .cyclic import local_row
from .qr import global_index, stage_bounds
from .tridiagonal import reflector


def _global_order(mloc: int, pr: int, nb: int) -> np.ndarray:
    """Positions, in the all_gather of every mesh row's local rows, of global rows 0..n-1."""
    order = np.empty(mloc * pr, dtype=np.int32)
    for s in range(pr):
        u = np.arange(mloc)
        order[(u // nb * pr + s) * nb + u % nb] = s * mloc + u
    return order


def _column_piece(sub, g, *, c0, pc, nb, j):
    """This device's rows of global column ``g`` of the stage's ``sub`` (zeros elsewhere)."""
    owner, local = local_row(g, p=pc, nb=nb)
    local = jnp.clip(local - c0 * nb, 0, sub.shape[1] - 1)
    piece = lax.dynamic_index_in_dim(sub, local, axis=1, keepdims=False)
    return jnp.where(owner == j, piece, jnp.zeros_like(piece))


def _apply_panel(sub, qsub, reflected, *, k, c0, cols, grow, me, pc, nb, row_axis, col_axis):
    """Panel ``k``'s reflectors ``(V, Y = A V T, T, H)`` applied: the columns right of the
    panel become ``Q_pᴴ (A Q_p)``, the panel's own columns ``H``'s, and ``q`` (when given)
    ``q Q_p``."""
    v_all, y_all, t, h_all = reflected
    j0 = k * nb
    zero = jnp.zeros((), sub.dtype)
    # the columns right of the panel: A ← Q_pᴴ (A Q_p)
    v_rows, v_cols = v_all[grow], v_all[cols]
    right = (cols >= j0 + nb)[None, :]
    sub = sub - jnp.where(right, y_all[grow] @ jnp.conj(v_cols).T, zero)
    w = jnp.conj(v_rows).T @ sub
    if row_axis is not None:
        w = lax.psum(w, row_axis)  # psum over the mesh column -> (nb, cols): Vᴴ A
    sub = sub - jnp.where(right, v_rows @ (jnp.conj(t).T @ w), zero)
    # the panel's columns become H's (on the mesh column that holds them)
    lc = (k // pc - c0) * nb
    old = lax.dynamic_slice_in_dim(sub, lc, nb, axis=1)
    sub = lax.dynamic_update_slice_in_dim(
        sub, jnp.where(me == k % pc, h_all[grow], old), lc, axis=1
    )
    if qsub is not None:  # Q ← Q (I − V T Vᴴ)
        qv = qsub @ v_cols
        if col_axis is not None:
            qv = lax.psum(qv, col_axis)  # psum over the mesh row -> (mloc, nb): Q V
        qsub = qsub - (qv @ t) @ jnp.conj(v_cols).T
    return sub, qsub


@highest_precision
def hessenberg_block_cyclic(
    a: jax.Array,
    q: jax.Array | None = None,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    panels: int,
    stages: int,
) -> tuple[jax.Array, jax.Array | None]:
    """Reduce ``A`` to upper Hessenberg form in place: ``(Qᴴ A Q, q Q)``.

    Args:
      a: ``(n/pr, n/pc)`` local block of ``A`` in block-cyclic order (block ``nb``).
      q: ``None``, or a local block (same order and shape) of a matrix to multiply
        by ``Q`` from the right (the identity, for ``Q`` itself).
      row_axis, col_axis: the grid's mesh axes (``None``: size 1).
      nb: block size (panel width).
      panels: panels to reduce, ``ceil((n_true − 1)/nb)`` (the columns of the
        zero padding need none).
      stages: fori_loops the panels are split over.

    Returns:
      ``(h, q)``: the local block of ``Qᴴ A Q`` (zero below the first subdiagonal in
      the reduced columns; the caller masks the rest) and of ``q Q`` (``None`` if
      ``q`` is).
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    me = axis_index(col_axis)
    mloc, nloc = a.shape
    n = mloc * pr
    grow = global_index(mloc, row_axis, nb)
    gcol = global_index(nloc, col_axis, nb)
    order = jnp.asarray(_global_order(mloc, pr, nb))
    idx = jnp.arange(n, dtype=jnp.int32)
    pos = jnp.arange(nb, dtype=jnp.int32)
    dtype = a.dtype
    zero = jnp.zeros((), dtype)

    def whole(pieces):
        """``(r, mloc)`` local row pieces summed over the mesh row -> ``(r, n)``, global order."""
        if col_axis is not None:
            pieces = lax.psum(pieces, col_axis)
        g = all_gather(pieces, row_axis, axis=1, tiled=True)  # (r, pr·mloc): mesh-row order
        return g[:, order]

    for k0, k1 in stage_bounds(panels, stages):
        c0 = k0 // pc  # first local block column that can hold a trailing column
        cols = gcol[c0 * nb :]

        def panel(k, carry, c0=c0, cols=cols):
            sub, qsub = carry
            j0 = k * nb
            first = whole(_column_piece(sub, j0, c0=c0, pc=pc, nb=nb, j=me)[None])[0]

            def step(i, carry):
                v_all, y_all, t, h_all, col = carry
                j = j0 + i
                # column j of A Q_i (the panel's reflectors so far, from the right) ...
                b = col - y_all @ jnp.conj(v_all[j])
                # ... and Q_iᴴ from the left
                b = b - v_all @ (jnp.conj(t).T @ (jnp.conj(v_all).T @ b))
                v, tau, beta = reflector(b, j, idx)
                h = jnp.where(idx <= j, b, jnp.where(idx == j + 1, beta.astype(dtype), zero))
                u = jnp.conj(v_all).T @ v  # V_iᴴ v_i (columns i.. of V are zero)
                # A v_i and the next column: psum over the mesh row, gather over the column
                mine = v[cols]
                nxt = _column_piece(sub, jnp.minimum(j + 1, n - 1), c0=c0, pc=pc, nb=nb, j=me)
                av, col = whole(jnp.stack([sub @ mine, nxt]))
                y = tau * (av - y_all @ u)
                t_col = jnp.where(pos < i, -tau * (t @ u), jnp.where(pos == i, tau, zero))
                put = lambda m, c: lax.dynamic_update_slice(m, c[:, None], (0, i))  # noqa: E731
                return put(v_all, v), put(y_all, y), put(t, t_col), put(h_all, h), col

            empty = jnp.zeros((n, nb), dtype)
            init = (empty, empty, jnp.zeros((nb, nb), dtype), empty, first)
            v_all, y_all, t, h_all, _ = lax.fori_loop(0, nb, step, init)

            return _apply_panel(
                sub, qsub, (v_all, y_all, t, h_all), k=k, c0=c0, cols=cols, grow=grow, me=me,
                pc=pc, nb=nb, row_axis=row_axis, col_axis=col_axis,
            )  # fmt: skip

        qsub = None if q is None else q[:, c0 * nb :]
        sub, qsub = fori(k0, k1, panel, (a[:, c0 * nb :], qsub))
        a = set_block(a, (0, c0 * nb), sub)
        if q is not None:
            q = set_block(q, (0, c0 * nb), qsub)
    return a, q
