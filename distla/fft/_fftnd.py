"""Arguments as ``jnp.fft`` reads them, and the jit body of the general route (private)."""

from __future__ import annotations

import functools
import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels.fftnd import fftnd_local

from .._core.matrix import pad_to
from .._core.mesh import (
    constrain,
    fitting_spec,
    is_explicit,
    run_on_mesh,
    same_layout,
    shard_map,
    spec_groups,
)
from .._core.specs import layout_spec
from . import _route

JNP = {
    "fft": jnp.fft.fftn,
    "ifft": jnp.fft.ifftn,
    "rfft": jnp.fft.rfftn,
    "irfft": jnp.fft.irfftn,
}


class RealInputError(TypeError, ValueError):
    """Complex input to ``rfftn``: a ``TypeError`` as in numpy, a ``ValueError`` as in jnp."""


def result_dtypes(x: jax.Array, kind: str, what: str) -> tuple[np.dtype, np.dtype]:
    """(dtype the kernel reads, dtype it returns), as ``jnp.fft`` would cast them."""
    real_in = kind == "rfft"
    if real_in and jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise RealInputError(
            f"{what} transforms real input; got dtype {x.dtype}. Use distla.fft.fftn for "
            "complex arrays."
        )
    out = _result(kind, (2,), np.dtype(x.dtype), None, None, None, *_config()).dtype
    if real_in:
        return np.dtype(jnp.finfo(out).dtype), np.dtype(out)
    if kind == "irfft":
        cplx = jax.dtypes.canonicalize_dtype(np.result_type(out, np.complex64))
        return np.dtype(cplx), np.dtype(out)
    return np.dtype(out), np.dtype(out)


def _ints(values: Any) -> tuple[int, ...] | None:
    """``values`` as a tuple of ints (``operator.index``: a float raises ``TypeError``)."""
    return None if values is None else tuple(operator.index(v) for v in values)


def _config() -> tuple[bool, Any]:
    """The settings that change what ``jnp.fft`` returns (their context managers included)."""
    return bool(jax.config.jax_enable_x64), jax.config.jax_numpy_dtype_promotion


@functools.lru_cache(maxsize=256)
def _result(kind, shape, dtype, s, axes, norm, x64, promotion) -> jax.ShapeDtypeStruct:
    """``jnp.fft``'s result for these arguments, traced once per key.

    Tracing it costs about a millisecond, as much as the rest of an eager call's
    dispatch together; ``x64`` and ``promotion`` are `_config`'s, read by
    the caller so that the trace runs under the same settings.
    """
    del x64, promotion
    fn = functools.partial(JNP[kind], s=s, axes=axes, norm=norm)
    return jax.eval_shape(fn, jax.ShapeDtypeStruct(shape, dtype))


def normalize(
    x: jax.Array, s: Any, axes: Any, kind: str, norm: str | None
) -> tuple[tuple[int, ...], tuple[int, ...], jax.ShapeDtypeStruct]:
    """``(s, axes, result)`` with jnp's defaults filled in; jnp's own errors for bad ones.

    ``axes`` come back non-negative in the caller's order, ``s`` one length
    per axis of ``axes`` (for ``irfft`` the last is the output length), and
    ``result`` is the shape and dtype ``jnp.fft`` gives.
    """
    try:  # hashable: tuples of ints (jnp's own error below for anything else)
        key = _ints(s), _ints(axes)
    except TypeError:
        key = None
    if key is None:
        fn = functools.partial(JNP[kind], s=s, axes=axes, norm=norm)
        result = jax.eval_shape(fn, jax.ShapeDtypeStruct(x.shape, x.dtype))
    else:
        result = _result(kind, tuple(x.shape), np.dtype(x.dtype), *key, norm, *_config())
    if axes is None:
        n = x.ndim if s is None else len(s)
        axes = tuple(range(x.ndim - n, x.ndim))
    else:
        axes = tuple(int(a) % x.ndim for a in axes)
    if s is None:
        s = [x.shape[a] for a in axes]
        if kind == "irfft" and axes:
            s[-1] = 2 * (s[-1] - 1)
    return tuple(int(n) for n in s), axes, result


def input_shape(shape, s, axes, kind) -> tuple[int, ...]:
    """The shape ``jnp.fft`` crops or zero-pads the input to before it transforms."""
    out = list(shape)
    for a, n in zip(axes, s):
        out[a] = n
    if kind == "irfft":
        out[axes[-1]] = s[-1] // 2 + 1
    return tuple(out)


def spec_of(x: jax.Array) -> P:
    """The layout of ``x``: its concrete sharding, else its abstract one (``P()``: unknown)."""
    sharding = getattr(x, "sharding", None)
    if not isinstance(x, jax.core.Tracer) and isinstance(sharding, NamedSharding):
        return sharding.spec
    return getattr(jax.typeof(x).sharding, "spec", None) or P()


