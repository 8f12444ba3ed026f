"""Hermitian to real tridiagonal by Householder reflections, and its eigenvalues by bisection.

The two halves of LAPACK's ``xHEEVX`` without eigenvectors: ``xHETRD``'s
reduction ``Qᴴ A Q = T`` and ``xSTEBZ``'s bisection on Sturm counts. About
``4n³/3`` flops in all, LAPACK's count (the QDWH divide and conquer of
``distla/linalg/_eigh.py`` does several times that).

**Reduction** (:func:`reduce_columns`). ``A`` is in the 2D block layout (device
``(i, j)`` holds rows ``[i·mloc, (i+1)·mloc)`` and columns
``[j·nloc, (j+1)·nloc)``). Column ``j`` is reduced by ``H = I − τ v vᴴ``
(LAPACK's ``xLARFG``: ``Hᴴ [α; x] = [β; 0]`` with ``β`` real) applied from
both sides, ``A ← Hᴴ A H = A − v wᴴ − w vᴴ`` with ``p = τ A v`` and
``w = p − ½ τ (pᴴ v) v``. As in ``xLATRD`` (Dongarra, Hammarling & Sorensen,
"Block reduction of matrices to condensed forms", 1989) the rank-2 updates of
``nb`` columns are kept as ``V, W`` (``m x nb``, on every device) and applied
to ``A`` at once, one local GEMM per panel; in between, a column of the
updated matrix is ``A[:, j] − V W[j]ᴴ − W V[j]ᴴ`` and ``A v`` is corrected the
same way. A step's communication is one psum of two ``m``-vectors over the
mesh: this device's share of ``A v`` and of the next column (zeros from the
devices that do not hold it). The reflectors, the vectors ``V, W`` and the
tridiagonal ``(d, e)`` are computed on every device alike.

The kernel reduces the first ``steps`` columns of the ``m x m`` matrix it is
given and returns the trailing matrix updated; the caller cuts that matrix
down to its trailing part between calls (a few phases, so that the local
matrix-vector products shrink with the trailing matrix).

**Eigenvalues** (:func:`bisect`). The Sturm count ``#{λ(T) < x}`` is the
number of negative pivots of ``T − x I`` (``q₀ = d₀ − x``,
``qᵢ = dᵢ − x − eᵢ₋₁²/qᵢ₋₁``, a pivot smaller than ``pivmin`` replaced by
``−pivmin``, as ``xLAEBZ``). Each device bisects its own ``k`` of the ``n``
eigenvalues from Gershgorin's interval for ``mantissa bits + 2`` halvings,
to within a few ``eps·‖T‖``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from ._axes import axis_index, axis_size, highest_precision, zero_after


class Local(NamedTuple):
    """Where a device's ``mloc x nloc`` block of an ``m x n`` matrix sits (2D block layout)."""

    row0: jax.Array  # its first global row
    col0: jax.Array  # its first global column
    mloc: int
    nloc: int
    m: int
    n: int
    every: tuple[str, ...]  # the mesh axes, for a psum over all devices


def local(a_blk: jax.Array, row_axis: str | None, col_axis: str | None) -> Local:
    mloc, nloc = a_blk.shape
    return Local(
        jnp.asarray(axis_index(row_axis) * mloc, jnp.int32),
        jnp.asarray(axis_index(col_axis) * nloc, jnp.int32),
        mloc,
        nloc,
        mloc * axis_size(row_axis),
        nloc * axis_size(col_axis),
        tuple(x for x in (row_axis, col_axis) if x is not None),
    )


def spread(piece: jax.Array, start: jax.Array, length: int) -> jax.Array:
    """A ``length``-vector that is ``piece`` from ``start`` and zero elsewhere."""
    return lax.dynamic_update_slice(jnp.zeros((length,), piece.dtype), piece, (start,))


def column_piece(a_blk: jax.Array, j: jax.Array, at: Local) -> jax.Array:
    """This device's rows of global column ``j``, zeros unless it holds that column."""
    jl = jnp.clip(j - at.col0, 0, at.nloc - 1)
    held = (j >= at.col0) & (j < at.col0 + at.nloc)
    return jnp.where(held, lax.dynamic_slice(a_blk, (jnp.int32(0), jl), (at.mloc, 1))[:, 0], 0)


def row_piece(a_blk: jax.Array, j: jax.Array, at: Local) -> jax.Array:
    """This device's columns of global row ``j``, zeros unless it holds that row."""
    jl = jnp.clip(j - at.row0, 0, at.mloc - 1)
    held = (j >= at.row0) & (j < at.row0 + at.mloc)
    return jnp.where(held, lax.dynamic_slice(a_blk, (jl, jnp.int32(0)), (1, at.nloc))[0], 0)


