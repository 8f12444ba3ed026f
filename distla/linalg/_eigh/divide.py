"""eigh's divide and conquer on QDWH (docs/spectral.md): the subsets of large matrices.

Nakatsukasa & Higham (2013), run by ``eigh`` (``pencil``) for
``subset_by_index`` / ``subset_by_value`` on large concrete matrices, where it
descends only into the halves that hold the wanted eigenvalues
(`partial_eager`; the whole spectrum goes by tridiagonal reduction,
``tridiagonal``).
One divide step on a Hermitian block ``B`` (2D block layout, padded with
singleton blocks that ``start``, the replicated vector of each index's block
start, keeps apart):

1. the block is shifted by ``σ`` (the median of its diagonal) and scaled to
   unit Frobenius norm (`level_prep`);
2. ``U = polar(X)`` by QDWH (``distla.linalg._qdwh.qdwh_eager``): for
   Hermitian ``X``, ``U = sign(X)``, so ``P = (I − U)/2`` projects on the
   eigenvalues below ``σ``; ``r = trace(P)``;
3. a random ``Ω`` gives ``Y = PΩ₁ + (I − P)Ω₂`` (the first ``r`` columns from
   ``range(P)``, the others from its complement); its QR (``distla.linalg.qr``)
   is an orthonormal basis ``Q`` adapted to the split (`split_basis`);
4. each half ``QₖᴴBQₖ`` is its own smaller problem (``_Blocked``: the host
   knows each split point), down to leaves of at most ``L`` rows, each solved
   by ``jnp.linalg.eigh`` on one device (``L² ≤ N²/p`` elements there). A
   level on a block of order ``s`` costs ``O(s³)``.

Names: ``start`` (``[N]`` int32, replicated) block of each index;
``rows`` the row layout ``P((r, c), None)``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from ..._core.matmul import mm
from ..._core.matrix import block_spec, ct, diagonal, eye, on_mesh, put, round_up
from ..._core.mesh import fitting_spec, grid_of
from ..._core.plan import plan_here
from .. import _qr
from .._qdwh import count, qdwh_eager, unit_scaled, unscaled

# a fraction of a block's diagonal spread added to the median shift, so that a
# shift rarely lands on a repeated diagonal value that is an eigenvalue
_NUDGE = 0.0137


def _blocks(start):
    """``(ordinal, size)`` per index for the contiguous blocks that ``start`` names."""
    n = start.shape[0]
    idx = jnp.arange(n, dtype=jnp.int32)
    head = (start == idx).astype(jnp.int32)
    ordinal = jnp.cumsum(head) - 1
    size = jax.ops.segment_sum(jnp.ones(n, jnp.int32), ordinal, num_segments=n)[ordinal]
    return ordinal, size


def _diag(b, spec):
    """Real diagonal of ``b`` as a replicated vector (a masked row reduction)."""
    return put(diagonal(jnp.real(b)), P())


def _same_block(start, spec):
    return put(start[:, None] == start[None, :], spec)


def _shifts(d, start, ordinal, size):
    """Per-index shift: the median of its block's diagonal, nudged into the block's spread."""
    n = d.shape[0]
    order = jnp.lexsort((d, ordinal))  # by block, then by value: block b at [start_b, end_b)
    ds = d[order]
    k = jnp.maximum(size // 2, 1)
    lo = ds[jnp.clip(start + k - 1, 0, n - 1)]
    hi = ds[jnp.clip(start + k, 0, n - 1)]
    first = ds[start]
    last = ds[jnp.clip(start + size - 1, 0, n - 1)]
    mid = jnp.where(size > 1, (lo + hi) / 2, lo)
    sigma = mid + _NUDGE * (last - first)
    return jnp.minimum(sigma, (mid + last) / 2)


def level_prep(b, start, *, spec, leaf):
    """QDWH's input for one divide step: each block larger than ``leaf`` shifted by its
    median diagonal and scaled to unit Frobenius norm; the others the identity."""
    n = b.shape[0]
    dtype = b.dtype
    ordinal, size = _blocks(start)
    active = size > leaf
    same = _same_block(start, spec)
    d = _diag(b, spec)
    sigma = _shifts(d, start, ordinal, size)
    eye_n = eye(n, n, dtype, spec)
    shifted = put(b - eye_n * sigma[:, None].astype(dtype), spec)
    rows2 = put(jnp.sum(jnp.abs(shifted) ** 2, axis=1), P())
    fro2 = jax.ops.segment_sum(rows2, ordinal, num_segments=n)
    scale = jnp.sqrt(fro2)[ordinal]
    scale = jnp.where(scale > 0, scale, 1.0)
    act2 = put(active[:, None] & same, spec)
    return put(jnp.where(act2, shifted / scale[:, None].astype(dtype), eye_n), spec)


def split_basis(lvl, start, u, *, spec, leaf):
    """``(q, new_start)``: the orthonormal basis adapted to every active block's split
    along ``sign(X) = u`` (block diagonal) and the new block starts."""
    n = u.shape[0]
    dtype = u.dtype
    ordinal, size = _blocks(start)
    active = size > leaf
    same = _same_block(start, spec)
    act2 = put(active[:, None] & same, spec)
    eye_n = eye(n, n, dtype, spec)
    proj = put((eye_n - (u + ct(u, spec)) / 2) / 2, spec)  # eigenvalues below the shift
    tr = jax.ops.segment_sum(_diag(proj, spec), ordinal, num_segments=n)[ordinal]
    rank = jnp.clip(jnp.round(tr).astype(jnp.int32), 0, size)
    degenerate = (rank == 0) | (rank == size)  # shift outside: a multiple of I, any split
    rank = jnp.where(degenerate, size // 2, rank)
    pos = jnp.arange(n, dtype=jnp.int32) - start
    first = pos < rank  # columns taken from range(P)
    omega = jax.random.normal(jax.random.fold_in(jax.random.key(0), lvl), (n, n), dtype)
    omega = put(jnp.where(act2, omega, 0), spec)
    sign = jnp.where(first, 1.0, -1.0).astype(dtype)
    keep2 = jnp.where(first, 0.0, 1.0).astype(dtype)
    y = put(omega * keep2[None, :], spec) + mm(proj, put(omega * sign[None, :], spec), spec)
    y = put(jnp.where(act2, y, eye_n), spec)
    q, _ = _qr.qr_2d(y, mode="reduced", call=plan_here(y.dtype))
    q = put(q, spec)
    return q, jnp.where(active & ~first, start + rank, start)


def _sizes(n, mesh):
    """``(N, leaf, max_levels)``: padded order, leaf block size ``K·N/p`` with
    ``K = round(√p) − 1`` (at least 1): leaf windows of ``(K+1)N/p ≈ N/√p`` rows keep
    ``O(N²/p)`` per device and save the levels below ``N/√p``; cap on levels."""
    p = grid_of(mesh, what="distla.linalg.eigh").size
    big = round_up(n, p)
    k = max(1, min(p - 1, round(p**0.5) - 1))
    leaf = k * (big // p)
    return big, leaf, 4 * max(1, (big // leaf).bit_length()) + 8


# ------------------------------------------------ eager: divide and conquer on blocks
# After a split at r, the blocks Q₀ᴴBQ₀ (r x r) and Q₁ᴴBQ₁ ((n−r) x (n−r)) are
# independent problems, each padded to a multiple of a grain (about N/16) so the
# compiled steps of one padded size serve every block of that size. Blocks of
# at most the leaf size L = max(K·N/p, N/√p rounded down to the grain) finish
# with jnp.linalg.eigh on one device each. eigh's subsets take this route from a
# padded order of BLOCKED_MIN (partial_eager below).

BLOCKED_MIN = 256


def _grain(big, p):
    return round_up(max(big // 16, 1), p)


def sub_start(b, size):
    """``start`` for one active block ``[0, size)`` padded with singleton blocks."""
    idx = jnp.arange(b.shape[0], dtype=jnp.int32)
    return jnp.where(idx < size, 0, idx)


def take_columns(q, off, size, *, width, rows, spec):
    """Columns ``[off, off + size)`` of ``q`` as an ``[S, width]`` matrix (zeros after
    ``size``): a local gather in the row layout ``rows`` (no device holds all of ``q``)."""
    s = q.shape[1]
    j = jnp.arange(width, dtype=jnp.int32)
    cols = jnp.take(put(q, rows), jnp.clip(off + j, 0, s - 1), axis=1)
    cols = jnp.where((j < size)[None, :], cols, 0)
    return put(put(cols, rows), spec)


def sub_block(b, qk, *, spec):
    """``qkᴴ b qk`` (Hermitian), the diagonal block that ``qk``'s columns span."""
    bk = mm(ct(qk, spec), mm(b, qk, spec), spec)
    return put((bk + ct(bk, spec)) / 2, spec)


