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
whole and puts the mesh axes that would have split it on the axis the fewest
bytes reach, by one of the routes below (``kernels/fftnd.py``'s steps, run
by ``_fftnd.transform``; natural axes ``(X, Y, Z)``, input pencils
``P(a, b, None)``, ``pa x pb`` mesh, ``P = pa * pb``):

- Y-split (``pb <= pa``, and slabs ``P(a, None, None)``)::

      (X/pa, Y/pb, Z)     rfft along Z
        swap Y -> X over b, pb-way      (X/P, Y, Zt)     fft along Y
        swap X -> Y over (a, b), P-way  (X, Y/P, Zt)     fft along X

  result ``P((a, b), None, None)`` in the contiguous order ``(Y, Zt, X)``.
- X-split (``pb > pa``, and slabs ``P(None, b, None)``)::

      (X/pa, Y/pb, Z)     rfft along Z
        swap X -> Y over a, pa-way      (X, Y/P, Zt)     fft along X
        swap Y -> X over (b, a), P-way  (X/P, Y, Zt)     fft along Y

  result ``P(None, None, (b, a))`` in the contiguous order.

Each moves ``(p_first - 1)/p_first + (P - 1)/P`` of a local block of the
half spectrum (``p_first = min(pa, pb)``), against ``pfft3d``'s
``(pb - 1)/pb + (pa - 1)/pa`` of the full one; slabs move ``(p - 1)/p`` of
the half spectrum. ``pirfft3d`` runs the route backwards from either layout
(and the 3-D kernels from ``pfft3d``'s) and returns ``P(a, b, None)``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from distla.kernels.fftnd import FftStep, SwapStep

from .._core.checks import as_array
from .._core.eager import one_program
from .._core.matrix import round_up
from .._core.mesh import grid_of, operand_mesh
from .._core.specs import layout_spec
from . import _fft3d, _fftnd
from ._route import Route
from ._transforms import NORMS, _check_backend, _contiguous, _operand


@one_program
def prfft3d(
    x: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Real-to-complex :func:`pfft3d`: the non-redundant half of its spectrum.

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
        ``distla.jaxdecomp.config``, as :func:`pfft3d`.
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
      ``jnp.fft.rfftn``; :func:`pirfft3d`; :func:`pfft3d`.

    Example:
      >>> import numpy as np, distla
      >>> mesh = distla.make_mesh((4, 2), ("z", "y"))
      >>> x = distla.shard(np.ones((16, 16, 16), np.float32), mesh)
      >>> k = distla.fft.prfft3d(x)
      >>> k.shape, k.sharding.spec
      ((16, 9, 16), PartitionSpec(('z', 'y'), None, None))
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
    x = x.astype(in_dtype)
    mesh = operand_mesh(x, names=("x",))
    if mesh is None or mesh.size == 1:
        return _one_device(x, norm=norm, contiguous=contiguous)
    grid = grid_of(mesh, what=what)
    gx, gy = _groups(grid)
    if _divides(zt, grid):  # pfft3d's layout fits: its 3-D kernels
        return _fft3d.transform(
            x, on_cpu=_fft3d._on_cpu_outside_jit(x), kind="rfft", norm=norm, s=None,
            order="yzx", algorithm="auto", in_dtype=in_dtype, swap_grid=False,
            contiguous=contiguous,
        )  # fmt: skip
    route = _forward_route(tuple(x.shape), gx, gy, dict(mesh.shape))
    return _run(
        x, route=route, norm=norm, in_dtype=in_dtype, perm=(1, 2, 0) if contiguous else None
    )


@one_program
def pirfft3d(
    y: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    s: tuple[int, int, int] | None = None,
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Inverse of :func:`prfft3d`: the real volume from the half spectrum.

    Args:
      y: the half spectrum as :func:`prfft3d` returns it (``(Y, Zt, X)``
        when contiguous, else ``(X, Y, Zt)``), in its layout (others are
        re-laid out first).
      norm: as for :func:`prfft3d`.
      backend: as for :func:`prfft3d`.
      s: the real volume's ``(X, Y, Z)``; default ``Z = 2 (Zt - 1)``, as
        ``jnp.fft.irfftn`` (an odd Z needs ``s``). ``X`` and ``Y`` must be
        ``y``'s.
      transpose_axis_contiguous: as for :func:`prfft3d`.
      a: jaxdecomp's keyword for ``y``; give one of the two.

    Returns:
      Real ``[X, Y, Z]`` volume in :func:`prfft3d`'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh).

    Raises:
      ValueError: ``y`` is not 3-D, ``s`` does not match it, the mesh has
        more than 2 axes, or ``norm`` or ``backend`` is unknown.

    See also:
      ``jnp.fft.irfftn``; :func:`prfft3d`.
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
    y = y.astype(in_dtype)
    mesh = operand_mesh(y, names=("y",))
    if mesh is None or mesh.size == 1:
        return _one_device_inverse(y, norm=norm, s=s, contiguous=contiguous)
    grid = grid_of(mesh, what=what)
    gx, gy = _groups(grid)
    if _divides(zt, grid):
        return _fft3d.transform(
            y, on_cpu=_fft3d._on_cpu_outside_jit(y), kind="irfft", norm=norm, s=s,
            order="yzx", algorithm="auto", in_dtype=in_dtype, swap_grid=False,
            contiguous=contiguous,
        )  # fmt: skip
    route = _inverse_route(s, gx, gy, dict(mesh.shape))
    return _run(
        y, route=route, norm=norm, in_dtype=in_dtype, perm=(2, 0, 1) if contiguous else None
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


def _forward_route(shape, gx, gy, sizes) -> Route:
    """The Y-split or X-split route of the module docstring, natural axes in and out."""
    xg, yg, zg = shape
    zt = zg // 2 + 1
    every = gx + gy if _y_split(gx, gy, sizes) else gy + gx
    parts = math.prod(sizes[n] for n in every)
    steps = [FftStep((2,), "rfft")]
    if _y_split(gx, gy, sizes):
        if gy:  # all_to_all over b -> (X/P, Y, Zt)
            steps.append(SwapStep(1, 0, gy, None, yg))
        steps += [FftStep((1,), "fft"), SwapStep(0, 1, every, round_up(yg, parts), xg)]
        steps.append(FftStep((0,), "fft"))  # (X, Y/P, Zt)
        pad_in, out = (round_up(xg, parts), round_up(yg, _size(gy, sizes)), zg), ((), every, ())
    else:
        if gx:  # all_to_all over a -> (X, Y/P, Zt)
            steps.append(SwapStep(0, 1, gx, None, xg))
        steps += [FftStep((0,), "fft"), SwapStep(1, 0, every, round_up(xg, parts), yg)]
        steps.append(FftStep((1,), "fft"))  # (X/P, Y, Zt)
        pad_in, out = (round_up(xg, _size(gx, sizes)), round_up(yg, parts), zg), (every, (), ())
    return Route(
        steps=tuple(steps),
        pad_in=pad_in,
        spec_in=layout_spec((gx, gy, ())),
        spec_out=layout_spec(out),
        out_shape=(xg, yg, zt),
    )


def _inverse_route(s, gx, gy, sizes) -> Route:
    """:func:`_forward_route` backwards: natural half spectrum in, pencils out."""
    xg, yg, zg = s
    zt = zg // 2 + 1
    if _y_split(gx, gy, sizes):
        every = gx + gy
        parts = math.prod(sizes[n] for n in every)
        steps = [FftStep((0,), "ifft"), SwapStep(1, 0, every, round_up(xg, parts), yg)]
        steps.append(FftStep((1,), "ifft"))  # (X/P, Y, Zt)
        if gy:  # all_to_all over b -> (X/pa, Y/pb, Zt); X stays split over a
            local_x = round_up(xg, parts) // _size(gx, sizes)
            steps.append(SwapStep(0, 1, gy, round_up(yg, _size(gy, sizes)), local_x))
        pad_in, src = (xg, round_up(yg, parts), zt), ((), every, ())
    else:
        every = gy + gx
        parts = math.prod(sizes[n] for n in every)
        steps = [FftStep((1,), "ifft"), SwapStep(0, 1, every, round_up(yg, parts), xg)]
        steps.append(FftStep((0,), "ifft"))  # (X, Y/P, Zt)
        if gx:  # all_to_all over a -> (X/pa, Y/pb, Zt); Y stays split over b
            local_y = round_up(yg, parts) // _size(gy, sizes)
            steps.append(SwapStep(1, 0, gx, round_up(xg, _size(gx, sizes)), local_y))
        pad_in, src = (round_up(xg, parts), yg, zt), (every, (), ())
    steps.append(FftStep((2,), "irfft", zg))
    return Route(
        steps=tuple(steps),
        pad_in=pad_in,
        spec_in=layout_spec(src),
        spec_out=layout_spec((gx, gy, ())),
        out_shape=(xg, yg, zg),
    )


def _size(group, sizes) -> int:
    return math.prod(sizes[n] for n in group)


@functools.partial(jax.jit, static_argnames=("route", "norm", "in_dtype", "perm"))
def _run(x, *, route, norm, in_dtype, perm):
    """``route`` on the natural-order operand (``x.transpose(perm)`` first for the
    inverse, after for the forward)."""
    if perm == (2, 0, 1):  # pirfft3d: (Y, Zt, X) in
        x = x.transpose(perm)
    y = _fftnd.transform(
        x, plan=route, kind="rfft", s=None, axes=None, norm=norm,
        shape_in=tuple(x.shape), in_dtype=in_dtype, spec=None,
    )  # fmt: skip
    return y.transpose(perm) if perm == (1, 2, 0) else y


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
