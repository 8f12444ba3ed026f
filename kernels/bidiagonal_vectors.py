"""Singular vectors of a real upper bidiagonal matrix, each device its own block.

LAPACK's ``xBDSVDX`` route, spread over the devices as ``xSTEIN`` is in
``kernels/tridiagonal_vectors.py``. For ``B`` (``k x k``, diagonal ``d``,
superdiagonal ``e``) the Golub–Kahan matrix ``TGK`` is the zero-diagonal
tridiagonal of order ``2k`` with off-diagonal ``(d₀, e₀, d₁, e₁, …, d_{k−1})``;
if ``B v = σ u`` and ``Bᴴ u = σ v`` (unit ``u, v``), then
``z = (v₀, u₀, v₁, u₁, …)/√2`` is its eigenvector for ``+σ``. Every device
holds ``d, e`` and the ``k`` singular values ascending, and computes the
eigenvectors of ``TGK`` for one contiguous range of them (ranges cut at wide
gaps, windows with guards, inverse iteration, the window orthonormalized:
:func:`~distla.kernels.tridiagonal_vectors.window_rows`); :func:`halves`
then splits each vector into its ``v`` and ``u`` halves, scaled by ``√2``.

Mixing with the partner eigenvector for ``−σ`` (at distance ``2σ``) only
rescales the two halves; mixing with ``−σⱼ`` of another value moves them by
about ``eps·‖B‖/(σ + σⱼ)``. So the halves are orthonormal to about
``eps·‖B‖/σ``, and for values at the rounding level (``σ ≲ k·eps·‖B‖``) they
mean nothing: the caller completes those columns
(``distla/linalg/_bidiagonal.py``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from . import tridiagonal_vectors
from ._axes import after, axis_size, fori, highest_precision, zeros_after
from .tridiagonal_vectors import cuts, rank_of, rows_per_chunk, to_columns, window_rows

#: Inverse iteration solves ``TGK``'s window in this many chunks of rows: twice
#: eigh's, since its rows are ``2k`` long (each of the five copies of a chunk that
#: LAPACK's batched ``gtsv`` takes is ``2·rows/block`` shares beside the window's 2.5,
#: svd's peak at n = 4096 with eigh's chunks: docs/memory.md).
CHUNKS = 2 * tridiagonal_vectors.CHUNKS


def golub_kahan(d: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(diagonal, off-diagonal)`` of ``TGK`` (order ``2k``) for ``B = (d, e)``; the
    off-diagonal's last entry (and ``e[k − 1]``) is not read."""
    k = d.shape[0]
    e = jnp.where(jnp.arange(k) < k - 1, e, 0)
    return jnp.zeros((2 * k,), d.dtype), jnp.stack([d, e], axis=1).reshape(2 * k)


