"""The LU family's stacks: each device factors and solves its own members (private).

The route (``distla._core.route``) calls these functions for stacks
``[..., n, n]`` on a mesh, after its checks (square matrices,
``jnp.linalg.solve``'s numpy-2 shape rules), with every operand cast to the
result dtype and with the call's ``distla._core.plan.Plan``; so does the
vmap rule of a one-matrix call (`vmap_rule`). Nothing is checked or
looked up again.

The work is embarrassingly parallel: each device factors and solves the
members it holds with the one-device LAPACK path (``distla.kernels.batched``)
inside ``shard_map``, and the compiled program has no collective at all when
the stack arrives sharded along its batch dimensions. The path of one call:

1. **Kernel layout.** Every mesh axis (of size > 1) goes on a batch
   dimension, so every device gets members: ``P(('x', 'y'), None, None)``
   for a ``[B, n, n]`` stack on a 2-axis mesh. The axes the stack is already
   sharded by stay where they are, in their order, and the remaining axes
   are appended after them (a local slice, no communication): a stack in
   ``P('y', None, None)`` on a 2x4 mesh is solved in ``P(('y', 'x'), None,
   None)``. Among the layouts that use every device the one needing the
   least padding wins, then the one that moves the fewest axes.
2. **Padding.** A batch dimension the devices do not divide is padded with
   identity systems (zero right-hand sides, identity pivots); they are
   cropped on the way out.
3. **Re-layout.** An operand in another layout (matrix dimensions sharded,
   another batch axis order) is moved one mesh axis at a time (one
   all-to-all each); a whole stack is never gathered on one device. XLA's
   partitioner would otherwise replicate a stack whose matrix dimensions are
   sharded before slicing it along the batch.
4. **Results** come back in the layout jnp would give them: the batch
   layout the stack arrived in (``P('rows')`` in, ``P('rows')`` out, so
   ``jnp.matmul(a, x) - b`` type-checks on an Explicit mesh; replicated
   operands give replicated results), reached from the kernel layout one
   axis at a time (moving results only, never the stack). Where the arriving
   layout cannot be seen (an ``Auto`` tracer) or has an unsharded batch with
   sharded matrix dimensions, the kernel layout
   when it fits their shape, for a padded batch the largest even layout of
   the mesh that fits (``distla._core.mesh.fitting_spec``).

The layout of a concrete array is read from its ``NamedSharding``, and of a
tracer on an ``Explicit`` mesh from its type. Inside ``jax.jit`` on an
``Auto`` mesh the tracer does not carry its layout, so the stack is assumed
to be sharded in the kernel layout (mesh axes in mesh order on the first
batch dimension); any other layout then costs one re-layout chosen by XLA.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels import batched as kernels

from ..._core.batch_layout import (
    Layout,
    arrived_layout,
    entry_axes,
    fill_batch,
    kernel_layout,
    layout_spec,
    relayout,
    source_layout,
    whole_members,
)
from ..._core.lapack_batch import in_member_chunks, members_per_call
from ..._core.mesh import fitting_spec, run_on_mesh, shard_map
from ..._core.plan import Plan

# --------------------------------------------------------------------------- public


def solve(plan: Plan, a: jax.Array, b: jax.Array) -> jax.Array:
    """``jnp.linalg.solve`` for a stack sharded along its batch dimensions.

    Args:
      plan: the call's plan (its mesh).
      a: ``[..., n, n]`` stack on a mesh, ideally sharded along batch
        dimensions only (any layout is accepted).
      b: ``[n]`` (one vector for every member, as in ``jnp.linalg.solve``)
        or ``[..., n, k]`` with batch dimensions that broadcast against
        ``a``'s (numpy 2 rules: a ``[B, n]`` ``b`` is not a stack of vectors).

    Returns:
      ``x`` of shape ``[..., n]`` or ``[..., n, k]`` (the broadcast batch
      shape), sharded along the batch dimensions in the kernel layout (see
      the module docstring), or in the largest even layout that fits when the
      batch was padded. A singular member gives inf/nan in that member only.
    """
    b_core = 1 if b.ndim == 1 else 2
    out_core = b.shape[b.ndim - b_core :]
    return _dispatch(
        "solve", (a, b), plan, cores=(2, b_core), fills=("eye", "zeros"), out_cores=(out_core,)
    )[0]


def lu_factor(plan: Plan, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jax.scipy.linalg.lu_factor`` of every member of a sharded stack.

    Args:
      plan: the call's plan (its mesh).
      a: ``[..., n, n]`` stack on a mesh.

    Returns:
      ``(lu [..., n, n], piv [..., n] int32)``, both sharded along the batch
      like the kernel layout; ``piv[..., i]`` is the row interchanged with row
      ``i`` (0-based, scipy's convention).
    """
    n = a.shape[-1]
    return tuple(
        _dispatch("lu_factor", (a,), plan, cores=(2,), fills=("eye",), out_cores=((n, n), (n,)))
    )


