"""Real 3D FFT whose half spectrum keeps its Z axis whole: ``prfft3d``'s odd ``Zt``.

``rfftn`` of a power-of-two Z leaves ``Zt = Z//2 + 1`` frequencies, which no
even split divides; the spectrum then keeps ``Zt`` whole and all ``P = pa *
pb`` devices split Y (``y_split``) or X. Per-device bodies for ``shard_map``
on a mesh ``(a, b)`` (``pa x pb``; ``b`` may be ``None`` or of size 1, and
so may ``a``: slabs), every FFT along the contiguous last axis, each
``all_to_all`` carrying the transpose the next FFT needs in its pack and
unpack copies. Y-split, forward::

    Z-pencils (Xp/pa, Yp/pb, Z)   rfft along Z
      -> (Xp/pa, Zt, Yp/pb), all_to_all over b: X cut pb-way, Y gathered
    (Xp/P, Zt, Y)                 fft along Y
      all_to_all over (a, b): Y cut P-way, X gathered -> (X, Zt, Yq/P)
    (Yq/P, Zt, X)                 fft along X: jaxdecomp's (Y, Z, X) order

X-split exchanges the roles of X and Y (``a`` first, then ``(b, a)``) and
ends ``(Xq/P, Zt, Y)`` after its FFT along Y. The inverses run the same steps
backwards. Sizes the mesh does not divide arrive padded with zeros at the
end of the split axes and are cropped before the axis is transformed.
"""

from __future__ import annotations

import jax
from jax import lax

from ._axes import round_up
from .fft3d import _pad_axis
from .local_fft import fft_last
from .transpose import live_axes


def _exchange(x: jax.Array, names, split: int, concat: int) -> jax.Array:
    """One tiled ``all_to_all`` over the live axes of ``names`` (none: ``x`` itself)."""
    live = live_axes(names)
    if not live:
        return x
    return lax.all_to_all(x, live if len(live) > 1 else live[0], split, concat, tiled=True)


def _size(names) -> int:
    n = 1
    for name in live_axes(names):
        n *= lax.axis_size(name)
    return n


def half_spectrum_forward(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    norm: str | None,
    y_split: bool,
    order: str,
) -> jax.Array:
    """Forward real 3D FFT of Z-pencils, the half spectrum's Z whole.

    Args:
      x: ``(Xp/pa, Yp/pb, Z)`` real Z-pencil (``Xp`` a multiple of ``P`` when
        ``y_split``, else of ``pa``; ``Yp`` of ``pb``, else of ``P``).
      row_axis, col_axis: mesh axes ``a`` and ``b`` (``None`` for none).
      sizes: the true ``(X, Y, Z)``.
      norm: ``jnp.fft`` normalisation, axis by axis.
      y_split: the devices split Y in the result (else X).
      order: ``"yzx"`` or ``"xyz"``, the result's axis order.

    Returns:
      ``y_split``: ``(Yq/P, Zt, X)`` (``"yzx"``) or ``(X, Yq/P, Zt)``;
      else ``(Y, Zt, Xq/P)`` or ``(Xq/P, Y, Zt)``, ``Yq``/``Xq`` padded to
      multiples of ``P`` (for the caller to crop).
    """
    xg, yg, _ = sizes
    a, b = row_axis, col_axis
    every = (a, b) if y_split else (b, a)
    parts = _size(every)
    f = fft_last(x, "rfft", norm)  # (Xp/pa, Yp/pb, Zt)
    if y_split:
        # all_to_all over b -> (Xp/P, Zt, Y): X cut pb-way, Y gathered
        g = _exchange(f.transpose(0, 2, 1), (b,), 0, 2)[..., :yg]
        g = _pad_axis(fft_last(g, "fft", norm), 2, round_up(yg, parts))
        # all_to_all over (a, b) -> (X, Zt, Yq/P): Y cut P-way, X gathered
        h = _exchange(g, every, 2, 0)[:xg].transpose(2, 1, 0)  # (Yq/P, Zt, X)
        h = fft_last(h, "fft", norm)
        return h if order == "yzx" else h.transpose(2, 0, 1)
    # all_to_all over a -> (Yp/P, Zt, X): Y cut pa-way, X gathered
    g = _exchange(f.transpose(1, 2, 0), (a,), 0, 2)[..., :xg]
    g = _pad_axis(fft_last(g, "fft", norm), 2, round_up(xg, parts))
    # all_to_all over (b, a) -> (Y, Zt, Xq/P): X cut P-way, Y gathered
    h = _exchange(g, every, 2, 0)[:yg].transpose(2, 1, 0)  # (Xq/P, Zt, Y)
    h = fft_last(h, "fft", norm)
    return h.transpose(2, 1, 0) if order == "yzx" else h.transpose(0, 2, 1)


def half_spectrum_inverse(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    norm: str | None,
    y_split: bool,
    order: str,
) -> jax.Array:
    """Inverse of :func:`half_spectrum_forward`.

    Args:
      x: the local block as the forward returns it for ``y_split`` and
        ``order``.
      sizes: the true ``(X, Y, Z)`` of the result (``Z`` gives the
        complex-to-real transform's length).

    Returns:
      ``(Xp/pa, Yp/pb, Z)`` real Z-pencil (padded rows zero, for the caller
      to crop): ``Xp`` a multiple of ``P`` (``y_split``) or ``pa``, ``Yp`` of
      ``pb`` or ``P``.
    """
    xg, yg, zg = sizes
    a, b = row_axis, col_axis
    every = (a, b) if y_split else (b, a)
    parts = _size(every)
    if y_split:
        h = x if order == "yzx" else x.transpose(1, 2, 0)  # (Yq/P, Zt, X)
        h = _pad_axis(fft_last(h, "ifft", norm), 2, round_up(xg, parts)).transpose(2, 1, 0)
        # all_to_all over (a, b) -> (Xq/P, Zt, Y): X cut P-way, Y gathered
        g = fft_last(_exchange(h, every, 0, 2)[..., :yg], "ifft", norm)
        g = _pad_axis(g, 2, round_up(yg, _size((b,))))
        # all_to_all over b -> (Xq/pa, Zt, Yp/pb): Y cut pb-way, X's b-chunks gathered
        f = _exchange(g, (b,), 2, 0).transpose(0, 2, 1)  # (Xq/pa, Yp/pb, Zt)
        return fft_last(f, "irfft", norm, zg)
    h = x.transpose(2, 1, 0) if order == "yzx" else x.transpose(0, 2, 1)  # (Xq/P, Zt, Y)
    h = _pad_axis(fft_last(h, "ifft", norm), 2, round_up(yg, parts))
    # all_to_all over (b, a) -> (X, Zt, Yq/P): Y cut P-way, X gathered
    g = _exchange(h, every, 2, 0)[:xg].transpose(2, 1, 0)  # (Yq/P, Zt, X)
    g = _pad_axis(fft_last(g, "ifft", norm), 2, round_up(xg, _size((a,))))
    # all_to_all over a -> (Yq/pb, Zt, Xp/pa): X cut pa-way, Y's a-chunks gathered
    f = _exchange(g, (a,), 2, 0).transpose(2, 0, 1)  # (Xp/pa, Yq/pb, Zt)
    return fft_last(f, "irfft", norm, zg)
