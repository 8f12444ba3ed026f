"""Halo exchange of sharded volumes, as ``jaxdecomp.halo_exchange`` (private).

The public function lives here and is re-exported by ``distla.jaxdecomp``;
the per-device body is ``kernels/halo.py``. The blocks are those of the
operand's layout: the exchange runs over the mesh axes that split each
exchanged axis, and the result keeps the operand's layout.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import PartitionSpec as P

from distla.kernels.halo import AxisExchange, halo_local

from .._core import route
from .._core.checks import as_array
from .._core.mesh import (
    constrain,
    describe_mesh,
    grid_of,
    is_explicit,
    run_on_mesh,
    shard_map,
    spec_groups,
)
from .._core.plan import Plan
from ._fftnd import spec_of, tied

WHAT = "distla.jaxdecomp.halo_exchange"


@route.public
def halo_exchange(
    x: jax.typing.ArrayLike,
    halo_extents: Sequence[int | tuple[int, int]],
    halo_periods: Sequence[bool] | bool,
    backend: str = "jax",
    *,
    exchange_whole_axes: bool = False,
) -> jax.Array:
    """Fill each block's ghost cells from its neighbours, as ``jaxdecomp.halo_exchange``.

    ``x`` is a volume whose every local block carries ghost cells at both
    ends of the exchanged axes. Along axis ``i`` with ``halo_extents[i] = h``
    (or ``(lo, hi)``), a block of local length ``L`` keeps its cells
    ``[lo, L - hi)``; its first ``lo`` cells become the last ``lo`` of those
    of the block before it, and its last ``hi`` cells the first ``hi`` of
    those of the block after it. Along a periodic axis the first and last
    blocks are neighbours; otherwise the ghosts beyond the ends become zeros.
    Corner ghosts come from the diagonal neighbour. The same values as
    jaxdecomp's on ``Auto`` meshes, also on ``Explicit`` meshes, 1-axis
    meshes, with extents that differ per axis or per end, and on a third
    axis.

    The derivative is the exchange's true adjoint: each ghost cell's
    cotangent is added to the cell it copies, and the ghosts' cotangent is
    zero (jaxdecomp exchanges the cotangent again instead). With
    ``jax.linear_transpose`` that adjoint folds ghost cells back onto their
    owners: cloud-in-cell painting into padded blocks (see
    ``docs/particle-mesh.md``).

    Args:
      x: ``[X, Y, Z]`` volume (or ``[B, X, Y, Z]``, a batch along a leading
        axis that is never exchanged), ghost cells included, sharded on a
        1- or 2-axis mesh. Its blocks are those of its layout; an ``x``
        whose layout splits none of the exchanged axes (replicated, or a
        tracer on an ``Auto`` mesh, whose layout jax does not tell while
        tracing) is taken in jaxdecomp's layout ``P(a, b, None)`` on a mesh
        ``(a, b)`` (``P(a, None, None)`` on a 1-axis mesh). On one device
        (unsharded, or a one-device mesh) it comes back as it is, as
        jaxdecomp returns it, unless ``exchange_whole_axes``.
      halo_extents: ghost cells per exchanged axis: ``(hx, hy)`` as
        jaxdecomp's, or up to three entries (the third for Z), each an int
        (the same at both ends) or a pair ``(lo, hi)``; 0 leaves the axis.
      halo_periods: whether each axis is periodic (one bool per entry of
        ``halo_extents``, or one for all).
      backend: ``"jax"`` or ``"cudecomp"`` (accepted for compatibility;
        both run distla's exchange).
      exchange_whole_axes: also exchange along axes that no mesh axis splits
        (one block along them, its own neighbour: a periodic axis wraps onto
        itself, the ghosts of a non-periodic one become zeros), so that code
        gives the same ghosts on every mesh, one device included. jaxdecomp
        leaves those ghosts as they are (``False``).

    Returns:
      Array of ``x``'s shape and dtype, in ``x``'s layout. Per device, each
      exchanged axis costs two ``ppermute``\\ s of one ghost slab each:
      ``(lo + hi) * (block size / L) * itemsize`` bytes received.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D; its mesh has more than 2 axes;
        negative extents, or periods that do not match them; a block shorter
        than its two ghost regions; jaxdecomp's layout assumed for a shape
        the mesh does not divide; an unknown ``backend``.

    See also:
      ``jnp.pad(..., mode="wrap")``, the one-device equivalent of a periodic
      exchange; [`distla.jaxdecomp.transposeXtoY`][distla.jaxdecomp.transposeXtoY].

    Example:
      >>> import jax, numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((8, 16, 4), np.float32), mesh)
      >>> y = jaxdecomp.halo_exchange(x, halo_extents=(1, 1), halo_periods=(True, True))
      >>> y.sharding.spec
      P('z', 'y', None)
    """
    check_backend(backend, WHAT)
    x = as_array(x, "x", WHAT)
    if x.ndim not in (3, 4):
        raise ValueError(
            f"{WHAT} exchanges the ghost cells of 3-D volumes [X, Y, Z] (or a batch "
            f"[B, X, Y, Z]); got x of shape {x.shape}."
        )
    lead = x.ndim - 3
    extents = _extents(halo_extents)
    periods = _periods(halo_periods, len(extents))
    wanted = [(lead + i, lo, hi, per) for i, ((lo, hi), per) in enumerate(zip(extents, periods))]
    wanted = [w for w in wanted if w[1] or w[2]]
    if x.size == 0 or not wanted:
        return x
    options = dict(wanted=tuple(wanted), lead=lead, whole_axes=exchange_whole_axes)
    return route.call(HALO_EXCHANGE, x, **options)


def _on_one_device(x, *, wanted, lead, whole_axes):
    """No mesh: one block along every axis; its ghost cells only with ``whole_axes``."""
    del lead
    if not whole_axes:
        return x
    exchanges = tuple(AxisExchange(ax, (), 1, lo, hi, per) for ax, lo, hi, per in wanted)
    _check_lengths(x.shape, exchanges, None)
    return _local(x, exchanges=exchanges)


def _on_mesh(plan: Plan, x, *, wanted, lead, whole_axes):
    """On ``plan``'s mesh: over the mesh axes that split each exchanged axis."""
    mesh = plan.mesh
    grid_of(mesh, what=WHAT)
    spec = _blocks(x, mesh, [w[0] for w in wanted], lead)
    sizes = dict(mesh.shape)
    groups = spec_groups(spec, x.ndim, sizes)
    exchanges = []
    for ax, lo, hi, per in wanted:
        parts = math.prod(sizes[n] for n in groups[ax])
        if parts > 1 or whole_axes:
            order = tuple(n for n in mesh.axis_names if n in groups[ax])
            exchanges.append(AxisExchange(ax, groups[ax], parts, lo, hi, per, order))
    if not exchanges:
        return x
    exchanges = tuple(exchanges)
    _check_lengths(x.shape, exchanges, mesh)
    return _exchange(x, spec=spec, exchanges=exchanges)


