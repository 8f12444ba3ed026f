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

With vectors (``svd``, LAPACK's ``xGEBRD`` + ``xORGBR``), ``Q = H₀ H₁ ⋯`` and
``P = G₀ G₁ ⋯`` are accumulated as the reduction runs, ``A = Q B Pᴴ``: each
takes two panels' reflectors at once as one block reflector (``xLARFT`` /
``xLARFB``, :func:`~distla.kernels.tridiagonal.times_reflectors`), as the
tridiagonal reduction accumulates its ``Q``.

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

from ._axes import highest_precision
from .tridiagonal import (
    Local,
    column_piece,
    local,
    rank_2k_update,
    reflector,
    row_piece,
    spread,
    times_two_panels,
)


@highest_precision
def reduce_to_bidiagonal(
    a_blk: jax.Array,
    q_blk: jax.Array | None = None,
    p_blk: jax.Array | None = None,
    *,
    steps: int,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
) -> tuple[jax.Array, ...]:
    """Reduce the first ``steps`` columns and rows of the ``m x n`` matrix held as ``a_blk``.

    Args:
      a_blk: this device's ``mloc x nloc`` block (``m = mloc·pr >= n = nloc·pc``).
      q_blk: optional (with ``p_blk``), this device's block of an ``M x m``
        matrix ``Q`` in the 2D block layout (``m`` divisible by the column
        axis): returned times the left reflectors, ``Q H₀ H₁ ⋯``.
      p_blk: this device's block of an ``N x n`` matrix ``P``, columns laid
        out as ``a_blk``'s: returned times the right reflectors, ``P G₀ G₁ ⋯``.
      steps: columns to reduce, a multiple of ``nb``, at most ``n``.
      nb: the panel width.

    Returns:
      ``(a_blk, d, e)``, or ``(a_blk, q_blk, p_blk, d, e)``: the block after
      the reductions (rows and columns ``>= steps`` carry on), the real
      diagonal ``d[:steps]`` and superdiagonal ``e[:steps]``
      (``e[j] = B[j, j+1]``) of ``B``, the same on every device. The columns
      of ``Q`` and ``P`` below ``steps`` are final.
    """
    at = local(a_blk, row_axis, col_axis)
    m, n = at.m, at.n
    assert m >= n and steps % nb == 0 and steps <= n, (a_blk.shape, m, n, steps, nb)
    dtype = a_blk.dtype
    real = jnp.finfo(dtype).dtype
    panels = steps // nb
    d = jnp.zeros((steps,), real)
    e = jnp.zeros((steps,), real)
    qp, at_q, at_p = None, None, None
    if q_blk is not None:
        # where this device's columns of Q (indexed as A's rows) and of P (as A's columns) lie
        at_q, at_p = local(q_blk, row_axis, col_axis), local(p_blk, row_axis, col_axis)
        assert at_q.n == m and at_p.n == n, (q_blk.shape, p_blk.shape, m, n)
        qp = tuple(
            (blk, jnp.zeros((size, 2 * nb), dtype), jnp.zeros((2 * nb,), dtype))
            for blk, size in ((q_blk, m), (p_blk, n))
        )
    panel = functools.partial(
        _reduce_panel, nb=nb, panels=panels, at=at, at_q=at_q, at_p=at_p, col_axis=col_axis
    )
    a_blk, qp, d, e = lax.fori_loop(0, panels, panel, (a_blk, qp, d, e))
    if qp is None:
        return a_blk, d, e
    return a_blk, qp[0][0], qp[1][0], d, e


def _reflect_pair(i, carry, *, k0, a_blk, at: Local):
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


def _reduce_panel(k, carry, *, nb, panels, at: Local, at_q, at_p, col_axis):
    """Panel ``k``: its ``nb`` columns and rows reflected, the deferred update, and
    ``Q``, ``P`` times its reflectors (two panels at once) when they are carried."""
    a_blk, qp, d, e = carry
    m, n = at.m, at.n
    dtype = a_blk.dtype
    k0 = (k * nb).astype(jnp.int32)
    col = lax.psum(spread(column_piece(a_blk, k0, at), at.row0, m), at.every)
    tall, short = jnp.zeros((m, nb), dtype), jnp.zeros((n, nb), dtype)
    step = functools.partial(_reflect_pair, k0=k0, a_blk=a_blk, at=at)
    u_all, x_all, v_all, y_all, taus, d, e, _ = lax.fori_loop(
        0, nb, step, (tall, tall, short, short, jnp.zeros((2, nb), dtype), d, e, col)
    )
    # the deferred update, local: A ← A − U Yᴴ − X Vᴴ
    a_blk = rank_2k_update(a_blk, u_all, y_all, x_all, v_all, at)
    if qp is not None:  # Q ← Q H_k0 ⋯, P ← P G_k0 ⋯ (two panels at once)
        last = k == panels - 1
        qp = (
            times_two_panels(qp[0], u_all, taus[0], k=k, last=last, at=at_q, axis=col_axis),
            times_two_panels(qp[1], v_all, taus[1], k=k, last=last, at=at_p, axis=col_axis),
        )
    return a_blk, qp, d, e
