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

from ._axes import ROW_CHUNKS, after, axis_index, fori, zeros_after
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

    # U's block starts as zeros varying over the mesh (as the loop's writes are; read
    # from the last power, they are); a copy of the last power would be one more matrix
    # (XLA copies the loop's carry too). Made once the last power exists: XLA makes a
    # plain zeros first, held through the last power's product
    u = zeros_after((mb, nb), last.dtype, last)
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
    """``(U_in, V)`` blocks of the degree-13 approximant, Higham's (2.5), in four blocks.

    ``U_in = x⁶ B_u + u_low`` and ``V = x⁶ B_v + v_low`` with
    ``B_u = b₁₃x⁶ + b₁₁x⁴ + b₉x²``, ``B_v = b₁₂x⁶ + b₁₀x⁴ + b₈x²``,
    ``u_low = b₇x⁶ + b₅x⁴ + b₃x² + b₁I`` and ``v_low = b₆x⁶ + b₄x⁴ + b₂x² + b₀I``.
    ``B_u`` is written over ``x²``, which is read back from it where it is needed
    (``x² = (B_u − b₁₃x⁶ − b₁₁x⁴)/b₉``: ``b₉x²`` is ``B_u``'s largest term by far,
    ``b₁₁/b₉ ≈ 4·10⁻⁴``, so this costs a few roundings of ``x²``). Once ``x⁶B_u``
    is made, one loop over row chunks adds ``u_low`` into it (``U_in``) and writes
    ``B_v`` over ``B_u`` and ``v_low`` over ``x⁴``; ``V``'s product is added into
    ``v_low``. At most four blocks are held (``x⁶``, ``B_u``, ``x⁴`` and ``x⁶B_u``,
    then ``x⁶``, ``B_v``, ``V`` and ``U_in``) and SUMMA's panels.

    Args:
      b: the 14 coefficients ``b₀ … b₁₃`` (:func:`distla.linalg.pade_coefficients`), or
        a lower degree's with zeros after its own (``b₉`` must not be zero), as floats or
        an array.
      x2: block ``(m/pr, n/pc)`` of ``x²``; its buffer becomes ``B_u``'s, then ``B_v``'s.
      x4: the same of ``x⁴``; its buffer becomes ``v_low``'s, then ``V``'s.
      x6: the same of ``x⁶``.
      row_axis: mesh axis of the grid's rows (``None`` for one row).
      col_axis: mesh axis of the grid's columns (``None`` for one column).
      panels: SUMMA's steps (``summa_local``).
      precision: of the products.

    Returns:
      ``(U_in, V)`` blocks, each of the powers' shape and dtype.
    """
    summa = dict(row_axis=row_axis, col_axis=col_axis, panels=panels, precision=precision)
    b_u = b[13] * x6 + b[11] * x4 + b[9] * x2  # x² dies into it
    t_u = summa_local(x6, b_u, **summa)
    mb, nb = x2.shape
    # four times the sums' chunks: two rows of B_v's and v_low's are held beside the blocks
    chunks = max(d for d in range(1, 4 * ROW_CHUNKS + 1) if mb % d == 0)
    rows = mb // chunks
    top, left = axis_index(row_axis) * mb, axis_index(col_axis) * nb

    def step(i, carry):
        # t: x⁶B_u's buffer (becomes U_in); bu: B_u's (becomes B_v); v: x⁴'s (becomes
        # v_low); held: B_v's and v_low's rows of the chunk before, written first. Only t
        # is written at the rows this step reads: written there too, B_v's rows and
        # v_low's would each overwrite rows the other's sums read, and XLA (which fuses
        # the sums into the writes) would copy both blocks every step to keep them intact
        t, bu, v, held_bv, held_v = carry
        lo = jnp.minimum(i, chunks - 1) * rows  # a last step writes the last held rows only
        before = jnp.maximum(i - 1, 0) * rows
        bu = lax.dynamic_update_slice_in_dim(bu, held_bv, before, axis=0)
        v = lax.dynamic_update_slice_in_dim(v, held_v, before, axis=0)
        p_t, p_u, p4, p6 = (lax.dynamic_slice_in_dim(p, lo, rows, axis=0) for p in (t, bu, v, x6))
        p2 = (p_u - (b[13] * p6 + b[11] * p4)) / b[9]
        r = top + lo + lax.broadcasted_iota(jnp.int32, (rows, nb), 0)
        c = left + lax.broadcasted_iota(jnp.int32, (rows, nb), 1)
        eye = (r == c).astype(x2.dtype)
        u_rows = p_t + (b[1] * eye + (b[3] * p2 + b[5] * p4 + b[7] * p6))
        bv_rows = b[12] * p6 + b[10] * p4 + b[8] * p2
        v_rows = b[0] * eye + (b[2] * p2 + b[4] * p4 + b[6] * p6)
        t = lax.dynamic_update_slice_in_dim(t, jnp.where(i < chunks, u_rows, p_t), lo, axis=0)
        return t, bu, v, bv_rows, v_rows

    # the first step writes the first rows over themselves; one step more than the chunks
    # writes the last (after the loop, XLA copies B_v's block to write them)
    first = tuple(lax.slice_in_dim(p, 0, rows, axis=0) for p in (b_u, x4))
    u_in, b_v, v_low, _, _ = fori(0, chunks + 1, step, (t_u, b_u, x4, *first))
    return u_in, summa_local(x6, b_v, c=v_low, **summa)
