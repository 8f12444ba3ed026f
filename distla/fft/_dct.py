"""Distributed discrete cosine transforms: ``distla.scipy.fft``'s functions (private).

``dct``, ``dctn``, ``idct`` and ``idctn`` take ``jax.scipy.fft``'s arguments
and compute scipy's transforms (types 1 to 4; jax has type 2 alone), with
``distla.fft``'s route: the layout decisions and ``all_to_all`` swaps of
``fftn`` (``dctn``) and ``ifftn`` (``idctn``), each local FFT replaced by the
local DCTs of ``kernels/dct.py``. The data stay real, so every exchange moves
half the bytes of the complex FFT's; the result is laid out as ``fftn``
(``ifftn``) lays out its own.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jax.scipy.fft
import numpy as np
from jax.sharding import PartitionSpec as P

from distla.kernels.dct import dct_along, dctnd_local, pencil_dct

from .._core import route
from .._core.checks import as_array, empty_results, result_types
from .._core.matrix import pad_to, round_up
from .._core.mesh import (
    constrain,
    fitting_spec,
    grid_of,
    is_explicit,
    run_on_mesh,
    shard_map,
    shard_spec,
    spec_groups,
)
from .._core.plan import Plan
from . import _fftnd

TYPES = (1, 2, 3, 4)
NORMS = (None, "backward", "ortho", "forward")


@route.public
def dctn(
    x: jax.Array,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
) -> jax.Array:
    """Distributed N-D discrete cosine transform, as ``jax.scipy.fft.dctn``.

    Equal to ``scipy.fft.dctn(x, type, s, axes, norm)``: a DCT along each
    axis of ``axes``. Axes whole on a device are transformed there; a
    sharded one is first swapped with another axis by one ``all_to_all``
    (as [`distla.fft.fftn`][distla.fft.fftn] does), so no device holds the
    whole array, and the exchanges move real values.

    Args:
      x: array of any rank, sharded on a 1- or 2-axis mesh in any layout (or
        on one device). Integers and bools are cast as jax casts them.
      type: the DCT type, 1 to 4 (scipy's definitions; jax has type 2 only).
      s: lengths of the transformed axes (the input is cropped or
        zero-padded to them at their ends), as in ``jax.scipy.fft.dctn``.
      axes: the transformed axes (default: all, or the last ``len(s)``).
        The others are batch axes: they keep their sharding, and nothing is
        exchanged over the mesh axes that shard them.
      norm: ``None``/``"backward"``, ``"ortho"`` (scipy's orthonormal
        transform, ``orthogonalize=True``) or ``"forward"``.

    Returns:
      Array of ``x``'s shape with ``s`` along ``axes``, real for real ``x``
      (``float32`` for ``float32`` and integers, as jax's), complex for
      complex ``x`` (real and imaginary parts transformed apart); laid out as
      [`distla.fft.fftn`][distla.fft.fftn] lays out its result for the same
      input (a pencil volume ``P(a, b, None)`` comes back ``P(None, a, b)``).

    Raises:
      ValueError: a ``type`` other than 1-4, an unknown ``norm``, a length
        below 1 (below 2 for type 1), bad ``s`` or ``axes`` (jax's checks),
        or a mesh of more than 2 axes.

    See also:
      ``jax.scipy.fft.dctn``, the one-device equivalent;
      [`idctn`][distla.scipy.fft.idctn].

    Examples:
      >>> import numpy as np, scipy.fft, distla, distla.scipy.fft
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.ones((16, 16, 16), np.float32), mesh)
      >>> y = distla.scipy.fft.dctn(x)
      >>> y.sharding.spec
      P(None, 'rows', 'cols')
      >>> bool(np.allclose(y, scipy.fft.dctn(np.ones((16, 16, 16))), atol=1e-2))
      True
    """
    return transform(x, type, s, axes, norm, False, "distla.scipy.fft.dctn")


@route.public
def idctn(
    x: jax.Array,
    type: int = 2,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
) -> jax.Array:
    """Distributed inverse N-D DCT, as ``jax.scipy.fft.idctn``.

    Equal to ``scipy.fft.idctn(x, type, s, axes, norm)``: the inverse of
    [`dctn`][distla.scipy.fft.dctn] of the same ``type`` and ``norm``.

    Args:
      x: array of any rank, sharded on a 1- or 2-axis mesh in any layout (or
        on one device); [`dctn`][distla.scipy.fft.dctn]'s output layouts are
        taken as they are.
      type: the DCT type, 1 to 4 (scipy's definitions; jax has type 2 only).
      s: lengths of the transformed axes (crop or zero-pad the input).
      axes: the transformed axes (default: all, or the last ``len(s)``).
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as for
        [`dctn`][distla.scipy.fft.dctn].

    Returns:
      Array as for [`dctn`][distla.scipy.fft.dctn]; laid out as
      [`distla.fft.ifftn`][distla.fft.ifftn] lays out its result (``dctn``'s
      output layouts come back in its input layouts).

    Raises:
      ValueError: as [`dctn`][distla.scipy.fft.dctn].

    See also:
      ``jax.scipy.fft.idctn``; [`dctn`][distla.scipy.fft.dctn].

    Examples:
      >>> import numpy as np, distla, distla.scipy.fft
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.arange(512, dtype=np.float32).reshape(8, 8, 8), mesh)
      >>> back = distla.scipy.fft.idctn(distla.scipy.fft.dctn(x, type=4), type=4)
      >>> back.sharding.spec, bool(np.allclose(back, x, atol=1e-2))
      (P('rows', 'cols', None), True)
    """
    return transform(x, type, s, axes, norm, True, "distla.scipy.fft.idctn")


@route.public
def dct(
    x: jax.Array,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
) -> jax.Array:
    """Distributed DCT along one axis, as ``jax.scipy.fft.dct``.

    Equal to ``scipy.fft.dct(x, type, n, axis, norm)``: [`dctn`][distla.scipy.fft.dctn]
    over the one axis ``axis``. The other axes keep their sharding; a
    sharded ``axis`` is swapped with another one, as
    [`distla.fft.fft`][distla.fft.fft] does.

    Args:
      x: array of any rank, sharded on a 1- or 2-axis mesh in any layout (or
        on one device).
      type: the DCT type, 1 to 4 (scipy's definitions; jax has type 2 only).
      n: the length of the transform (the input is cropped or zero-padded
        to it at the end of ``axis``).
      axis: the transformed axis.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as for
        [`dctn`][distla.scipy.fft.dctn].

    Returns:
      Array of ``x``'s shape with ``n`` along ``axis``, laid out as
      [`distla.fft.fft`][distla.fft.fft] lays out its result.

    Raises:
      ValueError: as [`dctn`][distla.scipy.fft.dctn].

    See also:
      ``jax.scipy.fft.dct``; [`idct`][distla.scipy.fft.idct].

    Examples:
      >>> import numpy as np, scipy.fft, distla, distla.scipy.fft
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8), mesh)
      >>> y = distla.scipy.fft.dct(x, type=1, axis=0)
      >>> bool(np.allclose(y, scipy.fft.dct(np.asarray(x), type=1, axis=0), atol=1e-5))
      True
    """
    return transform(x, type, _one(n), (axis,), norm, False, "distla.scipy.fft.dct")


@route.public
def idct(
    x: jax.Array,
    type: int = 2,
    n: int | None = None,
    axis: int = -1,
    norm: str | None = None,
) -> jax.Array:
    """Distributed inverse DCT along one axis, as ``jax.scipy.fft.idct``.

    Equal to ``scipy.fft.idct(x, type, n, axis, norm)``, the inverse of
    [`dct`][distla.scipy.fft.dct].

    Args:
      x: array of any rank, sharded on a 1- or 2-axis mesh in any layout (or
        on one device).
      type: the DCT type, 1 to 4 (scipy's definitions; jax has type 2 only).
      n: the length of the transform (crop or zero-pad the input).
      axis: the transformed axis.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Array as for [`dct`][distla.scipy.fft.dct].

    Raises:
      ValueError: as [`dctn`][distla.scipy.fft.dctn].

    See also:
      ``jax.scipy.fft.idct``; [`dct`][distla.scipy.fft.dct].

    Examples:
      >>> import numpy as np, distla, distla.scipy.fft
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.eye(8, dtype=np.float32), mesh)
      >>> y = distla.scipy.fft.idct(distla.scipy.fft.dct(x, norm="ortho"), norm="ortho")
      >>> bool(np.allclose(y, np.eye(8), atol=1e-5))
      True
    """
    return transform(x, type, _one(n), (axis,), norm, True, "distla.scipy.fft.idct")


def _one(n):
    return None if n is None else (n,)


def transform(x, type, s, axes, norm, inverse, what):
    """The checks, jax's dtype and defaults, and the dispatch of the four functions."""
    x = as_array(x, "x", what)
    if isinstance(type, bool) or type not in TYPES:
        raise ValueError(f"{what}: type must be 1, 2, 3 or 4 (scipy's DCTs); got {type!r}")
    if norm not in NORMS:
        raise ValueError(f"{what}: norm must be one of {NORMS}; got {norm!r}")
    if s is not None and not isinstance(s, (list, tuple)):
        s = [operator.index(s)]
    smallest = 2 if type == 1 else 1
    if s is not None and any(operator.index(n) < smallest for n in s):
        raise ValueError(
            f"{what}: invalid number of data points {tuple(s)} for a type {type} DCT (at "
            f"least {smallest}); x of shape {x.shape}."
        )
    try:  # jax's dtype, shape and checks of s and axes (cached: a trace costs a millisecond)
        key = (None if s is None else tuple(map(operator.index, s)),
               None if axes is None else tuple(map(operator.index, axes)))  # fmt: skip
    except TypeError:
        key = None
    if key is None:
        result = jax.eval_shape(
            _reference(inverse, s, axes), jax.ShapeDtypeStruct(x.shape, x.dtype)
        )
    else:
        result = _result(inverse, tuple(x.shape), np.dtype(x.dtype), *key, *_fftnd._config())
    if axes is None:
        axes = tuple(range(x.ndim - len(s), x.ndim)) if s is not None else tuple(range(x.ndim))
    axes = tuple(operator.index(a) % x.ndim for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{what}: axes must be distinct; got {axes}")
    lengths = tuple(int(n) for n in s) if s is not None else tuple(x.shape[a] for a in axes)
    if any(n < smallest for n in lengths):
        raise ValueError(
            f"{what}: invalid number of data points {lengths} along axes {axes} for a type "
            f"{type} DCT (at least {smallest}); x of shape {x.shape}."
        )
    if result.size == 0:  # an empty result: where jax puts it
        return empty_results(result_types(_reference(inverse, s, axes), (x,)), x)
    in_dtype = np.dtype(result.dtype)
    shape_in = list(x.shape)
    for a, n in zip(axes, lengths):
        shape_in[a] = n
    shape_in = tuple(shape_in)
    local = (("type", type), ("norm", norm), ("inverse", inverse))
    if x.size == 0:  # zero-padded to nothing but zeros
        return jnp.zeros(shape_in, in_dtype)
    options = dict(axes=axes, lengths=lengths, s=s, shape_in=shape_in, in_dtype=in_dtype)
    return route.call(DCT, x, local=local, public_name=what, **options)


def _unsharded(x, *, axes, lengths, s, shape_in, in_dtype, local, public_name):
    """No mesh: the transforms along ``axes`` on the device ``x`` is on."""
    del lengths, public_name
    y = _one_device(x, axes=axes, shape_in=shape_in, in_dtype=in_dtype, local=local)
    sharding = jax.typeof(x).sharding
    if getattr(sharding, "mesh", None) is not None and is_explicit(sharding.mesh):
        # a one-device Explicit mesh: the layout jax's own function gives there
        inverse = dict(local)["inverse"]
        layout = result_types(_reference(inverse, s, axes), (x,)).sharding
        # jax 0.11 refuses the sharded operand (jnp.roll along a split axis, even of size
        # 1): there the result keeps x's layout, as jax 0.10 gave it
        y = jax.sharding.reshard(y, sharding if layout is None else layout)
    return y


def _distributed(plan: Plan, x, *, axes, lengths, s, shape_in, in_dtype, local, public_name):
    """On ``plan``'s mesh: a volume over all its axes on the pencil algorithm (`_volume`), a
    sharded vector gathered (`_gathered`), anything else on the FFT's general route."""
    del s
    mesh = plan.mesh
    grid_of(mesh, what=public_name)
    known = not (isinstance(x, jax.core.Tracer) and not is_explicit(mesh))
    spec = _fftnd.spec_of(x) if known else None
    if x.ndim == 3 and sorted(axes) == [0, 1, 2]:  # a volume over all its axes
        roles = _roles(spec, mesh, dict(local)["inverse"])
        return _volume(x, roles=roles, local=local, shape_in=shape_in, in_dtype=in_dtype)
    spec = spec if known else shard_spec(x.shape, mesh)
    kind = "ifft" if dict(local)["inverse"] else "fft"
    steps, _, back_to = _fftnd._decide(kind, tuple(x.shape), lengths, axes, mesh, spec, known)
    if steps is None:  # a sharded vector: every device transforms all of it
        return _gathered(x, axes=axes, shape_in=shape_in, in_dtype=in_dtype, local=local)
    return _sharded(x, route=steps, local=local, shape_in=shape_in, in_dtype=in_dtype, spec=back_to)


#: the four DCTs, checked by `transform`, then the route
DCT = route.Op(
    "distla.scipy.fft",
    operands=("x",),
    one_device=_unsharded,
    distributed=_distributed,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=route.never,
    own_placement=True,
)


def _reference(inverse, s, axes):
    """jax's own function, whose result types and argument checks distla's follow."""
    return functools.partial(
        jax.scipy.fft.idctn if inverse else jax.scipy.fft.dctn, type=2, s=s, axes=axes
    )


@functools.lru_cache(maxsize=256)
def _result(inverse, shape, dtype, s, axes, x64, promotion) -> jax.ShapeDtypeStruct:
    """jax's result for these arguments, traced once per key (``x64`` and
    ``promotion``: the settings it depends on, read by the caller)."""
    del x64, promotion
    return jax.eval_shape(_reference(inverse, s, axes), jax.ShapeDtypeStruct(shape, dtype))


def _roles(spec, mesh, inverse: bool) -> tuple[str, str | None]:
    """The mesh axes ``(a, b)`` that split a volume's X and Y in pencils (``b``
    ``None`` on a 1-axis mesh): the mesh's order, or the other way round for an
    operand in pencils ``P(b, a, None)`` (an inverse's in ``P(None, b, a)``), as
    ``fftn``'s 3-D algorithms take them."""
    names = tuple(mesh.axis_names)
    if len(names) == 1:
        return names[0], None
    a, b = names
    if spec is not None and min(mesh.shape[n] for n in names) > 1:
        swapped = ((), (b,), (a,)) if inverse else ((b,), (a,), ())
        if spec_groups(spec, 3, dict(mesh.shape)) == swapped:
            return b, a
    return a, b


@functools.partial(jax.jit, static_argnames=("roles", "local", "shape_in", "in_dtype"))
def _volume(x, *, roles, local, shape_in, in_dtype):
    """The 3-D DCT of a volume on the pencil algorithm (``kernels/dct.py``'s
    ``pencil_dct``): pencils ``P(a, b, None)`` in and ``P(None, a, b)`` out
    (the inverse the other way round), as ``fftn``'s 3-D algorithms lay them out;
    sizes the mesh does not divide padded inside, the result in the largest
    even layout like those."""
    x = _fftnd.tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    a, b = roles
    pa, pb = mesh.shape[a], (mesh.shape[b] if b else 1)
    xg, yg, zg = shape_in
    pencils, spectrum = P(a, b, None), P(None, a, b)
    if dict(local)["inverse"]:
        pad_in, spec_in, spec_out = (xg, round_up(yg, pa), round_up(zg, pb)), spectrum, pencils
    else:
        pad_in, spec_in, spec_out = (round_up(xg, pa), round_up(yg, pb), zg), pencils, spectrum
    kernel = functools.partial(pencil_dct, row_axis=a, col_axis=b, sizes=shape_in, **dict(local))

    def body(x):
        x = pad_to(x.astype(in_dtype), shape_in)
        x = constrain(pad_to(x, pad_in), spec_in)
        y = shard_map(kernel, in_specs=spec_in, out_specs=spec_out)(x)
        return pad_to(y, shape_in)

    return run_on_mesh(body, mesh, fitting_spec(shape_in, mesh, spec_out), x)


@functools.partial(jax.jit, static_argnames=("axes", "shape_in", "in_dtype", "local"))
def _one_device(x, *, axes, shape_in, in_dtype, local):
    x = pad_to(x.astype(in_dtype), shape_in)
    for a in axes:
        x = dct_along(x, a, **dict(local))
    return x


@functools.partial(jax.jit, static_argnames=("axes", "shape_in", "in_dtype", "local"))
def _gathered(x, *, axes, shape_in, in_dtype, local):
    """A sharded vector: made whole on every device, as ``distla.fft.fft`` does."""
    x = _fftnd.tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    spec = _fftnd.spec_of(x)

    def body(x):
        return _one_device(constrain(x, P()), axes=axes,
                           shape_in=shape_in, in_dtype=in_dtype, local=local)  # fmt: skip

    return run_on_mesh(body, mesh, fitting_spec(shape_in, mesh, spec), x)


@functools.partial(jax.jit, static_argnames=("route", "local", "shape_in", "in_dtype", "spec"))
def _sharded(x, *, route, local, shape_in, in_dtype, spec):
    """``route`` (``_route.Route``) with ``kernels/dct.py``'s local transforms; the
    result in ``spec`` where it fits (``None``: where the route leaves it), as
    ``_fftnd.transform`` returns the FFT's."""
    x = _fftnd.tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    kernel = functools.partial(dctnd_local, steps=route.steps, **dict(local))
    out_spec = fitting_spec(route.out_shape, mesh, route.spec_out if spec is None else spec)

    def body(x):
        x = pad_to(x.astype(in_dtype), shape_in)
        x = constrain(pad_to(x, route.pad_in), route.spec_in)
        y = shard_map(kernel, in_specs=route.spec_in, out_specs=route.spec_out)(x)
        return pad_to(y, route.out_shape)

    return run_on_mesh(body, mesh, out_spec, x)