HALO_EXCHANGE = route.Op(
    WHAT,
    operands=("x",),
    one_device=_on_one_device,
    distributed=_on_mesh,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=route.never,
    own_placement=True,
)


@functools.partial(jax.jit, static_argnames=("exchanges",))
def _local(x, *, exchanges):
    return halo_local(x, exchanges=exchanges)


@functools.partial(jax.jit, static_argnames=("spec", "exchanges"))
def _exchange(x, *, spec, exchanges):
    """``kernels/halo.py`` on the blocks of ``spec``; the result in ``spec``."""
    x = tied(x)  # under jit(grad) on an Auto mesh: the program keeps x
    mesh = jax.typeof(x).sharding.mesh
    kernel = functools.partial(halo_local, exchanges=exchanges)

    def body(x):
        return shard_map(kernel, in_specs=spec, out_specs=spec)(constrain(x, spec))

    return run_on_mesh(body, mesh, spec, x)


def _blocks(x: jax.Array, mesh, axes: Sequence[int], lead: int) -> P:
    """The layout whose blocks the exchange fills: ``x``'s, or jaxdecomp's.

    ``x``'s own layout when it splits one of the exchanged ``axes``;
    otherwise (replicated, or a tracer on an ``Auto`` mesh, whose layout is
    not known while tracing) jaxdecomp's ``P(a, b, None)``, which must then
    divide ``x``'s shape.
    """
    sizes = dict(mesh.shape)
    spec = spec_of(x)
    unknown = isinstance(x, jax.core.Tracer) and not is_explicit(mesh)
    groups = spec_groups(spec, x.ndim, sizes)
    if not unknown and any(groups[a] for a in axes):
        return spec
    names = tuple(mesh.axis_names)
    default = P(*([None] * lead), *names, *([None] * (3 - len(names))))
    bad = [
        (d, n, sizes[name])
        for d, (n, name) in enumerate(zip(x.shape[lead:], names), start=lead)
        if n % sizes[name]
    ]
    if bad:
        d, n, parts = bad[0]
        raise ValueError(
            f"{WHAT}: x of shape {x.shape} has no layout of its own here (replicated, or "
            f"traced on an Auto mesh), so its blocks are jaxdecomp's {default} on the "
            f"{describe_mesh(mesh)}; axis {d} of length {n} does not split into {parts} "
            "equal blocks. Give x a shape the mesh divides (ghost cells included) and "
            "put it in that layout (distla.shard), or use an Explicit mesh."
        )
    return default


