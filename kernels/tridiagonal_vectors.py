"""Eigenvectors of a real symmetric tridiagonal matrix, each device its own block.

LAPACK's ``xSTEIN`` (inverse iteration) spread over the devices as ScaLAPACK's
``PxSTEIN`` spreads it: every device holds ``T`` (``n``-vectors ``d, e``) and
all its eigenvalues, and computes the eigenvectors of one contiguous range of
them, ``n x W`` numbers.

- **Ranges** (:func:`cuts`). Device ``r`` would take indices ``[r·b, (r+1)·b)``
  (``b = ⌈n/p⌉``); each cut between two devices moves, within ``±g``, to the
  widest eigenvalue gap there, so that vectors of close eigenvalues are
  computed, and orthogonalized, together. Every device computes every cut
  from the same eigenvalues, alike.
- **Inverse iteration** (:func:`window_vectors`). ``W = b + 2g`` vectors from
  pseudo-random starts: ``(T − λᵢ I) xᵢ ← xᵢ`` (jax's batched tridiagonal
  solve, a singular pivot perturbed), normalized, and the window
  orthonormalized in order (Cholesky QR) after every solve. LAPACK
  orthogonalizes within each cluster only; vectors of well-separated
  eigenvalues are orthogonal to about ``eps·‖T‖/gap`` already, so the whole
  window's orthonormalization moves them by rounding and keeps their
  residuals. A fixed number of sweeps, one loop body.
- **Layout** (:func:`to_columns`). The ranges are then laid out as the 1D
  column blocks ``[r·b, (r+1)·b)``: each device takes the columns it lacks
  from its two neighbours, at most ``g`` from each (two collective-permutes
  of ``n x g``).

A cluster wider than the guard ``g`` can still straddle a cut; its vectors
from the two sides are then orthogonal only to about ``eps·‖T‖/gap``. The
caller checks and, if need be, orthonormalizes the whole basis.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size, highest_precision

#: Inverse-iteration sweeps (LAPACK's ``xSTEIN`` stops after at most five).
SWEEPS = 2


def rank_of(axis_names: tuple[str, ...]) -> jax.Array:
    """This device's row-major index over ``axis_names``."""
    rank = jnp.int32(0)
    for name in axis_names:
        rank = rank * axis_size(name) + axis_index(name)
    return rank


def ppermute_index(axis_names: tuple[str, ...]) -> tuple[tuple[str, ...], list[int]]:
    """``axis_names`` in the mesh's order, which ``lax.ppermute`` requires (jax
    0.11 raises on any other), and for each rank of :func:`rank_of` the device's
    index in ``lax.ppermute``'s numbering over them (row-major in that order)."""
    sizes = [axis_size(name) for name in axis_names]
    mesh_order = tuple(
        name for name in jax.sharding.get_abstract_mesh().axis_names if name in axis_names
    )
    out = []
    for rank in range(math.prod(sizes)):
        where, rest = {}, rank
        for name, size in zip(reversed(axis_names), reversed(sizes)):
            where[name], rest = rest % size, rest // size
        linear = 0
        for name in mesh_order:
            linear = linear * sizes[axis_names.index(name)] + where[name]
        out.append(linear)
    return mesh_order, out


def cuts(w: jax.Array, *, devices: int, block: int, guard: int) -> jax.Array:
    """``devices + 1`` ascending range bounds over the ``n`` ascending eigenvalues ``w``.

    Bound ``s`` (``0 < s < devices``) is the index ``j`` within ``guard`` of
    ``s·block`` with the widest gap ``w[j] − w[j−1]``; bound 0 is 0, the last
    is ``n``.
    """
    n = w.shape[0]
    nominal = jnp.arange(1, devices, dtype=jnp.int32)[:, None] * block
    cand = nominal + jnp.arange(-guard, guard + 1, dtype=jnp.int32)[None, :]
    inside = (cand >= 1) & (cand <= n - 1)
    at = jnp.clip(cand, 1, max(n - 1, 1))
    gaps = jnp.where(inside, w[at] - w[at - 1], -jnp.inf)
    best = jnp.take_along_axis(cand, jnp.argmax(gaps, axis=1)[:, None], axis=1)[:, 0]
    inner = jnp.where(jnp.any(inside, axis=1), best, jnp.minimum(nominal[:, 0], n))
    return jnp.concatenate([jnp.zeros((1,), jnp.int32), inner, jnp.full((1,), n, jnp.int32)])


