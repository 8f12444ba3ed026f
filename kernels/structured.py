"""A matrix built where it lies: each device computes its own block from index formulas.

The structured matrices of ``scipy.linalg`` (Toeplitz, Hankel, Hilbert, Pascal, DFT,
...) are functions of the row and column indices and of a few short defining
vectors. :func:`block_of` gives each device the global indices of its block's rows
and columns (from its mesh coordinates, contiguous blocks split over the mesh axes a
layout names, major axis first) and evaluates the formula on them: no
communication, no device holds more than its block. The defining vectors arrive
replicated (the caller's one all-gather of a short vector).

:func:`gram_block` is the one formula that is a sum: this device's block of
``Lᴴ L`` for a matrix ``L`` given by a formula, accumulated over chunks of ``L``'s
rows, so that nothing but the block and two ``chunk x block`` slices of ``L`` are
ever held (the symmetric inverse Pascal matrix).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size


def block_start(size: int, axes: Sequence[str]) -> jax.Array:
    """Global index of this device's first element along a dimension split over ``axes``.

    ``size`` is the local length; the axes are listed major first (a
    ``PartitionSpec`` entry), so the block index is their mixed-radix number.
    """
    block = jnp.int32(0)
    for name in axes:
        block = block * axis_size(name) + axis_index(name)
    return block * size


def global_indices(local_shape: Sequence[int], axes: Sequence[Sequence[str]]) -> list[jax.Array]:
    """The global indices (int32 vectors) of this device's rows and columns."""
    return [
        block_start(size, names) + jnp.arange(size, dtype=jnp.int32)
        for size, names in zip(local_shape, axes)
    ]


def block_of(
    entries: Callable[..., jax.Array],
    local_shape: tuple[int, int],
    axes: Sequence[Sequence[str]],
    *vectors: jax.Array,
) -> jax.Array:
    """This device's ``local_shape`` block of the matrix ``entries(i, j, *vectors)``.

    Args:
      entries: the entry formula, broadcasting over ``i`` (``[mloc, 1]``, int32
        global row indices) and ``j`` (``[1, nloc]``).
      local_shape: ``(mloc, nloc)``.
      axes: the mesh axes each dimension is split over (major first; ``()``:
        whole on every device).
      *vectors: the defining vectors, whole (replicated).
    """
    i, j = global_indices(local_shape, axes)
    return entries(i[:, None], j[None, :], *vectors)


def gram_block(
    factor: Callable[[jax.Array, jax.Array], jax.Array],
    rows: int,
    local_shape: tuple[int, int],
    axes: Sequence[Sequence[str]],
    *,
    chunk: int,
    dtype,
) -> jax.Array:
    """This device's block of ``Lᴴ L`` with ``L[k, i] = factor(k, i)`` (``rows x n``).

    ``L``'s rows are taken ``chunk`` at a time (``rows`` a multiple of ``chunk``):
    ``L[ks, I]ᴴ L[ks, J]`` for this device's columns ``I`` and ``J``, summed. A
    local product of generated operands: no communication.
    """
    i, j = global_indices(local_shape, axes)

    def step(s, acc):
        k = s * chunk + jnp.arange(chunk, dtype=jnp.int32)[:, None]
        left = factor(k, i[None, :]).astype(dtype)  # [chunk, mloc]: L[ks, I]
        right = factor(k, j[None, :]).astype(dtype)  # [chunk, nloc]: L[ks, J]
        return acc + jnp.dot(jnp.conj(left).T, right, precision=lax.Precision.HIGHEST)

    return lax.fori_loop(0, rows // chunk, step, jnp.zeros(local_shape, dtype))
