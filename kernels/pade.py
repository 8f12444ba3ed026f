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
from .summa import summa_local


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


def pade13_local(
    b: tuple[float, ...],
    x2: jax.Array,
    x4: jax.Array,
    x6: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    panels: int,
    precision: lax.PrecisionLike,
) -> tuple[jax.Array, jax.Array]:
    """``(U_in, V)`` blocks of the degree-13 approximant, Higham's (2.5), in place.

    ``U_in = x⁶ B_u + u_low`` and ``V = x⁶ B_v + v_low`` with
    ``B_u = b₁₃x⁶ + b₁₁x⁴ + b₉x²``, ``B_v = b₁₂x⁶ + b₁₀x⁴ + b₈x²``,
    ``u_low = b₇x⁶ + b₅x⁴ + b₃x² + b₁I`` and ``v_low = b₆x⁶ + b₄x⁴ + b₂x² + b₀I``.
    Once ``B_u`` and ``B_v`` are made, ``u_low`` and ``v_low`` are written over
    ``x²`` and ``x⁴`` a row chunk at a time, and the two SUMMA products are added
    into them panel by panel: the branch holds the three powers and the two ``B``
    operands (five blocks), where sums and products made apart held ten.

    Args:
      b: the 14 coefficients ``b₀ … b₁₃`` (:func:`distla.linalg.pade_coefficients`).
      x2: block ``(m/pr, n/pc)`` of ``x²``; its buffer becomes ``U_in``'s.
      x4: the same of ``x⁴``; its buffer becomes ``V``'s.
      x6: the same of ``x⁶``.
      row_axis: mesh axis of the grid's rows (``None`` for one row).
      col_axis: mesh axis of the grid's columns (``None`` for one column).
      panels: SUMMA's steps (``summa_local``).
      precision: of the products.

    Returns:
      ``(U_in, V)`` blocks, each of the powers' shape and dtype.
    """
    b_u = b[13] * x6 + b[11] * x4 + b[9] * x2
    b_v = b[12] * x6 + b[10] * x4 + b[8] * x2
    mb, nb = x2.shape
    # twice the sums' chunks: a chunk's rows are held three times (read, U's, V's held)
    chunks = max(d for d in range(1, 2 * ROW_CHUNKS + 1) if mb % d == 0)
    rows = mb // chunks
    top, left = axis_index(row_axis) * mb, axis_index(col_axis) * nb

    def rows_of(lo, u, v):  # U's and V's rows [lo, lo + rows) from x², x⁴, x⁶'s
        p2, p4, p6 = (lax.dynamic_slice_in_dim(p, lo, rows, axis=0) for p in (u, v, x6))
        r = top + lo + lax.broadcasted_iota(jnp.int32, (rows, nb), 0)
        c = left + lax.broadcasted_iota(jnp.int32, (rows, nb), 1)
        eye = (r == c).astype(x2.dtype)
        # summed in pade_sums_local's order: b₁I + ((b₃x² + b₅x⁴) + b₇x⁶)
        u_rows = b[1] * eye + (b[3] * p2 + b[5] * p4 + b[7] * p6)
        v_rows = b[0] * eye + (b[2] * p2 + b[4] * p4 + b[6] * p6)
        return u_rows, v_rows

    def step(i, carry):
        # u, v: x²'s and x⁴'s buffers; held: V's rows of the chunk before, written over
        # x⁴'s once U's rows of this chunk (which read x⁴'s) are written over x²'s
        u, v, held = carry
        lo = i * rows
        u_rows, v_rows = rows_of(lo, u, v)
        u = lax.dynamic_update_slice_in_dim(u, u_rows, after(lo, v_rows), axis=0)
        v = lax.dynamic_update_slice_in_dim(v, held, after(jnp.maximum(lo - rows, 0), u), axis=0)
        return u, v, v_rows

    # the loop's x² and x⁴ made once both B operands exist (they read x² and x⁴ whole), as
    # values that nothing else reads: XLA copies a loop's start that other operations read
    made = after(0, b_u) + after(0, b_v) > 0  # False
    x2, x4 = (jnp.where(made, jnp.zeros((), p.dtype), p) for p in (x2, x4))
    # (the first step writes these zeros over x⁴'s first rows, once both rows are read)
    held = jnp.zeros((rows, nb), x4.dtype)
    axes = tuple(a for a in (row_axis, col_axis) if a is not None)
    if axes:
        held = lax.pcast(held, axes, to="varying")
    u_low, v_low, held = fori(0, chunks, step, (x2, x4, held))
    v_low = lax.dynamic_update_slice_in_dim(v_low, held, mb - rows, axis=0)
    summa = dict(row_axis=row_axis, col_axis=col_axis, panels=panels, precision=precision)
    u_in = summa_local(x6, b_u, c=u_low, **summa)
    # V's product once U's is made: the two at once would hold both products' panels
    return u_in, summa_local(x6, b_v, c=v_low, **summa)