def join(w0, w1, split, size, y0=None, y1=None, *, total, rows, spec):
    """Eigenvalues (padding ``+inf``) and vectors of the two halves in the parent's
    columns ``[0, split)`` and ``[split, size)`` (a local gather in row slabs)."""
    n0, n1 = w0.shape[0], w1.shape[0]
    c = jnp.arange(total, dtype=jnp.int32)
    first = c < split
    second = (c >= split) & (c < size)
    i0 = jnp.clip(c, 0, n0 - 1)
    i1 = jnp.clip(c - split, 0, n1 - 1)
    w = jnp.where(first, w0[i0], jnp.where(second, w1[i1], jnp.asarray(jnp.inf, w0.dtype)))
    if y0 is None:
        return w
    z = jnp.where(
        first[None, :],
        jnp.take(put(y0, rows), i0, axis=1),
        jnp.where(second[None, :], jnp.take(put(y1, rows), i1, axis=1), 0),
    )
    return w, put(put(z, rows), spec)


def times(q, z, *, spec):
    return mm(q, z, spec)


@functools.partial(jax.jit, static_argnames=("vectors",))
def _base_eigh(b, size, *, vectors):
    """``eigh`` of ``b[:size, :size]`` on one device; padding ``+inf`` / zero columns."""
    s = b.shape[0]
    idx = jnp.arange(s, dtype=jnp.int32)
    own = idx < size
    bb = jnp.where(own[:, None] & own[None, :], b, 0)
    bound = jnp.max(jnp.sum(jnp.abs(bb), axis=1))
    sentinel = (2 * bound + 1).astype(jnp.finfo(b.dtype).dtype)
    bb = bb + jnp.diag(jnp.where(own, 0, sentinel).astype(b.dtype))
    real = jnp.finfo(b.dtype).dtype
    if not vectors:
        w = jnp.linalg.eigvalsh(bb)
        return jnp.where(own, w, jnp.asarray(jnp.inf, real))
    w, z = jnp.linalg.eigh(bb, symmetrize_input=True)
    return jnp.where(own, w, jnp.asarray(jnp.inf, real)), jnp.where(own[None, :], z, 0)


