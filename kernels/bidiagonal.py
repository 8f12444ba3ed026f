"""A general matrix to real upper bidiagonal form by Householder reflections (LAPACK's xGEBRD).

``Qᴴ A P = B`` for an ``m x n`` matrix with ``m >= n``: column ``j`` is reduced
by a reflector from the left (``Hᴴ A[j:, j] = d_j e₁``), then row ``j`` by one
from the right (``A[j, j+1:] G = e_j e₁ᵀ``), both ``xLARFG``'s
(``kernels/tridiagonal.py``'s :func:`reflector`). ``B`` has ``A``'s singular
values; ``kernels/tridiagonal.py``'s bisection finds them as the top ``n``
eigenvalues of the Golub–Kahan matrix, the zero-diagonal tridiagonal of order
``2n`` with off-diagonal ``(d₀, e₀, d₁, e₁, …, d_{n−1})``.

Blocked as LAPACK's ``xLABRD``: the updates of a panel of ``nb`` columns are
kept as ``A − U Yᴴ − X Vᴴ`` (``U, X``: ``m x nb``; ``V, Y``: ``n x nb``, on
every device) and applied in one local GEMM per panel. In between, column
``j`` and row ``j`` of the updated matrix and the products ``Aᴴ u`` and
``A v`` are corrected with them. A column costs two psums over the mesh: one
of two ``n``-vectors (this device's share of ``Aᴴ u`` and of row ``j``), one
of two ``m``-vectors (of ``A v`` and of the next column). Layout and phases
as ``kernels/tridiagonal.py``'s reduction.

With vectors (``svd``, LAPACK's ``xGEBRD`` + ``xORMBR``), ``A = Q B Pᴴ`` with
``Q = H₀ H₁ ⋯`` and ``P = G₀ G₁ ⋯`` kept as their reflectors, in the reduced
part of ``A`` (``store=True``), and applied to ``B``'s singular vectors in place
(:func:`apply_reflectors`, two panels' reflectors at once as one block
reflector, ``xLARFT`` / ``xLARFB``): ``Q`` and ``P`` are never formed, so the
SVD holds one matrix of reflectors where it held ``Q`` and ``P``, and applying
them takes the place of both accumulating ``Q`` and ``P`` and multiplying by them.

**Backward error on rank-deficient matrices.** The blocked form forms each
column, row and product ``Aᴴu``, ``Av`` from the panel's starting matrix
minus up to ``2·nb`` rank-one corrections, each rounded at ``eps·‖A₀‖``.
Once the rank is exhausted the trailing matrix is at the rounding level, so
every later step of the panel builds its reflector from one rounding of it
and applies it with another, and the part the reflector was meant to zero is
dropped at ``eps·‖A₀‖`` per step: the noise singular values of ``B`` come out
at about ``2·eps·σ₁`` (median 1.64 over 17 float32 products of orders 37-400)
where LAPACK's unblocked ``xGEBD2`` leaves 0.76. LAPACK's own blocked
``xLABRD`` does the same (``sgesdd`` 1.98-2.25 at orders 160-400; it runs
unblocked below its crossover ``NX = 128``), and accumulating the corrected
products in float64 removes it (0.52): ``benchmarks/reduction_backward_error.py``.
The SVD takes its values at the rounding level from the original matrix
instead (docs/spectral.md, "SVD").
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, fori, highest_precision
from .tridiagonal import (
    Local,
    block_reflector_of_gram,
    column_piece,
    local,
    rank_2k_update,
    reflector,
    row_piece,
    spread,
)
from .tridiagonal_vectors import rows_per_chunk


@highest_precision
def reduce_to_bidiagonal(
    a_blk: jax.Array,
    *,
    steps: int,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
    store: bool = False,
) -> tuple[jax.Array, ...]:
    """Reduce the first ``steps`` columns and rows of the ``m x n`` matrix held as ``a_blk``.

    Args:
      a_blk: this device's ``mloc x nloc`` block (``m = mloc·pr >= n = nloc·pc``).
      steps: columns to reduce, a multiple of ``nb``, at most ``n``.
      nb: the panel width.
      store: keep the reflectors in the reduced part of ``a_blk``, as LAPACK's
        ``xGEBRD`` does: column ``j``'s left reflector in rows ``>= j`` of column
        ``j`` (its unit included), row ``j``'s right reflector in columns ``> j``
        of row ``j`` (its unit at ``j + 1`` included); :func:`apply_reflectors`
        applies them (``xORMBR``), so ``Q`` and ``P`` are never formed.

    Returns:
      ``(a_blk, d, e)``, with ``store`` ``(a_blk, taus, d, e)``: the block after
      the reductions (rows and columns ``>= steps`` carry on), the real
      diagonal ``d[:steps]`` and superdiagonal ``e[:steps]``
      (``e[j] = B[j, j+1]``) of ``B``, the same on every device, and the
      reflectors' ``τ`` (``2 x steps``: left, right; the same on every device).
    """
    at = local(a_blk, row_axis, col_axis)
    m, n = at.m, at.n
    assert m >= n and steps % nb == 0 and steps <= n, (a_blk.shape, m, n, steps, nb)
    dtype = a_blk.dtype
    real = jnp.finfo(dtype).dtype
    panels = steps // nb
    d = jnp.zeros((steps,), real)
    e = jnp.zeros((steps,), real)
    taus = jnp.zeros((2, steps), dtype) if store else None
    panel = functools.partial(_reduce_panel, nb=nb, at=at, store=store)
    a_blk, taus, d, e = lax.fori_loop(0, panels, panel, (a_blk, taus, d, e))
    return (a_blk, taus, d, e) if store else (a_blk, d, e)


def _reflect_pair(i, carry, *, k0, a_blk, at: Local, store):
    """Step ``i`` of a panel: column ``j = k0 + i`` of ``A − U Yᴴ − X Vᴴ`` and its
    reflector from the left, then row ``j`` of the updated matrix and its reflector
    from the right (``xLABRD``'s step); the next column comes with the second psum."""
    u_all, x_all, v_all, y_all, taus, d, e, col = carry
    m, n = at.m, at.n
    real = d.dtype
    rows = jnp.arange(m, dtype=jnp.int32)
    cols = jnp.arange(n, dtype=jnp.int32)
    zero = jnp.int32(0)
    i = i.astype(jnp.int32)
    j = k0 + i
    # column j of A − U Yᴴ − X Vᴴ, and its reflector from the left
    a_j = col - u_all @ jnp.conj(y_all[j]) - x_all @ jnp.conj(v_all[j])
    u, tau_u, beta_u = reflector(a_j, j - 1, rows)
    d = lax.dynamic_update_slice(d, beta_u[None].astype(real), (j,))
    mine_u = lax.dynamic_slice(u, (at.row0,), (at.mloc,))
    both = lax.psum(
        jnp.stack(
            [
                spread(jnp.conj(jnp.conj(mine_u) @ a_blk), at.col0, n),
                spread(row_piece(a_blk, j, at), at.col0, n),
            ]
        ),
        at.every,
    )
    ahu, row = both[0], both[1]
    ahu = ahu - y_all @ (jnp.conj(u_all.T) @ u) - v_all @ (jnp.conj(x_all.T) @ u)
    y = tau_u * ahu  # Hᴴ A = A − u yᴴ
    if store:  # the reduced columns hold reflectors: the update leaves them alone
        y = jnp.where(cols > j, y, 0)
    u_all = lax.dynamic_update_slice(u_all, u[:, None], (zero, i))
    y_all = lax.dynamic_update_slice(y_all, y[:, None], (zero, i))
    # row j of the updated matrix, and its reflector from the right
    r = row - jnp.conj(y_all @ jnp.conj(u_all[j])) - jnp.conj(v_all @ jnp.conj(x_all[j]))
    v, tau_v, beta_v = reflector(jnp.conj(r), j, cols)
    e = lax.dynamic_update_slice(e, beta_v[None].astype(real), (j,))
    mine_v = lax.dynamic_slice(v, (at.col0,), (at.nloc,))
    both = lax.psum(
        jnp.stack(
            [
                spread(a_blk @ mine_v, at.row0, m),
                spread(column_piece(a_blk, j + 1, at), at.row0, m),
            ]
        ),
        at.every,
    )
    av, col = both[0], both[1]
    av = av - u_all @ (jnp.conj(y_all.T) @ v) - x_all @ (jnp.conj(v_all.T) @ v)
    x = jnp.where(rows > j, tau_v * av, 0)  # A G = A − x vᴴ
    x_all = lax.dynamic_update_slice(x_all, x[:, None], (zero, i))
    v_all = lax.dynamic_update_slice(v_all, v[:, None], (zero, i))
    taus = lax.dynamic_update_slice(taus, jnp.stack([tau_u, tau_v])[:, None], (zero, i))
    return u_all, x_all, v_all, y_all, taus, d, e, col


def _reduce_panel(k, carry, *, nb, at: Local, store):
    """Panel ``k``: its ``nb`` columns and rows reflected, the deferred update, and
    with ``store`` the panel's reflectors written where it reduced."""
    a_blk, taus_all, d, e = carry
    m, n = at.m, at.n
    dtype = a_blk.dtype
    k0 = (k * nb).astype(jnp.int32)
    col = lax.psum(spread(column_piece(a_blk, k0, at), at.row0, m), at.every)
    tall, short = jnp.zeros((m, nb), dtype), jnp.zeros((n, nb), dtype)
    step = functools.partial(_reflect_pair, k0=k0, a_blk=a_blk, at=at, store=store)
    u_all, x_all, v_all, y_all, taus, d, e, _ = lax.fori_loop(
        0, nb, step, (tall, tall, short, short, jnp.zeros((2, nb), dtype), d, e, col)
    )
    # the deferred update, local: A ← A − U Yᴴ − X Vᴴ
    a_blk = rank_2k_update(a_blk, u_all, y_all, x_all, v_all, at)
    if store:  # the panel's reflectors where it reduced, their τ beside
        a_blk = _stored(a_blk, u_all, v_all, k0, at)
        taus_all = lax.dynamic_update_slice(taus_all, taus, (jnp.int32(0), k0))
    return a_blk, taus_all, d, e


def _window(start, size, width):
    """The start of a ``width`` (at most ``size``) window of a device's ``size`` rows or
    columns that holds all of them in ``[start, start + width)`` (global ``start`` made
    local): the part of a panel a device holds never exceeds the window."""
    width = min(width, size)
    return jnp.clip(start, 0, size - width).astype(jnp.int32), width


def _stored(a_blk, u_all, v_all, k0, at: Local):
    """``a_blk`` with panel ``k0``'s left reflectors (``u_all``: ``m x nb``) in rows
    ``>= j`` of its columns ``j`` and the right ones (``v_all``: ``n x nb``) in columns
    ``> j`` of its rows ``j``: two slabs of the panel's width, written in place."""
    nb = u_all.shape[1]
    zero = jnp.int32(0)
    # the columns: rows >= j of column j = k0 + i hold uᵢ (its unit included)
    c0, w = _window(k0 - at.col0, at.nloc, nb)
    gc = at.col0 + c0 + jnp.arange(w, dtype=jnp.int32)
    gr = at.row0 + jnp.arange(at.mloc, dtype=jnp.int32)
    u_loc = lax.dynamic_slice(u_all, (at.row0, zero), (at.mloc, nb))
    u_part = jnp.take(u_loc, jnp.clip(gc - k0, 0, nb - 1), axis=1)
    slab = lax.dynamic_slice(a_blk, (zero, c0), (at.mloc, w))
    mine = (gc[None, :] >= k0) & (gc[None, :] < k0 + nb) & (gr[:, None] >= gc[None, :])
    a_blk = lax.dynamic_update_slice(a_blk, jnp.where(mine, u_part, slab), (zero, c0))
    # the rows: columns > j of row j = k0 + i hold vᵢ (its unit at j + 1 included)
    r0, w = _window(k0 - at.row0, at.mloc, nb)
    gr = at.row0 + r0 + jnp.arange(w, dtype=jnp.int32)
    gc = at.col0 + jnp.arange(at.nloc, dtype=jnp.int32)
    v_loc = lax.dynamic_slice(v_all, (at.col0, zero), (at.nloc, nb))
    v_part = jnp.take(v_loc, jnp.clip(gr - k0, 0, nb - 1), axis=1).T
    slab = lax.dynamic_slice(a_blk, (r0, zero), (w, at.nloc))
    mine = (gr[:, None] >= k0) & (gr[:, None] < k0 + nb) & (gc[None, :] > gr[:, None])
    return lax.dynamic_update_slice(a_blk, jnp.where(mine, v_part, slab), (r0, zero))


def _reflector_blocks(r_blk, taus, *, side, nb, row_axis, col_axis, whole, rows, row0):
    """``(blocks, block_of)`` for the reflectors :func:`reduce_to_bidiagonal` stored:
    how many blocks of ``2·nb`` there are, and ``block_of(t) = (v, τ)`` for block ``t``
    counted from the last: ``v`` (``rows x 2nb``) the rows ``[row0, row0 + rows)`` of
    its vectors (every row gathered with ``whole``), masked to the reflectors' nonzero
    part, ``τ`` its ``2nb`` factors (0 past ``K``: the identity). ``side``: ``"left"``
    (``Q``'s, in ``r_blk``'s columns) or ``"right"`` (``P``'s, in its rows)."""
    at = local(r_blk, row_axis, col_axis)
    count = taus.shape[1]
    width = 2 * nb
    blocks = -(-count // width)
    left = side == "left"
    tau = jnp.pad(taus[0 if left else 1], (0, blocks * width - count))
    gy = row0 + jnp.arange(rows, dtype=jnp.int32)
    zero = jnp.int32(0)
    pos = jnp.arange(width, dtype=jnp.int32)

    def block_of(t):
        c0 = ((blocks - 1 - t) * width).astype(jnp.int32)
        real = c0 + pos < count  # reflectors past K: the identity
        if left:  # column c0 + i, my rows: a psum over the column axis
            s0, w = _window(c0 - at.col0, at.nloc, width)
            piece = lax.dynamic_slice(r_blk, (zero, s0), (at.mloc, w))
            gc = at.col0 + s0 + jnp.arange(w, dtype=jnp.int32)
            v_loc = piece @ (gc[:, None] == c0 + pos[None, :]).astype(piece.dtype)
            if whole:  # every row: this device's rows in place, summed over the mesh
                v_loc = lax.psum(
                    lax.dynamic_update_slice(
                        jnp.zeros((at.m, width), v_loc.dtype), v_loc, (at.row0, zero)
                    ),
                    at.every,
                )[:rows]
            elif col_axis is not None:
                v_loc = lax.psum(v_loc, col_axis)
            below = gy[:, None] >= c0 + pos[None, :]
        else:  # row c0 + i, every column gathered, then my rows of Y
            s0, w = _window(c0 - at.row0, at.mloc, width)
            piece = lax.dynamic_slice(r_blk, (s0, zero), (w, at.nloc))
            gr = at.row0 + s0 + jnp.arange(w, dtype=jnp.int32)
            cols = piece.T @ (gr[:, None] == c0 + pos[None, :]).astype(piece.dtype)
            full = lax.dynamic_update_slice(
                jnp.zeros((at.n, width), piece.dtype), cols, (at.col0, zero)
            )
            full = lax.psum(full, at.every)
            v_loc = lax.dynamic_slice(full, (row0, zero), (rows, width))
            below = gy[:, None] > c0 + pos[None, :]
        v_loc = jnp.where(below & real[None, :], v_loc, 0)
        return v_loc, jnp.where(real, lax.dynamic_slice(tau, (c0,), (width,)), 0)

    return blocks, block_of


@highest_precision
def apply_reflectors(
    r_blk: jax.Array,
    taus: jax.Array,
    y_blk: jax.Array,
    *,
    side: str,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
    whole: bool = False,
) -> jax.Array:
    """``Q Y`` or ``P Y`` from the reflectors that :func:`reduce_to_bidiagonal` stored
    (LAPACK's ``xORMBR``, ``Q`` and ``P`` never formed): ``Y`` updated in place, the
    reflectors applied ``2·nb`` at a time as one block reflector (``xLARFT`` /
    ``xLARFB``), last block first.

    Args:
      r_blk: this device's block of the ``m x n`` matrix holding the reflectors
        (``store=True``'s ``a_blk``; its rows and columns ``>= K`` are not read).
      taus: ``2 x K`` (left, right), the same on every device.
      y_blk: this device's block of ``Y`` (``m x k`` for ``side="left"``, ``n x k``
        for ``"right"``), its rows over ``row_axis`` as ``r_blk``'s rows
        (``"left"``) or evenly (``"right"``).
      side: ``"left"``: ``Q = H₀ H₁ ⋯`` (the reflectors in ``r_blk``'s columns);
        ``"right"``: ``P = G₀ G₁ ⋯`` (in its rows).
      nb: the reduction's panel width (``K`` is a multiple of it).
      whole: ``y_blk`` holds every row of ``Y`` (its columns split over the devices
        any way): each block's reflectors are gathered whole (``m x 2nb``) and
        applied with no further collective.

    Returns:
      This device's block of ``Q Y`` (or ``P Y``).
    """
    mloc_y = y_blk.shape[0]
    row0_y = jnp.asarray(0 if whole else axis_index(row_axis) * mloc_y, jnp.int32)
    blocks, block_of = _reflector_blocks(
        r_blk,
        taus,
        side=side,
        nb=nb,
        row_axis=row_axis,
        col_axis=col_axis,
        whole=whole,
        rows=mloc_y,
        row0=row0_y,
    )

    def block(t, y_blk):
        v_loc, taus_b = block_of(t)
        gram = jnp.conj(v_loc.T) @ v_loc
        vy = jnp.conj(v_loc.T) @ y_blk
        if row_axis is not None and not whole:
            gram, vy = lax.psum((gram, vy), row_axis)
        return y_blk - v_loc @ (block_reflector_of_gram(gram, taus_b) @ vy)

    return lax.fori_loop(0, blocks, block, y_blk)


@highest_precision
def apply_reflectors_to_rows(
    r_blk: jax.Array,
    taus: jax.Array,
    x: jax.Array,
    *,
    count: int,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
) -> jax.Array:
    """``Q U_B`` and ``P V_B`` of a square ``B`` written in place over ``U_B`` and
    ``V_B`` where ``TGK``'s eigenvectors hold them (rows, not columns), each half made
    unit first: as ``apply_reflectors(whole=True)`` on both sides, the vectors never
    copied out of ``x``.

    Args:
      r_blk, taus: as :func:`apply_reflectors` (``m = k``: ``Q`` and ``P`` act on
        ``k`` entries; the matrix's real dtype, as ``x``'s).
      x: ``W x 2k`` (inverse iteration's window,
        ``bidiagonal_vectors.golub_kahan_vectors(whole=True)``): its first ``count``
        rows each a vector ``(v₀, u₀, v₁, u₁, …)``.
      count: how many of ``x``'s rows hold vectors.
      nb: the reduction's panel width.

    Returns:
      ``x`` with each of its first ``count`` rows ``(v, u)`` made ``(P v/‖v‖,
      Q u/‖u‖)`` (zero halves stay zero), interleaved as before; the rest as it was.
      Each block of reflectors is gathered whole and applied to a chunk of rows at a
      time (``tridiagonal_vectors.rows_per_chunk``): the halves made out of ``x``
      beside it were two shares more, svd's peak (docs/memory.md).
    """
    k = x.shape[1] // 2
    sides = {
        side: _reflector_blocks(
            r_blk,
            taus,
            side=side,
            nb=nb,
            row_axis=row_axis,
            col_axis=col_axis,
            whole=True,
            rows=k,
            row0=jnp.int32(0),
        )
        for side in ("left", "right")
    }
    blocks = sides["left"][0]
    height = rows_per_chunk(count)

    def block(t, x):
        made = []
        for side in ("right", "left"):  # v, then u: the order the rows interleave them
            v_loc, taus_b = sides[side][1](t)
            made.append((v_loc, block_reflector_of_gram(jnp.conj(v_loc.T) @ v_loc, taus_b)))

        def rows(c, x):
            part = lax.dynamic_slice_in_dim(x, c * height, height).reshape(height, k, 2)
            halves = []
            for h, (v_loc, tmat) in enumerate(made):
                y = part[:, :, h].T  # k x height: the half's vectors as columns
                norm = jnp.linalg.norm(y, axis=0)
                y = y / jnp.where((t == 0) & (norm > 0), norm, 1).astype(y.dtype)[None, :]
                halves.append((y - v_loc @ (tmat @ (jnp.conj(v_loc.T) @ y))).T)
            part = jnp.stack(halves, axis=2).reshape(height, 2 * k)
            return lax.dynamic_update_slice_in_dim(x, part, c * height, axis=0)

        return fori(0, count // height, rows, x)

    return fori(0, blocks, block, x)