def start_vectors(index: jax.Array, n: int, dtype) -> jax.Array:
    """Pseudo-random ``len(index) x n`` starts in ``[−½, ½)``, a function of the
    eigenvalue's global index alone (an integer hash; ``jax.random`` inside
    ``shard_map`` does not partition on every jax release)."""
    h = index.astype(jnp.uint32)[:, None] * jnp.uint32(0x9E3779B1) + jnp.arange(
        n, dtype=jnp.uint32
    )[None, :] * jnp.uint32(0x85EBCA77)
    for shift, mult in ((16, 0x7FEB352D), (15, 0x846CA68B), (16, 1)):
        h = (h ^ (h >> shift)) * jnp.uint32(mult)
    return (h >> 8).astype(dtype) / (1 << 24) - 0.5


#: Rows solved together in :func:`inverse_iteration`: the batched tridiagonal solve
#: takes its three diagonals and right-hand sides as ``rows x n`` operands, so a whole
#: window at once held four times the window (12 of the 18 shares of svd's vectors at
#: n = 512 on 2x4); in chunks they hold four times a chunk.
SOLVE_ROWS = 32


@highest_precision
def inverse_iteration(d, e, shift, x) -> jax.Array:
    """Rows ``xᵢ ← (T − σᵢ I)⁻¹ xᵢ`` normalized (``σᵢ`` a few ulps of ``‖T‖`` below
    ``shift[i]``, so that ``T − σᵢ I`` is never exactly singular, ``T = λI`` included),
    :data:`SOLVE_ROWS` rows at a time."""
    n = d.shape[0]
    k = x.shape[0]
    off = jnp.where(jnp.arange(n) < n - 1, e, 0)
    t_norm = jnp.max(jnp.abs(d)) + 2 * jnp.max(jnp.abs(off))
    sigma = shift - 4 * jnp.finfo(d.dtype).eps * jnp.where(t_norm > 0, t_norm, 1)
    rows = min(k, SOLVE_ROWS)
    chunks = -(-k // rows)

    def solve(chunk):
        s, b = chunk
        lower = jnp.broadcast_to(jnp.pad(off[:-1], (1, 0)), (rows, n))
        upper = jnp.broadcast_to(off, (rows, n))
        return lax.linalg.tridiagonal_solve(
            lower, d[None, :] - s[:, None], upper, b[:, :, None], perturb_singular=True
        )[:, :, 0]

    if chunks == 1:
        x = solve((sigma, x))
    else:  # one chunk after the other (zero rows pad the last; they solve to zero)
        pad = chunks * rows - k
        s_c = jnp.pad(sigma, (0, pad)).reshape(chunks, rows)
        x_c = jnp.pad(x, ((0, pad), (0, 0))).reshape(chunks, rows, n)
        x = lax.map(solve, (s_c, x_c)).reshape(chunks * rows, n)[:k]
    x = x / jnp.max(jnp.abs(x), axis=1, keepdims=True)  # then no square overflows
    x = x / jnp.linalg.norm(x, axis=1, keepdims=True)
    return jnp.where(jnp.isfinite(x), x, 0)


@highest_precision
def window_vectors(d, e, w, first, *, width: int) -> jax.Array:
    """``n x width`` orthonormal eigenvectors of ``T`` for eigenvalues ``w[first:first+width]``.

    Indices past ``n − 1`` repeat the last eigenvalue (the columns there are
    not eigenvectors of anything new; the caller ignores them). They come
    after the real ones, so orthonormalizing in order leaves those alone.
    """
    n = d.shape[0]
    index = first + jnp.arange(width, dtype=jnp.int32)
    shift = w[jnp.minimum(index, n - 1)]

    def sweep(_, x):
        return orthonormal_rows(inverse_iteration(d, e, shift, x))

    x = orthonormal_rows(lax.fori_loop(0, SWEEPS, sweep, start_vectors(index, n, d.dtype)))
    # the shift leaves each row's norm² about 1/(1 + δ): unit rows again
    return (x / jnp.linalg.norm(x, axis=1, keepdims=True)).T


@highest_precision
def orthonormal_rows(x: jax.Array) -> jax.Array:
    """``L⁻¹ x`` with ``x xᵀ + δI = L Lᵀ``: the rows of ``x`` orthonormalized in order
    (Cholesky QR, GEMM-rich; ``jnp.linalg.qr`` inside ``shard_map`` is far slower
    on the CPU backend). The shift ``δ = width·eps`` keeps the factor finite for
    nearly dependent rows; a second pass then orthonormalizes to rounding."""
    width = x.shape[0]
    gram = jnp.dot(x, x.T, precision=lax.Precision.HIGHEST)
    gram = gram + width * jnp.finfo(x.dtype).eps * jnp.eye(width, dtype=x.dtype)
    low = jnp.linalg.cholesky(gram)
    return lax.linalg.triangular_solve(low, x, left_side=True, lower=True)


def to_columns(z_win, bounds, *, block: int, axis_names: tuple[str, ...]) -> jax.Array:
    """This device's ``n x block`` columns ``[r·block, (r+1)·block)`` of the basis.

    ``z_win`` holds the columns ``[bounds[r], bounds[r+1])`` from its first
    column on (``width = block + 2·guard`` columns). A bound moves at most
    ``guard`` from its nominal place, so a device's columns come from itself and
    at most ``guard`` from each neighbour: the left one's columns from
    ``r·block`` on (the end of its range), the right one's first ``guard``. Each
    device sends its neighbours just those (two collective-permutes of
    ``n x guard``) and picks its columns from the three pieces.
    """
    n, width = z_win.shape
    guard = (width - block) // 2
    devices = bounds.shape[0] - 1
    r = rank_of(axis_names)
    j = r * block + jnp.arange(block, dtype=jnp.int32)
    src = jnp.clip(jnp.searchsorted(bounds, j, side="right") - 1, 0, devices - 1)
    own = jnp.take(z_win, jnp.clip(j - bounds[r], 0, width - 1), axis=1)
    cols = jnp.where((src == r)[None, :], own, 0)
    if devices > 1 and guard > 0:
        names, lin = ppermute_index(axis_names)
        # to the right neighbour: its columns [(r+1)·block, bounds[r+1]), which this
        # device computed at the end of its range; to the left one: this range's first
        zero = jnp.int32(0)
        tail = lax.dynamic_slice(z_win, (zero, (r + 1) * block - bounds[r]), (n, guard))
        from_left = lax.ppermute(tail, names, [(lin[s], lin[s + 1]) for s in range(devices - 1)])
        head = z_win[:, :guard]
        from_right = lax.ppermute(head, names, [(lin[s + 1], lin[s]) for s in range(devices - 1)])
        left = jnp.take(from_left, jnp.clip(j - r * block, 0, guard - 1), axis=1)
        right = jnp.take(
            from_right, jnp.clip(j - bounds[jnp.minimum(r + 1, devices)], 0, guard - 1), axis=1
        )
        cols = jnp.where((src == r - 1)[None, :], left, cols)
        cols = jnp.where((src == r + 1)[None, :], right, cols)
    return jnp.where((j < n)[None, :], cols, 0)
