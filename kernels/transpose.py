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


def regroup(
    x: jax.Array,
    names: Sequence[str | None],
    view: Sequence[int],
    pack: Sequence[int],
    unpack: Sequence[int],
    out: Sequence[int],
    *,
    peers: int = 1,
) -> jax.Array:
    """One global transpose: pack, :func:`exchange`, unpack.

    ``x`` is viewed as ``view`` and permuted by ``pack`` so that its ``peers``
    leading axes index the receiving device (its linear index over ``names``,
    major axis first); the received chunks, whose leading axes then index the
    sender, are permuted by ``unpack`` and reshaped to ``out``. The two
    permutations are the two local copies of the module docstring.
    """
    chunks = x.reshape(tuple(view)).transpose(tuple(pack))
    shape = chunks.shape
    recv = exchange(chunks.reshape((-1, *shape[peers:])), names).reshape(shape)
    return recv.transpose(tuple(unpack)).reshape(tuple(out))


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
    xl, yl, zp = x.shape
    m = zp // (pa * pb)
    t = fit_tile(m, tile)
    # pack: Z-chunk j*pa + i for device (i, j), moving t-runs -> (pb, pa, xl, m/t, yl, t);
    # all_to_all over (b, a): sender (i', j') sent its pencil; unpack: (yl, t) tiles transposed
    if swap:  # sender (i', j') held X-block j' and Y-block i'
        unpack, out = (3, 5, 0, 2, 1, 4), (m, pb * xl, pa * yl)  # (m/t, t, pb, xl, pa, yl)
    else:
        unpack, out = (3, 5, 1, 2, 0, 4), (m, pa * xl, pb * yl)  # (m/t, t, pa, xl, pb, yl)
    view, pack = (xl, yl, pb, pa, m // t, t), (2, 3, 0, 4, 1, 5)
    return regroup(x, (col_axis, row_axis), view, pack, unpack, out, peers=2)


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
    m, xg, yg = x.shape
    xn, yn = (pb, pa) if swap else (pa, pb)
    xl, yl = xg // xn, yg // yn
    t = fit_tile(m, tile)
    # pack: block for device (i, j) at linear index j*pa + i, (t, yl) tiles transposed
    # -> (pb, pa, xl, m/t, yl, t): with swap X-block j, Y-block i; else X-block i, Y-block j
    pack = (2, 4, 3, 0, 5, 1) if swap else (4, 2, 3, 0, 5, 1)
    # all_to_all over (b, a): sender c held Z-chunk c; unpack moves t-runs
    view, unpack, out = (m // t, t, xn, xl, yn, yl), (2, 4, 0, 1, 3, 5), (xl, yl, pa * pb * m)
    return regroup(x, (col_axis, row_axis), view, pack, unpack, out, peers=2)


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
        # all_to_all over a -> (pa, X, ya/t, m, t): sender k held Z sub-chunk k
        view, pack = (m, xg, pa, ya // t, t), (2, 1, 3, 0, 4)
        unpack, out = (1, 2, 4, 0, 3), (xg, ya, pa * m)
        return regroup(x, (row_axis,), view, pack, unpack, out)
    t = fit_tile(ya, min(tile, 8))  # the unpack transposes (X, t) tiles
    # pack -> (pa, ya/t, m, X, t)
    # all_to_all over a -> (pa, ya/t, m, X, t)
    view, pack = (m, xg, pa, ya // t, t), (2, 3, 0, 1, 4)
    unpack, out = (1, 4, 0, 2, 3), (ya, pa * m, xg)
    return regroup(x, (row_axis,), view, pack, unpack, out)


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
        # all_to_all over a -> (pa, X, ya/t, m, t): sender k held Y-block k
        view, pack = (xg, ya // t, t, pa, m), (3, 0, 1, 4, 2)
        unpack, out = (3, 1, 0, 2, 4), (m, xg, pa * ya)
        return regroup(x, (row_axis,), view, pack, unpack, out)
    ya, zb, xg = x.shape
    m = zb // pa
    t = fit_tile(ya, min(tile, 8))
    # pack -> (pa, ya/t, m, X, t)
    # all_to_all over a -> (pa, ya/t, m, X, t): sender k held Y-block k
    view, pack = (ya // t, t, pa, m, xg), (2, 0, 3, 4, 1)
    unpack, out = (2, 3, 0, 1, 4), (m, xg, pa * ya)
    return regroup(x, (row_axis,), view, pack, unpack, out)


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
        # all_to_all -> (p, run/t, xl, t): sender k held X-block k
        view, pack = (xl, p, run // t, t), (1, 2, 0, 3)
        unpack, out = (1, 3, 0, 2), (yg // p, zg, p * xl)
        return regroup(x, (axis,), view, pack, unpack, out)
    zl = zg // p
    t = fit_tile(zl, tile)
    # pack -> (p, Y, zl/t, xl, t)
    # all_to_all -> (p, Y, zl/t, xl, t): sender k held X-block k
    view, pack = (xl, yg, p, zl // t, t), (2, 1, 3, 0, 4)
    unpack, out = (1, 2, 4, 0, 3), (yg, zl, p * xl)
    return regroup(x, (axis,), view, pack, unpack, out)


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
        # all_to_all -> (p, run/t, xl, t): sender k held Y-block k
        view, pack = (run // t, t, p, xl), (2, 0, 3, 1)
        unpack, out = (2, 0, 1, 3), (xl, p * yl, zg)
        return regroup(x, (axis,), view, pack, unpack, out)
    yg, zl, xg = x.shape
    xl = xg // p
    t = fit_tile(zl, tile)
    # pack -> (p, Y, zl/t, xl, t)
    # all_to_all -> (p, Y, zl/t, xl, t): sender k held Z-block k
    view, pack = (yg, zl // t, t, p, xl), (3, 0, 1, 4, 2)
    unpack, out = (3, 1, 0, 2, 4), (xl, yg, p * zl)
    return regroup(x, (axis,), view, pack, unpack, out)


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
    # all_to_all over b -> (pb, xl, zl/t, yl, t): sender k held Y-block k
    view, pack = (xl, yl, pb, zl // t, t), (2, 0, 3, 1, 4)
    unpack, out = (1, 2, 4, 0, 3), (xl, zl, pb * yl)
    return regroup(x, (col_axis,), view, pack, unpack, out)


def ypencils_to_zpencils(x: jax.Array, *, col_axis: str | None, tile: int = 8) -> jax.Array:
    """Y-pencils ``(X/pa, Zq/pb, Y)`` -> Z-pencils ``(X/pa, Y/pb, Zq)``; ``Y % pb == 0``."""
    pb = axis_size(col_axis)
    xl, zl, yg = x.shape
    yl = yg // pb
    t = fit_tile(zl, tile)
    # pack: Y-block k for device k, (yl, t) tiles transposed -> (pb, xl, zl/t, yl, t)
    # all_to_all over b -> (pb, xl, zl/t, yl, t): sender k held Z-block k
    view, pack = (xl, zl // t, t, pb, yl), (3, 0, 1, 4, 2)
    unpack, out = (1, 3, 0, 2, 4), (xl, yl, pb * zl)
    return regroup(x, (col_axis,), view, pack, unpack, out)


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
    # all_to_all over a -> (pa, yl/t, zl, xl, t): sender k held X-block k
    view, pack = (xl, zl, pa, yl // t, t), (2, 3, 1, 0, 4)
    unpack, out = (1, 4, 2, 0, 3), (yl, zl, pa * xl)
    return regroup(x, (row_axis,), view, pack, unpack, out)


def xpencils_to_ypencils(x: jax.Array, *, row_axis: str | None, tile: int = 8) -> jax.Array:
    """X-pencils ``(Y/pa, Zb, Xp)`` -> Y-pencils ``(Xp/pa, Zb, Y)``; ``Xp % pa == 0``."""
    pa = axis_size(row_axis)
    yl, zl, xg = x.shape
    xl = xg // pa
    t = fit_tile(yl, tile)
    # pack: X-block k for device k, (xl, t) tiles transposed -> (pa, yl/t, zl, xl, t)
    # all_to_all over a -> (pa, yl/t, zl, xl, t): sender k held Y-block k
    view, pack = (yl // t, t, zl, pa, xl), (3, 0, 2, 4, 1)
    unpack, out = (3, 2, 0, 1, 4), (xl, zl, pa * yl)
    return regroup(x, (row_axis,), view, pack, unpack, out)