def lu_solve(plan: Plan, lu: jax.Array, piv: jax.Array, b: jax.Array, *, trans: int = 0):
    """``jax.scipy.linalg.lu_solve`` for every member of a sharded stack.

    Args:
      plan: the call's plan (its mesh).
      lu: ``[..., n, n]`` factors from [`lu_factor`][distla.linalg.lu_factor].
      piv: ``[..., n]`` integer pivots (scipy's convention).
      b: ``[..., n]`` (one vector per member) or ``[..., n, k]``, with exactly
        ``lu``'s batch dimensions.
      trans: 0 solves ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.

    Returns:
      ``x`` shaped like ``b``, sharded along the batch.
    """
    b_core = 1 if b.ndim == lu.ndim - 1 else 2
    return _dispatch(
        "lu_solve",
        (lu, piv.astype(jnp.int32), b),
        plan,
        cores=(2, 1, b_core),
        fills=("eye", "arange", "zeros"),
        out_cores=(b.shape[b.ndim - b_core :],),
        trans=trans,
    )[0]


def det(plan: Plan, a: jax.Array) -> jax.Array:
    """``jnp.linalg.det`` of every member: ``[..., n, n] -> [...]`` sharded along the batch."""
    return _dispatch("det", (a,), plan, cores=(2,), fills=("eye",), out_cores=((),))[0]


