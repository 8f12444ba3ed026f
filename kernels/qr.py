"""Blocked Householder QR on a 2D block-cyclic matrix (ScaLAPACK's PDGEQRF).

One SPMD program for ``jax.shard_map``. The matrix is ``m x n`` (both
multiples of ``nb``) in block-cyclic order on a ``pr x pc`` grid (see
``cyclic.py``): device ``(i, j)`` holds the ``nb x nb`` blocks ``(I, J)``
with ``I ≡ i (mod pr)``, ``J ≡ j (mod pc)``. Naming: ``grow`` / ``gcol`` are
the global row / column index of each local row / column; ``sub`` is the
part of the local block still in play in a stage (a suffix of the local
block rows and columns); ``h`` its number of local rows.

For each panel ``k`` (global columns ``[k·nb, (k+1)·nb)``):

1. **Panel** (the ``pr`` devices of mesh column ``k mod pc`` only, under
   ``lax.cond``): all-gather the panel column along the mesh column, take its
   rows ``>= k·nb`` and factor them with LAPACK's ``geqrf``; build the
   compact-WY factor ``T`` (``H_1···H_nb = I - V T Vᴴ``, LAPACK's ``larft``
   recursion). The factored rows (``R`` on top, the reflectors ``V`` below,
   as LAPACK stores them) replace the panel in place.
2. **Broadcast** ``V`` (each device row's rows of it) and ``T`` along the
   mesh row: one psum in which the other columns add zeros.
3. **Trailing update** ``A22 <- (I - V T Vᴴ)ᴴ A22 = A22 - V (Tᴴ (Vᴴ A22))``:
   a local GEMM ``Vᴴ A22``, one psum along the mesh column (``nb`` rows per
   local column), and two more local GEMMs.

``Q`` (:func:`form_q`) is built by applying the panels' ``I - V T Vᴴ`` in
reverse order to the identity, in place (``Q = H_1 (H_2 (··· (H_K I)))``):
the same broadcast of ``V`` and one psum per panel.

Compile cost does not grow with the matrix: the panels run in ``lax.fori_loop``
s. So that the trailing matrix shrinks with the factorisation as it does in
an unrolled loop, the panels are split into ``stages`` consecutive groups;
each stage is one ``fori_loop`` over the suffix of local block rows and
columns that can still hold its trailing matrix (static shapes), rows and
columns that already left it masked. ``stages`` loop bodies are compiled
whatever ``n``; more stages waste fewer flops (about ``1/stages`` of the
update's) for a longer compile.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import ROW_CHUNKS, add_block, after, axis_index, axis_size, fori
from .cyclic import global_blocks


def global_index(n_local: int, axis_name: str | None, nb: int) -> jax.Array:
    """Global index of each of this device's ``n_local`` rows (or columns), block-cyclic."""
    blocks = global_blocks(n_local // nb, axis_name)
    return (blocks[:, None] * nb + jnp.arange(nb, dtype=jnp.int32)[None, :]).reshape(-1)


def stage_bounds(panels: int, stages: int) -> list[tuple[int, int]]:
    """``stages`` consecutive ranges ``[k0, k1)`` covering ``range(panels)``."""
    stages = max(1, min(stages, panels))
    cuts = [round(s * panels / stages) for s in range(stages + 1)]
    return [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def _geqrf(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    h, tau = jnp.linalg.qr(x, mode="raw")
    return h.mT, tau


def larft(v: jax.Array, tau: jax.Array, *, precision) -> jax.Array:
    """Upper triangular ``T`` with ``H_1···H_nb = I - V T Vᴴ`` (LAPACK's ``larft``, forward).

    ``T[:j, j] = -tau_j T[:j, :j] (Vᴴ v_j)``, ``T[j, j] = tau_j``: ``nb`` small
    steps on ``S = Vᴴ V``. A ``tau_j = 0`` (a zero column) gives a zero row
    and column of ``T``: ``H_j = I``.
    """
    nb = tau.shape[0]
    s = jnp.dot(jnp.conj(v).T, v, precision=precision)

    def column(j, t):
        above = jnp.arange(nb) < j
        col = -tau[j] * jnp.dot(t, jnp.where(above, s[:, j], 0), precision=precision)
        col = jnp.where(above, col, jnp.where(jnp.arange(nb) == j, tau[j], 0))
        return t.at[:, j].set(col)

    return lax.fori_loop(0, nb, column, jnp.zeros((nb, nb), v.dtype))


def t_from_v(v: jax.Array, tau: jax.Array, *, row_axis: str | None, precision) -> jax.Array:
    """:func:`larft`'s ``T`` again, from this device row's rows of ``V`` and the taus.

    ``T⁻¹ = diag(1/tau) + striu(Vᴴ V)`` (the UT transform: Puglisi 1992; Joffrain,
    Low, Quintana-Ortí, van de Geijn & Van Zee 2006): ``Vᴴ V`` summed over the mesh
    column (one ``nb x nb`` psum) and one triangular solve, instead of keeping every
    panel's ``T`` from the factorization to ``Q``'s formation (LAPACK's ``orgqr``
    calls ``larft`` per panel likewise). A ``tau_j = 0`` (``H_j = I``) takes a unit
    diagonal and no coupling in ``T⁻¹``, and a zero row and column in ``T``.
    """
    nb = tau.shape[0]
    s = jnp.dot(jnp.conj(v).T, v, precision=precision)
    if row_axis is not None:
        s = lax.psum(s, row_axis)
    idle = tau == 0
    cut = idle[:, None] | idle[None, :]
    diag = jnp.where(idle, jnp.ones_like(tau), 1 / jnp.where(idle, jnp.ones_like(tau), tau))
    upper = jnp.triu(jnp.where(cut, jnp.zeros_like(s), s), 1) + jnp.diag(diag)
    t = lax.linalg.triangular_solve(upper, jnp.eye(nb, dtype=v.dtype), left_side=True, lower=False)
    return jnp.where(cut, jnp.zeros_like(t), t)


def _gather_rows(panel: jax.Array, row_axis: str | None, pr: int, nb: int) -> jax.Array:
    """All-gather a local panel column along the mesh column, in global row order."""
    h = panel.shape[0]
    # all_gather over rows -> (pr, h, nb): device row s's local rows
    g = panel[None] if row_axis is None else lax.all_gather(panel, row_axis, axis=0)
    # local block u of device s is global block (t0 + u)·pr + s: (u, s) ascending
    return g.reshape(pr, h // nb, nb, nb).swapaxes(0, 1).reshape(pr * h, nb)


def _scatter_rows(g: jax.Array, me, pr: int, nb: int) -> jax.Array:
    """Inverse of :func:`_gather_rows` for this device row: its local rows of ``g``."""
    h = g.shape[0] // pr
    mine = lax.dynamic_index_in_dim(g.reshape(h // nb, pr, nb, nb), me, axis=1, keepdims=False)
    return mine.reshape(h, nb)


def _factor_panel(panel, *, k, base, span, row_axis, pr, nb, precision):
    """``geqrf`` of the panel's rows ``>= k·nb``: ``(factored local rows, local V, T)``.

    ``panel``: this device row's ``(h, nb)`` rows of the panel column, whose
    global rows start at block ``base`` (= ``t0·pr``). ``span``: the panel is zero
    from row ``k·nb + span`` on (``None``: no such rows).
    """
    g = _gather_rows(panel, row_axis, pr, nb)  # (pr·h, nb) global rows from base·nb
    rows = g.shape[0]
    tall = rows if span is None else min(rows, span)
    off = k * nb - base * nb  # the panel's first row within g
    # rows k·nb .. k·nb + tall to the top, zeros past g's end (reflectors keep zero rows
    # zero, and rows past the span are zero)
    pad = jnp.zeros((tall, nb), g.dtype)
    tail = lax.dynamic_slice_in_dim(jnp.concatenate([g, pad]), off, tall)
    hq, tau = _geqrf(tail)
    v = _local_v(hq, jnp.arange(tall, dtype=jnp.int32), 0, nb)
    t = larft(v, tau, precision=precision)

    def back(x):  # rows to their global place (rows above the panel and past it: zeros)
        x = lax.dynamic_update_slice_in_dim(jnp.zeros((rows + tall, nb), x.dtype), x, off, axis=0)
        return _scatter_rows(x[:rows], axis_index(row_axis), pr, nb)

    return back(hq), back(v), t


def _broadcast(x, j, owner, col_axis):
    """The owner mesh column's ``x`` on every device of the mesh row (masked psum)."""
    if col_axis is None:
        return x
    mask = lambda y: jnp.where(j == owner, y, jnp.zeros_like(y))  # noqa: E731
    return lax.psum(jax.tree.map(mask, x), col_axis)


def _reflect(x, start, v, t, *, keep, row_axis, precision, adjoint: bool):
    """``x[r0:, c0:] -= V T Vᴴ x[r0:, c0:]`` (``adjoint``: ``V Tᴴ Vᴴ``), in place, by row chunks.

    ``V`` holds this device's rows of the reflectors (``x``'s local rows from
    ``r0``). ``Vᴴ x`` is summed chunk by chunk and then over the mesh column
    (psum of ``(nb, cols)``); the update ``V (T Vᴴ x)`` is written chunk by chunk.
    ``keep``: ``(cols,)`` mask of the columns that take the update (``None``:
    all). Each chunk is read once the previous one is done (``after``): a device
    holds one chunk's rows and product, never the trailing matrix twice.
    """
    r0, c0 = start
    h, cols = v.shape[0], x.shape[1] - c0
    chunks = max(1, min(ROW_CHUNKS, h // max(1, v.shape[1])))
    edges = [h * c // chunks for c in range(chunks + 1)]
    w = None
    for lo, hi in zip(edges[:-1], edges[1:]):
        at = r0 + lo if w is None else after(r0 + lo, w)
        part = lax.dynamic_slice(x, (at, c0), (hi - lo, cols))
        vw = jnp.dot(jnp.conj(v[lo:hi]).T, part, precision=precision)
        w = vw if w is None else w + vw
    if row_axis is not None:
        w = lax.psum(w, row_axis)  # psum along the mesh column -> (nb, cols): Vᴴ x
    tt = jnp.conj(t).T if adjoint else t
    y = jnp.dot(tt, w, precision=precision)
    for lo, hi in zip(edges[:-1], edges[1:]):
        rows = lax.dynamic_slice_in_dim(v, after(lo, x), hi - lo)
        upd = jnp.dot(rows, y, precision=precision)
        if keep is not None:
            upd = jnp.where(keep[None, :], upd, jnp.zeros_like(upd))
        x = add_block(x, (r0 + lo, c0), -upd)
    return x


def qr_block_cyclic(
    a: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    panels: int,
    stages: int,
    precision: lax.PrecisionLike,
    t_factors: bool = True,
    span: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Factor ``A = Q R`` in place on a block-cyclic matrix (Householder, compact WY).

    Args:
      a: ``(m/pr, n/pc)`` local block of ``A`` in block-cyclic order with
        block size ``nb``; ``m/nb`` a multiple of ``pr``, ``n/nb`` of ``pc``.
      row_axis, col_axis: mesh axes of the grid's rows and columns.
      nb: block size (panel width).
      panels: number of panels to factor, ``ceil(min(m_true, n_true)/nb)``
        (later ones would only see zero padding).
      stages: fori_loops the panels are split over (see the module docstring).
      precision: for every dot.
      t_factors: keep every panel's ``T`` (``panels·nb²`` elements); ``False``: only
        the taus, from which :func:`form_q` makes each ``T`` again
        (:func:`t_from_v`).
      span: panel ``k`` is zero in the global rows from ``k·nb + span`` on, before
        and after the panels left of it are applied (QDWH's stack ``[X; I]``:
        ``m + nb``, ``X`` ``m x n``), so that its ``geqrf`` takes ``span`` rows;
        ``None``: every row from ``k·nb``.

    Returns:
      ``(h, ts)``: the local block of the factored matrix in the same order
      (``R`` on and above the diagonal, the reflectors ``V`` below it, as
      LAPACK's ``geqrf``) and the ``(panels, nb, nb)`` compact-WY factors
      ``T`` (``t_factors=False``: the ``(panels, nb)`` taus, their
      diagonals), the same on every device.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    j = axis_index(col_axis)
    mloc, nloc = a.shape
    grow = global_index(mloc, row_axis, nb)
    gcol = global_index(nloc, col_axis, nb)
    ts = jnp.zeros((panels, nb, nb) if t_factors else (panels, nb), a.dtype)

    for k0, k1 in stage_bounds(panels, stages):
        t0, c0 = k0 // pr, k0 // pc  # first local block row / column still in play
        r0, cc0 = t0 * nb, c0 * nb
        rows, cols = grow[r0:], gcol[cc0:]

        def step(k, carry, t0=t0, c0=c0, r0=r0, cc0=cc0, rows=rows, cols=cols):
            a, ts = carry
            owner, lc = k % pc, k // pc  # the panel's mesh column and local column
            at = (r0, lc * nb)
            panel = lax.dynamic_slice(a, at, (mloc - r0, nb))

            def factor(panel):
                return _factor_panel(
                    panel,
                    k=k,
                    base=t0 * pr,
                    span=span,
                    row_axis=row_axis,
                    pr=pr,
                    nb=nb,
                    precision=precision,
                )

            def skip(panel):
                z = jnp.zeros_like(panel)
                return z, z, jnp.zeros((nb, nb), panel.dtype)

            # only the owner column gathers and factors the panel
            fact, v, t = lax.cond(j == owner, factor, skip, panel)
            # psum along the mesh row -> every device: its rows of V, and T
            v, t = _broadcast((v, t), j, owner, col_axis)
            # the factored rows (>= k·nb) replace the panel on the owner column
            in_panel = (rows >= k * nb)[:, None] & (j == owner)
            a = lax.dynamic_update_slice(a, jnp.where(in_panel, fact, panel), at)
            # A22 -= V (Tᴴ (Vᴴ A22)) on the columns right of the panel
            right = cols >= (k + 1) * nb
            a = _reflect(
                a, (r0, cc0), v, t, keep=right, row_axis=row_axis, precision=precision, adjoint=True
            )
            return a, ts.at[k].set(t if t_factors else jnp.diagonal(t))

        # the stage works in place on the whole block; its trailing part starts at (r0, cc0)
        a, ts = fori(k0, k1, step, (a, ts))
    return a, ts


def form_q(
    h: jax.Array,
    ts: jax.Array,
    q_cols: int,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    stages: int,
    precision: lax.PrecisionLike,
    ready: jax.Array | None = None,
) -> jax.Array:
    """``Q = H_1···H_K [I; 0]``: the reflectors of :func:`qr_block_cyclic` applied to the identity.

    Where ``Q`` has ``h``'s shape (``m x n`` with ``m >= n``, mode ``"reduced"``),
    it is formed in place of ``h``, as LAPACK's ``orgqr`` forms it over ``A``:
    panel ``k`` (last to first) reads its reflectors, puts identity columns in
    their place and applies ``H_k`` to the columns from ``k·nb`` on, which hold
    ``Q``'s columns already; the columns left of the panel still hold the
    reflectors of the panels to come and are not touched. ``R`` (the upper
    triangle of ``h``) must have been read before: ``ready`` is a value made from
    it, which the first panel waits for. Otherwise ``H_K``..``H_1`` are applied to
    an identity of ``q_cols`` columns.

    Args:
      h, ts: the results of :func:`qr_block_cyclic` (``K = ts.shape[0]``); ``ts``
        either the ``T`` factors or the taus (``t_factors=False``), from which
        each panel's ``T`` is made again when its reflectors are applied.
      q_cols: local columns of ``Q`` (its global columns, a multiple of
        ``nb·pc``, over ``pc``), block-cyclic like ``h``'s.
      row_axis, col_axis, nb, stages, precision: as for :func:`qr_block_cyclic`.
      ready: where ``Q`` overwrites ``h``, a value that must exist first (``None``:
        no order).

    Returns:
      The ``(m/pr, q_cols)`` local block of ``Q`` in block-cyclic order.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    j = axis_index(col_axis)
    grow = global_index(h.shape[0], row_axis, nb)
    gcol = global_index(q_cols, col_axis, nb)
    in_place = q_cols == h.shape[1]
    q = h if in_place else (grow[:, None] == gcol[None, :]).astype(h.dtype)
    factored = ts.shape[0] * nb
    if in_place and factored < q_cols * pc:
        # Q's columns past the last panel (a tall matrix's complete Q, which has h's shape
        # when n's padding reaches m) start as the identity's: h holds the padding's zeros
        first = factored if ready is None else after(factored, ready)
        ident = (grow[:, None] == gcol[None, :]).astype(h.dtype)
        q = jnp.where(gcol[None, :] >= first, ident, q)

    for k0, k1 in reversed(stage_bounds(ts.shape[0], stages)):
        # H_k0..H_K leave rows and columns < k0·nb of the identity alone
        r0, cc0 = (k0 // pr) * nb, (k0 // pc) * nb
        rows = grow[r0:]

        def step(s, q, k1=k1, r0=r0, cc0=cc0, rows=rows):
            k = k1 - 1 - s  # panels in reverse order
            owner, lc = k % pc, k // pc
            if not in_place:
                panel = lax.dynamic_slice(h, (r0, lc * nb), (h.shape[0] - r0, nb))
            else:
                start = r0 if ready is None else after(r0, ready)
                panel = lax.dynamic_slice(q, (start, lc * nb), (h.shape[0] - r0, nb))
            # psum along the mesh row -> this device row's rows of V_k, everywhere
            v = _broadcast(_local_v(panel, rows, k, nb), j, owner, col_axis)
            keep = None
            if in_place:
                # once V_k is read: the panel's columns become the identity's (owner
                # column), and only the columns from the panel on take H_k
                cols_g = lax.dynamic_slice_in_dim(gcol, lc * nb, nb)
                ident = (grow[:, None] == cols_g[None, :]).astype(q.dtype)
                at = (0, after(lc * nb, v))  # (the rows span the block: no order there)
                cur = lax.dynamic_slice(q, at, (h.shape[0], nb))
                q = lax.dynamic_update_slice(q, jnp.where(j == owner, ident, cur), at)
                keep = gcol[cc0:] >= k * nb
            t = (
                ts[k]
                if ts.ndim == 3
                else t_from_v(v, ts[k], row_axis=row_axis, precision=precision)
            )
            # Q <- (I - V T Vᴴ) Q, in place on the stage's trailing part
            return _reflect(
                q,
                (r0, cc0),
                v,
                t,
                keep=keep,
                row_axis=row_axis,
                precision=precision,
                adjoint=False,
            )

        q = fori(0, k1 - k0, step, q)
    return q


def _local_v(panel: jax.Array, rows: jax.Array, k, nb: int) -> jax.Array:
    """This device's rows of panel ``k``'s ``V`` from the stored ``geqrf`` rows."""
    rel = rows[:, None] - k * nb
    col = jnp.arange(nb, dtype=jnp.int32)[None, :]
    one = jnp.ones((), panel.dtype)
    return jnp.where(rel > col, panel, jnp.where(rel == col, one, jnp.zeros((), panel.dtype)))


def apply_q(
    h: jax.Array,
    ts: jax.Array,
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    nb: int,
    stages: int,
    adjoint: bool,
    precision: lax.PrecisionLike,
) -> jax.Array:
    """``Q x`` (or ``Qᴴ x``) with the reflectors of :func:`qr_block_cyclic`, ``Q`` never formed.

    ``Q = H_1···H_K`` is applied panel by panel as ``I − V T Vᴴ`` (compact WY, the
    update of :func:`form_q` on ``x`` instead of the identity): in reverse order for
    ``Q x``, in order with ``Tᴴ`` for ``Qᴴ x``. Per panel, the broadcast of ``V``
    along the mesh row and one psum of ``Vᴴ x`` (``nb`` rows) along the mesh column.

    Args:
      h, ts: the results of :func:`qr_block_cyclic` (``K = ts.shape[0]`` panels).
      x: ``(m/pr, cols)`` local block of ``x`` (``m x P``), rows block-cyclic as
        ``h``'s (any column layout: each device's columns are its own business).
      row_axis, col_axis, nb, stages, precision: as for :func:`qr_block_cyclic`.
      adjoint: ``Qᴴ x`` instead of ``Q x``.

    Returns:
      The local block of ``Q x`` (or ``Qᴴ x``), laid out as ``x``.
    """
    pr, pc = axis_size(row_axis), axis_size(col_axis)
    j = axis_index(col_axis)
    grow = global_index(h.shape[0], row_axis, nb)
    bounds = stage_bounds(ts.shape[0], stages)
    for k0, k1 in bounds if adjoint else reversed(bounds):
        # H_k0..H_k1-1 leave the rows < k0·nb alone
        r0 = (k0 // pr) * nb
        rows = grow[r0:]

        def step(s, x, k0=k0, k1=k1, r0=r0, rows=rows):
            k = k0 + s if adjoint else k1 - 1 - s
            owner, lc = k % pc, k // pc
            panel = lax.dynamic_slice(h, (r0, lc * nb), (h.shape[0] - r0, nb))
            # psum along the mesh row -> this device row's rows of V_k, everywhere
            v = _broadcast(_local_v(panel, rows, k, nb), j, owner, col_axis)
            # x <- (I - V T Vᴴ) x (Tᴴ for Qᴴ), in place on the rows from r0
            return _reflect(
                x,
                (r0, 0),
                v,
                ts[k],
                keep=None,
                row_axis=row_axis,
                precision=precision,
                adjoint=adjoint,
            )

        x = fori(0, k1 - k0, step, x)
    return x
