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
  from its two neighbours (two collective-permutes of ``n x g``) and writes its
  block over its window's first rows, a chunk at a time, in place.

A cluster wider than the guard ``g`` can still straddle a cut; its vectors
from the two sides are then orthogonal only to about ``eps·‖T‖/gap``. The
caller checks and, if need be, orthonormalizes the whole basis.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax
from jax._src.lax.linalg import cholesky_p  # potrf alone: no public form without the tril

from ._axes import after, axis_index, axis_size, fori, highest_precision, solve_left

#: Inverse-iteration sweeps (LAPACK's ``xSTEIN`` stops after at most five).
SWEEPS = 2
#: Inverse iteration solves a window's rows this many chunks at a time (and the
#: Cholesky QR applies ``L⁻¹`` to a quarter as many column chunks), each written back
#: in place: the whole window at once holds several copies of it.
CHUNKS = 16


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


def guard_of(block: int) -> int:
    """How far a device's range of eigenvalues may move to a wider gap (:func:`cuts`):
    ``block/16``, but at least 32 and at most ``block/8`` (``block/4`` below 8). The
    window holds ``block + 2·guard`` vectors, 1.125 blocks from ``block = 512`` on
    (1.25 with ``block/8``, 1.5 with ``block/4``), at the top of eigh's and svd's memory
    (docs/memory.md); a cluster wider than the guard that straddles a cut is left to
    the caller's repair (eigh's `_repaired`, svd's `_complete_both`)."""
    # 32 vectors: a cluster that small never waits for the repair, whatever n (and at
    # n = 2048 on 8 devices the narrower window's program peaked higher: docs/memory.md)
    return min(block // 8, max(block // 16, 32)) or block // 4


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


def rows_per_chunk(k: int, chunks: int = CHUNKS) -> int:
    """Rows a chunk of :func:`inverse_iteration` solves at once: a divisor of ``k``
    near ``k/chunks`` (at least ``32·CHUNKS/chunks``), or all ``k`` when none is."""
    target = max(32 * CHUNKS // chunks, -(-k // chunks))
    if k <= target:
        return k
    best = max(c for c in range(1, target + 1) if k % c == 0)
    return best if 2 * best >= target else k


@highest_precision
def inverse_iteration(
    d, e, shift, x, *, columns: bool = False, apply=True, chunks: int = CHUNKS
) -> jax.Array:
    """Rows ``xᵢ ← (T − σᵢ I)⁻¹ xᵢ`` normalized (``σᵢ`` a few ulps of ``‖T‖`` below
    ``shift[i]``, so that ``T − σᵢ I`` is never exactly singular, ``T = λI`` included).

    LAPACK's batched ``gtsv`` overwrites a copy of ``T``'s three diagonals for
    every row it solves, four ``n``-vectors a row: the rows go in ``chunks``
    chunks (a loop), each chunk written back in place, so that a device holds one
    chunk's copies, not four more windows. With ``columns`` the vectors are
    ``x``'s columns (``n x k``; a chunk is transposed, never the whole ``x``).
    Where the traced ``apply`` is false ``x`` comes back unchanged (the chunks are
    solved and dropped: a step that needs no sweep runs no ``cond``).
    """
    n = d.shape[0]
    axis = 1 if columns else 0
    k = x.shape[axis]
    off = jnp.where(jnp.arange(n) < n - 1, e, 0)
    t_norm = jnp.max(jnp.abs(d)) + 2 * jnp.max(jnp.abs(off))
    sigma = shift - 4 * jnp.finfo(d.dtype).eps * jnp.where(t_norm > 0, t_norm, 1)
    rows = rows_per_chunk(k, chunks)

    def solve(t, x):
        at = t * rows
        xs = lax.dynamic_slice_in_dim(x, at, rows, axis=axis)
        xs = xs.T if columns else xs
        sig = lax.dynamic_slice_in_dim(sigma, at, rows)
        lower = jnp.broadcast_to(jnp.pad(off[:-1], (1, 0)), (rows, n))
        upper = jnp.broadcast_to(off, (rows, n))
        y = lax.linalg.tridiagonal_solve(
            lower, d[None, :] - sig[:, None], upper, xs[:, :, None], perturb_singular=True
        )[:, :, 0]
        y = y / jnp.max(jnp.abs(y), axis=1, keepdims=True)  # then no square overflows
        y = y / jnp.linalg.norm(y, axis=1, keepdims=True)
        y = jnp.where(jnp.isfinite(y), y, 0)
        if apply is not True:
            y = jnp.where(apply, y, xs)
        return lax.dynamic_update_slice_in_dim(x, y.T if columns else y, at, axis=axis)

    return solve(0, x) if rows == k else fori(0, k // rows, solve, x)


def window_vectors(d, e, w, first, *, width: int) -> jax.Array:
    """``n x width`` orthonormal eigenvectors of ``T`` for eigenvalues ``w[first:first+width]``.

    Indices past ``n − 1`` repeat the last eigenvalue (the columns there are
    not eigenvectors of anything new; the caller ignores them). They come
    after the real ones, so orthonormalizing in order leaves those alone.
    """
    return window_rows(d, e, w, first, width=width).T


@highest_precision
def window_rows(
    d, e, w, first, *, width: int, unit: bool = True, chunks: int = CHUNKS
) -> jax.Array:
    """:func:`window_vectors` as rows, ``width x n``: the vectors as inverse iteration
    makes them (their transpose would be one more window on the device); with ``unit``
    false, not yet scaled to unit norm (about ``1/√(1 + width·eps)`` each), for
    :func:`to_columns`, which scales the rows it places. ``chunks``: as
    :func:`inverse_iteration`'s."""
    n = d.shape[0]
    index = first + jnp.arange(width, dtype=jnp.int32)
    shift = w[jnp.minimum(index, n - 1)]

    def sweep(_, x):
        return orthonormal_rows(inverse_iteration(d, e, shift, x, chunks=chunks))

    x = orthonormal_rows(lax.fori_loop(0, SWEEPS, sweep, start_vectors(index, n, d.dtype)))
    # the shift leaves each row's norm² about 1/(1 + δ): unit rows again (or by the caller,
    # as :func:`to_columns` places them: the scaled window beside the window was one more)
    return x / jnp.linalg.norm(x, axis=1, keepdims=True) if unit else x


@highest_precision
def orthonormal_rows(x: jax.Array) -> jax.Array:
    """``L⁻¹ x`` with ``x xᵀ + δI = L Lᵀ``: the rows of ``x`` orthonormalized in order
    (Cholesky QR, GEMM-rich; ``jnp.linalg.qr`` inside ``shard_map`` is far slower
    on the CPU backend). The shift ``δ = width·eps`` keeps the factor finite for
    nearly dependent rows; a second pass then orthonormalizes to rounding.
    ``L⁻¹`` is applied ``CHUNKS`` column chunks at a time, each written back in
    place (the solve of all of ``x`` would be a second ``x``)."""
    width, n = x.shape
    gram = jnp.dot(x, x.T, precision=lax.Precision.HIGHEST)
    # δ on the diagonal by a mask XLA can make only once x exists: jnp.eye was a constant
    # hoisted out of every loop, held from the program's start (and packed among the
    # generalized eigh's large buffers)
    i = lax.broadcasted_iota(jnp.int32, (width, width), 0)
    j = lax.broadcasted_iota(jnp.int32, (width, width), 1) + after(0, x).astype(jnp.int32)
    gram = gram + jnp.where(i == j, width * jnp.finfo(x.dtype).eps, 0).astype(x.dtype)
    # potrf without jax's tril (its iota mask is loop-invariant: XLA hoisted it to the
    # program's start and held it there); solve_left reads only the lower triangle
    low = cholesky_p.bind(gram)
    chunks = max(1, min(CHUNKS // 4, n // 32))
    edges = [n * c // chunks for c in range(chunks + 1)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        start = lo if lo == 0 else after(lo, x)
        part = lax.dynamic_slice_in_dim(x, start, hi - lo, axis=1)
        x = lax.dynamic_update_slice_in_dim(x, solve_left(low, part, lower=True), lo, axis=1)
    return x


def to_columns(
    rows, bounds, *, block: int, guard: int, axis_names: tuple[str, ...], whole: bool = False
) -> jax.Array:
    """This device's ``n x block`` columns ``[r·block, (r+1)·block)`` of the basis
    (``whole``: the window itself, those columns transposed in its first ``block`` rows,
    for a caller that works on them in place).

    ``rows`` (``W x n``, ``W = block + 2·guard``; :func:`window_rows`) holds the
    vectors ``[bounds[r], bounds[r+1])`` from its first row on. A bound moves at
    most ``guard`` from its nominal place, so the vectors a device lacks are the
    at most ``guard`` just before ``bounds[r]`` (the left neighbour's, which it
    sends) and the at most ``guard`` from ``bounds[r+1]`` (the right neighbour's
    first): two collective-permutes of ``guard x n``, not of whole windows.
    The columns are written over ``rows``' first ``block`` rows, a chunk at a time,
    each scaled to unit norm (``rows`` may come from ``window_rows(..., unit=False)``).
    """
    width, n = rows.shape
    if width < block:
        raise ValueError(f"to_columns: the window has {width} rows, fewer than block = {block}")
    devices = bounds.shape[0] - 1
    r = rank_of(axis_names)
    lo, hi = bounds[r], bounds[r + 1]
    g = max(1, min(guard, width))
    # left's rows go over the window's last g rows, which the placement never reads (it
    # reads rows up to block + g), before the rows for the left neighbour are cut and
    # sent: one piece fewer beside the window (svd's peak at n = 4096 was the window, a
    # piece received and one being sent)
    spare = width - g if devices > 1 and width - g >= block + g else None
    if devices > 1:
        names, lin = ppermute_index(axis_names)
        # for the right neighbour: its columns from (r+1)·block that this range holds
        start = jnp.clip((r + 1) * block - lo, 0, width - g)
        for_right = lax.dynamic_slice_in_dim(rows, start, g)
        # collective-permute to the right -> the left neighbour's vectors from r·block
        left = lax.ppermute(for_right, names, [(lin[s], lin[s + 1]) for s in range(devices - 1)])
        if spare is not None:
            rows = lax.dynamic_update_slice_in_dim(rows, left, spare, axis=0)
        # collective-permute to the left -> the right neighbour's first vectors (from hi)
        right = lax.ppermute(rows[:g], names, [(lin[s + 1], lin[s]) for s in range(devices - 1)])
    else:
        left = right = rows[:g]

    def pick(x, at):
        return jnp.take(x, jnp.clip(at, 0, x.shape[0] - 1), axis=0)

    def from_left(x, i):
        return pick(left, i) if spare is None else pick(x, spare + i)

    # the columns are written over the window's first block rows a chunk at a time, in
    # place (a gather of all block x n beside the window was two more shares): row i
    # takes the window's row i + shift (shift = r·block − lo, within ±g), or before lo
    # left's row i and from hi right's row j − hi. The chunks go front to back when the
    # rows move forward (shift >= 0) and back to front otherwise, so that no chunk reads
    # a row an earlier chunk wrote.
    shift = r * block - lo
    height = rows_per_chunk(block)
    chunks = block // height

    def place(t, x):
        c = jnp.where(shift >= 0, t, chunks - 1 - t)
        i = c * height + jnp.arange(height, dtype=jnp.int32)
        at = r * block + i
        ok = (at < n) & jnp.where(
            at < lo, lo - at <= g, jnp.where(at < hi, at - lo < width, at - hi < g)
        )
        part = jnp.where(
            (at < lo)[:, None],
            from_left(x, i),
            jnp.where((at >= hi)[:, None], pick(right, at - hi), pick(x, i + shift)),
        )
        part = part / jnp.linalg.norm(part, axis=1, keepdims=True)  # unit rows
        part = jnp.where(ok[:, None], part, 0)
        return lax.dynamic_update_slice_in_dim(x, part, c * height, axis=0)

    rows = fori(0, chunks, place, rows)
    return rows if whole else rows[:block].T
