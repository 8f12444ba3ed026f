"""Disjoint plane rotations of adjacent rows (or columns) of a 2D block matrix.

``rsf2csf`` turns a real Schur form into a complex one with one 2x2 unitary
rotation per 2x2 diagonal block, acting on rows (or columns) ``m − 1`` and ``m``.
The blocks of a Schur form never overlap, so the rotations touch disjoint pairs,
commute, and can all be applied at once: new row ``i`` is
``self[i]·row_i + prev[i]·row_{i−1} + next[i]·row_{i+1}`` (per-row coefficients,
the whole ``n``-vectors on every device). A device needs one row beyond each
edge of its block: one collective-permute each way along the mesh axis that
splits the rows (a halo of one row), nothing else.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size


def _halos(x: jax.Array, axis_name: str | None) -> tuple[jax.Array, jax.Array]:
    """``(above, below)``: the row before this device's first and after its last (zeros at
    the matrix's edges); one collective-permute each way along ``axis_name``."""
    p = axis_size(axis_name)
    first, last = x[:1], x[-1:]
    if p == 1:
        return jnp.zeros_like(first), jnp.zeros_like(last)
    # collective-permute along the axis -> the previous device's last row, the next's first
    above = lax.ppermute(last, axis_name, [(s, s + 1) for s in range(p - 1)])
    below = lax.ppermute(first, axis_name, [(s + 1, s) for s in range(p - 1)])
    return above, below


def rotate_adjacent(
    x: jax.Array,
    coef_self: jax.Array,
    coef_prev: jax.Array,
    coef_next: jax.Array,
    active: jax.Array,
    *,
    axis: int,
    axis_name: str | None,
) -> jax.Array:
    """Rows (``axis=0``) or columns (``axis=1``) of the local block ``x`` rotated in pairs.

    Args:
      x: this device's contiguous block of the matrix.
      coef_self, coef_prev, coef_next: the whole ``n``-vectors of coefficients
        (padded ``n``, every device alike): new line ``i`` is
        ``self[i]·x_i + prev[i]·x_{i−1} + next[i]·x_{i+1}``.
      active: ``x``'s shape, ``True`` where the new value replaces the old (the
        rotated lines' entries that take part).
      axis: 0 rows, 1 columns.
      axis_name: the mesh axis that splits ``axis`` (``None``: unsplit).

    Returns:
      ``x`` with the rotations applied.
    """
    y = jnp.moveaxis(x, axis, 0)
    size = y.shape[0]
    start = axis_index(axis_name) * size
    above, below = _halos(y, axis_name)
    before = jnp.concatenate([above, y[:-1]])  # line i−1 beside line i
    after = jnp.concatenate([y[1:], below])  # line i+1 beside line i

    def mine(v):
        return lax.dynamic_slice_in_dim(v, start, size)[:, None].astype(y.dtype)

    rotated = mine(coef_self) * y + mine(coef_prev) * before + mine(coef_next) * after
    return jnp.where(active, jnp.moveaxis(rotated, 0, axis), x)
