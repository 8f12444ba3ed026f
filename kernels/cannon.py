"""Cannon's algorithm: C = A @ B on a square ``q x q`` grid (Cannon, 1969).

Device ``(i, j)`` starts with blocks ``A[i, j]`` and ``B[i, j]``. The initial
skew moves ``A[i, (i+j) % q]`` and ``B[(i+j) % q, j]`` to it; then ``q``
steps each multiply the two local blocks into C and shift A one block left
along the mesh row and B one block up along the mesh column. Every block
travels over nearest-neighbour ``ppermute``s only.

Cost per device: the bytes ``distla.matmul.model_bytes(..., algorithm="cannon")``
gives (the skew plus q-1 shifts of each operand, one fewer shift than
steps); memory of two blocks of each operand and one of C.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_size, fori


def _skew_perm(q: int, *, of: str) -> list[tuple[int, int]]:
    """(source, destination) pairs over the flattened ``(row, col)`` axes."""
    pairs = []
    for i in range(q):
        for j in range(q):
            t = (i + j) % q
            src = (i, t) if of == "a" else (t, j)
            pairs.append((src[0] * q + src[1], i * q + j))
    return pairs


def cannon_local(
    a_blk: jax.Array,
    b_blk: jax.Array,
    *,
    row_axis: str,
    col_axis: str,
    precision: lax.PrecisionLike,
) -> jax.Array:
    """Local Cannon body: ``C[i, j] = sum_t A[i, t] B[t, j]`` on a ``q x q`` grid.

    Args:
      a_blk: ``(m/q, k/q)`` block of A.
      b_blk: ``(k/q, n/q)`` block of B.
      row_axis, col_axis: the two mesh axes, both of size q.
      precision: passed to every local dot.

    Returns:
      ``(m/q, n/q)`` block of C.
    """
    q = axis_size(row_axis)
    if axis_size(col_axis) != q:
        raise ValueError(f"cannon_local needs a square grid; got {q}x{axis_size(col_axis)}")
    grid = (row_axis, col_axis)
    # skew over both axes -> device (i, j) holds A[i, i+j] and B[i+j, j]
    a = lax.ppermute(a_blk, grid, _skew_perm(q, of="a"))
    b = lax.ppermute(b_blk, grid, _skew_perm(q, of="b"))
    shift_left = [((j + 1) % q, j) for j in range(q)]  # device j receives from j+1

    def product(a, b):
        return jnp.dot(a, b, precision=precision)

    def step(_, carry):
        acc, a, b = carry
        # the shifts read the same blocks as this step's GEMM, so XLA may overlap them
        a_next = lax.ppermute(a, col_axis, shift_left)  # A[i, i+j+t+1]
        b_next = lax.ppermute(b, row_axis, shift_left)  # B[i+j+t+1, j]
        return acc + product(a, b), a_next, b_next

    acc = lax.pcast(jnp.zeros((a.shape[0], b.shape[1]), a.dtype), grid, to="varying")
    acc, a, b = fori(0, q - 1, step, (acc, a, b))
    return acc + product(a, b)