def tied_to(value: jax.Array, x: jax.Array) -> jax.Array:
    """``value`` itself, in a program that reads ``x``, where ``x`` lives on an ``Auto`` mesh
    (elsewhere ``value`` as given): the jit bodies of the distributed transforms that jax
    differentiates take ``tied(x)``; the derivative rule of ``_transforms`` ties its
    tangent to the primal (``x`` must not be a tangent: the predicate is not linear).

    The transforms are linear: under ``jax.jit(jax.grad(...))`` (or ``jax.jacfwd``) of a
    loss linear in one, the derivative does not depend on ``x``'s values, so jit drops
    ``x`` from the program, which then names no device of the (abstract) mesh and
    compiles for one device the transform's ``shard_map`` over the mesh (XLA: "No
    registered implementation for ... xla.sdy.GlobalToLocalShape"). ``value`` selected by
    a predicate read from one entry of ``x`` keeps ``x`` an input, whose devices the
    program runs on. The predicate is always true (XLA folds the select away: nothing
    runs); the select is linear in ``value``, so its derivative, and the transpose of
    that, read the predicate too. On an ``Explicit`` mesh the types name the mesh.
    """
    mesh = getattr(jax.typeof(x).sharding, "mesh", None)
    if mesh is None or mesh.size <= 1 or is_explicit(mesh) or x.size == 0:
        return value
    entry = jax.lax.stop_gradient(x[(0,) * x.ndim])
    keep = jnp.logical_or(True, entry != entry)  # True, read from x
    return jax.lax.select(keep, value, jnp.zeros_like(value))


@jax.custom_jvp
def tied(x: jax.Array) -> jax.Array:
    """``x`` itself, whose derivative's tangent is ``tied_to(tangent, x)``: the jit bodies of
    the distributed transforms that jax differentiates take ``tied(x)``. The primal is
    ``x`` untouched, so the body stays linear in ``x`` for ``jax.linear_transpose``
    (docs/particle-mesh.md folds ghosts by the halo exchange's transpose; a select whose
    predicate reads ``x`` cannot be transposed there), while under ``jax.jit(jax.grad)``
    the derivative's program reads ``x`` and runs on its devices."""
    return x


@tied.defjvp
def _tied_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return x, tied_to(t, x)


def one_device(x, kind, s, axes, norm):
    """``jnp.fft``'s own transform (unsharded operands, zero-size ones)."""
    if s is not None and axes is not None:
        default = [x.shape[a] for a in axes]
        if kind == "irfft":  # the output length jnp takes when s is not given
            default[-1] = 2 * (default[-1] - 1)
        if tuple(default) == tuple(s):
            s = None  # jnp.fft pads (by zero) whenever s is given: the same call without it
    try:
        fn = _jitted(kind, _ints(s), _ints(axes), norm)
    except TypeError:  # not ints: jnp's own error
        return JNP[kind](x, s=s, axes=axes, norm=norm)
    return fn(x)


@functools.lru_cache(maxsize=256)
def _jitted(kind, s, axes, norm):
    """``jnp.fft``'s transform with its arguments bound, under ``jax.jit``: an eager call
    with keyword arguments takes jax's slower dispatch path (twice the time for a small
    transform); this one takes the compiled program's fast path."""
    return jax.jit(functools.partial(JNP[kind], s=s, axes=axes, norm=norm))


@functools.partial(
    jax.jit,
    static_argnames=("route", "kind", "s", "axes", "norm", "shape_in", "in_dtype", "spec"),
)
def transform(x, *, route, kind, s, axes, norm, shape_in, in_dtype, spec):
    """Run ``route`` (a `_route.Route`) on ``x``; ``None``: gather, then jnp.

    ``spec``: ``None`` returns the route's own output layout; a layout (``x``'s)
    returns the result in it, where it fits the result's lengths, as jnp does
    (a gathered transform always does).
    """
    mesh = jax.typeof(x).sharding.mesh
    if route is None:  # a sharded 1-D transform: every device transforms the whole vector
        jnp_fn = functools.partial(JNP[kind], s=s, axes=axes, norm=norm)

        def gathered(x):
            return jnp_fn(constrain(x.astype(in_dtype), P()))

        out = jax.eval_shape(jnp_fn, jax.ShapeDtypeStruct(x.shape, in_dtype))
        return run_on_mesh(gathered, mesh, fitting_spec(out.shape, mesh, spec), x)
    kernel = functools.partial(fftnd_local, steps=route.steps, norm=norm)
    out_spec = fitting_spec(route.out_shape, mesh, route.spec_out if spec is None else spec)

    def body(x):
        x = pad_to(x.astype(in_dtype), shape_in)
        x = constrain(pad_to(x, route.pad_in), route.spec_in)
        y = shard_map(kernel, in_specs=route.spec_in, out_specs=route.spec_out)(x)
        return pad_to(y, route.out_shape)

    return run_on_mesh(body, mesh, out_spec, x)


