"""Tall-skinny QR (TSQR) of a matrix split into row blocks.

Demmel, Grigori, Hoemmen and Langou (2012), communication-avoiding QR of an
``m x n`` matrix with ``m >> n`` whose rows are split over ``p`` devices
(``P(r, None)`` on a 1-axis mesh, or the rows over every axis of a 2-axis
mesh). Naming: ``_blk`` is this device's ``(mloc, n)`` row block, ``h`` /
``tau`` LAPACK's compact Householder form (``geqrf``), ``p`` the devices on
the row axes.

1. **Local QR**: ``A_i = Q1_i R_i`` with LAPACK's ``geqrf`` on the local
   block (``mloc >= n``; the caller pads with zero rows, which Householder
   reflectors leave zero).
2. **Reduction tree of the R factors — a flat tree**: one ``all_gather`` of
   the ``p`` small ``n x n`` R factors, after which every device factors the
   stacked ``(p·n, n)`` matrix ``[R_0; ...; R_{p-1}] = Q2 R`` itself. One
   message round instead of the ``log2 p`` of a binary tree or butterfly
   (latency-bound on few devices), ``(p-1)·n²`` elements received per
   device, and ``R`` comes out replicated with no broadcast back down the
   tree. Every device repeats the ``2·p·n³``-flop reduction, which is
   cheap next to the local ``2·mloc·n²`` while ``p·n <= mloc``.
3. **Q, only when asked**: ``Q_i = Q1_i · Q2[i·n:(i+1)·n]``, applied with
   LAPACK's ``ormqr`` (the local reflectors on the ``n x n`` slice padded
   with zeros), so ``Q`` is formed in place, row block by row block, never
   gathered.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import set_block

AxisNames = str | tuple[str, ...]


def _geqrf(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """LAPACK's ``geqrf``: ``(h, tau)``, R on and above h's diagonal, reflectors below."""
    h, tau = jnp.linalg.qr(x, mode="raw")
    return h.mT, tau


def _upper(x: jax.Array, rows: int) -> jax.Array:
    """The upper triangle of ``x[:rows]`` (the R factor held in a ``geqrf`` result)."""
    return jnp.triu(x[:rows])


def tsqr_local(
    a_blk: jax.Array, *, axis_name: AxisNames, want_q: bool
) -> tuple[jax.Array | None, jax.Array]:
    """TSQR of a matrix in row blocks: ``A = Q R`` with a flat reduction tree.

    Args:
      a_blk: ``(mloc, n)`` local row block, ``mloc >= n``; device ``i`` of
        ``axis_name`` (mesh axes in order, major first) holds rows
        ``[i·mloc, (i+1)·mloc)``.
      axis_name: the mesh axis, or tuple of axes, that splits the rows.
      want_q: form this device's rows of the ``m x n`` ``Q``.

    Returns:
      ``(q_blk, r)``: ``q_blk`` the ``(mloc, n)`` local rows of ``Q`` (or
      ``None``), ``r`` the ``n x n`` upper triangular factor, the same on
      every device.
    """
    mloc, n = a_blk.shape
    if mloc < n:
        raise ValueError(f"tsqr_local: local block {a_blk.shape} has fewer rows than columns")
    h1, tau1 = _geqrf(a_blk)
    r1 = _upper(h1, n)
    # all_gather over the row axes -> (p·n, n): every device's R factor, in row order
    stacked = lax.all_gather(r1, axis_name, axis=0, tiled=True)
    h2, tau2 = _geqrf(stacked)
    r = _upper(h2, n)
    if not want_q:
        return None, r
    pn = stacked.shape[0]
    me = lax.axis_index(axis_name)
    # Q2 = H2 [I; 0] (p·n x n, cheap), of which this device keeps its n rows
    q2 = lax.linalg.ormqr(h2, tau2, jnp.eye(pn, n, dtype=a_blk.dtype), left=True)
    q2_mine = lax.dynamic_slice_in_dim(q2, me * n, n, axis=0)  # (n, n)
    # Q_i = Q1_i [Q2_i; 0]: the local reflectors applied to the padded slice
    c = set_block(jnp.zeros((mloc, n), a_blk.dtype), (0,), q2_mine)
    return lax.linalg.ormqr(h1, tau1, c, left=True), r