def replicated_int(like: jax.Array, value: int) -> jax.Array:
    """``value`` as an int32 scalar replicated on ``like``'s mesh (as the compiled steps
    return their counters, so that a first call shares their program)."""
    return jax.device_put(np.int32(value), jax.sharding.NamedSharding(like.sharding.mesh, P()))


class _Blocked:
    """The compiled steps of the blocked eager eigh for one mesh (cached per shape)."""

    def __init__(self, mesh, big, vectors):
        self.mesh, self.vectors = mesh, vectors
        self.spec = spec = block_spec(mesh)
        g = grid_of(mesh, what="distla.linalg.eigh")
        self.p = g.size
        self.rows = P(tuple(a for a in (g.row, g.col) if a is not None), None)
        k = max(1, min(self.p - 1, round(self.p**0.5) - 1))
        self.grain = _grain(big, self.p)
        # a leaf (padded to the grain) holds at most N²/p elements on its one device
        fits = int(big / self.p**0.5) // self.grain * self.grain
        self.leaf = max(k * (big // self.p), fits)
        self.lvl = 0
        self.start = on_mesh(sub_start, mesh, P())
        self.prep = on_mesh(level_prep, mesh, spec, (("spec", spec), ("leaf", 1)))
        self.basis = on_mesh(split_basis, mesh, (spec, P()), (("spec", spec), ("leaf", 1)))
        self.sub = on_mesh(sub_block, mesh, spec, (("spec", spec),))
        self.times = on_mesh(times, mesh, spec, (("spec", spec),))

    def int(self, like, value):
        return replicated_int(like, value)

    def take(self, q, off, size, width):
        return on_mesh(
            take_columns,
            self.mesh,
            self.spec,
            (("width", width), ("rows", self.rows), ("spec", self.spec)),
        )(q, self.int(q, off), self.int(q, size))

    def join(self, total, *args):
        out = (P(), self.spec) if self.vectors else P()
        return on_mesh(
            join, self.mesh, out, (("total", total), ("rows", self.rows), ("spec", self.spec))
        )(*args)

    def base(self, b, size):
        """A block of at most ``leaf`` rows: gathered on one device (``leaf² ≤ N²/p``)."""
        dev = b.sharding.mesh.devices.flat[self.lvl % self.p]
        self.lvl += 1
        # through the host: a single-device copy, free of the mesh's sharding types (and
        # of a context mesh, which would refuse an operand on one of its devices)
        with jax.set_mesh(None):
            out = _base_eigh(jax.device_put(np.asarray(b), dev), size, vectors=self.vectors)
        count("leaf")
        rep = jax.sharding.NamedSharding(b.sharding.mesh, P())
        if not self.vectors:
            return jax.device_put(out, rep)
        return jax.device_put(out[0], rep), jax.device_put(out[1], b.sharding)

    def divide(self, b, size):
        """One spectral divide of the Hermitian ``b[:size, :size]``: the basis ``q``
        (``[S, S]``) whose first ``r`` columns span the invariant subspace of the
        eigenvalues below the shift and whose next ``size - r`` the rest, ``r``, and
        the shift data ``start`` and QDWH's polar factor ``u`` it came from."""
        start = self.start(b, self.int(b, size))
        u, _ = qdwh_eager(self.prep(b, start), self.mesh, self.spec)
        self.lvl += 1
        q, new_start = self.basis(self.int(b, self.lvl), start, u)
        count("level")
        return q, int(np.asarray(new_start)[size - 1]), start, u

    def solve(self, b, size):
        """``w`` (``[S]``, padding ``+inf``) and, with vectors, ``z`` (``[S, S]``, columns
        from ``size`` on zero) of the Hermitian ``b[:size, :size]`` (``b`` is ``S x S``)."""
        s = b.shape[0]
        if size <= self.leaf:
            return self.base(b, size)
        q, r, _, _ = self.divide(b, size)
        halves = []
        parts = ((0, r), (r, size - r))
        # both halves that divide again share one padded order (one set of compiled
        # steps per level); a leaf block is padded only to the grain
        common = round_up(max(part for _, part in parts), self.grain)
        for off, part in parts:
            width = min(round_up(part, self.grain) if part <= self.leaf else common, s)
            qk = self.take(q, off, part, width)
            out = self.solve(self.sub(b, qk), part)
            halves.append((out, qk))
        (o0, q0), (o1, q1) = halves
        if not self.vectors:
            return self.join(s, o0, o1, self.int(b, r), self.int(b, size))
        return self.join(
            s,
            o0[0],
            o1[0],
            self.int(b, r),
            self.int(b, size),
            self.times(q0, o0[1]),
            self.times(q1, o1[1]),
        )


def blocked_prep(a, *, big):
    n = a.shape[0]
    return jnp.pad(a, ((0, big - n), (0, big - n)))


# ------------------------------------------------- partial: the pruned divide and conquer


def _shift_and_rank(b, start, u):
    """Block 0's shift ``σ`` (as ``level_prep`` chose it) and ``trace((I − sign)/2)``."""
    spec = block_spec(jax.sharding.get_abstract_mesh())
    ordinal, size = _blocks(start)
    d = _diag(b, spec)
    sigma = _shifts(d, start, ordinal, size)[0]
    du = _diag(u, spec)
    below = jnp.sum(jnp.where(ordinal == 0, (1 - du) / 2, 0))
    return sigma, below


def _zeros(x):
    return jnp.zeros_like(x)


class _Pruned(_Blocked):
    """The blocked eager eigh, descending only into the halves with wanted eigenvalues."""

    def __init__(self, mesh, big, vectors, window):
        super().__init__(mesh, big, vectors)
        self.window = window  # (vl, vu] in the scaled units, or None
        self.stats = on_mesh(_shift_and_rank, mesh, (P(), P()))
        self.zeros = on_mesh(_zeros, mesh, self.spec)
        self.tol = 0.0

    def skipped(self, like, width, below):
        """A half not descended into: eigenvalues ``-inf`` (below) or ``+inf``, no vectors."""
        rep = NamedSharding(like.sharding.mesh, P())
        real = jnp.finfo(like.dtype).dtype
        w = jax.device_put(np.full(width, -np.inf if below else np.inf, real), rep)
        return w

    def solve(self, b, size, lo=0, hi=None):
        """As ``_Blocked.solve`` for the eigenvalues ``[lo, hi)`` of ``b[:size, :size]``
        (and those in the value window): the others are ``∓inf`` with zero vectors."""
        hi = size if hi is None else hi
        s = b.shape[0]
        if size <= self.leaf:
            return self.base(b, size)
        q, r, start, u = self.divide(b, size)
        want = [lo < r, hi > r]  # the halves [0, r) and [r, size) hold wanted indices
        if self.window is not None:
            sigma, below = (float(x) for x in self.stats(b, start, u))
            if 0.5 < below < size - 0.5:  # a true split: half 0 below σ, half 1 above
                want[0] = want[0] and self.window[0] < sigma + self.tol
                want[1] = want[1] and self.window[1] >= sigma - self.tol
        parts = ((0, r, lo, min(hi, r)), (r, size - r, max(lo - r, 0), hi - r))
        common = round_up(max(part for _, part, _, _ in parts), self.grain)
        halves = []
        for k, (off, part, plo, phi) in enumerate(parts):
            width = min(round_up(part, self.grain) if part <= self.leaf else common, s)
            qk = self.take(q, off, part, width)
            if want[k]:
                out = self.solve(self.sub(b, qk), part, plo, phi)
                halves.append((out, qk))
            else:
                w = self.skipped(b, width, below=k == 0)
                halves.append(((w, None) if self.vectors else w, qk))
        (o0, q0), (o1, q1) = halves
        if not self.vectors:
            return self.join(s, o0, o1, self.int(b, r), self.int(b, size))
        y0 = self.times(q0, o0[1]) if o0[1] is not None else self.zeros(q0)
        y1 = self.times(q1, o1[1]) if o1[1] is not None else self.zeros(q1)
        return self.join(s, o0[0], o1[0], self.int(b, r), self.int(b, size), y0, y1)


def _pick(w, z=None, idx=None, *, rows):
    """``w[idx]`` and, with ``z``, its columns ``idx`` (a local gather in row slabs)."""
    if z is None:
        return w[idx]
    return w[idx], jnp.take(put(z, rows), idx, axis=1)


def partial_eager(h, *, mesh, sel, vectors):
    """The selected eigenpairs of a concrete Hermitian ``h`` by the pruned recursion.

    Returns ``w`` (``[k]``, ascending, replicated) and, with ``vectors``, ``[n, k]``
    eigenvectors in the largest even 2D block layout of the mesh that fits."""
    spec = block_spec(mesh)
    n = h.shape[0]
    h, s = on_mesh(unit_scaled, mesh, (fitting_spec((n, n), mesh, spec), P()))(h)
    scale = float(s)
    big, _, _ = _sizes(n, mesh)
    window = None
    lo, hi = 0, n
    if sel[0] == "index":
        lo, hi = sel[1], sel[2]
    else:
        window = (sel[1] * scale, sel[2] * scale)
    run = _Pruned(mesh, big, vectors, window)
    real = jnp.finfo(h.dtype).dtype
    run.tol = float(64 * n * jnp.finfo(real).eps)  # ‖h‖ ≤ n after the scaling
    b = on_mesh(blocked_prep, mesh, run.spec, (("big", big),))(h)
    out = run.solve(b, n, lo, hi)
    w = out[0] if vectors else out
    wh = np.asarray(w)
    order = np.argsort(wh, kind="stable")[:n]
    if window is None:
        idx = order[lo:hi]
    else:  # the skipped halves are ±inf: outside any finite window
        vals = wh[order]
        idx = order[(vals > window[0]) & (vals <= window[1])]
    k = int(idx.size)
    if k == 0:
        w0 = jnp.zeros((0,), real)
        return (w0, jnp.zeros((n, 0), h.dtype)) if vectors else w0
    rep = NamedSharding(w.sharding.mesh, P())
    idx = jax.device_put(idx.astype(np.int32), rep)
    rows = run.rows
    if not vectors:
        got = on_mesh(_pick, mesh, P(), (("rows", rows),))(w, None, idx)
        return on_mesh(unscaled, mesh, P())(got, s)
    specs = (P(), fitting_spec((n, k), mesh, spec))
    wk, zk = on_mesh(_pick_rows, mesh, specs, (("rows", rows), ("n", n)))(w, out[1], idx)
    return on_mesh(unscaled, mesh, P())(wk, s), zk


def _pick_rows(w, z, idx, *, rows, n):
    wk, zk = _pick(w, z, idx, rows=rows)
    return wk, zk[:n]