def halves(z: jax.Array) -> jax.Array:
    """``[v; u]·√2`` (``2k x W``) from ``TGK``'s eigenvectors ``z`` (rows interleaved
    ``v₀, u₀, v₁, …``): a local regrouping of rows."""
    two_k, width = z.shape
    split = z.reshape(two_k // 2, 2, width).transpose(1, 0, 2).reshape(two_k, width)
    return split * jnp.sqrt(jnp.asarray(2, z.dtype))


def halves_of_rows(x: jax.Array, count: int, sizes: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
    """``(u, v)`` (``sizes[0] x count`` and ``sizes[1] x count``, zero past ``k`` rows)
    from ``x``'s first ``count`` rows, each a vector ``(v₀, u₀, v₁, u₁, …)`` of length
    ``2k``: its halves as columns, copied out a chunk of rows at a time.

    A loop, so that ``u`` and ``v`` exist as arrays and ``x`` dies with the loop: a
    plain read is fused into whatever moves ``u`` and ``v`` next (an all-to-all to the
    2D blocks), whose pieces XLA then holds beside all of ``x``.
    """
    k = x.shape[1] // 2
    height = rows_per_chunk(count)
    out = tuple(zeros_after((size, count), x.dtype, x) for size in sizes)

    def rows(c, out):
        part = lax.dynamic_slice_in_dim(x, c * height, height).reshape(height, k, 2)
        return tuple(
            lax.dynamic_update_slice(o, part[:, :, h].T, (0, c * height))
            for o, h in zip(out, (1, 0))
        )

    return fori(0, count // height, rows, out)


def cluster_shifts(s: jax.Array) -> jax.Array:
    """Inverse iteration's shift for each value of ``s`` (ascending): the value itself,
    or for a value in a degenerate cluster (neighbours within ``8·eps·max|s|``, as
    ``eigh``'s repair groups them) one shift for the whole cluster, its width below it.

    A shift inside a cluster of nearly equal values would pull each start vector
    towards the few eigenvectors nearest to it, and the devices that share a cluster
    would return nearly parallel vectors; one shift below it amplifies the cluster's
    subspace evenly (condition about 2) and keeps the starts' directions in it random,
    so the vectors that meet from two devices stay independent and the caller's
    orthonormalization in order (a QR of each half) has well-conditioned columns.
    """
    k = s.shape[0]
    idx = jnp.arange(k)
    eps = jnp.finfo(s.dtype).eps
    new = jnp.concatenate([jnp.ones((1,), bool), s[1:] - s[:-1] > 8 * eps * jnp.max(jnp.abs(s))])
    first = lax.cummax(jnp.where(new, idx, 0))
    ends = jnp.roll(new, -1) | (idx == k - 1)
    last = jnp.flip(lax.cummin(jnp.flip(jnp.where(ends, idx, k))))
    width = s[last] - s[first]
    return jnp.where(last > first, s[first] - width, s)


@highest_precision
def golub_kahan_vectors(
    d: jax.Array,
    e: jax.Array,
    s: jax.Array,
    ready: jax.Array | None = None,
    *,
    block: int,
    guard: int,
    axis_names,
    whole: bool = False,
) -> jax.Array:
    """This device's ``2k x block`` columns of ``TGK``'s eigenvectors for ``+s``.

    Args:
      d, e: ``B``'s diagonal and superdiagonal (``k`` each; ``e[k − 1]`` unread),
        the same on every device.
      s: ``B``'s ``k`` singular values, ascending, the same on every device.
      ready: an array the window waits for (``_axes.after``): XLA's scheduler
        otherwise makes the window as soon as ``s`` exists, beside whatever else is
        still being made (svd: the reduction's reflectors put together).
      block: columns per device, ``⌈k/p⌉``.
      guard: how far a range's bounds may move to a wider gap.
      axis_names: the mesh axes the devices are laid on.
      whole: return inverse iteration's whole window (``block + 2·guard`` rows of
        length ``2k``), the vectors as its first ``block`` rows (``to_columns(whole=True)``),
        for a caller that works on them in place
        (:func:`~distla.kernels.bidiagonal.apply_reflectors_to_rows`).

    Returns:
      ``[2k, block]``: unit eigenvectors of ``TGK`` (rows interleaved
      ``v₀, u₀, v₁, …``; :func:`halves` splits them) for the values
      ``s[r·block : (r+1)·block]`` (device ``r`` row-major over
      ``axis_names``), laid out as
      :func:`~distla.kernels.tridiagonal_vectors.to_columns` lays them out.
    """
    k = d.shape[0]
    devices = 1
    for name in axis_names:
        devices *= axis_size(name)
    t_diag, t_off = golub_kahan(d, e)
    shift = cluster_shifts(s)
    # a window reads its shifts at indices up to first + width; past k the last repeats
    s_long = jnp.concatenate([shift, jnp.broadcast_to(shift[-1:], (k,))])
    bounds = cuts(s, devices=devices, block=block, guard=guard)
    first = bounds[rank_of(axis_names)]
    if ready is not None:
        # an entry summed over the devices: XLA otherwise reads it, inside the window's
        # fusions, from the array ``ready`` is copied from (an all-to-all's result) and
        # holds that array beside the window (an optimization barrier is dropped)
        entry = lax.psum(lax.index_in_dim(ready.reshape(-1), 0, keepdims=False), axis_names)
        first = first + after(0, entry).astype(first.dtype)
    width = block + 2 * guard
    window = window_rows(t_diag, t_off, s_long, first, width=width, unit=False, chunks=CHUNKS)
    return to_columns(window, bounds, block=block, guard=guard, axis_names=axis_names, whole=whole)