def rank_2k_update(a_blk, left1, right1, left2, right2, at: Local) -> jax.Array:
    """``a − L₁ R₁ᴴ − L₂ R₂ᴴ`` on this device's block (``L``: ``m x nb``, ``R``: ``n x nb``)."""
    zero = jnp.int32(0)
    rows = [lax.dynamic_slice(x, (at.row0, zero), (at.mloc, x.shape[1])) for x in (left1, left2)]
    cols = [lax.dynamic_slice(x, (at.col0, zero), (at.nloc, x.shape[1])) for x in (right1, right2)]
    # one product of rank 2nb: two products held two blocks beside a_blk and the result
    # (the reduction's first phase was eigh's peak)
    rows, cols = jnp.concatenate(rows, axis=1), jnp.concatenate(cols, axis=1)
    return a_blk - rows @ jnp.conj(cols.T)


def reflector(a_j: jax.Array, j: jax.Array, idx: jax.Array):
    """``(v, τ, β)`` with ``Hᴴ a_j[j+1:] = β e₁``, ``H = I − τ v vᴴ``, ``v[j+1] = 1``,
    ``v[:j+1] = 0`` (LAPACK's ``xLARFG``; ``τ = 0`` when nothing is below ``α``)."""
    m = a_j.shape[0]
    alpha = a_j[jnp.minimum(j + 1, m - 1)]
    below = jnp.where(idx > j + 1, a_j, 0)
    sigma = jnp.sum(jnp.real(below * jnp.conj(below)))
    norm = jnp.sqrt(jnp.real(alpha * jnp.conj(alpha)) + sigma)
    beta = jnp.where(jnp.real(alpha) >= 0, -norm, norm)
    trivial = (sigma == 0) & (jnp.imag(alpha) == 0)
    beta_c = beta.astype(a_j.dtype)
    tau = jnp.where(trivial, 0, (beta_c - alpha) / jnp.where(trivial, 1, beta_c))
    scale = jnp.where(trivial, 1, alpha - beta_c)
    v = jnp.where(idx == j + 1, 1, below / scale)
    return v.astype(a_j.dtype), tau.astype(a_j.dtype), jnp.where(trivial, jnp.real(alpha), beta)


def _reflect_column(i, carry, *, k0, a_blk, at: Local, idx, real):
    """Column ``k0 + i`` of a panel: its reflector (``xLARFG``), the next column, and the
    panel's ``V, W`` grown by one column (``xLATRD``'s step)."""
    v_all, w_all, taus, d, e, col = carry
    i = i.astype(jnp.int32)
    j = k0 + i
    m = at.m
    # column j of the matrix with the panel's earlier updates applied
    a_j = col - v_all @ jnp.conj(w_all[j]) - w_all @ jnp.conj(v_all[j])
    v, tau, beta = reflector(a_j, j, idx)
    d = lax.dynamic_update_slice(d, jnp.real(a_j[j])[None], (j,))
    e = lax.dynamic_update_slice(e, beta[None].astype(real), (j,))
    mine = lax.dynamic_slice(v, (at.col0,), (at.nloc,))
    both = lax.psum(
        jnp.stack(
            [
                spread(a_blk @ mine, at.row0, m),
                spread(column_piece(a_blk, j + 1, at), at.row0, m),
            ]
        ),
        at.every,
    )
    av, col = both[0], both[1]
    av = av - v_all @ (jnp.conj(w_all.T) @ v) - w_all @ (jnp.conj(v_all.T) @ v)
    p = tau * av
    w = p - 0.5 * tau * jnp.vdot(p, v) * v
    w = jnp.where(idx > j, w, 0)
    zero = jnp.int32(0)
    v_all = lax.dynamic_update_slice(v_all, v[:, None], (zero, i))
    w_all = lax.dynamic_update_slice(w_all, w[:, None], (zero, i))
    taus = lax.dynamic_update_slice(taus, tau[None], (i,))
    return v_all, w_all, taus, d, e, col


