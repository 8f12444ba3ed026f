"""Real 3-D transforms in jaxdecomp's order: ``prfft3d`` and ``pirfft3d`` (private).

``prfft3d(x)`` is the non-redundant half of ``pfft3d(x)``: the real-to-complex
transform along Z runs first, so the spectrum keeps ``Zt = Z//2 + 1`` of Z's
frequencies (``pfft3d(x)[:, :Zt, :]`` in the contiguous ``(Y, Z, X)`` order,
``[:, :, :Zt]`` in the natural one) and every exchange after it moves
``Zt`` complex values per line instead of ``Z``: about half of ``pfft3d``'s
bytes.

Layout. Where the mesh divides ``Zt`` as ``pfft3d``'s layout splits Z, the
spectrum is in that layout, from the same 3-D kernels (``_fft3d``). A
power-of-two Z gives an odd ``Zt``, which no split of an even mesh axis
divides; jax allows no uneven layout, so the spectrum then keeps ``Zt``
whole and all the devices split Y or X instead, whichever the smaller first
exchange reaches (``kernels/half_spectrum.py``; natural axes ``(X, Y, Z)``,
input pencils ``P(a, b, None)``, ``pa x pb`` mesh, ``P = pa * pb``):

- Y-split (``pb <= pa``, and slabs ``P(a, None, None)``)::

      (X/pa, Y/pb, Z)     rfft along Z
        all_to_all over b, pb-way       (X/P, Y, Zt)     fft along Y
        all_to_all over (a, b), P-way   (X, Y/P, Zt)     fft along X

  result ``P((a, b), None, None)`` in the contiguous order ``(Y, Zt, X)``.
- X-split (``pb > pa``, and slabs ``P(None, b, None)``)::

      (X/pa, Y/pb, Z)     rfft along Z
        all_to_all over a, pa-way       (X, Y/P, Zt)     fft along X
        all_to_all over (b, a), P-way   (X/P, Y, Zt)     fft along Y

  result ``P(None, None, (b, a))`` in the contiguous order.

Each moves ``(p_first - 1)/p_first + (P - 1)/P`` of a local block of the
half spectrum (``p_first = min(pa, pb)``), against ``pfft3d``'s
``(pb - 1)/pb + (pa - 1)/pa`` of the full one; slabs move ``(p - 1)/p`` of
the half spectrum. ``pirfft3d`` runs the kernel backwards (the 3-D kernels
from ``pfft3d``'s layout) and returns ``P(a, b, None)``. Concrete CPU arrays
get ``cpu_compiler_options``, as the 3-D algorithms do.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from distla.kernels.half_spectrum import half_spectrum_forward, half_spectrum_inverse

from .._core import route
from .._core.checks import as_array
from .._core.matrix import pad_to, round_up
from .._core.mesh import constrain, fitting_spec, grid_of, run_on_mesh, shard_map
from .._core.plan import Plan
from .._core.specs import layout_spec
from . import _fft3d, _fftnd
from ._transforms import NORMS, _check_backend, _contiguous, _operand


@route.public
def prfft3d(
    x: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Real-to-complex [`pfft3d`][distla.fft.pfft3d]: the non-redundant half of its spectrum.

    jaxdecomp 0.3.1 declares ``jaxdecomp.fft.prfft3d`` and raises "Not
    implemented"; this is the transform its name and ``pfft3d``'s layout
    define: ``rfftn(x)`` in ``pfft3d``'s axis order, the Z axis cut to
    ``Z//2 + 1`` frequencies (``pfft3d(x)[:, :Z//2 + 1, :]`` when
    contiguous). It moves about half of ``pfft3d``'s bytes.

    Args:
      x: real ``[X, Y, Z]`` volume in pencils ``P(a, b, None)`` on a 2-axis
        mesh (or ``P(a, None, None)`` on a 1-axis mesh); other layouts are
        re-laid out first. Integers and bools are cast as ``jnp.fft.rfftn``
        casts them.
      norm: as in ``jnp.fft`` (jaxdecomp's default ``"backward"``).
      backend: accepted for compatibility (``"JAX"`` or ``"cudecomp"``).
      transpose_axis_contiguous: ``True`` returns ``(Y, Z//2 + 1, X)``,
        ``False`` the natural ``(X, Y, Z//2 + 1)``; ``None`` reads
        ``distla.jaxdecomp.config``, as [`pfft3d`][distla.fft.pfft3d].
      a: jaxdecomp's keyword for ``x``; give one of the two.

    Returns:
      Complex spectrum (``complex64`` for ``float32``). Layout: ``pfft3d``'s
      where the mesh divides ``Z//2 + 1`` as that layout splits Z; otherwise
      (any power-of-two ``Z``) ``Z//2 + 1`` stays whole and the devices
      split Y (``P((a, b), None, None)`` when contiguous; ``pb <= pa`` and
      1-axis meshes) or X (``P(None, None, (b, a))``; ``pb > pa``), as
      ``docs/fft.md`` explains. On one device, ``jnp.fft.rfftn``'s.

    Raises:
      TypeError: ``x`` is complex (also a ``ValueError``, as jnp raises).
      ValueError: ``x`` is not 3-D, ``Z`` is 0, the mesh has more than 2
        axes, or ``norm`` or ``backend`` is unknown.

    See also:
      ``jnp.fft.rfftn``; [`pirfft3d`][distla.fft.pirfft3d]; [`pfft3d`][distla.fft.pfft3d].

    Example:
      >>> import numpy as np, distla
      >>> mesh = distla.make_mesh((4, 2), ("z", "y"))
      >>> x = distla.shard(np.ones((16, 16, 16), np.float32), mesh)
      >>> k = distla.fft.prfft3d(x)
      >>> k.shape, k.sharding.spec
      ((16, 9, 16), P(('z', 'y'), None, None))
    """
    what = "distla.fft.prfft3d"
    _check_backend(backend, "prfft3d")
    x = as_array(_operand(x, a, ("x", "a"), "prfft3d"), "x", what)
    _check(x, norm, what)
    contiguous = _contiguous(transpose_axis_contiguous)
    in_dtype, out_dtype = _fftnd.result_dtypes(x, "rfft", what)
    xg, yg, zg = x.shape
    if zg == 0:
        raise ValueError(f"{what}: Invalid number of FFT data points (0) along Z: x {x.shape}.")
    zt = zg // 2 + 1
    if x.size == 0:
        return jnp.zeros((yg, zt, xg) if contiguous else (xg, yg, zt), out_dtype)
    if x.dtype != in_dtype:  # (an eager astype to the same dtype still copies)
        x = x.astype(in_dtype)
    return route.call(PRFFT3D, x, norm=norm, contiguous=contiguous, in_dtype=in_dtype)