def general(x, kind, s, axes, norm, mesh, in_dtype, spec, known=True):
    """The general route of ``_route.py`` for ``x``, laid out ``spec`` on ``mesh``.

    The route works in ``spec`` with the mesh axes it leaves unused spread
    over the work (``_route.spread``): ``spec`` itself when ``x`` uses every
    mesh axis. The result stays where the route's exchanges leave it where
    `_cycles` allows; otherwise it is moved back to the working layout
    (one more reshard, XLA's all_to_alls). So ``ifftn(fftn(x))`` ends in ``x``'s own layout
    when ``x`` uses every mesh axis, as jnp keeps it, unless the spectrum
    cannot be split as ``x`` is (``rfftn`` of an ``x`` that splits the real
    axis). A replicated ``x``, and any ``x`` whose layout is not ``known``
    (a tracer on an ``Auto`` mesh), get the route's layout: the work is
    distributed and the result is in the largest even layout that fits.
    """
    route, shape_in, back_to = _decide(kind, tuple(x.shape), s, axes, mesh, spec, known)
    return transform(
        x,
        route=route,
        kind=kind,
        s=s,
        axes=axes,
        norm=norm,
        shape_in=shape_in,
        in_dtype=in_dtype,
        spec=back_to,
    )


@functools.lru_cache(maxsize=256)
def _decide(kind, shape, s, axes, mesh, spec, known):
    """(the route, the shape it transforms, the layout to return the result in or ``None``:
    where the route leaves it), as `general` says; a few hundred microseconds of
    finding it, done once per signature."""
    route, shape_in, work = _route_for(kind, shape, s, axes, mesh, spec)
    ndim = len(shape)
    if route is None:  # a sharded vector: gathered, returned in spec
        return route, shape_in, spec
    if not (known and any(spec_groups(spec, ndim, dict(mesh.shape)))):
        return route, shape_in, None
    fits = same_layout(fitting_spec(route.out_shape, mesh, work), work, mesh, ndim)
    back_to = work if fits and not _cycles(route, kind, shape_in, s, axes, mesh, work) else None
    final = back_to or fitting_spec(route.out_shape, mesh, route.spec_out)
    if same_layout(final, spec, mesh, ndim):
        back_to = spec  # the caller's own spelling (size-1 mesh axes and all)
    return route, shape_in, back_to


def _route_for(kind, shape, s, axes, mesh, spec):
    """(the route for an operand of ``shape`` laid out ``spec``, the shape it transforms,
    the layout it works in: ``spec`` with the mesh axes it leaves unused spread)."""
    sizes = dict(mesh.shape)
    shape_in = input_shape(shape, s, axes, kind)
    groups = _route.spread(spec_groups(spec, len(shape), sizes), shape_in, axes, sizes)
    n_last = s[-1] if kind == "irfft" else None
    found = _route.route_for(shape_in, groups, axes, kind, sizes, n_last)
    return found, shape_in, layout_spec(groups)


def _cycles(route, kind, shape_in, s, axes, mesh, work, steps=4) -> bool:
    """Whether ``route``'s result may stay where its exchanges leave it.

    Only when the chain of layouts that the route starts (its result, the
    route's result for that layout, and so on) returns to ``work``, each link
    brought back by the opposite transform's route. A chain that ends instead
    (in a layout the route leaves as it is, or one the opposite route does not
    bring back) maps two input layouts to one result layout, and the inverse
    can return only one of them; on such a chain every result is returned in
    its input's layout.
    """
    ndim, layout = len(shape_in), work
    for _ in range(steps):
        if route is None or not _round_trips(route, kind, shape_in, axes, mesh, layout):
            return False
        layout = fitting_spec(route.out_shape, mesh, route.spec_out)
        if same_layout(layout, work, mesh, ndim):
            return True
        if not same_layout(fitting_spec(shape_in, mesh, layout), layout, mesh, ndim):
            return False  # the input's lengths do not split that way
        route, _, _ = _route_for(kind, shape_in, s, axes, mesh, layout)
    return False


def _round_trips(route, kind, shape_in, axes, mesh, spec) -> bool:
    """Whether the opposite transform, given ``route``'s result, comes back to ``spec``."""
    out_spec = fitting_spec(route.out_shape, mesh, route.spec_out)
    back_s = list(route.out_shape[a] for a in axes)
    if kind == "rfft":  # irfft back to the true length of the real axis
        back_s[-1] = shape_in[axes[-1]]
    other = _route.OPPOSITE[kind]
    back, _, _ = _route_for(other, route.out_shape, tuple(back_s), axes, mesh, out_spec)
    if back is None:
        return False
    arrived = fitting_spec(back.out_shape, mesh, back.spec_out)
    return same_layout(arrived, spec, mesh, len(route.out_shape))