def times_two_panels(acc, v_all, taus, *, k, last, at: Local, axis: str | None):
    """Accumulate panel ``k``'s reflectors (``v_all``: ``m x nb``, ``taus``) into
    ``acc = (blk, V₂, T₂)`` and apply panels ``k − 1`` and ``k`` to ``blk`` at once, one
    block reflector of ``2nb`` columns (:func:`times_reflectors`), after every second
    panel and after the ``last``: reading ``blk``'s local block is the cost, so half as
    many reads. ``at``: where ``blk``'s columns lie (they index ``v_all``'s rows)."""
    blk, v_two, t_two = acc
    nb = taus.shape[0]
    half = (k % 2).astype(jnp.int32)
    v_two = lax.dynamic_update_slice(
        jnp.where(half == 0, 0, v_two), v_all, (jnp.int32(0), half * nb)
    )
    t_two = lax.dynamic_update_slice(jnp.where(half == 0, 0, t_two), taus, (half * nb,))
    blk = lax.cond(
        (half == 1) | last,
        lambda b: times_reflectors(b, v_two, t_two, at, axis),
        lambda b: b,
        blk,
    )
    return blk, v_two, t_two


def _reduce_panel(k, carry, *, nb, panels, at: Local, idx, real, col_axis):
    """Panel ``k``: its ``nb`` columns reflected, then the deferred rank-``2nb`` update."""
    a_blk, q, d, e = carry
    k0 = (k * nb).astype(jnp.int32)
    col = lax.psum(spread(column_piece(a_blk, k0, at), at.row0, at.m), at.every)
    empty = jnp.zeros((at.m, nb), a_blk.dtype)
    step = functools.partial(_reflect_column, k0=k0, a_blk=a_blk, at=at, idx=idx, real=real)
    v_all, w_all, taus, d, e, _ = lax.fori_loop(
        0, nb, step, (empty, empty, jnp.zeros((nb,), a_blk.dtype), d, e, col)
    )
    # the deferred rank-2nb update, local: A ← A − V Wᴴ − W Vᴴ
    a_blk = rank_2k_update(a_blk, v_all, w_all, w_all, v_all, at)
    if q is not None:
        q = times_two_panels(q, v_all, taus, k=k, last=k == panels - 1, at=at, axis=col_axis)
    return a_blk, q, d, e


@highest_precision
def reduce_columns(
    a_blk: jax.Array,
    q_blk: jax.Array | None = None,
    *,
    steps: int,
    nb: int,
    row_axis: str | None,
    col_axis: str | None,
) -> tuple[jax.Array, ...]:
    """Reduce the first ``steps`` columns of the Hermitian ``m x m`` matrix held as ``a_blk``.

    Args:
      a_blk: this device's ``mloc x nloc`` block of the ``m x m`` matrix
        (``m = mloc·pr = nloc·pc``), both triangles.
      q_blk: optional, this device's block of an ``N x m`` matrix ``Q``
        (rows over ``row_axis``, columns laid out as ``a_blk``'s): returned
        times the reflectors, ``Q H₀ H₁ ⋯`` (the columns of ``Q`` that the
        reductions touch are those of the trailing matrix).
      steps: columns to reduce, a multiple of ``nb``, at most ``m``.
      nb: the panel width (columns per deferred update).

    Returns:
      ``(a_blk, d, e)``, or ``(a_blk, q_blk, d, e)`` with ``q_blk``: the block
      of the trailing matrix after the reductions (rows and columns
      ``>= steps`` are the ones to carry on with), and the real ``d[:steps]``
      (diagonal of ``T``) and ``e[:steps]`` (``e[i] = T[i+1, i]``), the same
      on every device.
    """
    at = local(a_blk, row_axis, col_axis)
    m = at.m
    assert at.n == m and steps % nb == 0 and steps <= m, (a_blk.shape, m, at.n, steps, nb)
    dtype = a_blk.dtype
    real = jnp.finfo(dtype).dtype
    idx = jnp.arange(m, dtype=jnp.int32)
    panels = steps // nb
    panel = functools.partial(
        _reduce_panel, nb=nb, panels=panels, at=at, idx=idx, real=real, col_axis=col_axis
    )
    d = jnp.zeros((steps,), real)
    e = jnp.zeros((steps,), real)
    q = (
        None
        if q_blk is None
        # zeros made from a_blk's value: XLA makes a broadcast of a constant at the
        # program's start and holds it through every earlier phase (eigh's peak)
        else (
            q_blk,
            jnp.full((m, 2 * nb), zero_after(a_blk, a_blk.dtype)),
            jnp.zeros((2 * nb,), dtype),
        )
    )
    a_blk, q, d, e = lax.fori_loop(0, panels, panel, (a_blk, q, d, e))
    return (a_blk, d, e) if q is None else (a_blk, q[0], d, e)


