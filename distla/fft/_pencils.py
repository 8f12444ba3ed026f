"""jaxdecomp's pencil transposes and its output-layout rules (private).

``transposeXtoY`` and its five siblings move a volume from one pencil
layout to the next. In value each is a global transpose of the array
(jaxdecomp's ``transpose_axis_contiguous=True``: ``(2, 0, 1)`` for
X->Y, Y->Z and Z->X, ``(1, 2, 0)`` for the way back; ``False``: none),
and in layout each exchanges the mesh axes of two array axes: one
``all_to_all`` moves the mesh axes that split one axis onto an axis that was
whole (``kernels/fftnd.py``'s swap step, the same exchange as the FFTs').
``output_spec`` is jaxdecomp's rule for the result's layout;
``pfft3d_output_specs`` its rule for ``pfft3d``'s (``get_output_specs``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels.fftnd import SwapStep, fftnd_local

from .._core import route
from .._core.matrix import pad_to, round_up
from .._core.mesh import (
    constrain,
    fitting_spec,
    grid_of,
    is_explicit,
    run_on_mesh,
    shard_map,
    spec_groups,
)
from .._core.plan import Plan
from .._core.specs import layout_spec
from . import _settings
from ._fftnd import spec_of, tied
from ._route import Route

KINDS = ("x_y", "y_z", "z_y", "y_x", "x_z", "z_x")

# the global transpose each kind applies, with transpose_axis_contiguous=True
_ORDER = {
    "x_y": (2, 0, 1),
    "y_z": (2, 0, 1),
    "z_x": (2, 0, 1),
    "y_x": (1, 2, 0),
    "z_y": (1, 2, 0),
    "x_z": (1, 2, 0),
}


def order(kind: str, contiguous: bool) -> tuple[int, int, int]:
    """The global transpose ``kind`` applies to the volume's values."""
    return _ORDER[kind] if contiguous else (0, 1, 2)


def output_spec(spec: tuple, kind: str, contiguous: bool) -> tuple:
    """jaxdecomp's layout of a transpose's result, from its operand's ``(s0, s1, s2)``.

    Contiguous: ``(s1, s0, s2)`` for every kind. Not contiguous: the two axes
    the exchange concerns trade their mesh axes: X<->Y ``(s0, s2, s1)``, Y<->Z
    ``(s1, s0, s2)``, X<->Z ``(s2, s1, s0)`` (jaxdecomp itself has no rule for
    the last pair and raises).
    """
    s0, s1, s2 = (tuple(spec) + (None,) * 3)[:3]
    if contiguous:
        return (s1, s0, s2)
    if kind in ("x_y", "y_x"):
        return (s0, s2, s1)
    if kind in ("y_z", "z_y"):
        return (s1, s0, s2)
    return (s2, s1, s0)


def source_spec(kind: str, contiguous: bool, names: tuple[str, ...]) -> tuple:
    """The layout jaxdecomp's chain of transposes gives ``kind``'s operand, starting
    from X-pencils ``P(a, b, None)``: taken for operands whose layout is not known."""
    a, b = (tuple(names) + (None,))[:2]
    pencil = {"x": (a, b, None)}
    if contiguous:
        pencil.update(y=(b, a, None), z=(a, b, None))
    else:
        pencil.update(y=(a, None, b), z=(None, a, b))
    return pencil[kind[0]]


def transpose(x: jax.Array, kind: str, *, contiguous: bool, what: str) -> jax.Array:
    """The ``kind`` transpose of ``x`` (``[X, Y, Z]`` or a batch ``[B, X, Y, Z]``).

    See the module docstring; the result is laid out by `output_spec`
    (the largest even layout like it where the mesh does not divide the
    result's shape).
    """
    if x.ndim not in (3, 4):
        raise ValueError(
            f"{what} transposes 3-D volumes (or a batch [B, X, Y, Z]); got shape {x.shape}."
        )
    lead = x.ndim - 3
    perm = (*range(lead), *(lead + o for o in order(kind, contiguous)))
    options = dict(kind=kind, contiguous=contiguous, perm=perm, public_name=what)
    return route.call(TRANSPOSE, x, **options)