def slogdet(plan: Plan, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jnp.linalg.slogdet`` of every member: ``(sign [...], logabsdet [...])``.

    ``sign`` has ``a``'s dtype, ``logabsdet`` its real dtype; a singular member
    gives sign 0 and logabsdet ``-inf``. Both sharded along the batch.
    """
    return tuple(_dispatch("slogdet", (a,), plan, cores=(2,), fills=("eye",), out_cores=((), ())))


def inv(plan: Plan, a: jax.Array) -> jax.Array:
    """``jnp.linalg.inv`` of every member: ``[..., n, n]`` sharded along the batch."""
    n = a.shape[-1]
    return _dispatch("inv", (a,), plan, cores=(2,), fills=("eye",), out_cores=((n, n),))[0]


def vmap_rule(op: str, plan: Plan, axis_size: int, in_batched: Sequence[bool], *args, **kw):
    """A vmap rule (``distla._core.route.Op.vmap``): a vmapped one-matrix call becomes one
    batched call.

    ``jax.vmap`` of a function of one matrix (``distla.linalg.solve`` of an
    ``[n, n]`` matrix, say) would otherwise run the distributed one-matrix
    algorithm under vmap. With this rule the mapped axis becomes the batch
    dimension of a stack, and each device solves its own members, with no
    communication when the mapped axis is sharded. Declared as
    ``Op(..., vmap=functools.partial(stacks.vmap_rule, "solve"))``.

    ``custom_vmap`` has no reverse-mode rule, so differentiate around it: a
    solve built as ``lax.custom_linear_solve(lambda x: a @ x, b, solve, transpose_solve)``
    from the vmapped ``lu_factor`` of ``lax.stop_gradient(a)`` and vmapped
    ``lu_solve`` with ``trans=0 / 1`` (jax's own structure for
    ``jnp.linalg.solve``) supports ``grad``, ``jvp``, ``vmap`` and ``vmap`` of
    ``grad``, every vmapped piece batched (``tests/test_batched.py``).

    Args:
      op: ``"solve"``, ``"lu_factor"``, ``"lu_solve"`` (keyword ``trans``),
        ``"det"``, ``"slogdet"`` or ``"inv"``; the arguments are those of the
        functions of this module (``lu_solve(plan, lu, piv, b)``), one matrix each.
      plan: the one-matrix call's plan (its mesh).
      axis_size: the size of the mapped axis.
      in_batched: which arguments carry the mapped axis (at axis 0).
      *args: the arguments, mapped ones with the mapped axis first.

    Returns:
      ``(outputs, out_batched)`` as ``custom_vmap`` expects: every output
      carries the mapped axis first.
    """
    # vmap broadcasts an unmapped operand against the mapped ones without any
    # rank-promotion complaint, so the batched call must not complain either
    with jax.numpy_rank_promotion("allow"):
        if op == "solve":
            a, b = args
            if in_batched[1] and b.ndim == 2:  # one vector per member
                return solve(plan, a, b[..., None])[..., 0], True
            return solve(plan, a, b), True  # an unmapped a is factored once per device
        if op == "lu_solve":
            lu, piv, b = (
                x if mapped else jnp.broadcast_to(x, (axis_size, *x.shape))
                for x, mapped in zip(args, in_batched)
            )
            if b.ndim == lu.ndim - 1:  # one vector per member
                return lu_solve(plan, lu, piv, b[..., None], **kw)[..., 0], True
            return lu_solve(plan, lu, piv, b, **kw), True
        out = {"lu_factor": lu_factor, "det": det, "slogdet": slogdet, "inv": inv}[op](plan, *args)
    return out, jax.tree.map(lambda _: True, out)


# --------------------------------------------------------------------------- the call


def _dispatch(
    op: str,
    operands: tuple[jax.Array, ...],
    plan: Plan,
    *,
    cores: tuple[int, ...],
    fills: tuple[str, ...],
    out_cores: tuple[tuple[int, ...], ...],
    trans: int = 0,
) -> tuple[jax.Array, ...]:
    mesh = plan.mesh
    # jnp's own shape rules on the global shapes: under
    # jax_numpy_rank_promotion="raise" a stack solved against one vector raises
    # here exactly as jnp.linalg.solve does (the kernels then allow it).
    _one_device_shapes(
        op,
        tuple(x.shape for x in operands),
        tuple(np.dtype(x.dtype) for x in operands),
        trans,
        jax.config.jax_numpy_rank_promotion,
    )
    manual = any(t == AxisType.Manual for t in mesh.axis_types)
    if manual or any(x.size == 0 for x in operands):
        # already inside a shard_map (local blocks), or empty
        return _one_device(op, operands, trans)
    sources = tuple(source_layout(x, mesh) for x in operands)
    outs = _call(
        *operands,
        mesh=mesh,
        op=op,
        cores=cores,
        fills=fills,
        out_cores=out_cores,
        sources=sources,
        trans=trans,
    )
    if any(isinstance(y, jax.core.Tracer) or not hasattr(y, "sharding") for y in outs):
        return outs
    # Called eagerly: the results in the layout the program's last constraint names.
    # GSPMD (jax_use_shardy_partitioner=False) may hand back an Auto-mesh result
    # more finely sharded than that constraint; Shardy keeps it (then nothing moves).
    specs = _layouts(tuple(x.shape for x in operands), mesh, cores, out_cores, sources)[-1]
    return tuple(
        y if y.sharding.is_equivalent_to(want, y.ndim) else jax.device_put(y, want)
        for y, want in ((y, NamedSharding(y.sharding.mesh, s)) for y, s in zip(outs, specs))
    )


@functools.lru_cache(maxsize=256)
def _one_device_shapes(op, shapes, dtypes, trans, rank_promotion):
    del rank_promotion  # part of the cache key only
    structs = [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, dtypes)]
    return jax.eval_shape(_reference(op, trans), *structs)


def _reference(op: str, trans: int):
    """The one-device jax function whose semantics ``op`` has."""
    if op == "lu_solve":
        return lambda lu, piv, b: jsl.lu_solve((lu, piv), b, trans=trans)
    return {
        "solve": jnp.linalg.solve,
        "lu_factor": jsl.lu_factor,
        "det": jnp.linalg.det,
        "slogdet": jnp.linalg.slogdet,
        "inv": jnp.linalg.inv,
    }[op]


def _kernel(op: str, trans: int):
    if op == "lu_solve":
        return functools.partial(kernels.lu_solve_local, trans=trans)
    return {
        "solve": kernels.solve_local,
        "lu_factor": kernels.lu_factor_local,
        "det": kernels.det_local,
        "slogdet": kernels.slogdet_local,
        "inv": kernels.inv_local,
    }[op]


def _as_tuple(fn):
    def wrapped(*xs):
        # the global shapes passed jnp's rank-promotion rule already; locally the
        # same broadcasting is allowed whatever the config
        with jax.numpy_rank_promotion("allow"):
            out = fn(*xs)
        return tuple(out) if isinstance(out, tuple) else (out,)

    return wrapped


def _one_device(op: str, operands: tuple[jax.Array, ...], trans: int) -> tuple[jax.Array, ...]:
    return _as_tuple(_kernel(op, trans))(*operands)


def _layouts(shapes, mesh, cores, out_cores, sources):
    """The kernel layout of a batched call and its results' layouts, from static shapes."""
    batches = [s[: len(s) - c] for s, c in zip(shapes, cores)]
    full = tuple(np.broadcast_shapes(*batches))
    nb = len(full)

    def lift(layout: Layout | None, rank: int) -> Layout | None:
        # an operand's layout in the coordinates of the full batch shape
        return None if layout is None else ((),) * (nb - rank) + layout

    # the stack's own batch layout decides the kernel layout: the first operand
    # with sharded batch dimensions (or, if none is, any whose layout is known)
    lifted = [lift(s, len(bt)) for s, bt in zip(sources, batches)]
    known = [s for s, bt in zip(lifted, batches) if s is not None and bt]
    sharded = [s for s in known if any(s[:nb])]
    source_batch = (sharded or known or [None])[0]
    source_batch = None if source_batch is None else source_batch[:nb]
    whole = all(whole_members(s, c, mesh) for s, bt, c in zip(lifted, batches, cores) if bt)
    layout, padded = kernel_layout(full, source_batch, mesh, whole=whole)

    # results: the batch layout the stack arrived in, as jnp returns it; unknown:
    # the kernel layout, for a padded batch the largest even layout that fits
    # (fitting_spec lists the axes of a dimension in mesh order)
    replicated = bool(known) and all(s is not None and not any(s) for s in lifted)
    arrived = arrived_layout(full, source_batch, replicated, mesh)
    out_specs = tuple(
        layout_spec(arrived + ((),) * len(oc))
        if arrived is not None
        else layout_spec(layout + ((),) * len(oc))
        if padded == full
        else fitting_spec(full + oc, mesh, layout_spec(layout + ((),) * len(oc)))
        for oc in out_cores
    )
    return full, nb, layout, padded, lifted, batches, arrived, out_specs


@functools.partial(
    jax.jit, static_argnames=("mesh", "op", "cores", "fills", "out_cores", "sources", "trans")
)
def _call(*operands, mesh, op, cores, fills, out_cores, sources, trans):
    shapes = tuple(x.shape for x in operands)
    full, nb, layout, padded, lifted, batches, arrived, out_specs = _layouts(
        shapes, mesh, cores, out_cores, sources
    )
    # per operand: the dims it is broadcast along stay unsharded and unpadded
    plans = []
    for x, core, fill, bt, src in zip(operands, cores, fills, batches, lifted):
        if not bt:  # no batch dimensions: replicated, whole
            plans.append(None)
            continue
        shape = (1,) * (nb - len(bt)) + bt
        bcast = tuple(s == 1 and f != 1 for s, f in zip(shape, full))
        own_pad = tuple(s if b else p for s, b, p in zip(shape, bcast, padded))
        dst = tuple(() if b else e for b, e in zip(bcast, layout)) + ((),) * core
        plans.append((shape, core, own_pad, dst, src, fill))

    def body(*xs):
        ins, in_specs = [], []
        for x, plan in zip(xs, plans):
            if plan is None:
                ins.append(x)
                in_specs.append(P())
                continue
            shape, core, own_pad, dst, src, fill = plan
            x = x.reshape(shape + x.shape[x.ndim - core :])  # missing batch dims as 1s
            x = fill_batch(x, shape, own_pad, fill)
            x = relayout(x, src, dst, mesh)
            ins.append(x)
            in_specs.append(layout_spec(dst))
        kernel_out = tuple(layout_spec(layout + ((),) * len(oc)) for oc in out_cores)
        largest = max((max(x.shape[x.ndim - c :], default=1) for x, c in zip(operands, cores)))
        kernel = in_member_chunks(
            _as_tuple(_kernel(op, trans)), cores, members_per_call(mesh, largest)
        )
        outs = shard_map(kernel, in_specs=tuple(in_specs), out_specs=kernel_out)(*ins)
        results = []
        for y, spec in zip(outs, out_specs):
            if padded != full or arrived is not None:
                target = tuple(entry_axes(e) for e in tuple(spec) + (None,) * (y.ndim - len(spec)))
                y = relayout(y, layout + ((),) * (y.ndim - nb), target, mesh, final=False)
                y = y[tuple(slice(0, s) for s in full)]
            results.append(y)
        return tuple(results)

    return run_on_mesh(body, mesh, out_specs, *operands)