@highest_precision
def block_reflector(v_all: jax.Array, taus: jax.Array) -> jax.Array:
    """Upper-triangular ``T`` with ``H₀ H₁ ⋯ H_{nb−1} = I − V T Vᴴ`` (LAPACK's ``xLARFT``,
    forward, columnwise): ``T[i, i] = τᵢ``, ``T[:i, i] = −τᵢ T[:i, :i] V[:, :i]ᴴ vᵢ``."""
    return block_reflector_of_gram(jnp.conj(v_all.T) @ v_all, taus)


def block_reflector_of_gram(gram: jax.Array, taus: jax.Array) -> jax.Array:
    """:func:`block_reflector`'s ``T`` from the reflectors' Gram matrix ``Vᴴ V``."""
    nb = taus.shape[0]
    pos = jnp.arange(nb)

    def column(i, t):
        above = jnp.where(pos < i, gram[:, i], 0)  # V[:, :i]ᴴ vᵢ, zero from row i on
        c = jnp.where(pos == i, taus[i], -taus[i] * (t @ above))
        return lax.dynamic_update_slice(t, c[:, None], (jnp.int32(0), i.astype(jnp.int32)))

    return lax.fori_loop(0, nb, column, jnp.zeros((nb, nb), gram.dtype))


@highest_precision
def times_reflectors(q_blk, v_all, taus, at: Local, col_axis: str | None) -> jax.Array:
    """``Q (I − V T Vᴴ)`` on this device's block of ``Q`` (LAPACK's ``xLARFB``): one
    local GEMM, a psum of ``Q V`` over the column axis, another local GEMM."""
    v_loc = lax.dynamic_slice(v_all, (at.col0, jnp.int32(0)), (at.nloc, v_all.shape[1]))
    qv = q_blk @ v_loc
    if col_axis is not None:
        qv = lax.psum(qv, col_axis)
    return q_blk - (qv @ block_reflector(v_all, taus)) @ jnp.conj(v_loc.T)


def sturm_count(d: jax.Array, e2: jax.Array, pivmin: jax.Array, x: jax.Array) -> jax.Array:
    """``#{λ(T) < x}`` for each shift in ``x`` (``T`` with diagonal ``d``, ``e2 = e²``)."""

    def pivot(q):
        return jnp.where(jnp.abs(q) < pivmin, -pivmin, q)

    q = pivot(d[0] - x)
    count = (q < 0).astype(jnp.int32)

    def body(i, carry):
        q, count = carry
        q = pivot(d[i] - x - e2[i - 1] / q)
        return q, count + (q < 0).astype(jnp.int32)

    _, count = lax.fori_loop(1, d.shape[0], body, (q, count), unroll=8)
    return count


def bisect(
    d: jax.Array, e: jax.Array, *, k: int, axis_names: tuple[str | None, ...], first: int = 0
) -> jax.Array:
    """This device's ``k`` eigenvalues of the real symmetric tridiagonal ``T``, ascending.

    Args:
      d: the ``n`` diagonal entries, the same on every device.
      e: ``n`` entries: the ``n - 1`` off-diagonal ones and one that is not
        read, the same on every device.
      k: eigenvalues per device; device ``r`` (row-major over ``axis_names``)
        computes those of index ``first + [r·k, (r+1)·k)`` (clamped to ``n - 1``).
      axis_names: the mesh axes the devices are laid on (``None``: size 1).
      first: the index of the first eigenvalue wanted (0: the smallest).

    Returns:
      ``[k]`` eigenvalues.
    """
    n = d.shape[0]
    finfo = jnp.finfo(d.dtype)
    rank = jnp.int32(0)
    for name in axis_names:
        rank = rank * axis_size(name) + axis_index(name)
    target = jnp.minimum(first + rank * k + jnp.arange(k, dtype=jnp.int32), n - 1)
    e = jnp.where(jnp.arange(n) < n - 1, e, 0)
    e2 = e * e
    ae = jnp.abs(e)
    radius = ae + jnp.pad(ae[:-1], (1, 0))  # Gershgorin: |e_{i-1}| + |e_i|
    lo, hi = jnp.min(d - radius), jnp.max(d + radius)
    t_norm = jnp.maximum(jnp.abs(lo), jnp.abs(hi))
    pivmin = finfo.tiny * jnp.maximum(1, jnp.max(e2))
    slack = 2.1 * n * finfo.eps * t_norm + 4 * pivmin
    lo = jnp.full((k,), lo - slack)
    hi = jnp.full((k,), hi + slack)

    def halve(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        below = sturm_count(d, e2, pivmin, mid) <= target  # λ_target >= mid
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = lax.fori_loop(0, finfo.nmant + 2, halve, (lo, hi))
    return 0.5 * (lo + hi)
