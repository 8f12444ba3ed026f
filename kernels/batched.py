"""Batched solves: the per-device bodies (no communication at all).

Layout: every operand arrives as the local block of a stack sharded along
its batch dimensions only, so device ``d`` holds whole matrices
``a_blk[..., :, :]`` (``[b_1/p_1, ..., b_k/p_k, n, n]``, where ``p_i`` is the
product of the mesh axes on batch dimension ``i``) and the matching
right-hand sides. An operand that is broadcast along a batch dimension
(size 1 there) or has no batch dimensions is replicated and arrives whole.
Each body is the one-device LAPACK path (``jnp.linalg`` /
``jax.scipy.linalg``) applied to the local block, so the compiled program
contains no collective and the numbers are exactly those of one device on
the same members.

Cost per device: nothing sent or received; the LAPACK flops of its own
members (``2/3 n^3`` per factorisation, ``2 n^2 k`` per solve with ``k``
right-hand sides).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl


def solve_local(a_blk: jax.Array, b_blk: jax.Array) -> jax.Array:
    """``jnp.linalg.solve`` on the local members.

    Args:
      a_blk: ``[..., n, n]`` local block of the stack (batch dimensions of size
        1 broadcast, as in ``jnp.linalg.solve``).
      b_blk: ``[n]`` (one vector, replicated) or ``[..., n, k]`` local block.

    Returns:
      ``[..., n]`` or ``[..., n, k]``: the local block of ``x``.
    """
    return jnp.linalg.solve(a_blk, b_blk)


def lu_factor_local(a_blk: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jax.scipy.linalg.lu_factor`` on the local members.

    Args:
      a_blk: ``[..., n, n]`` local block.

    Returns:
      ``(lu_blk [..., n, n], piv_blk [..., n] int32)``; ``piv[i]`` is the row
      interchanged with row ``i`` (LAPACK/scipy convention).
    """
    return jsl.lu_factor(a_blk)


def lu_solve_local(
    lu_blk: jax.Array, piv_blk: jax.Array, b_blk: jax.Array, *, trans: int
) -> jax.Array:
    """``jax.scipy.linalg.lu_solve`` on the local members.

    Args:
      lu_blk: ``[..., n, n]`` local block of the factors.
      piv_blk: ``[..., n]`` local block of the pivots (integer).
      b_blk: ``[..., n]`` (one vector per member) or ``[..., n, k]``.
      trans: 0, 1 or 2 (``a``, ``a^T``, ``a^H``), as in scipy.

    Returns:
      The local block of ``x``, shaped like ``b_blk``.
    """
    if b_blk.ndim == lu_blk.ndim - 1:  # one vector per member, as jax treats it today
        return jsl.lu_solve((lu_blk, piv_blk), b_blk[..., None], trans=trans)[..., 0]
    return jsl.lu_solve((lu_blk, piv_blk), b_blk, trans=trans)


def det_local(a_blk: jax.Array) -> jax.Array:
    """``jnp.linalg.det`` of each local member: ``[..., n, n] -> [...]``."""
    return jnp.linalg.det(a_blk)


def slogdet_local(a_blk: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jnp.linalg.slogdet`` of each local member: ``(sign [...], logabsdet [...])``."""
    sign, logabsdet = jnp.linalg.slogdet(a_blk)
    return sign, logabsdet


def inv_local(a_blk: jax.Array) -> jax.Array:
    """``jnp.linalg.inv`` of each local member: ``[..., n, n] -> [..., n, n]``."""
    return jnp.linalg.inv(a_blk)
