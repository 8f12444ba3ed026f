"""jax's one-device functions on stacks sharded along their batch (private).

The Cholesky family, QR and the spectral functions run a stack ``[..., m, n]``
sharded along its batch dimensions with jax's own one-device function on each
device's members: no collective. :func:`stack` puts the operands in the batch
layout of distla's batched solves (``distla._core.batch_layout.kernel_layout``) and runs
the function inside ``shard_map``; :func:`vmappable` makes ``jax.vmap`` of a
one-matrix call such a stacked call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from .batch_layout import (
    arrived_layout,
    entry_axes,
    kernel_layout,
    layout_spec,
    relayout,
    source_layout,
    whole_members,
)
from .lapack_batch import in_member_chunks, members_per_call
from .mesh import constrain, fitting_spec, run_on_mesh, shard_map
from .plan import mesh_of


def stack(
    fn: Callable[..., Any],
    xs: tuple[jax.Array, ...],
    cores: tuple[int, ...],
    out_core: int,
    *,
    mesh: AbstractMesh | None = None,
) -> Any:
    """``fn`` (a jax function of stacks) on operands sharded along their batch: no collective.

    Args:
      fn: the one-device function, applied to whole stacks.
      xs: its operands; those with every batch dimension are laid out along
        the batch, the others (no batch dimensions) replicated.
      cores: the number of core (matrix) dimensions of each operand.
      out_core: the number of core dimensions of every result.
      mesh: the call's mesh (``None``: read off the operands).

    Returns:
      ``fn(*xs)``, computed in the batch layout of distla's batched solves (every
      mesh axis on a batch dimension, the largest even one that fits) and
      returned as jnp returns it: in the stack's own batch layout where it is
      sharded along the batch, replicated where every operand is, else in that
      kernel layout.
    """
    if mesh is None:
        mesh = mesh_of(*xs, names=tuple(f"x{i}" for i in range(len(xs))))
    batches = [x.shape[: x.ndim - c] for x, c in zip(xs, cores)]
    full = tuple(jnp.broadcast_shapes(*batches))
    source = None
    for x, bt in zip(xs, batches):
        if bt == full:
            source = source_layout(x, mesh)
            source = None if source is None else source[: len(full)]
            break
    sources = [source_layout(x, mesh) for x in xs]  # read outside: see _batch_layout.source_layout
    whole = all(whole_members(s, c, mesh) for s, bt, c in zip(sources, batches, cores) if bt)
    layout, _ = kernel_layout(full, source, mesh, whole=whole)
    replicated = all(s is not None and not any(s) for s in sources)
    arrived = arrived_layout(full, source, replicated, mesh)

    def spec(shape, core, where=layout):
        return fitting_spec(shape, mesh, layout_spec(where + ((),) * core))

    out = jax.eval_shape(fn, *(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs))
    out_specs = jax.tree.map(lambda o: spec(o.shape, out_core), out)
    # computed in the kernel's layout (every mesh axis on the batch), returned in the one
    # the stack arrived in, as jnp returns it
    back = (
        out_specs
        if arrived is None
        else jax.tree.map(lambda o: spec(o.shape, out_core, arrived), out)
    )

    # an operand with part of the batch (b of shape (4, n, k) against a of (2, 4, n, n)) is
    # broadcast to all of it, as jnp broadcasts it; one with no batch is shared, replicated
    in_specs = tuple(
        spec(full + x.shape[x.ndim - c :], c) if bt else P() for x, bt, c in zip(xs, batches, cores)
    )
    local = all(  # every device holds whole members: run fn on them in shard_map
        all(e is None for e in tuple(s)[len(full) :])
        for s in (*in_specs, *jax.tree.leaves(out_specs, is_leaf=lambda s: isinstance(s, P)))
    )

    def body(*ys):
        moved = []
        for y, bt, c, s, src in zip(ys, batches, cores, in_specs, sources):
            if bt == full:
                dst = tuple(entry_axes(e) for e in tuple(s) + (None,) * y.ndim)[: y.ndim]
                y = relayout(y, src, dst, mesh)
            elif bt:
                y = constrain(jnp.broadcast_to(y, full + y.shape[y.ndim - c :]), s)
            moved.append(y)
        if local:
            largest = max(max(x.shape[x.ndim - c :], default=1) for x, c in zip(xs, cores))
            per_device = in_member_chunks(fn, cores, members_per_call(mesh, largest))
            # check_vma=False: jax's own loops (QDWH's convergence flag) carry unvarying
            # constants that the members make varying, which a checked shard_map refuses
            return shard_map(per_device, in_specs=in_specs, out_specs=out_specs, check_vma=False)(
                *moved
            )
        return fn(*moved)  # members split over devices: XLA partitions fn

    return jax.jit(lambda *ys: run_on_mesh(body, mesh, back, *ys))(*xs)


def vmappable(one: Callable[..., Any], stacked: Callable[..., Any]) -> Callable[..., Any]:
    """``one`` (a one-matrix call) whose ``jax.vmap`` runs ``stacked`` on the stack instead."""
    f = jax.custom_batching.custom_vmap(one)

    def rule(axis_size, in_batched, *args):
        args = [
            x if mapped else jnp.broadcast_to(x, (axis_size, *x.shape))
            for x, mapped in zip(args, in_batched)
        ]
        with jax.numpy_rank_promotion("allow"):
            out = stacked(*args)
        return out, jax.tree.map(lambda _: True, out)

    f.def_vmap(rule)
    return f