def _local_transpose(x, *, kind, contiguous, perm, public_name):
    """jaxdecomp's local transpose: no mesh, or nothing to move."""
    del kind, contiguous, public_name
    return _local(x, perm=perm)


def _nothing_to_move(x, **options):
    del options
    return x.size == 0


def _global_transpose(plan: Plan, x, *, kind, contiguous, perm, public_name):
    """On ``plan``'s mesh: one swap step (`_swap_route`), the result in `output_spec`."""
    mesh = plan.mesh
    lead = x.ndim - 3
    grid_of(mesh, what=public_name)
    spec = (tuple(spec_of(x)) + (None,) * x.ndim)[: x.ndim]
    sizes = dict(mesh.shape)
    unknown = isinstance(x, jax.core.Tracer) and not is_explicit(mesh)
    if unknown or not any(spec_groups(P(*spec), x.ndim, sizes)):
        spec = (None,) * lead + source_spec(kind, contiguous, tuple(mesh.axis_names))
        spec = tuple(fitting_spec(x.shape, mesh, P(*spec)))
        spec = (spec + (None,) * x.ndim)[: x.ndim]
    after = spec[:lead] + output_spec(spec[lead:], kind, contiguous)  # on the output's axes
    target = [None] * x.ndim  # the same, on x's axes
    for j, d in enumerate(perm):
        target[d] = after[j]
    swap = _swap_route(tuple(x.shape), P(*spec), P(*target), sizes)
    out_shape = tuple(x.shape[d] for d in perm)
    out_spec = fitting_spec(out_shape, mesh, P(*after))
    return _transpose(x, route=swap, perm=perm, out_spec=out_spec)


#: jaxdecomp's six transposes (``_transposes``), checked by `transpose`, then the route
TRANSPOSE = route.Op(
    "distla.jaxdecomp",
    operands=("x",),
    one_device=_local_transpose,
    distributed=_global_transpose,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=_nothing_to_move,
    own_placement=True,
)


def _swap_route(shape, spec: P, target: P, sizes) -> Route | None:
    """One swap step from ``spec`` to ``target`` (both on ``x``'s axes), or ``None``.

    ``None`` when the layouts are the same, or when they differ otherwise
    than by the mesh axes of one axis moving onto one that was whole (an
    operand in a layout jaxdecomp does not produce): XLA then re-lays it out.
    """
    ndim = len(shape)
    before, after = spec_groups(spec, ndim, sizes), spec_groups(target, ndim, sizes)
    moved = [d for d in range(ndim) if before[d] != after[d]]
    if len(moved) != 2:
        return None
    t, u = moved if before[moved[0]] else moved[::-1]
    group = before[t]
    if before[u] or after[t] or after[u] != group:
        return None
    parts = math.prod(sizes[n] for n in group)
    pad_in = tuple(
        round_up(n, math.prod(sizes[m] for m in g)) if g else n for n, g in zip(shape, before)
    )
    # all_to_all over t's group -> t whole (cropped to its length), u split as t was
    step = SwapStep(t, u, group, round_up(shape[u], parts), shape[t])
    return Route(
        steps=(step,),
        pad_in=pad_in,
        spec_in=layout_spec(before),
        spec_out=layout_spec(after),
        out_shape=tuple(shape),
    )


@functools.partial(jax.jit, static_argnames=("perm",))
def _local(x, *, perm):
    return x.transpose(perm)


@functools.partial(jax.jit, static_argnames=("route", "perm", "out_spec"))
def _transpose(x, *, route, perm, out_spec):
    x = tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    kernel = functools.partial(fftnd_local, steps=route.steps if route else (), norm=None)

    def body(x):
        if route is not None:
            x = constrain(pad_to(x, route.pad_in), route.spec_in)
            x = shard_map(kernel, in_specs=route.spec_in, out_specs=route.spec_out)(x)
            x = pad_to(x, route.out_shape)
        return x.transpose(perm)  # a sharded array's transpose: each block's own

    return run_on_mesh(body, mesh, out_spec, x)


