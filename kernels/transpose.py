"""Global transposes of a 3D volume with ``lax.all_to_all`` (pencils and slabs).

Every function here takes a device's local block and mesh axis names and
returns the device's block of the re-distributed volume, after exactly one
``lax.all_to_all`` (none when the axes it would use have size 1). A mesh has a
row axis ``a`` of size ``pa`` and a column axis ``b`` of size ``pb``;
``P = pa * pb``. The layouts, named by the axis that is whole and contiguous:

- Z-pencils ``(X/pa, Y/pb, Z)``: device ``(i, j)`` holds X-block ``i`` and
  Y-block ``j`` (``P(a, b, None)``).
- Y-pencils ``(X/pa, Z/pb, Y)`` (the textbook middle stage).
- Z-slabs ``(Z/P, X, Y)``: device ``(i, j)`` holds Z-chunk ``j * pa + i``;
  X and Y whole (the order in which the next transpose regroups Z over ``a``).
- X-pencils ``(X, Y/pa, Z/pb)`` (``P(None, a, b)``), or the same blocks in
  the order ``(Y/pa, Z/pb, X)`` that ``jaxdecomp.fft.pfft3d`` returns.
- XY-pencils ``(X/pb, Y/pa, Z)`` (``P(b, a, None)``): Z whole.
- X-slabs ``(X/p, Y, Z)`` and X-minor slabs ``(Y/p, Z, X)`` or
  ``(Y, Z/p, X)`` on a single axis.

How the local copies are arranged. XLA lowers an ``all_to_all`` to one copy
that packs the chunks for each peer, the exchange itself, and one copy that
unpacks what arrived; any change of which axis is contiguous has to ride on
those two copies. A whole-axis transpose done by one copy is four to five
times slower than a plain copy on a CPU (it reads one element per cache line
of a plane that does not stay in cache), so a transpose is split in two:
one side moves runs of ``tile`` contiguous elements (a near-plain copy) and
the other transposes ``tile``-wide tiles that stay in L1. The exchange
between them keeps XLA from fusing the two halves back into one slow copy.
``tile`` is clipped to the largest power of two that divides the axis it
cuts; 1 gives the one-copy transpose.

Chunks of the received block are stacked by the sender's linear index over
the exchanged axes, major axis first (``(b, a)``: ``s = j * pa + i``), as
``lax.all_to_all`` orders a tuple of axis names.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
from jax import lax

from ._axes import axis_size


def fit_tile(n: int, tile: int) -> int:
    """The largest power of two ``<= tile`` that divides ``n`` (at least 1)."""
    t = 1
    while t * 2 <= tile and n % (t * 2) == 0:
        t *= 2
    return t


def live_axes(names: Sequence[str | None]) -> tuple[str, ...]:
    """The mesh axes of ``names`` that exist and have more than one device."""
    return tuple(n for n in names if n is not None and axis_size(n) > 1)


def exchange(chunks: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """``chunks[k]`` goes to the device of linear index ``k`` over ``names``.

    Returns the received chunks stacked by sender (same shape). The identity
    when no axis of ``names`` has more than one device (no collective).
    """
    axes = live_axes(names)
    if not axes:
        return chunks
    return lax.all_to_all(chunks, axes if len(axes) > 1 else axes[0], 0, 0, tiled=False)


# --- Z-pencils <-> Z-slabs: one all_to_all over (col, row), P-way -----------------


def zpencils_to_zslabs(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    swap: bool = False,
    tile: int = 8,
) -> jax.Array:
    """Z-pencils ``(X/pa, Y/pb, Zp)`` -> Z-slabs ``(Zp/P, X, Y)``.

    Args:
      x: local block; ``Zp`` a multiple of ``P``.
      row_axis, col_axis: mesh axes ``a`` (size pa) and ``b`` (size pb).
      swap: the input is XY-pencils ``(X/pb, Y/pa, Zp)`` instead (X split
        over ``b``, Y over ``a``).
      tile: see the module docstring; here runs along the Z-chunk.

    Returns:
      ``(Zp/P, X, Y)``: Z-chunk ``j * pa + i`` on device ``(i, j)``.
    """
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    p = pa * pb
    xl, yl, zp = x.shape
    m = zp // p
    t = fit_tile(m, tile)
    # pack: Z-chunk c for linear index c, moving t-runs of it -> (P, xl, m/t, yl, t)
    chunks = x.reshape(xl, yl, p, m // t, t).transpose(2, 0, 3, 1, 4)
    recv = exchange(chunks, (col_axis, row_axis))
    # all_to_all over (b, a) -> (P, xl, m/t, yl, t): sender s = j*pa + i sent its pencil;
    # unpack: (yl, t) tiles transposed
    recv = recv.reshape(pb, pa, xl, m // t, yl, t)
    if swap:  # sender (i, j) held X-block j and Y-block i
        out = recv.transpose(3, 5, 0, 2, 1, 4)  # (m/t, t, pb, xl, pa, yl)
        return out.reshape(m, pb * xl, pa * yl)
    out = recv.transpose(3, 5, 1, 2, 0, 4)  # (m/t, t, pa, xl, pb, yl)
    return out.reshape(m, pa * xl, pb * yl)


def zslabs_to_zpencils(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    swap: bool = False,
    tile: int = 8,
) -> jax.Array:
    """Z-slabs ``(Zp/P, X, Y)`` -> Z-pencils ``(X/pa, Y/pb, Zp)``; inverse of the above.

    ``X`` must be a multiple of ``pa`` and ``Y`` of ``pb`` (of ``pb`` and
    ``pa`` with ``swap``, which returns XY-pencils ``(X/pb, Y/pa, Zp)``).
    """
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    p = pa * pb
    m, xg, yg = x.shape
    xn, yn = (pb, pa) if swap else (pa, pb)
    xl, yl = xg // xn, yg // yn
    t = fit_tile(m, tile)
    blocks = x.reshape(m // t, t, xn, xl, yn, yl)
    # pack: block for device (i, j) at linear index j*pa + i, (t, yl) tiles transposed
    if swap:  # X-block j, Y-block i
        chunks = blocks.transpose(2, 4, 3, 0, 5, 1)  # (pb, pa, xl, m/t, yl, t)
    else:  # X-block i, Y-block j
        chunks = blocks.transpose(4, 2, 3, 0, 5, 1)  # (pb, pa, xl, m/t, yl, t)
    recv = exchange(chunks.reshape(p, xl, m // t, yl, t), (col_axis, row_axis))
    # all_to_all over (b, a) -> (P, xl, m/t, yl, t): sender c held Z-chunk c; unpack moves t-runs
    return recv.transpose(1, 3, 0, 2, 4).reshape(xl, yl, p * m)


# --- Z-slabs <-> X-pencils: one all_to_all over the row axis, pa-way --------------


def zslabs_to_xpencils(
    x: jax.Array, *, row_axis: str | None, order: str = "xyz", tile: int = 32
) -> jax.Array:
    """Z-slabs ``(m, X, Yq)`` -> X-pencils, regrouping Z-chunks over the row axis.

    Device ``(i, j)`` ends with Y-block ``i`` and the ``pa`` Z-chunks
    ``j*pa .. j*pa + pa - 1``, which is Z-block ``j`` of ``Z/pb``.

    Args:
      x: local Z-slab; ``Yq`` a multiple of ``pa``.
      row_axis: mesh axis ``a`` (None or size 1: a local re-ordering only).
      order: ``"xyz"`` returns ``(X, Yq/pa, pa*m)``; ``"yzx"`` returns
        ``(Yq/pa, pa*m, X)`` (jaxdecomp's order).
      tile: see the module docstring.
    """
    pa = axis_size(row_axis)
    m, xg, yq = x.shape
    ya = yq // pa
    if order == "xyz":
        t = fit_tile(ya, tile)
        # pack: Y-block k for device k, moving t-runs -> (pa, X, ya/t, m, t)
        chunks = x.reshape(m, xg, pa, ya // t, t).transpose(2, 1, 3, 0, 4)
        recv = exchange(chunks, (row_axis,))
        # all_to_all over a -> (pa, X, ya/t, m, t): sender k held Z sub-chunk k
        return recv.transpose(1, 2, 4, 0, 3).reshape(xg, ya, pa * m)
    t = fit_tile(ya, min(tile, 8))  # the unpack transposes (X, t) tiles
    chunks = x.reshape(m, xg, pa, ya // t, t).transpose(2, 3, 0, 1, 4)  # (pa, ya/t, m, X, t)
    recv = exchange(chunks, (row_axis,))
    # all_to_all over a -> (pa, ya/t, m, X, t)
    return recv.transpose(1, 4, 0, 2, 3).reshape(ya, pa * m, xg)


def xpencils_to_zslabs(
    x: jax.Array, *, row_axis: str | None, order: str = "xyz", tile: int = 32
) -> jax.Array:
    """X-pencils -> Z-slabs ``(m, X, Yq)``; inverse of :func:`zslabs_to_xpencils`.

    ``x`` is ``(X, Yq/pa, Zb)`` for ``order="xyz"`` or ``(Yq/pa, Zb, X)`` for
    ``"yzx"``, with ``Zb = pa * m``.
    """
    pa = axis_size(row_axis)
    if order == "xyz":
        xg, ya, zb = x.shape
        m = zb // pa
        t = fit_tile(ya, tile)
        # pack: Z sub-chunk k for device k, (m, t) tiles transposed -> (pa, X, ya/t, m, t)
        chunks = x.reshape(xg, ya // t, t, pa, m).transpose(3, 0, 1, 4, 2)
        recv = exchange(chunks, (row_axis,))
        # all_to_all over a -> (pa, X, ya/t, m, t): sender k held Y-block k
        return recv.transpose(3, 1, 0, 2, 4).reshape(m, xg, pa * ya)
    ya, zb, xg = x.shape
    m = zb // pa
    t = fit_tile(ya, min(tile, 8))
    chunks = x.reshape(ya // t, t, pa, m, xg).transpose(2, 0, 3, 4, 1)  # (pa, ya/t, m, X, t)
    recv = exchange(chunks, (row_axis,))
    # all_to_all over a -> (pa, ya/t, m, X, t): sender k held Y-block k
    return recv.transpose(2, 3, 0, 1, 4).reshape(m, xg, pa * ya)


# --- X-slabs <-> X-minor slabs: one all_to_all over a single axis -----------------


def xslabs_to_xminor(x: jax.Array, *, axis: str | None, split: int, tile: int = 32) -> jax.Array:
    """X-slabs ``(X/p, Y, Z)`` -> X-minor slabs with X whole and contiguous.

    Args:
      x: local block ``(xl, Y, Z)``; the axis named by ``split`` must be a
        multiple of ``p``.
      axis: the mesh axis of size ``p``.
      split: 1 splits Y: returns ``(Y/p, Z, X)``; 2 splits Z: returns
        ``(Y, Z/p, X)``.
      tile: see the module docstring.
    """
    p = axis_size(axis)
    xl, yg, zg = x.shape
    if split == 1:
        run = (yg // p) * zg
        t = fit_tile(run, tile)
        # pack: Y-block k for device k as (run/t, xl, t), moving t-runs
        chunks = x.reshape(xl, p, run // t, t).transpose(1, 2, 0, 3)
        recv = exchange(chunks, (axis,))
        # all_to_all -> (p, run/t, xl, t): sender k held X-block k
        return recv.transpose(1, 3, 0, 2).reshape(yg // p, zg, p * xl)
    zl = zg // p
    t = fit_tile(zl, tile)
    chunks = x.reshape(xl, yg, p, zl // t, t).transpose(2, 1, 3, 0, 4)  # (p, Y, zl/t, xl, t)
    recv = exchange(chunks, (axis,))
    # all_to_all -> (p, Y, zl/t, xl, t): sender k held X-block k
    return recv.transpose(1, 2, 4, 0, 3).reshape(yg, zl, p * xl)


def xminor_to_xslabs(x: jax.Array, *, axis: str | None, split: int, tile: int = 32) -> jax.Array:
    """X-minor slabs -> X-slabs ``(X/p, Y, Z)``; inverse of :func:`xslabs_to_xminor`.

    ``x`` is ``(Y/p, Z, X)`` for ``split=1`` or ``(Y, Z/p, X)`` for
    ``split=2``; ``X`` must be a multiple of ``p``.
    """
    p = axis_size(axis)
    if split == 1:
        yl, zg, xg = x.shape
        xl, run = xg // p, yl * zg
        t = fit_tile(run, tile)
        # pack: X-block k for device k, (xl, t) tiles transposed -> (p, run/t, xl, t)
        chunks = x.reshape(run // t, t, p, xl).transpose(2, 0, 3, 1)
        recv = exchange(chunks, (axis,))
        # all_to_all -> (p, run/t, xl, t): sender k held Y-block k
        return recv.transpose(2, 0, 1, 3).reshape(xl, p * yl, zg)
    yg, zl, xg = x.shape
    xl = xg // p
    t = fit_tile(zl, tile)
    chunks = x.reshape(yg, zl // t, t, p, xl).transpose(3, 0, 1, 4, 2)  # (p, Y, zl/t, xl, t)
    recv = exchange(chunks, (axis,))
    # all_to_all -> (p, Y, zl/t, xl, t): sender k held Z-block k
    return recv.transpose(3, 1, 0, 2, 4).reshape(xl, yg, p * zl)


# --- the textbook pencil transposes: Z-pencils <-> Y-pencils <-> X-pencils ---------


def zpencils_to_ypencils(x: jax.Array, *, col_axis: str | None, tile: int = 8) -> jax.Array:
    """Z-pencils ``(X/pa, Y/pb, Zq)`` -> Y-pencils ``(X/pa, Zq/pb, Y)``: all_to_all over b.

    ``Zq`` must be a multiple of ``pb``. Y comes out whole and contiguous.
    """
    pb = axis_size(col_axis)
    xl, yl, zq = x.shape
    zl = zq // pb
    t = fit_tile(zl, tile)
    # pack: Z-block k for device k, moving t-runs -> (pb, xl, zl/t, yl, t)
    chunks = x.reshape(xl, yl, pb, zl // t, t).transpose(2, 0, 3, 1, 4)
    recv = exchange(chunks, (col_axis,))
    # all_to_all over b -> (pb, xl, zl/t, yl, t): sender k held Y-block k
    return recv.transpose(1, 2, 4, 0, 3).reshape(xl, zl, pb * yl)


def ypencils_to_zpencils(x: jax.Array, *, col_axis: str | None, tile: int = 8) -> jax.Array:
    """Y-pencils ``(X/pa, Zq/pb, Y)`` -> Z-pencils ``(X/pa, Y/pb, Zq)``; ``Y % pb == 0``."""
    pb = axis_size(col_axis)
    xl, zl, yg = x.shape
    yl = yg // pb
    t = fit_tile(zl, tile)
    # pack: Y-block k for device k, (yl, t) tiles transposed -> (pb, xl, zl/t, yl, t)
    chunks = x.reshape(xl, zl // t, t, pb, yl).transpose(3, 0, 1, 4, 2)
    recv = exchange(chunks, (col_axis,))
    # all_to_all over b -> (pb, xl, zl/t, yl, t): sender k held Z-block k
    return recv.transpose(1, 3, 0, 2, 4).reshape(xl, yl, pb * zl)


def ypencils_to_xpencils(x: jax.Array, *, row_axis: str | None, tile: int = 8) -> jax.Array:
    """Y-pencils ``(X/pa, Zb, Yq)`` -> X-pencils ``(Yq/pa, Zb, X)``: all_to_all over a.

    ``Yq`` must be a multiple of ``pa``. X comes out whole and contiguous,
    in jaxdecomp's ``(Y, Z, X)`` order.
    """
    pa = axis_size(row_axis)
    xl, zl, yq = x.shape
    yl = yq // pa
    t = fit_tile(yl, tile)
    # pack: Y-block k for device k, moving t-runs -> (pa, yl/t, zl, xl, t)
    chunks = x.reshape(xl, zl, pa, yl // t, t).transpose(2, 3, 1, 0, 4)
    recv = exchange(chunks, (row_axis,))
    # all_to_all over a -> (pa, yl/t, zl, xl, t): sender k held X-block k
    return recv.transpose(1, 4, 2, 0, 3).reshape(yl, zl, pa * xl)


def xpencils_to_ypencils(x: jax.Array, *, row_axis: str | None, tile: int = 8) -> jax.Array:
    """X-pencils ``(Y/pa, Zb, Xp)`` -> Y-pencils ``(Xp/pa, Zb, Y)``; ``Xp % pa == 0``."""
    pa = axis_size(row_axis)
    yl, zl, xg = x.shape
    xl = xg // pa
    t = fit_tile(yl, tile)
    # pack: X-block k for device k, (xl, t) tiles transposed -> (pa, yl/t, zl, xl, t)
    chunks = x.reshape(yl // t, t, zl, pa, xl).transpose(3, 0, 2, 4, 1)
    recv = exchange(chunks, (row_axis,))
    # all_to_all over a -> (pa, yl/t, zl, xl, t): sender k held Y-block k
    return recv.transpose(3, 2, 0, 1, 4).reshape(xl, zl, pa * yl)
