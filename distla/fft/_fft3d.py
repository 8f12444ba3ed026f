"""The 3-D algorithms of ``distla.fft``: pencil, slab-pencil and slab volumes (private).

A 3-D volume transformed over all three axes runs the tuned kernels of
``kernels/fft3d.py`` (see ``docs/fft.md``); every other call runs the general
route of ``_route.py``. This module picks the 3-D kernel, pads and lays out
the volume around it, and holds the 3-D communication model.
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
    slab_forward,
    slab_inverse,
    slab_pencil_forward,
    slab_pencil_inverse,
)

from .._core.checks import is_traced
from .._core.matrix import pad_to, round_up
from .._core.mesh import Grid, constrain, fitting_spec, run_on_mesh, shard_map
from ._fftnd import tied

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

    Examples:
      >>> import jax, distla
      >>> opts = distla.fft.cpu_compiler_options((256, 256, 256))
      >>> step = jax.jit(distla.fft.fftn, compiler_options=opts)
    """
    devices = jax.device_count() if devices is None else devices
    itemsize = np.result_type(np.dtype(dtype), np.complex64).itemsize
    padded = math.prod(round_up(int(n), devices) for n in shape)
    largest = round_up(itemsize * padded // devices, 2**20)
    return {"xla_multiheap_size_constraint_per_heap": max(_MIN_HEAP, largest)}


def _on_cpu_outside_jit(x: jax.Array) -> bool:
    """A concrete array on CPU devices, no trace running (a jit inside a jit takes no
    compiler options)."""
    sharding = getattr(x, "sharding", None)
    if is_traced(x) or not isinstance(sharding, jax.sharding.NamedSharding):
        return False
    return next(iter(sharding.mesh.devices.flat)).platform == "cpu"


# --- algorithms -----------------------------------------------------------------------


def choose_algorithm(grid: Grid, zt: int, order: str, algorithm: str) -> str:
    """The algorithm a call runs: ``"slab"``, ``"slab-pencil"`` or ``"pencil"``.

    Meshes with one axis, or a second axis of size 1, always run the slab
    algorithm. ``"auto"`` otherwise takes the textbook pencil algorithm for
    jaxdecomp's ``(Y, Z, X)`` order (its last FFT leaves X contiguous) and
    for spectra too short to cut into ``P`` Z-slabs (``Zt < P``), and the
    slab-pencil algorithm for the natural order, which needs no local transpose
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
    chosen = choose_algorithm(grid, zt, order, algorithm)
    common = dict(sizes=sizes, real=real, norm=None, tile=_TILES[chosen])  # norm: see _transform

    if chosen == "slab":  # over the row axis
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
    zq = round_up(zt, pa * pb if chosen == "slab-pencil" else pb)
    if order == "yzx":
        layout, spectrum, spec_k = "yzx", (round_up(yg, pa), zq, xg), P(a, b, None)
        crop, desired = (yg, zt, xg), yzx
    else:
        crop, desired = (xg, yg, zt), natural
        fit = fitting_spec(crop, grid.mesh, natural)
        if chosen == "slab-pencil" and real and pb > 1 and fit == P(b, a, None):
            layout, spectrum, spec_k = "xy-z", (xg, yg, zt), P(b, a, None)
        else:
            layout, spectrum, spec_k = "xyz", (xg, round_up(yg, pa), zq), natural
    if chosen == "pencil":
        fwd, inv = pencil_forward, pencil_inverse
    else:
        fwd, inv = slab_pencil_forward, slab_pencil_inverse
    if inverse:
        kernel = functools.partial(inv, inp=layout, **common)
        return kernel, spectrum, spec_k, pencils, sizes, pencils
    kernel = functools.partial(fwd, out=layout, **common)
    return kernel, space, pencils, spec_k, crop, desired


def _transform_impl(
    x, *, kind, norm, s, order, algorithm, in_dtype, swap_grid, contiguous, batch=None, tie=False
):
    """The jit body of a 3-D algorithm.

    ``s`` is ``jnp.fft``'s (``None``: the input's shape); ``swap_grid`` runs
    the algorithm with the mesh axes' roles exchanged (pencils ``P(b, a, None)``
    stay where they are and come back ``P(None, b, a)``); ``contiguous=False``
    is jaxdecomp's ``transpose_axis_contiguous=False``: ``pfft3d`` returns the
    natural ``(X, Y, Z)`` order (its ``(Y, Z, X)`` algorithm, transposed back).
    ``batch`` (a tuple of mesh axes): ``x`` is ``(B, X, Y, Z)`` with B split
    over those axes, and each device runs the algorithm, on the mesh axes left, for
    each of its members (``jax.vmap`` of the kernel: no exchange along B). ``tie``:
    ``_fftnd.tied(x)`` first (where jax differentiates this body itself).
    """
    if tie:  # under jit(grad) on an Auto mesh: the program keeps x
        x = tied(x)
    mesh = jax.typeof(x).sharding.mesh
    names = tuple(n for n in mesh.axis_names if n not in (batch or ()))
    if len(names) == 1:
        grid = Grid(mesh, names[0], None)
    else:
        grid = Grid(mesh, *(names[::-1] if swap_grid else names))
    inverse = kind in ("ifft", "irfft")
    shape = tuple(x.shape)[1:] if batch else tuple(x.shape)
    if order == "yzx" and inverse and not contiguous:  # (X, Y, Z) in: to jaxdecomp's (Y, Z, X)
        x = x.transpose(1, 2, 0)
        shape = tuple(x.shape)
    if order == "yzx" and inverse:  # pifft3d: (Y, Z, X) in, (X, Y, Z) out (pirfft3d: s out)
        shape_out = s if kind == "irfft" else (shape[2], shape[0], shape[1])
        shape_in = shape
    elif kind == "irfft":  # jnp.fft.irfftn: crop/zero-pad to (X', Y', Z'//2 + 1) first
        shape_out, shape_in = s, (s[0], s[1], s[2] // 2 + 1)
    else:
        shape_out = shape_in = s or shape
    kernel, pad_in, spec_in, spec_k, crop, desired = _layouts(
        grid, kind, order, algorithm, shape_in, shape_out
    )
    kernel = functools.partial(kernel, norm=norm)
    transposed = order == "yzx" and not inverse and not contiguous
    if transposed:
        crop_out, desired = (crop[2], crop[0], crop[1]), P(desired[2], desired[0], desired[1])
    else:
        crop_out = crop
    out_spec = fitting_spec(crop_out, mesh, desired)
    if batch:  # one more leading axis, split over the batch's mesh axes
        lead = (x.shape[0],)
        b = batch[0] if len(batch) == 1 else batch
        kernel = jax.vmap(kernel)
        spec_in, spec_k, out_spec = (P(b, *sp) for sp in (spec_in, spec_k, out_spec))
        shape_in, pad_in, crop = lead + shape_in, lead + pad_in, lead + crop

    def body(x):
        x = x.astype(in_dtype)
        x = pad_to(x, shape_in)
        x = constrain(pad_to(x, pad_in), spec_in)
        y = shard_map(kernel, in_specs=spec_in, out_specs=spec_k)(x)
        y = pad_to(y, crop)
        return y.transpose(2, 0, 1) if transposed else y

    return run_on_mesh(body, mesh, out_spec, x)


_STATIC = (
    *("kind", "norm", "s", "order", "algorithm", "in_dtype"),
    *("swap_grid", "contiguous", "batch", "tie"),
)
_transform = jax.jit(_transform_impl, static_argnames=_STATIC)


def transform(x, *, on_cpu: bool, **static: Any) -> jax.Array:
    """Run a 3-D algorithm; concrete CPU arrays get `cpu_compiler_options`."""
    if not on_cpu:
        return _transform(x, **static)
    s, lead = static.get("s"), x.shape[:1] if static.get("batch") else ()
    vol = x.shape[len(lead) :]
    shape = lead + tuple(max(n, m) for n, m in zip(vol, s or vol))
    mesh = jax.typeof(x).sharding.mesh
    opts = cpu_compiler_options(shape, static["in_dtype"], mesh.size)
    return _transform_with(**opts)(x, **static)


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
    ``Zt`` (``Z//2 + 1`` for ``real``) padded as the algorithm pads it.

    Args:
      shape: ``(X, Y, Z)`` of the real-space volume.
      mesh_shape: ``(p,)`` or ``(pa, pb)``.
      real: ``rfftn`` rather than ``fftn``.
      order: ``"xyz"`` (``fftn``) or ``"yzx"`` (``pfft3d``).
      algorithm: as the transforms take it.
      itemsize: bytes per complex value.

    Returns:
      Bytes per device, as ``distla.cost`` counts them for the transform.

    Examples:
      A 256³ complex64 volume (128 MiB) on a 4 x 2 mesh: 26 MiB per device.

      >>> import distla
      >>> distla.fft.model_bytes((256, 256, 256), (4, 2)) / 2**20
      26.0
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