def _forward_on(plan: Plan, x, *, norm, contiguous, in_dtype):
    """On ``plan``'s mesh: pfft3d's 3-D kernels where its layout fits, else the half
    spectrum's own program (`_half_on`)."""
    grid = grid_of(plan.mesh, what=PRFFT3D.name)
    gx, gy = _groups(grid)
    if _divides(x.shape[2] // 2 + 1, grid):  # pfft3d's layout fits: its 3-D kernels
        return _fft3d.transform(
            x, on_cpu=_fft3d._on_cpu_outside_jit(x), kind="rfft", norm=norm, s=None,
            order="yzx", algorithm="auto", in_dtype=in_dtype, swap_grid=False,
            contiguous=contiguous, tie=True,
        )  # fmt: skip
    y_split = _y_split(gx, gy, dict(plan.mesh.shape))
    order = "yzx" if contiguous else "xyz"
    return _half_on(x)(
        x, sizes=tuple(x.shape), norm=norm, in_dtype=in_dtype, y_split=y_split, order=order,
        inverse=False,
    )  # fmt: skip


def _forward_here(x, *, norm, contiguous, in_dtype):
    del in_dtype
    return _one_device(x, norm=norm, contiguous=contiguous)


PRFFT3D = route.Op(
    "distla.fft.prfft3d",
    operands=("x",),
    one_device=_forward_here,
    distributed=_forward_on,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=route.never,
    own_placement=True,
)


@route.public
def pirfft3d(
    y: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    s: tuple[int, int, int] | None = None,
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Inverse of [`prfft3d`][distla.fft.prfft3d]: the real volume from the half spectrum.

    Args:
      y: the half spectrum as [`prfft3d`][distla.fft.prfft3d] returns it (``(Y, Zt, X)``
        when contiguous, else ``(X, Y, Zt)``), in its layout (others are
        re-laid out first).
      norm: as for [`prfft3d`][distla.fft.prfft3d].
      backend: as for [`prfft3d`][distla.fft.prfft3d].
      s: the real volume's ``(X, Y, Z)``; default ``Z = 2 (Zt - 1)``, as
        ``jnp.fft.irfftn`` (an odd Z needs ``s``). ``X`` and ``Y`` must be
        ``y``'s.
      transpose_axis_contiguous: as for [`prfft3d`][distla.fft.prfft3d].
      a: jaxdecomp's keyword for ``y``; give one of the two.

    Returns:
      Real ``[X, Y, Z]`` volume in [`prfft3d`][distla.fft.prfft3d]'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh).

    Raises:
      ValueError: ``y`` is not 3-D, ``s`` does not match it, the mesh has
        more than 2 axes, or ``norm`` or ``backend`` is unknown.

    See also:
      ``jnp.fft.irfftn``; [`prfft3d`][distla.fft.prfft3d].

    Examples:
      >>> import numpy as np, distla
      >>> mesh = distla.make_mesh((4, 2), ("z", "y"))
      >>> x = distla.shard(np.arange(16**3, dtype=np.float32).reshape(16, 16, 16), mesh)
      >>> back = distla.fft.pirfft3d(distla.fft.prfft3d(x))
      >>> back.sharding.spec, bool(np.allclose(back, x, rtol=1e-4))
      (P('z', 'y', None), True)
    """
    what = "distla.fft.pirfft3d"
    _check_backend(backend, "pirfft3d")
    y = as_array(_operand(y, a, ("y", "a"), "pirfft3d"), "y", what)
    _check(y, norm, what)
    contiguous = _contiguous(transpose_axis_contiguous)
    in_dtype, out_dtype = _fftnd.result_dtypes(y, "irfft", what)
    yg, zt, xg = y.shape if contiguous else (y.shape[1], y.shape[2], y.shape[0])
    if s is None:
        s = (xg, yg, 2 * (zt - 1))
    s = tuple(int(n) for n in s)
    if len(s) != 3 or s[:2] != (xg, yg) or s[2] // 2 + 1 != zt or s[2] < 1:
        raise ValueError(
            f"{what}: s must be the real volume's (X, Y, Z), with (X, Y) = {(xg, yg)} and "
            f"Z//2 + 1 = {zt} as y of shape {y.shape} has them; got s={s}."
        )
    if y.size == 0:
        return jnp.zeros(s, out_dtype)
    if y.dtype != in_dtype:
        y = y.astype(in_dtype)
    return route.call(PIRFFT3D, y, norm=norm, s=s, contiguous=contiguous, in_dtype=in_dtype)


def _inverse_on(plan: Plan, y, *, norm, s, contiguous, in_dtype):
    """On ``plan``'s mesh, as `_forward_on` the other way round."""
    grid = grid_of(plan.mesh, what=PIRFFT3D.name)
    gx, gy = _groups(grid)
    if _divides(s[2] // 2 + 1, grid):
        return _fft3d.transform(
            y, on_cpu=_fft3d._on_cpu_outside_jit(y), kind="irfft", norm=norm, s=s,
            order="yzx", algorithm="auto", in_dtype=in_dtype, swap_grid=False,
            contiguous=contiguous, tie=True,
        )  # fmt: skip
    y_split = _y_split(gx, gy, dict(plan.mesh.shape))
    order = "yzx" if contiguous else "xyz"
    return _half_on(y, s)(
        y, sizes=s, norm=norm, in_dtype=in_dtype, y_split=y_split, order=order, inverse=True
    )


def _inverse_here(y, *, norm, s, contiguous, in_dtype):
    del in_dtype
    return _one_device_inverse(y, norm=norm, s=s, contiguous=contiguous)


PIRFFT3D = route.Op(
    "distla.fft.pirfft3d",
    operands=("y",),
    one_device=_inverse_here,
    distributed=_inverse_on,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=route.never,
    own_placement=True,
)


def _check(x, norm, what) -> None:
    if x.ndim != 3:
        raise ValueError(
            f"{what} transforms 3-D volumes; got shape {x.shape} ({x.ndim}-D). For other "
            "ranks use distla.fft.rfftn / irfftn with axes=."
        )
    if norm not in NORMS:
        raise ValueError(f"{what}: norm must be one of {NORMS}; got {norm!r}")


def _groups(grid) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The mesh axes of pencils ``P(a, b, None)`` that split X and Y (size 1 dropped)."""
    gx = (grid.row,) if grid.pr > 1 else ()
    gy = (grid.col,) if grid.pc > 1 else ()
    return gx, gy


def _divides(zt: int, grid) -> bool:
    """Whether ``pfft3d``'s layout fits a spectrum ``Zt`` long: it splits Z over b (over
    a when b has size 1)."""
    return zt % (grid.pc if grid.pc > 1 else grid.pr) == 0


def _y_split(gx, gy, sizes) -> bool:
    """The Y-split route (else the X-split one): its first exchange is the smaller."""
    size = {g: math.prod(sizes[n] for n in g) for g in (gx, gy)}
    return bool(gx) and (not gy or size[gy] <= size[gx])


def _size(group, sizes) -> int:
    return math.prod(sizes[n] for n in group)


_HALF_STATIC = ("sizes", "norm", "in_dtype", "y_split", "order", "inverse")


def _half_on(x, shape=None):
    """`_half` compiled for ``x``: with ``cpu_compiler_options`` for a concrete CPU
    array outside a trace (as the 3-D algorithms are), else as it is."""
    if not _fft3d._on_cpu_outside_jit(x):
        return _half
    mesh = jax.typeof(x).sharding.mesh
    opts = _fft3d.cpu_compiler_options(shape or x.shape, x.dtype, mesh.size)
    return _half_with(**opts)


@functools.cache
def _half_with(**compiler_options: int):
    return jax.jit(_half_impl, static_argnames=_HALF_STATIC, compiler_options=compiler_options)


def _half_impl(x, *, sizes, norm, in_dtype, y_split, order, inverse):
    """``kernels/half_spectrum.py`` between pencils and the half spectrum's layout
    (`_y_split` chooses which of X and Y the devices split), padded inside."""
    x = _fftnd.tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    grid = grid_of(mesh, what="distla.fft.prfft3d")
    # every mesh axis, size-1 ones included (shard_map tracks them as the input's)
    names = tuple(n for n in (grid.row, grid.col) if n is not None)
    every = names if y_split else names[::-1]
    parts = _size(every, dict(mesh.shape))
    xg, yg, zg = sizes
    zt = zg // 2 + 1
    pencils = P(grid.row, grid.col, None)
    entry = layout_spec((every,))[0]
    if y_split:
        pad_real = (round_up(xg, parts), round_up(yg, grid.pc), zg)
        half, spec = ((round_up(yg, parts), zt, xg), P(entry, None, None))
    else:
        pad_real = (round_up(xg, grid.pr), round_up(yg, parts), zg)
        half, spec = ((yg, zt, round_up(xg, parts)), P(None, None, entry))
    true_half = (yg, zt, xg)
    if order == "xyz":  # the same blocks in the natural order
        half, true_half = (half[2], half[0], half[1]), (xg, yg, zt)
        spec = P(spec[2], spec[0], spec[1])
    kw = dict(row_axis=grid.row, col_axis=grid.col, sizes=sizes, norm=norm, y_split=y_split)
    kernel = functools.partial(
        half_spectrum_inverse if inverse else half_spectrum_forward, order=order, **kw
    )
    if inverse:
        shape_in, pad_in, spec_in, crop, spec_out = true_half, half, spec, sizes, pencils
    else:
        shape_in, pad_in, spec_in, crop, spec_out = sizes, pad_real, pencils, true_half, spec

    def body(x):
        x = constrain(pad_to(pad_to(x.astype(in_dtype), shape_in), pad_in), spec_in)
        y = shard_map(kernel, in_specs=spec_in, out_specs=spec_out)(x)
        return pad_to(y, crop)

    return run_on_mesh(body, mesh, fitting_spec(crop, mesh, spec_out), x)


_half = jax.jit(_half_impl, static_argnames=_HALF_STATIC)


@functools.partial(jax.jit, static_argnames=("norm", "contiguous"))
def _one_device(x, *, norm, contiguous):
    y = jnp.fft.rfftn(x, norm=norm)
    return y.transpose(1, 2, 0) if contiguous else y


@functools.partial(jax.jit, static_argnames=("norm", "s", "contiguous"))
def _one_device_inverse(y, *, norm, s, contiguous):
    y = y.transpose(2, 0, 1) if contiguous else y
    # s only where it is not the default (jnp pads by zero whenever s is given)
    default = (*y.shape[:2], 2 * (y.shape[2] - 1))
    return jnp.fft.irfftn(y, s=None if tuple(s) == default else s, norm=norm)
