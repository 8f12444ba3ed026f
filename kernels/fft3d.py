"""Distributed 3D FFT bodies: local 1D/2D transforms between global transposes.

Three plans, each a per-device body for ``shard_map`` (see ``transpose.py`` for
the layouts and for how each transpose arranges its local copies):

**Slab-pencil** (2-axis mesh ``(a, b)``, ``P = pa*pb`` devices; also used
with ``pa = 1``, where the second exchange is a local transpose)::

    Z-pencils (X/pa, Y/pb, Z)   1D FFT along Z (contiguous)
      -> all_to_all over (b, a), P-way
    Z-slabs   (Z/P, X, Y)       2D FFT over (X, Y) (trailing, one XLA op)
      -> all_to_all over a, pa-way
    X-pencils (X, Y/pa, Z/pb)   or (Y/pa, Z/pb, X) for jaxdecomp's order

Two all_to_alls, like the textbook pencil FFT (Z-, Y-, X-pencils), but every
local transform runs on trailing axes and the last exchange writes the
natural ``(X, Y, Z)`` order directly, so no local transpose is left after
the last FFT. It moves ``(P-1)/P + (pa-1)/pa`` of the local block per device
instead of the textbook ``(pb-1)/pb + (pa-1)/pa``, and needs the padded Z
(or Z/2+1) length to split ``P`` ways.

**Pencil**, the textbook plan (three 1D FFT passes)::

    Z-pencils (X/pa, Y/pb, Z)   1D FFT along Z
      -> all_to_all over b, pb-way
    Y-pencils (X/pa, Z/pb, Y)   1D FFT along Y
      -> all_to_all over a, pa-way
    X-pencils (Y/pa, Z/pb, X)   1D FFT along X; jaxdecomp's order, or a local
                                transpose to (X, Y/pa, Z/pb)

**Slab** (one mesh axis of ``p`` devices)::

    X-slabs (X/p, Y, Z)          2D FFT over (Y, Z)
      -> all_to_all, p-way
    (Y/p, Z, X) or (Y, Z/p, X)   1D FFT along X (contiguous)
    -> (X, Y/p, Z) by a local transpose (natural order only)

Real transforms (``real=True``) start with a real-to-complex transform along
the contiguous Z axis (and end with the complex-to-real one), so every
exchange moves ``Z/2+1`` complex values per line instead of ``Z``: half the
bytes of the complex transform.

Sizes the mesh does not divide arrive padded with zeros at the end of the
split axes; each axis is padded only where it is split for an exchange and
cropped before it is transformed, so no transform ever sees padding along
its own axis. ``sizes`` gives the true lengths for those crops.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ._axes import axis_size, round_up
from .local_fft import fft_last
from .transpose import (
    xminor_to_xslabs,
    xpencils_to_ypencils,
    xpencils_to_zslabs,
    xslabs_to_xminor,
    ypencils_to_xpencils,
    ypencils_to_zpencils,
    zpencils_to_ypencils,
    zpencils_to_zslabs,
    zslabs_to_xpencils,
    zslabs_to_zpencils,
)


def _pad_axis(x: jax.Array, axis: int, length: int) -> jax.Array:
    """Zero-pad (at the end) or crop ``x`` along ``axis`` to ``length``."""
    n = x.shape[axis]
    if n == length:
        return x
    if n > length:
        return jax.lax.slice_in_dim(x, 0, length, axis=axis)
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, length - n)
    return jnp.pad(x, widths)


def _fit(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    for axis, length in enumerate(shape):
        x = _pad_axis(x, axis, length)
    return x


def slab_pencil_forward(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    out: str,
    tile: tuple[int, int],
) -> jax.Array:
    """Forward 3D FFT of Z-pencils (slab-pencil algorithm).

    Args:
      x: ``(Xp/pa, Yp/pb, Z)`` local Z-pencil (``X, Y`` padded to multiples
        of ``pa, pb``); real when ``real``.
      row_axis, col_axis: mesh axes ``a`` (size pa) and ``b`` (size pb).
      sizes: the true ``(X, Y, Z)``.
      real: real-to-complex along Z (``rfftn``): the Z length becomes
        ``Zt = Z//2 + 1``.
      norm: ``jnp.fft`` normalisation, applied axis by axis.
      out: ``"xyz"``: ``(X, Yq/pa, Zq/pb)`` X-pencils (``Yq``, ``Zq`` padded
        to multiples of ``pa`` and ``P``); ``"yzx"``: the same blocks as
        ``(Yq/pa, Zq/pb, X)``; ``"xy-z"``: ``(Xq/pb, Yq/pa, Zt)`` XY-pencils
        (X padded to a multiple of ``pb``).
      tile: transpose tiles (``transpose.py``) of the first and the second
        exchange.

    Returns:
      The local block of the transform in the layout ``out`` names.
    """
    xg, yg, _ = sizes
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    p = pa * pb
    f = fft_last(x, "rfft" if real else "fft", norm)
    zt = f.shape[-1]
    f = _pad_axis(f, 2, round_up(zt, p))
    axes = dict(row_axis=row_axis, col_axis=col_axis)
    s = zpencils_to_zslabs(f, tile=tile[0], **axes)  # (Zq/P, Xp, Yp) Z-slabs
    s = jnp.fft.fftn(s[:, :xg, :yg], axes=(1, 2), norm=norm)
    if out == "xy-z":
        s = _fit(s, (s.shape[0], round_up(xg, pb), round_up(yg, pa)))
        return zslabs_to_zpencils(s, swap=True, tile=tile[0], **axes)[
            ..., :zt
        ]  # (Xq/pb, Yq/pa, Zt)
    s = _pad_axis(s, 2, round_up(yg, pa))
    return zslabs_to_xpencils(s, row_axis=row_axis, order=out, tile=tile[1])


def slab_pencil_inverse(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    inp: str,
    tile: tuple[int, int],
) -> jax.Array:
    """Inverse of :func:`slab_pencil_forward`.

    Args:
      x: local block in the layout ``inp`` names (see ``out`` above), with
        the spectrum's Z length ``Zt`` (``Z//2 + 1`` when ``real``).
      sizes: the true ``(X, Y, Z)`` of the result.
      real: complex-to-real along Z last (``irfftn``) with output length Z.

    Returns:
      ``(Xp/pa, Yp/pb, Z)`` local Z-pencil of the result; the padded rows
      (``X``, ``Y`` rounded up to multiples of ``pa``, ``pb``) are zeros, for
      the caller to crop.
    """
    xg, yg, zg = sizes
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    p = pa * pb
    zt = zg // 2 + 1 if real else zg
    axes = dict(row_axis=row_axis, col_axis=col_axis)
    if inp == "xy-z":
        s = zpencils_to_zslabs(_pad_axis(x, 2, round_up(zt, p)), swap=True, tile=tile[0], **axes)
    else:
        s = xpencils_to_zslabs(x, row_axis=row_axis, order=inp, tile=tile[1])
    s = jnp.fft.ifftn(s[:, :xg, :yg], axes=(1, 2), norm=norm)  # (Zq/P, X, Y)
    s = _fit(s, (s.shape[0], round_up(xg, pa), round_up(yg, pb)))
    f = zslabs_to_zpencils(s, tile=tile[0], **axes)[..., :zt]  # (Xp/pa, Yp/pb, Zt)
    if real:
        return fft_last(f, "irfft", norm, zg)
    return fft_last(f, "ifft", norm)


def slab_forward(
    x: jax.Array,
    *,
    axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    split: int,
    tile: int,
) -> jax.Array:
    """Forward 3D FFT of X-slabs (slab algorithm).

    Args:
      x: ``(Xp/p, Y, Z)`` local X-slab (X padded to a multiple of ``p``).
      axis: the mesh axis of size ``p``.
      sizes: the true ``(X, Y, Z)``.
      real: real-to-complex along Z (``Zt = Z//2 + 1``).
      split: 1 returns ``(X, Yq/p, Zt)`` (Y split, natural order); 2 returns
        ``(Y, Zq/p, X)`` (Z split, jaxdecomp's order).
    """
    xg, yg, _ = sizes
    p = axis_size(axis)
    f = jnp.fft.rfft2(x, axes=(1, 2), norm=norm) if real else jnp.fft.fft2(x, norm=norm)
    f = _pad_axis(f, split, round_up(f.shape[split], p))
    u = xslabs_to_xminor(f, axis=axis, split=split, tile=tile)[..., :xg]
    u = fft_last(u, "fft", norm)  # X-minor: (Yq/p, Zt, X) or (Y, Zq/p, X)
    return u.transpose(2, 0, 1) if split == 1 else u


def slab_inverse(
    x: jax.Array,
    *,
    axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    split: int,
    tile: int,
) -> jax.Array:
    """Inverse of :func:`slab_forward`: returns the ``(Xp/p, Y, Z)`` X-slab."""
    xg, yg, zg = sizes
    p = axis_size(axis)
    zt = zg // 2 + 1 if real else zg
    u = x.transpose(1, 2, 0) if split == 1 else x  # X-minor
    u = _pad_axis(fft_last(u, "ifft", norm), 2, round_up(xg, p))
    f = xminor_to_xslabs(u, axis=axis, split=split, tile=tile)[:, :yg, :zt]
    if real:
        return jnp.fft.irfft2(f, s=(yg, zg), axes=(1, 2), norm=norm)
    return jnp.fft.ifft2(f, norm=norm)


def pencil_forward(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    out: str,
    tile: int,
    transform: Callable[[jax.Array], jax.Array] | None = None,
) -> jax.Array:
    """Forward 3D FFT of Z-pencils, textbook pencil algorithm (three 1D FFT passes).

    Args:
      x: ``(Xp/pa, Yp/pb, Z)`` local Z-pencil.
      sizes, real, norm: as for :func:`slab_pencil_forward`.
      tile: transpose tile of both exchanges (``transpose.py``).
      out: ``"yzx"``: ``(Yq/pa, Zq/pb, X)`` (jaxdecomp's order, X contiguous
        as the last FFT leaves it); ``"xyz"``: ``(X, Yq/pa, Zq/pb)`` after a
        local transpose. ``Zq`` is ``Zt`` padded to a multiple of ``pb``.
      transform: another separable transform's 1D pass along the last axis,
        run in place of each FFT (the DCTs of ``dct.py``; ``real`` False).
    """
    xg, yg, _ = sizes
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    f = transform(x) if transform else fft_last(x, "rfft" if real else "fft", norm)
    f = _pad_axis(f, 2, round_up(f.shape[-1], pb))
    g = zpencils_to_ypencils(f, col_axis=col_axis, tile=tile)[..., :yg]  # (Xp/pa, Zq/pb, Y)
    g = _pad_axis(transform(g) if transform else fft_last(g, "fft", norm), 2, round_up(yg, pa))
    h = ypencils_to_xpencils(g, row_axis=row_axis, tile=tile)[..., :xg]  # (Yq/pa, Zq/pb, X)
    h = transform(h) if transform else fft_last(h, "fft", norm)
    return h if out == "yzx" else h.transpose(2, 0, 1)


def pencil_inverse(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    real: bool,
    norm: str | None,
    inp: str,
    tile: int,
    transform: Callable[[jax.Array], jax.Array] | None = None,
) -> jax.Array:
    """Inverse of :func:`pencil_forward`: returns the ``(Xp/pa, Yp/pb, Z)`` Z-pencil.

    ``transform``: as for :func:`pencil_forward` (the inverse's 1D pass).
    """
    xg, yg, zg = sizes
    pa, pb = axis_size(row_axis), axis_size(col_axis)
    zt = zg // 2 + 1 if real else zg
    last = transform or (lambda v: fft_last(v, "ifft", norm))
    h = x if inp == "yzx" else x.transpose(1, 2, 0)  # (Yq/pa, Zq/pb, X)
    h = _pad_axis(last(h), 2, round_up(xg, pa))
    g = xpencils_to_ypencils(h, row_axis=row_axis, tile=tile)[..., :yg]  # (Xp/pa, Zq/pb, Y)
    g = _pad_axis(last(g), 2, round_up(yg, pb))
    f = ypencils_to_zpencils(g, col_axis=col_axis, tile=tile)[..., :zt]  # (Xp/pa, Yp/pb, Zt)
    if real:
        return fft_last(f, "irfft", norm, zg)
    return last(f)
