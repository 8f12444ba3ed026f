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
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from distla.kernels.fft3d import (
    pencil_forward,
    pencil_inverse,
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
ALGORITHMS = ("auto", "slab-pencil", "pencil")

# Width of the tiles that each plan's transposes move (kernels/transpose.py),
# tuned at 256^3 on 4x2 (docs/fft.md).
_TILES = {"slab": 32, "slab-pencil": (8, 32), "pencil": 8}

# XLA:CPU gives each call's temporaries one allocation. glibc maps any block
# over 32 MiB fresh on every call, and the page faults of touching it cost
# about as much as the transform's copies (256^3 complex64 on 8 devices needs
# 32 MiB of temporaries per device). Capping XLA's temporary heaps at the size
# of the largest local block (8 MiB at least) keeps them under that threshold,
# so glibc reuses them. Only distla's own jit applies this; inside a caller's
# jit, pass ``cpu_compiler_options(...)`` to that jit.
_MIN_HEAP = 8 * 2**20


def cpu_compiler_options(
    shape: Sequence[int], dtype: Any = jnp.complex64, devices: int | None = None
) -> dict[str, int]:
    """XLA:CPU ``compiler_options`` for a jit that runs distla FFTs of ``shape``.

    Caps XLA's temporary heaps at the largest local block the transforms of a
    ``shape`` volume (of ``dtype``, spectrum in the matching complex dtype)
    hold on ``devices`` devices (default: all), and at 8 MiB at least; see
    ``docs/fft.md``.

    Example:
      >>> import jax, distla
      >>> opts = distla.fft.cpu_compiler_options((256, 256, 256))
      >>> step = jax.jit(distla.fft.fftn, compiler_options=opts)
    """
    devices = jax.device_count() if devices is None else devices
    itemsize = np.dtype(jnp.result_type(dtype, jnp.complex64)).itemsize
    padded = math.prod(round_up(int(n), devices) for n in shape)
    largest = round_up(itemsize * padded // devices, 2**20)
    return {"xla_multiheap_size_constraint_per_heap": max(_MIN_HEAP, largest)}


_JNP = {
    "fft": jnp.fft.fftn,
    "ifft": jnp.fft.ifftn,
    "rfft": jnp.fft.rfftn,
    "irfft": jnp.fft.irfftn,
}


def fftn(x: jax.typing.ArrayLike, *, norm: str | None = None, algorithm: str = "auto") -> jax.Array:
    """Distributed 3D FFT, equal in value to ``jnp.fft.fftn(x, norm=norm)``.

    Args:
      x: ``[X, Y, Z]`` volume (any numeric dtype; real and integer inputs are
        cast to complex as ``jnp.fft.fftn`` casts them). Pencils
        ``P(a, b, None)`` on a 2-axis mesh ``(a, b)``, or slabs
        ``P(a, None, None)`` on a 1-axis mesh; any other layout is re-laid
        out to those first.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as in
        ``jnp.fft``.
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

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
    return _public(x, "fftn", "fft", norm=norm, algorithm=algorithm)


def ifftn(
    x: jax.typing.ArrayLike, *, norm: str | None = None, algorithm: str = "auto"
) -> jax.Array:
    """Distributed inverse 3D FFT, equal in value to ``jnp.fft.ifftn(x, norm=norm)``.

    Args:
      x: ``[X, Y, Z]`` volume, best in the layout :func:`fftn` returns
        (``P(None, a, b)`` on a 2-axis mesh, ``P(None, a, None)`` on a
        1-axis mesh); any other layout is re-laid out to it first.
      norm: as in ``jnp.fft``.
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

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
    return _public(x, "ifftn", "ifft", norm=norm, algorithm=algorithm)


def rfftn(
    x: jax.typing.ArrayLike, *, norm: str | None = None, algorithm: str = "auto"
) -> jax.Array:
    """Distributed real-to-complex 3D FFT, equal to ``jnp.fft.rfftn(x, norm=norm)``.

    The first transform is real-to-complex along the contiguous Z axis, so
    every ``all_to_all`` after it moves ``Z//2 + 1`` complex values per line:
    half the bytes of :func:`fftn` of the same volume.

    Args:
      x: ``[X, Y, Z]`` real volume (float32, float64; integer and boolean
        inputs are cast as ``jnp.fft.rfftn`` casts them), laid out as for
        :func:`fftn`.
      norm: as in ``jnp.fft``.
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

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
    return _public(x, "rfftn", "rfft", norm=norm, algorithm=algorithm)


def irfftn(
    x: jax.typing.ArrayLike,
    s: Sequence[int] | None = None,
    *,
    norm: str | None = None,
    algorithm: str = "auto",
) -> jax.Array:
    """Distributed complex-to-real inverse 3D FFT, equal to ``jnp.fft.irfftn(x, s, norm=norm)``.

    Args:
      x: ``[X, Y, Zh]`` half spectrum, best in the layout :func:`rfftn`
        returns; any other layout is re-laid out first.
      s: ``(X', Y', Z')``, the shape of the result, as in ``jnp.fft.irfftn``:
        ``x`` is cropped or zero-padded to ``(X', Y', Z'//2 + 1)`` first.
        Default ``(X, Y, 2 * (Zh - 1))``.
      norm: as in ``jnp.fft``.
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

    Returns:
      ``[X', Y', Z']`` real array in :func:`rfftn`'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh), or the
      largest even layout that fits.

    Raises:
      ValueError: ``x`` is not 3-D, ``s`` is not three positive lengths, the
        mesh has more than 2 axes, or ``norm`` or ``algorithm`` is unknown.

    See also:
      ``jnp.fft.irfftn``; :func:`rfftn`.
    """
    return _public(x, "irfftn", "irfft", norm=norm, s=s, algorithm=algorithm)


def pfft3d(
    x: jax.typing.ArrayLike,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    algorithm: str = "auto",
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
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

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
    return _public(x, "pfft3d", "fft", norm=norm, order="yzx", algorithm=algorithm)


def pifft3d(
    y: jax.typing.ArrayLike,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    algorithm: str = "auto",
) -> jax.Array:
    """Drop-in for ``jaxdecomp.fft.pifft3d``: ``ifftn(y.transpose(2, 0, 1))``.

    Args:
      y: ``[Y, Z, X]`` spectrum as :func:`pfft3d` returns it (in its layout;
        other layouts are re-laid out first).
      norm: as in ``jnp.fft``.
      backend: accepted for compatibility, ignored.
      algorithm: ``"auto"``, ``"slab-pencil"`` or ``"pencil"`` (2-axis meshes
        with both axes > 1; see ``docs/fft.md``). Slab meshes ignore it.

    Returns:
      ``[X, Y, Z]`` complex array in :func:`pfft3d`'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh).

    Raises:
      ValueError: ``y`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` or ``backend`` is unknown.
    """
    _check_backend(backend, "pifft3d")
    return _public(y, "pifft3d", "ifft", norm=norm, order="yzx", algorithm=algorithm)


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
        s = (shape[0], shape[1], 2 * (shape[2] - 1))
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
    algorithm: str = "auto",
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
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{what}: algorithm must be one of {ALGORITHMS}; got {algorithm!r}")
    if min(x.shape) < 1:
        raise ValueError(f"{what}: x of shape {x.shape} has an empty axis")
    if kind == "irfft":
        s = _check_s(s, x.shape, what)
    in_dtype, _ = _result_dtypes(x, kind, what)
    mesh = operand_mesh(x, names=("x",))
    if mesh is None:
        return _one_device(x.astype(in_dtype), kind, norm, s, order)
    grid_of(mesh, what=what)  # a 1- or 2-axis mesh, or ValueError
    transform = _transform
    if _on_cpu_outside_jit(x):
        shape = tuple(max(n, m) for n, m in zip(x.shape, s or x.shape))
        transform = _transform_with(**cpu_compiler_options(shape, in_dtype, mesh.size))
    return transform(
        x, kind=kind, norm=norm, s=s, order=order, algorithm=algorithm, in_dtype=in_dtype
    )


def _on_cpu_outside_jit(x: jax.Array) -> bool:
    """A concrete array on CPU devices (a jit inside a jit takes no compiler options)."""
    sharding = getattr(x, "sharding", None)
    if isinstance(x, jax.core.Tracer) or not isinstance(sharding, jax.sharding.NamedSharding):
        return False
    return next(iter(sharding.mesh.devices.flat)).platform == "cpu"


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


def choose_algorithm(grid: Grid, zt: int, order: str, algorithm: str) -> str:
    """The plan a call runs: ``"slab"``, ``"slab-pencil"`` or ``"pencil"``.

    Meshes with one axis, or a second axis of size 1, always run the slab
    plan. ``"auto"`` otherwise takes the textbook pencil plan for
    jaxdecomp's ``(Y, Z, X)`` order (its last FFT leaves X contiguous) and
    for spectra too short to cut into ``P`` Z-slabs (``Zt < P``), and the
    slab-pencil plan for the natural order, which needs no local transpose
    after its last FFT.
    """
    if grid.col is None or grid.pc == 1:
        return "slab"
    if algorithm != "auto":
        return algorithm
    if order == "yzx" or zt < grid.size:
        return "pencil"
    return "slab-pencil"


def _layouts(grid: Grid, kind: str, order: str, algorithm: str, shape_in, shape_out):
    """The kernel, and the padded shapes and specs on each side of it.

    Returns ``(kernel, pad_in, spec_in, spec_kernel_out, crop, desired_out)``:
    the input is cropped/zero-padded to ``pad_in`` and laid out ``spec_in``,
    the kernel returns ``spec_kernel_out``, and its result is cropped to
    ``crop`` and returned in the largest even layout like ``desired_out``.
    """
    inverse = kind in ("ifft", "irfft")
    real = kind in ("rfft", "irfft")
    a, b, pa, pb = grid.row, grid.col, grid.pr, grid.pc
    sizes = shape_out if inverse else shape_in  # the real-space (X, Y, Z)
    xg, yg, zg = sizes
    zt = zg // 2 + 1 if real else zg
    pencils = P(a, None, None) if b is None else P(a, b, None)
    natural = P(None, a, None) if b is None else P(None, a, b)
    if b is None:  # jaxdecomp's specs on (Y, Z, X)
        yzx = P(None, a, None)
    elif pb == 1:
        yzx = P(b, a, None)
    elif pa == 1:
        yzx = P(None, b, a)
    else:
        yzx = P(a, b, None)
    plan = choose_algorithm(grid, zt, order, algorithm)
    common = dict(sizes=sizes, real=real, norm=None, tile=_TILES[plan])  # norm: see _transform

    if plan == "slab":  # over the row axis
        split = 2 if order == "yzx" else 1
        space, slabs = (round_up(xg, pa), yg, zg), P(a, None, None)
        if split == 1:
            spectrum, crop, desired = (xg, round_up(yg, pa), zt), (xg, yg, zt), natural
        else:
            spectrum, crop, desired = (yg, round_up(zt, pa), xg), (yg, zt, xg), yzx
        kernel = functools.partial(
            slab_inverse if inverse else slab_forward, axis=a, split=split, **common
        )
        spec_k = P(None, a, None)
        if inverse:
            return kernel, spectrum, spec_k, slabs, sizes, pencils
        return kernel, space, slabs, spec_k, crop, desired

    space = (round_up(xg, pa), round_up(yg, pb), zg)
    common.update(row_axis=a, col_axis=b)
    zq = round_up(zt, pa * pb if plan == "slab-pencil" else pb)
    if order == "yzx":
        layout, spectrum, spec_k = "yzx", (round_up(yg, pa), zq, xg), P(a, b, None)
        crop, desired = (yg, zt, xg), yzx
    else:
        crop, desired = (xg, yg, zt), natural
        fit = fitting_spec(crop, grid.mesh, natural)
        if plan == "slab-pencil" and real and pb > 1 and fit == P(b, a, None):
            layout, spectrum, spec_k = "xy-z", (xg, yg, zt), P(b, a, None)
        else:
            layout, spectrum, spec_k = "xyz", (xg, round_up(yg, pa), zq), natural
    if plan == "pencil":
        fwd, inv = pencil_forward, pencil_inverse
    else:
        fwd, inv = slab_pencil_forward, slab_pencil_inverse
    if inverse:
        kernel = functools.partial(inv, inp=layout, **common)
        return kernel, spectrum, spec_k, pencils, sizes, pencils
    kernel = functools.partial(fwd, out=layout, **common)
    return kernel, space, pencils, spec_k, crop, desired


def _transform_impl(x, *, kind, norm, s, order, algorithm, in_dtype):
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
        grid, kind, order, algorithm, shape_in, shape_out
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


_STATIC = ("kind", "norm", "s", "order", "algorithm", "in_dtype")
_transform = jax.jit(_transform_impl, static_argnames=_STATIC)


@functools.cache
def _transform_with(**compiler_options: int):
    return jax.jit(_transform_impl, static_argnames=_STATIC, compiler_options=compiler_options)


def model_bytes(
    shape: Sequence[int],
    mesh_shape: Sequence[int],
    *,
    real: bool = False,
    order: str = "xyz",
    algorithm: str = "auto",
    itemsize: int = 8,
) -> float:
    """Bytes each device receives in a forward transform's ``all_to_all``\\ s.

    The communication model of ``docs/fft.md``: an ``all_to_all`` over ``g``
    devices of a local block of ``B`` bytes receives ``B (g - 1) / g``. The
    block is the complex spectrum (``itemsize`` 8 for complex64), its Z axis
    ``Zt`` (``Z//2 + 1`` for ``real``) padded as the plan pads it.

    Args:
      shape: ``(X, Y, Z)`` of the real-space volume.
      mesh_shape: ``(p,)`` or ``(pa, pb)``.
      real: ``rfftn`` rather than ``fftn``.
      order: ``"xyz"`` (``fftn``) or ``"yzx"`` (``pfft3d``).
      algorithm: as the transforms take it.
      itemsize: bytes per complex value.
    """
    xg, yg, zg = shape
    zt = zg // 2 + 1 if real else zg
    pa, pb = (mesh_shape[0], 1) if len(mesh_shape) == 1 else tuple(mesh_shape)
    p = pa * pb
    if pb == 1:  # slab: one exchange over p devices
        return xg * yg * zt * itemsize / p * (p - 1) / p
    if algorithm == "auto":
        algorithm = "pencil" if order == "yzx" or zt < p else "slab-pencil"
    if algorithm == "pencil":
        block = xg * yg * round_up(zt, pb) * itemsize / p
        return block * ((pb - 1) / pb + (pa - 1) / pa)
    block = xg * yg * round_up(zt, p) * itemsize / p
    odd = real and order == "xyz" and zt % pb != 0  # the XY-pencil layout: both P-way
    return block * ((p - 1) / p + ((p - 1) / p if odd else (pa - 1) / pa))
