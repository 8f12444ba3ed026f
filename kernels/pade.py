"""expm's Padé sums on a device's blocks, ``V`` written over the last power in place.

Higham (2005), "The scaling and squaring method for the matrix exponential
revisited", (2.3)-(2.5): ``U_in = Σ b_{2k+1} x²ᵏ`` and ``V = Σ b_{2k} x²ᵏ`` over
the powers ``I, x², x⁴, ...`` of the scaled matrix. Summed whole, ``U_in`` and
``V`` are two new matrices beside every power (XLA does not write ``V`` over the
last power, which dies there); here both are made a row chunk at a time in a
loop whose carry is the last power's block, so the sums hold one matrix more
than the powers.

Layout: every block ``(m/pr, n/pc)`` of the 2D block layout ``P(row, col)``
(contiguous blocks), the coefficients replicated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import ROW_CHUNKS, after, axis_index, fori


def pade_sums_local(
    odd: jax.Array,
    even: jax.Array,
    *powers: jax.Array,
    row_axis: str | None,
    col_axis: str | None,
) -> tuple[jax.Array, jax.Array]:
    """``(U_in, V)`` blocks of ``Σ odd[k] x²ᵏ`` and ``Σ even[k] x²ᵏ`` (``x⁰ = I``).

    Args:
      odd: ``(len(powers) + 1,)`` coefficients of ``I, x², x⁴, ...`` in ``U_in``.
      even: the same for ``V``.
      *powers: blocks ``(m/pr, n/pc)`` of ``x², x⁴, ...``; the last one's
        buffer becomes ``V``'s (a chunk's rows are read before they are
        written).
      row_axis: mesh axis of the grid's rows (``None`` for one row).
      col_axis: mesh axis of the grid's columns (``None`` for one column).

    Returns:
      ``(U_in, V)`` blocks, each of the powers' shape and dtype.
    """
    *rest, last = powers
    mb, nb = last.shape
    chunks = max(d for d in range(1, ROW_CHUNKS + 1) if mb % d == 0)
    rows = mb // chunks
    top, left = axis_index(row_axis) * mb, axis_index(col_axis) * nb

    def step(i, carry):
        u, v = carry
        lo = i * rows
        pieces = [lax.dynamic_slice_in_dim(p, lo, rows, axis=0) for p in (*rest, v)]
        r = top + lo + lax.broadcasted_iota(jnp.int32, (rows, nb), 0)
        c = left + lax.broadcasted_iota(jnp.int32, (rows, nb), 1)
        eye = (r == c).astype(last.dtype)
        u_rows = odd[0] * eye + sum(odd[k] * p for k, p in enumerate(pieces, 1))
        v_rows = even[0] * eye + sum(even[k] * p for k, p in enumerate(pieces, 1))
        u = lax.dynamic_update_slice_in_dim(u, u_rows, lo, axis=0)
        # V's rows written once U's are (they read the same rows of the last power):
        # unordered, XLA copies the last power's block twice a step to keep it intact
        return u, lax.dynamic_update_slice_in_dim(v, v_rows, after(lo, u), axis=0)

    # U's block starts as zeros varying over the mesh (as the loop's writes are); a copy
    # of the last power would be one more matrix (XLA copies the loop's carry too)
    u = jnp.zeros((mb, nb), last.dtype)
    axes = tuple(a for a in (row_axis, col_axis) if a is not None)
    if axes:
        u = lax.pcast(u, axes, to="varying")
    return fori(0, chunks, step, (u, last))