def _check_lengths(shape, exchanges, mesh) -> None:
    for ex in exchanges:
        local = shape[ex.axis] // ex.parts
        if local < ex.lo + ex.hi:
            where = f" over {ex.parts} blocks on the {describe_mesh(mesh)}" if mesh else ""
            raise ValueError(
                f"{WHAT}: axis {ex.axis} of x (shape {shape}) has blocks of {local} cells"
                f"{where}, fewer than its {ex.lo} + {ex.hi} ghost cells. Use smaller "
                "halo_extents or fewer blocks along that axis."
            )


def _extents(halo_extents: Any) -> tuple[tuple[int, int], ...]:
    """``halo_extents`` as one ``(lo, hi)`` pair per axis."""
    try:
        entries = list(halo_extents)
    except TypeError:
        entries = None
    if entries is None or not 1 <= len(entries) <= 3:
        raise ValueError(
            f"{WHAT}: halo_extents must give 1 to 3 axes' ghost cells, as (hx, hy) or "
            f"(hx, hy, hz), each an int or a pair (lo, hi); got {halo_extents!r}."
        )
    out = []
    for e in entries:
        pair = (e, e) if not isinstance(e, (tuple, list)) else tuple(e)
        if len(pair) != 2 or any(int(v) != v or v < 0 for v in pair):
            raise ValueError(
                f"{WHAT}: each halo extent is a non-negative int or a pair (lo, hi) of "
                f"them; got {e!r} in halo_extents={halo_extents!r}."
            )
        out.append((int(pair[0]), int(pair[1])))
    return tuple(out)


def _periods(halo_periods: Any, n: int) -> tuple[bool, ...]:
    if isinstance(halo_periods, bool):
        return (halo_periods,) * n
    try:
        periods = tuple(bool(p) for p in halo_periods)
    except TypeError:
        periods = ()
    if len(periods) != n:
        raise ValueError(
            f"{WHAT}: halo_periods must give one bool per entry of halo_extents ({n}); "
            f"got {halo_periods!r}."
        )
    return periods


def check_backend(backend: Any, what: str) -> None:
    """jaxdecomp's ``backend=`` keyword: ``"jax"`` or ``"cudecomp"``, any case."""
    if not isinstance(backend, str) or backend.lower() not in ("jax", "cudecomp"):
        raise ValueError(
            f"{what}: backend must be 'jax' or 'cudecomp' (accepted for jaxdecomp "
            f"compatibility; both run distla's code); got {backend!r}"
        )
