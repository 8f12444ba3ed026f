"""Pencil- and slab-decomposed 3D FFTs of sharded volumes: ``distla.fft``.

``fftn``, ``ifftn``, ``rfftn`` and ``irfftn`` equal their ``jnp.fft``
namesakes in value and axis order; ``pfft3d`` and ``pifft3d`` are drop-ins
for ``jaxdecomp.fft.pfft3d`` / ``pifft3d`` (transposed ``(Y, Z, X)`` result,
jaxdecomp's sharding specs), on ``Auto`` and ``Explicit`` meshes alike.

Layouts (a 2-axis mesh ``(a, b)``; see ``docs/fft.md``):

- pencils in, ``P(a, b, None)``: the forward transform returns
  ``P(None, a, b)`` after two ``all_to_all``\\ s (``kernels/fft3d.py``,
  slab-pencil plan);
- slabs in, ``P(a, None, None)`` on a 1-axis mesh, or on a 2-axis mesh whose
  second axis has size 1: returns ``P(None, a, None)`` after one;
- a 2-axis mesh whose first axis has size 1 (``P(None, b, None)`` in):
  returns ``P(None, None, b)`` after one.

The inverses accept the forward's output layout and return its input
layout. Inputs in any other layout are re-laid out first by XLA (never by a
gather of the whole volume). Sizes the mesh does not divide are padded inside
and cropped on the way out, and the result comes back in the largest even
layout of the mesh that fits its shape. Inputs on one device fall back to
``jnp.fft``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from distla.kernels.fft3d import (
    round_up,
    slab_forward,
    slab_inverse,
    slab_pencil_forward,
    slab_pencil_inverse,
)

from ._checks import as_array
from ._mesh import (
    Grid,
    constrain,
    fitting_spec,
    grid_of,
    operand_mesh,
    run_on_mesh,
    shard_map,
)

__all__ = ["fftn", "ifftn", "irfftn", "pfft3d", "pifft3d", "rfftn"]

NORMS = (None, "backward", "ortho", "forward")

# Width of the tiles that the transposes move (kernels/transpose.py).
_TILE = 32

_JNP = {
    "fft": jnp.fft.fftn,
    "ifft": jnp.fft.ifftn,
    "rfft": jnp.fft.rfftn,
    "irfft": jnp.fft.irfftn,
}


def fftn(x: jax.typing.ArrayLike, *, norm: str | None = None) -> jax.Array:
    """Distributed 3D FFT, equal in value to ``jnp.fft.fftn(x, norm=norm)``.

    Args:
      x: ``[X, Y, Z]`` volume (any numeric dtype; real and integer inputs are
        cast to complex as ``jnp.fft.fftn`` casts them). Pencils
        ``P(a, b, None)`` on a 2-axis mesh ``(a, b)``, or slabs
        ``P(a, None, None)`` on a 1-axis mesh; any other layout is re-laid
        out to those first.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as in
        ``jnp.fft``.

    Returns:
      ``[X, Y, Z]`` complex array on the same mesh: ``P(None, a, b)`` on a
      2-axis mesh (two ``all_to_all``\\ s; one when an axis has size 1),
      ``P(None, a, None)`` on a 1-axis mesh (one ``all_to_all``); where the
      mesh does not divide the shape, the largest even layout that fits.

    Raises:
      ValueError: ``x`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` is unknown.

    See also:
      ``jnp.fft.fftn``, the one-device equivalent; :func:`ifftn`;
      :func:`pfft3d` for jaxdecomp's transposed output.

    Example:
      >>> import distla, jax.numpy as jnp
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((32, 32, 32), jnp.complex64), mesh)
      >>> y = distla.fft.fftn(x)
      >>> y.shape, y.sharding.spec
      ((32, 32, 32), PartitionSpec(None, 'rows', 'cols'))
    """
    return _public(x, "fftn", "fft", norm=norm)


def ifftn(x: jax.typing.ArrayLike, *, norm: str | None = None) -> jax.Array:
    """Distributed inverse 3D FFT, equal in value to ``jnp.fft.ifftn(x, norm=norm)``.

    Args:
      x: ``[X, Y, Z]`` volume, best in the layout :func:`fftn` returns
        (``P(None, a, b)`` on a 2-axis mesh, ``P(None, a, None)`` on a
        1-axis mesh); any other layout is re-laid out to it first.
      norm: as in ``jnp.fft``.

    Returns:
      ``[X, Y, Z]`` complex array in :func:`fftn`'s input layout:
      ``P(a, b, None)`` (``P(a, None, None)`` on a 1-axis mesh), or the
      largest even layout that fits.

    Raises:
      ValueError: ``x`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` is unknown.

    See also:
      ``jnp.fft.ifftn``; :func:`fftn`.
    """
    return _public(x, "ifftn", "ifft", norm=norm)


def rfftn(x: jax.typing.ArrayLike, *, norm: str | None = None) -> jax.Array:
    """Distributed real-to-complex 3D FFT, equal to ``jnp.fft.rfftn(x, norm=norm)``.

    The first transform is real-to-complex along the contiguous Z axis, so
    every ``all_to_all`` after it moves ``Z//2 + 1`` complex values per line:
    half the bytes of :func:`fftn` of the same volume.

    Args:
      x: ``[X, Y, Z]`` real volume (float32, float64; integer and boolean
        inputs are cast as ``jnp.fft.rfftn`` casts them), laid out as for
        :func:`fftn`.
      norm: as in ``jnp.fft``.

    Returns:
      ``[X, Y, Z//2 + 1]`` complex array: ``P(None, a, b)`` where the mesh
      divides it; otherwise the largest even layout that fits, which for a
      power-of-two Z on a mesh with ``b > 1`` (``Z//2 + 1`` odd) is
      ``P(b, a, None)``, written directly by the second ``all_to_all``.

    Raises:
      ValueError: ``x`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` is unknown.
      TypeError: ``x`` is complex (``jnp.fft.rfftn`` raises ValueError).

    See also:
      ``jnp.fft.rfftn``; :func:`irfftn`.
    """
    return _public(x, "rfftn", "rfft", norm=norm)


def irfftn(
    x: jax.typing.ArrayLike, s: Sequence[int] | None = None, *, norm: str | None = None
) -> jax.Array:
    """Distributed complex-to-real inverse 3D FFT, equal to ``jnp.fft.irfftn(x, s, norm=norm)``.

    Args:
      x: ``[X, Y, Zh]`` half spectrum, best in the layout :func:`rfftn`
        returns; any other layout is re-laid out first.
      s: ``(X', Y', Z')``, the shape of the result, as in ``jnp.fft.irfftn``:
        ``x`` is cropped or zero-padded to ``(X', Y', Z'//2 + 1)`` first.
        Default ``(X, Y, 2 * (Zh - 1))``.
      norm: as in ``jnp.fft``.

    Returns:
      ``[X', Y', Z']`` real array in :func:`rfftn`'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh), or the
      largest even layout that fits.

    Raises:
      ValueError: ``x`` is not 3-D, ``s`` is not three positive lengths, the
        mesh has more than 2 axes, or ``norm`` is unknown.

    See also:
      ``jnp.fft.irfftn``; :func:`rfftn`.
    """
    return _public(x, "irfftn", "irfft", norm=norm, s=s)


def pfft3d(
    x: jax.typing.ArrayLike, norm: str | None = "backward", backend: str = "JAX"
) -> jax.Array:
    """Drop-in for ``jaxdecomp.fft.pfft3d``: ``fftn(x).transpose(1, 2, 0)``.

    Same values, ``(Y, Z, X)`` shape and sharding spec as jaxdecomp 0.3.1's
    pure-JAX backend, also on ``Explicit`` meshes, 1-axis meshes and sizes
    the mesh does not divide (which jaxdecomp rejects).

    Args:
      x: ``[X, Y, Z]`` volume in pencils ``P(a, b)`` on a 2-axis mesh (or
        ``P(a)`` on a 1-axis mesh); other layouts are re-laid out first.
      norm: as in ``jnp.fft`` (jaxdecomp's default ``"backward"``).
      backend: accepted for compatibility (``"JAX"`` or ``"cudecomp"``);
        distla always runs its own kernels.

    Returns:
      ``[Y, Z, X]`` complex array, ``fftn(x)`` transposed. Its spec is
      jaxdecomp's: ``P(a, b)`` on an ``a x b`` mesh with both axes > 1,
      ``P(b, a)`` when ``b`` has size 1 (Z split over ``a``),
      ``P(None, b, a)`` when ``a`` has size 1; ``P(None, a)`` on a 1-axis
      mesh. The largest even layout that fits where the mesh does not
      divide the shape.

    Raises:
      ValueError: ``x`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` or ``backend`` is unknown.

    See also:
      :func:`pifft3d`; :func:`fftn` for the natural order.
    """
    _check_backend(backend, "pfft3d")
    return _public(x, "pfft3d", "fft", norm=norm, order="yzx")


def pifft3d(
    y: jax.typing.ArrayLike, norm: str | None = "backward", backend: str = "JAX"
) -> jax.Array:
    """Drop-in for ``jaxdecomp.fft.pifft3d``: ``ifftn(y.transpose(2, 0, 1))``.

    Args:
      y: ``[Y, Z, X]`` spectrum as :func:`pfft3d` returns it (in its layout;
        other layouts are re-laid out first).
      norm: as in ``jnp.fft``.
      backend: accepted for compatibility, ignored.

    Returns:
      ``[X, Y, Z]`` complex array in :func:`pfft3d`'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh).

    Raises:
      ValueError: ``y`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` or ``backend`` is unknown.
    """
    _check_backend(backend, "pifft3d")
    return _public(y, "pifft3d", "ifft", norm=norm, order="yzx")


# --- validation ---------------------------------------------------------------------


def _check_backend(backend: Any, name: str) -> None:
    if not isinstance(backend, str) or backend.lower() not in ("jax", "cudecomp"):
        raise ValueError(
            f"distla.fft.{name}: backend must be 'JAX' or 'cudecomp' (accepted for "
            f"jaxdecomp compatibility); got {backend!r}"
        )


def _result_dtypes(x: jax.Array, kind: str, what: str) -> tuple[np.dtype, np.dtype]:
    """(dtype the kernel reads, dtype it returns), as ``jnp.fft`` would cast them."""
    real_in = kind == "rfft"
    if real_in and jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(
            f"{what} transforms real input; got dtype {x.dtype}. Use distla.fft.fftn for "
            "complex volumes."
        )
    probe = jax.ShapeDtypeStruct((2, 2, 2), x.dtype)
    out = jax.eval_shape(_JNP[kind], probe).dtype
    if real_in:
        return np.dtype(jnp.finfo(out).dtype), np.dtype(out)
    if kind == "irfft":
        return np.dtype(jnp.result_type(out, jnp.complex64)), np.dtype(out)
    return np.dtype(out), np.dtype(out)


def _check_s(s: Any, shape: tuple[int, ...], what: str) -> tuple[int, int, int]:
    if s is None:
        return (shape[0], shape[1], 2 * (shape[2] - 1))
    try:
        s = tuple(int(n) for n in s)
    except TypeError as e:
        raise ValueError(f"{what}: s must be a sequence of 3 lengths; got {s!r}") from e
    if len(s) != 3 or any(n < 1 for n in s):
        raise ValueError(
            f"{what}: s must be 3 positive lengths (X', Y', Z') for a 3-D input of shape "
            f"{shape}; got s={s}"
        )
    return s


def _public(
    x: Any,
    name: str,
    kind: str,
    *,
    norm: str | None,
    s: Any = None,
    order: str = "xyz",
) -> jax.Array:
    what = f"distla.fft.{name}"
    x = as_array(x, "x", what)
    if x.ndim != 3:
        raise ValueError(
            f"{what} transforms 3-D volumes (X, Y, Z); got x of shape {x.shape} "
            f"({x.ndim}-D). For other ranks use jnp.fft.{_JNP[kind].__name__}."
        )
    if norm not in NORMS:
        raise ValueError(f"{what}: norm must be one of {NORMS}; got {norm!r}")
    if min(x.shape) < 1:
        raise ValueError(f"{what}: x of shape {x.shape} has an empty axis")
    if kind == "irfft":
        s = _check_s(s, x.shape, what)
    in_dtype, _ = _result_dtypes(x, kind, what)
    mesh = operand_mesh(x, names=("x",))
    if mesh is None:
        return _one_device(x.astype(in_dtype), kind, norm, s, order)
    grid_of(mesh, what=what)  # a 1- or 2-axis mesh, or ValueError
    return _transform(x, kind=kind, norm=norm, s=s, order=order, in_dtype=in_dtype)


def _one_device(x, kind, norm, s, order):
    if order == "yzx":
        x = x.transpose(2, 0, 1) if kind == "ifft" else x
        y = _JNP[kind](x, norm=norm)
        return y.transpose(1, 2, 0) if kind == "fft" else y
    if kind == "irfft":
        return jnp.fft.irfftn(x, s=s, norm=norm)
    return _JNP[kind](x, norm=norm)


# --- plans --------------------------------------------------------------------------


def _pad_to(x: jax.Array, shape: Sequence[int]) -> jax.Array:
    """Crop or zero-pad ``x`` at the end of each axis to ``shape``."""
    if tuple(x.shape) == tuple(shape):
        return x
    x = x[tuple(slice(0, min(n, m)) for n, m in zip(x.shape, shape))]
    return jnp.pad(x, [(0, m - n) for n, m in zip(x.shape, shape)])


def _layouts(grid: Grid, kind: str, order: str, shape_in, shape_out):
    """The kernel, and the padded shapes and specs on each side of it.

    Returns ``(kernel, pad_in, spec_in, spec_kernel_out, crop, desired_out)``.
    """
    inverse = kind in ("ifft", "irfft")
    real = kind in ("rfft", "irfft")
    a, b, pa, pb = grid.row, grid.col, grid.pr, grid.pc
    one_axis = b is None
    sizes = shape_out if inverse else shape_in  # the real-space (X, Y, Z)
    xg, yg, zg = sizes
    zt = zg // 2 + 1 if real else zg
    if order == "yzx":  # jaxdecomp's specs, on (Y, Z, X)
        if one_axis:
            yzx = P(None, a, None)
        elif pb == 1:
            yzx = P(b, a, None)
        elif pa == 1:
            yzx = P(None, b, a)
        else:
            yzx = P(a, b, None)
    pencils = P(a, None, None) if one_axis else P(a, b, None)
    natural = P(None, a, None) if one_axis else P(None, a, b)

    if one_axis or pb == 1:  # slab plan over the row axis
        p = pa
        split = 2 if order == "yzx" else 1
        kernel = functools.partial(
            slab_inverse if inverse else slab_forward,
            axis=a,
            sizes=sizes,
            real=real,
            norm=None,  # filled in by _transform
            split=split,
            tile=_TILE,
        )
        slabs = P(a, None, None)
        if split == 1:
            spectrum, spec_k = (xg, round_up(yg, p), zt), P(None, a, None)
            desired = natural
        else:
            spectrum, spec_k = (yg, round_up(zt, p), xg), P(None, a, None)
            desired = yzx
        space = (round_up(xg, p), yg, zg)
        if inverse:
            return kernel, spectrum, spec_k, slabs, (xg, yg, zg), pencils
        crop = (xg, yg, zt) if split == 1 else (yg, zt, xg)
        return kernel, space, slabs, spec_k, crop, desired

    p = pa * pb
    space = (round_up(xg, pa), round_up(yg, pb), zg)
    if order == "yzx":
        layout, spectrum, spec_k = "yzx", (round_up(yg, pa), round_up(zt, p), xg), P(a, b, None)
        crop, desired = (yg, zt, xg), yzx
    else:
        desired = natural
        crop = (xg, yg, zt)
        fit = fitting_spec(crop, grid.mesh, natural)
        if real and pb > 1 and fit == P(b, a, None):
            layout, spectrum, spec_k = "xy-z", (xg, yg, zt), P(b, a, None)
        else:
            layout, spectrum, spec_k = "xyz", (xg, round_up(yg, pa), round_up(zt, p)), natural
    common = dict(row_axis=a, col_axis=b, sizes=sizes, real=real, norm=None, tile=_TILE)
    if inverse:
        kernel = functools.partial(slab_pencil_inverse, inp=layout, **common)
        return kernel, spectrum, spec_k, pencils, (xg, yg, zg), pencils
    kernel = functools.partial(slab_pencil_forward, out=layout, **common)
    return kernel, space, pencils, spec_k, crop, desired


@functools.partial(jax.jit, static_argnames=("kind", "norm", "s", "order", "in_dtype"))
def _transform(x, *, kind, norm, s, order, in_dtype):
    mesh = operand_mesh(x, names=("x",))
    grid = grid_of(mesh, what="distla.fft")
    inverse = kind in ("ifft", "irfft")
    shape = tuple(x.shape)
    if order == "yzx" and inverse:  # pifft3d: (Y, Z, X) in, (X, Y, Z) out
        shape_out = (shape[2], shape[0], shape[1])
    elif kind == "irfft":
        shape_out = s
    else:
        shape_out = shape
    shape_in = shape
    if kind == "irfft":  # jnp.fft.irfftn: crop/zero-pad to (X', Y', Z'//2 + 1) first
        shape_in = (s[0], s[1], s[2] // 2 + 1)
    kernel, pad_in, spec_in, spec_k, crop, desired = _layouts(
        grid, kind, order, shape_in, shape_out
    )
    kernel = functools.partial(kernel, norm=norm)
    out_spec = fitting_spec(crop, mesh, desired)

    def body(x):
        x = x.astype(in_dtype)
        if kind == "irfft":
            x = _pad_to(x, shape_in)
        x = constrain(_pad_to(x, pad_in), spec_in)
        y = shard_map(kernel, in_specs=spec_in, out_specs=spec_k)(x)
        return _pad_to(y, crop)

    return run_on_mesh(body, mesh, out_spec, x)


def model_bytes(shape: Sequence[int], mesh_shape: Sequence[int], *, real: bool = False) -> float:
    """Bytes each device receives in the forward transform's ``all_to_all``\\ s.

    The communication model of ``docs/fft.md`` for a complex64 volume of
    ``shape`` (``real``: the ``rfftn`` of a float32 one) on a mesh of
    ``mesh_shape`` (``(p,)`` or ``(pa, pb)``), for the divisible case: an
    ``all_to_all`` over ``g`` devices of a local block of ``B`` bytes
    receives ``B (g - 1) / g``.
    """
    xg, yg, zg = shape
    zt = zg // 2 + 1 if real else zg
    if len(mesh_shape) == 1 or mesh_shape[1] == 1:
        p = mesh_shape[0]
        block = xg * yg * zt * 8 / p
        return block * (p - 1) / p
    pa, pb = mesh_shape
    p = pa * pb
    zq = round_up(zt, p)
    block = xg * yg * zq * 8 / p
    first = block * (p - 1) / p
    second = block * (pa - 1) / pa
    return first + second if not (real and zt % pb) else first + block * (p - 1) / p