# --- pfft3d's output layout (jaxdecomp's get_output_specs) ----------------------------


def pencil_type(axis_sizes: tuple[int, ...]) -> str:
    """jaxdecomp's decomposition of a mesh of these axis sizes (its last two axes)."""
    pdims = tuple(axis_sizes)[-2:]
    if len(pdims) == 1:
        pdims = (1, *pdims)
    if len(pdims) == 0 or pdims == (1, 1):
        return "NO_DECOMP"
    if pdims[0] == 1:
        return "SLAB_YZ"
    if pdims[1] == 1:
        return "SLAB_XY"
    return "PENCILS"


def pfft3d_output_specs(
    inverse: bool, decomposition: str, spec: tuple, contiguous: bool, backend: str
) -> tuple:
    """jaxdecomp's ``get_output_specs``: the layout ``pfft3d`` (``pifft3d`` when
    ``inverse``) gives an operand laid out ``spec`` on a mesh of ``decomposition``.

    ``NO_DECOMP`` (one device) keeps ``spec``, where jaxdecomp raises.
    """
    s0, s1, s2 = (tuple(spec) + (None,) * 3)[:3]
    if decomposition == "NO_DECOMP":
        return (s0, s1, s2)
    if contiguous:
        return {
            "SLAB_XY": (s1, s0, s2),
            "SLAB_YZ": (s2, s1, s0),
            "PENCILS": (s0, s1, s2),
        }[decomposition]
    if decomposition == "SLAB_XY":
        return (s1, s0, s2) if backend.lower() == "cudecomp" else (s2, s1, s0)
    if decomposition == "SLAB_YZ":
        return (s0, s2, s1)
    return (s1, s2, s0) if inverse else (s2, s0, s1)


# --- the public functions (re-exported by distla.jaxdecomp) ---------------------------


def get_output_specs(fft_type: Any, pencil_type: Any, spec: Any, backend: str = "JAX") -> tuple:
    """jaxdecomp's ``get_output_specs``: where ``pfft3d`` puts an operand's mesh axes.

    Args:
      fft_type: ``jax.lax.FftType`` (``FFT``/``RFFT`` forward, ``IFFT``/``IRFFT``
        inverse) or its name.
      pencil_type: the mesh's decomposition: ``distla.jaxdecomp.PENCILS``,
        ``SLAB_XY``, ``SLAB_YZ`` or ``NO_DECOMP`` (jaxdecomp's own enum, or the
        name, are accepted too).
      spec: the operand's ``PartitionSpec`` (or tuple) over ``(d0, d1, d2)``.
      backend: ``"JAX"`` or ``"cudecomp"``; changes the non-contiguous
        ``SLAB_XY`` rule, as in jaxdecomp.

    Returns:
      A tuple of three spec entries, as jaxdecomp returns: contiguous
      (``distla.jaxdecomp.config.transpose_axis_contiguous``) ``SLAB_XY``
      ``(s1, s0, s2)``, ``SLAB_YZ`` ``(s2, s1, s0)``, ``PENCILS`` the spec
      itself; not contiguous, the natural-order rules. ``NO_DECOMP`` gives
      the spec back (jaxdecomp raises).

    Raises:
      TypeError: an unknown ``fft_type`` or ``pencil_type``.

    Example:
      >>> import jax, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> jaxdecomp.get_output_specs(jax.lax.FftType.FFT, jaxdecomp.SLAB_XY, P("z", None))
      (None, 'z', None)
    """
    inverse = _fft_inverse(fft_type)
    name = getattr(pencil_type, "name", pencil_type)
    if name not in ("SLAB_XY", "SLAB_YZ", "PENCILS", "NO_DECOMP"):
        raise TypeError(f"Unknown pencil type {pencil_type!r}")
    contiguous = _settings.contiguous(None)
    out = pfft3d_output_specs(inverse, name, tuple(spec), contiguous, backend)
    if (name == "PENCILS" and contiguous) or name == "NO_DECOMP":
        return spec + (None,) * (3 - len(spec))  # the spec itself, as jaxdecomp returns it
    return out


