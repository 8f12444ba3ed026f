"""Batch layouts of stacks on a mesh: where the mesh axes go, padding, re-layout (private).

The layout rules of distla's batched calls (``distla.linalg._batched``, and the
stacked Cholesky, QR and spectral calls through ``distla._core.stacked``): a
``Layout`` names, for each dimension of a stack, the mesh axes it is split
over, major first. :func:`kernel_layout` puts every mesh axis on a batch
dimension, :func:`fill_batch` pads a batch the devices do not divide and
:func:`relayout` moves a stack between layouts one mesh axis at a time.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AbstractMesh, AxisType, NamedSharding

from .matrix import round_up
from .mesh import constrain
from .specs import entry_axes, layout_spec

Axes = tuple[str, ...]  # the mesh axes on one dimension, major first
Layout = tuple[Axes, ...]  # one entry per dimension


def source_layout(x: jax.Array, mesh: AbstractMesh) -> Layout | None:
    """The layout ``x`` arrives in, or ``None`` where it cannot be seen.

    Concrete arrays carry it in their ``NamedSharding``; tracers only on a
    mesh whose axes are all ``Explicit`` (an ``Auto`` axis is not part of the
    type).
    """
    if isinstance(x, jax.core.Tracer):
        sharding = jax.typeof(x).sharding
        if not all(t == AxisType.Explicit for t in mesh.axis_types):
            return None
        spec = sharding.spec
    else:
        sharding = getattr(x, "sharding", None)
        if not isinstance(sharding, NamedSharding):
            return None
        spec = sharding.spec
    entries = tuple(spec) + (None,) * (x.ndim - len(spec))
    return tuple(entry_axes(e) for e in entries)


def live(layout: Layout | None, mesh: AbstractMesh) -> Layout | None:
    """``layout`` without its mesh axes of size 1, which split nothing.

    :func:`source_layout` keeps them: results come back spelled as the stack
    arrived (``P('x')`` on a 1x8 mesh stays ``P('x')``, as jnp keeps it, and an
    ``Explicit`` mesh compares the spelling); the kernel layouts ignore them.
    """
    if layout is None:
        return None
    return tuple(tuple(ax for ax in e if mesh.shape[ax] > 1) for e in layout)


def kernel_layout(
    batch: tuple[int, ...], source: Layout | None, mesh: AbstractMesh, *, whole: bool = False
) -> tuple[Layout, tuple[int, ...]]:
    """Where the mesh axes go on the batch dimensions, and the padded batch shape.

    A stack that arrived sharded along its batch with ``whole`` members (no
    mesh axis on a matrix dimension of any operand) stays where it is: each
    device computes the members it holds, with no collective at all, as
    DESIGN.md asks of batched calls. Devices that hold the same members (the
    mesh axes ``source`` leaves out) compute them alike, as jnp does.

    Otherwise every mesh axis of size > 1 is put on some batch dimension.
    Among those assignments the one with the fewest (padded) members wins,
    then the one that keeps most of ``source``'s batch axes where they are
    (in ``source``'s order, with new axes appended after them: a local
    slice), then the one that puts axes on earlier dimensions.

    Args:
      batch: the batch shape.
      source: the batch part of the stack's current layout (``None``:
        unknown, treated as unsharded).
      mesh: the mesh.
      whole: every operand's members are whole on every device.

    Returns:
      ``(layout, padded)``: the mesh axes of each batch dimension and the
      batch shape padded so that they divide it.
    """
    nb = len(batch)
    source = live(source, mesh) or ((),) * nb
    if whole and any(source) and divides(batch, source, mesh):
        return tuple(source), tuple(batch)
    axes = [ax for ax in mesh.axis_names if mesh.shape[ax] > 1]
    best = None
    for choice in itertools.product(range(nb), repeat=len(axes)):
        layout = []
        for d in range(nb):
            mine = [ax for ax, c in zip(axes, choice) if c == d]
            home = [ax for ax in source[d] if ax in mine]
            layout.append(tuple(home + [ax for ax in mine if ax not in home]))
        padded = tuple(
            round_up(size, math.prod(mesh.shape[ax] for ax in e)) for size, e in zip(batch, layout)
        )
        kept = (
            padded[d] == batch[d] and layout[d][: len(source[d])] == source[d] for d in range(nb)
        )
        moved = sum(len(source[d]) for d, k in enumerate(kept) if not k)
        key = (math.prod(padded), moved, choice)
        if best is None or key < best[0]:
            best = (key, tuple(layout), padded)
    return best[1], best[2]


def whole_members(layout: Layout | None, core: int, mesh: AbstractMesh) -> bool:
    """Whether ``layout`` (a stack's, ``core`` matrix dimensions last) keeps each member
    whole on a device: known, and no mesh axis of size > 1 on a matrix dimension."""
    layout = live(layout, mesh)
    return layout is not None and not any(layout[len(layout) - core :])


def divides(shape: Sequence[int], layout: Sequence[Axes], mesh: AbstractMesh) -> bool:
    return all(s % math.prod(mesh.shape[ax] for ax in e) == 0 for s, e in zip(shape, layout))


def arrived_layout(
    full: tuple[int, ...], source: Layout | None, replicated: bool, mesh: AbstractMesh
) -> Layout | None:
    """The batch layout a stacked call's results come back in, as jnp returns them.

    ``source`` is the stack's batch layout (``None``: unseen) and ``replicated``
    whether every operand arrived replicated. Sharded along the batch: back in
    ``source``; every operand replicated: replicated; else (or where that does
    not divide ``full``) ``None``, the kernel's own layout.
    """
    arrived = None
    if source is not None and any(source):
        arrived = tuple(source)
    elif replicated:
        arrived = ((),) * len(full)
    if arrived is not None and not divides(full, arrived, mesh):
        arrived = None
    return arrived


def relayout(
    x: jax.Array, src: Layout | None, dst: Layout, mesh: AbstractMesh, *, final: bool = True
) -> jax.Array:
    """Constrain ``x`` from ``src`` to ``dst``, moving one mesh axis per step.

    Each step is a single all-to-all (or a local slice); XLA's partitioner,
    given the whole move at once, may replicate the array first. Steps whose
    layout does not divide the shape are skipped, and so is ``dst`` itself
    unless ``final``.
    """
    if src is not None:
        cur = [list(e) for e in live(src, mesh)]
        for d, want in enumerate(dst):
            for i, ax in enumerate(want):
                if cur[d][: i + 1] == list(want[: i + 1]):
                    continue
                for entry in cur:
                    if ax in entry:
                        entry.remove(ax)
                cur[d].insert(i, ax)
                if cur != [list(e) for e in dst] and divides(x.shape, cur, mesh):
                    x = constrain(x, layout_spec(cur))
    return constrain(x, layout_spec(dst)) if final else x


def fill_batch(
    x: jax.Array, batch: tuple[int, ...], padded: tuple[int, ...], kind: str
) -> jax.Array:
    """Pad the batch dimensions of ``x`` from ``batch`` to ``padded`` with ``kind`` members."""
    if batch == padded:
        return x
    core = x.shape[len(batch) :]
    x = jnp.pad(x, [(0, p - s) for s, p in zip(batch, padded)] + [(0, 0)] * len(core))
    if kind == "zeros":
        return x
    pad_member = functools.reduce(
        jnp.logical_or,
        [
            lax.broadcasted_iota(jnp.int32, padded, d) >= s
            for d, (s, p) in enumerate(zip(batch, padded))
            if s != p
        ],
    )
    n = core[-1]
    if kind == "eye":
        member = jnp.eye(n, dtype=x.dtype)
    else:  # "arange": pivots that interchange nothing
        member = jnp.arange(n, dtype=x.dtype)
    mask = pad_member.reshape(padded + (1,) * len(core))
    return jnp.where(mask, jnp.broadcast_to(member, x.shape), x)


def broadcast_batch(x: jax.Array, batch: tuple[int, ...], core: int) -> jax.Array:
    """``x`` (``core`` matrix dimensions last) broadcast to the batch shape ``batch``."""
    shape = (*batch, *x.shape[x.ndim - core :])
    return x if x.shape == shape else jnp.broadcast_to(x, shape)
