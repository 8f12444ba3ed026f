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
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import highest_precision
from .tridiagonal import column_piece, local, rank_2k_update, reflector, row_piece, spread


@highest_precision
def reduce_to_bidiagonal(
    a_blk: jax.Array,
    *,
    steps: int,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Reduce the first ``steps`` columns and rows of the ``m x n`` matrix held as ``a_blk``.

    Args:
      a_blk: this device's ``mloc x nloc`` block (``m = mloc·pr >= n = nloc·pc``).
      steps: columns to reduce, a multiple of ``nb``, at most ``n``.
      nb: the panel width.

    Returns:
      ``(a_blk, d, e)``: the block after the reductions (rows and columns
      ``>= steps`` carry on), the real diagonal ``d[:steps]`` and
      superdiagonal ``e[:steps]`` (``e[j] = B[j, j+1]``) of ``B``, the same on
      every device.
    """
    at = local(a_blk, row_axis, col_axis)
    m, n = at.m, at.n
    assert m >= n and steps % nb == 0 and steps <= n, (a_blk.shape, m, n, steps, nb)
    dtype = a_blk.dtype
    real = jnp.finfo(dtype).dtype
    rows = jnp.arange(m, dtype=jnp.int32)
    cols = jnp.arange(n, dtype=jnp.int32)
    zero = jnp.int32(0)

    def panel(k, carry):
        a_blk, d, e = carry
        k0 = (k * nb).astype(jnp.int32)

        def step(i, carry):
            u_all, x_all, v_all, y_all, d, e, col = carry
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
            return u_all, x_all, v_all, y_all, d, e, col

        col = lax.psum(spread(column_piece(a_blk, k0, at), at.row0, m), at.every)
        tall, short = jnp.zeros((m, nb), dtype), jnp.zeros((n, nb), dtype)
        u_all, x_all, v_all, y_all, d, e, _ = lax.fori_loop(
            0, nb, step, (tall, tall, short, short, d, e, col)
        )
        # the deferred update, local: A ← A − U Yᴴ − X Vᴴ
        a_blk = rank_2k_update(a_blk, u_all, y_all, x_all, v_all, at)
        return a_blk, d, e

    d = jnp.zeros((steps,), real)
    e = jnp.zeros((steps,), real)
    return lax.fori_loop(0, steps // nb, panel, (a_blk, d, e))