def get_fft_output_sharding(fft_sharding: NamedSharding) -> NamedSharding:
    """jaxdecomp's ``get_fft_output_sharding``: the sharding ``pfft3d`` gives an operand.

    Args:
      fft_sharding: the operand's ``NamedSharding`` (a concrete or abstract
        mesh; a 4-D spec's leading entry is a batch axis, as jaxdecomp reads it).

    Returns:
      ``NamedSharding`` on the same mesh, by `get_output_specs` with the
      mesh's decomposition (its last two axes' sizes, ``(1, n)`` for a 1-axis
      mesh). It equals ``distla.fft.pfft3d(x).sharding`` for pencils and slabs
      laid out as jaxdecomp lays them out.

    Example:
      >>> import distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> mesh = distla.make_mesh((4, 2), ("z", "y"))
      >>> jaxdecomp.get_fft_output_sharding(NamedSharding(mesh, P("z", "y"))).spec
      P('z', 'y', None)
    """
    spec, mesh = tuple(fft_sharding.spec), fft_sharding.mesh
    decomposition = pencil_type(tuple(mesh.axis_sizes))
    sharded = sum(entry is not None for entry in spec)
    if sharded >= 3 or (spec and spec[0] is None):  # jaxdecomp's reading: a leading batch
        out = pfft3d_output_specs(False, decomposition, spec[1:], _settings.contiguous(None), "JAX")
        return NamedSharding(mesh, P(spec[0] if spec else None, *out))
    out = pfft3d_output_specs(False, decomposition, spec, _settings.contiguous(None), "JAX")
    return NamedSharding(mesh, P(*out))


def validate_spec_matches_mesh(spec: Any, mesh: Any) -> None:
    """jaxdecomp's check that ``spec`` is its natural layout on ``mesh``: ``spec[i]`` is
    mesh axis ``i``, or ``None`` where that axis has size 1 or there is none.

    distla's functions take any layout and need no such check; this is for code that
    calls it.

    Args:
      spec: a ``PartitionSpec`` (or tuple) over a volume's three axes.
      mesh: the mesh (concrete or abstract).

    Raises:
      ValueError: ``spec`` names another axis at some position, or leaves a
        position whole that a mesh axis of size > 1 should split.

    Examples:
      >>> import distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> jaxdecomp.validate_spec_matches_mesh(P("z", "y"), mesh)  # fine: no error
      >>> jaxdecomp.validate_spec_matches_mesh(P("y", "z"), mesh)
      Traceback (most recent call last):
      ...
      ValueError: Spec ('y', 'z', None) does not match mesh axis names ('z', 'y'). ...
    """
    spec = (tuple(spec) + (None,) * 3)[: max(3, len(tuple(spec)))]
    names = tuple(mesh.axis_names)
    for i in range(3):
        entry = spec[i]
        if entry is not None and (i >= len(names) or entry != names[i]):
            expected = names[i] if i < len(names) else "nothing (trailing)"
            raise ValueError(
                f"Spec {spec} does not match mesh axis names {names}. At position {i}: spec "
                f"has {entry!r} but mesh expects {expected!r}. Ensure the array is sharded "
                "with a spec matching the mesh axis order."
            )
        if entry is None and i < len(names) and mesh.shape[names[i]] > 1:
            raise ValueError(
                f"Spec {spec} does not match mesh axis names {names}. At position {i}: spec "
                f"has None but mesh axis {names[i]!r} has size {mesh.shape[names[i]]} (> 1). "
                "An unsharded dimension cannot correspond to a distributed mesh axis."
            )


def _fft_inverse(fft_type: Any) -> bool:
    name = getattr(fft_type, "name", fft_type)
    name = name.upper() if isinstance(name, str) else name
    if name not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        raise TypeError(f"Unknown FFT type {fft_type!r}")
    return name in ("IFFT", "IRFFT")
