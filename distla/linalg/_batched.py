"""Batched solves across devices: each device solves its own members (private).

``distla.linalg`` calls these functions for stacks ``[..., n, n]`` on a
mesh, after the common checks (square matrices, ``jnp.linalg.solve``'s
numpy-2 shape rules), with every operand cast to the result dtype and with
the call's ``distla._core.plan.Plan`` (``call=``): then nothing is checked or
looked up again. Called with no plan (``jax.vmap`` of a one-matrix call, see
:func:`vmap_rule`, or a direct caller), they check their operands and read
the mesh off them first.

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
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels import batched as kernels

from .._core.batch_layout import (
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
from .._core.checks import ShapeError
from .._core.lapack_batch import in_member_chunks, members_per_call
from .._core.mesh import fitting_spec, operand_mesh, run_on_mesh, shard_map
from .._core.plan import Plan

# --------------------------------------------------------------------------- public


def solve(a: jax.Array, b: jax.Array, *, call: Plan | None = None) -> jax.Array:
    """``jnp.linalg.solve`` for a stack sharded along its batch dimensions.

    Args:
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

    Raises:
      ValueError: (with no ``call``) ``a`` is not a stack of square matrices,
        or the batch dimensions of ``a`` and ``b`` do not broadcast.
    """
    b_core = 1 if b.ndim == 1 else 2
    if call is None:
        _check_solve(a, b, b_core)
    out_core = b.shape[b.ndim - b_core :]
    return _dispatch(
        "solve", (a, b), call, cores=(2, b_core), fills=("eye", "zeros"), out_cores=(out_core,)
    )[0]


def lu_factor(a: jax.Array, *, call: Plan | None = None) -> tuple[jax.Array, jax.Array]:
    """``jax.scipy.linalg.lu_factor`` of every member of a sharded stack.

    Args:
      a: ``[..., n, n]`` stack on a mesh.

    Returns:
      ``(lu [..., n, n], piv [..., n] int32)``, both sharded along the batch
      like the kernel layout; ``piv[..., i]`` is the row interchanged with row
      ``i`` (0-based, scipy's convention).

    Raises:
      ValueError: ``a`` is not a stack of square matrices.
    """
    if call is None:
        _check_square(a, "distla.linalg.lu_factor", "a")
    n = a.shape[-1]
    return tuple(
        _dispatch("lu_factor", (a,), call, cores=(2,), fills=("eye",), out_cores=((n, n), (n,)))
    )


def lu_solve(
    lu: jax.Array, piv: jax.Array, b: jax.Array, *, trans: int = 0, call: Plan | None = None
) -> jax.Array:
    """``jax.scipy.linalg.lu_solve`` for every member of a sharded stack.

    Args:
      lu: ``[..., n, n]`` factors from :func:`lu_factor`.
      piv: ``[..., n]`` integer pivots (scipy's convention).
      b: ``[..., n]`` (one vector per member) or ``[..., n, k]``, with exactly
        ``lu``'s batch dimensions.
      trans: 0 solves ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.

    Returns:
      ``x`` shaped like ``b``, sharded along the batch.

    Raises:
      ValueError: (with no ``call``) the batch dimensions of ``lu``, ``piv``
        and ``b`` differ, or their matrix dimensions do not match; ``trans``
        not in (0, 1, 2).
      TypeError: (with no ``call``) ``piv`` is not an integer array.
    """
    b_core = 1 if b.ndim == lu.ndim - 1 else 2
    if call is None:
        _check_lu_solve(lu, piv, b, b_core, trans)
    return _dispatch(
        "lu_solve",
        (lu, piv.astype(jnp.int32), b),
        call,
        cores=(2, 1, b_core),
        fills=("eye", "arange", "zeros"),
        out_cores=(b.shape[b.ndim - b_core :],),
        trans=trans,
    )[0]


def _check_lu_solve(lu, piv, b, b_core, trans):
    what = "distla.linalg.lu_solve"
    _check_square(lu, what, "lu")
    if trans not in (0, 1, 2):
        raise ValueError(f"{what}: trans must be 0, 1 or 2; got {trans!r}")
    if not jnp.issubdtype(piv.dtype, jnp.integer):
        raise TypeError(
            f"{what}: piv must be an integer array (from lu_factor); got dtype {piv.dtype}"
        )
    n, batch = lu.shape[-1], lu.shape[:-2]
    if piv.shape[:-1] != batch or b.shape[: b.ndim - b_core] != batch:
        raise ShapeError(
            f"{what}: batch dimensions differ: lu {lu.shape} has {batch}, piv {piv.shape} has "
            f"{piv.shape[:-1]}, b {b.shape} has {b.shape[: max(b.ndim - b_core, 0)]}; lu_solve "
            "does not broadcast them"
        )
    if piv.shape[-1] != n or b.ndim < 1 or b.shape[len(batch)] != n:
        raise ShapeError(
            f"{what}: lu {lu.shape}, piv {piv.shape} and b {b.shape} do not match: piv must be "
            f"{(*batch, n)} and b {(*batch, n)} or {(*batch, n, 'k')}"
        )


def det(a: jax.Array, *, call: Plan | None = None) -> jax.Array:
    """``jnp.linalg.det`` of every member: ``[..., n, n] -> [...]`` sharded along the batch."""
    if call is None:
        _check_square(a, "distla.linalg.det", "a")
    return _dispatch("det", (a,), call, cores=(2,), fills=("eye",), out_cores=((),))[0]


def slogdet(a: jax.Array, *, call: Plan | None = None) -> tuple[jax.Array, jax.Array]:
    """``jnp.linalg.slogdet`` of every member: ``(sign [...], logabsdet [...])``.

    ``sign`` has ``a``'s dtype, ``logabsdet`` its real dtype; a singular member
    gives sign 0 and logabsdet ``-inf``. Both sharded along the batch.
    """
    if call is None:
        _check_square(a, "distla.linalg.slogdet", "a")
    return tuple(_dispatch("slogdet", (a,), call, cores=(2,), fills=("eye",), out_cores=((), ())))


def inv(a: jax.Array, *, call: Plan | None = None) -> jax.Array:
    """``jnp.linalg.inv`` of every member: ``[..., n, n]`` sharded along the batch."""
    if call is None:
        _check_square(a, "distla.linalg.inv", "a")
    n = a.shape[-1]
    return _dispatch("inv", (a,), call, cores=(2,), fills=("eye",), out_cores=((n, n),))[0]


def vmap_rule(op: str, axis_size: int, in_batched: Sequence[bool], *args: jax.Array, **kw):
    """``jax.custom_batching.custom_vmap`` rule: a vmapped one-matrix call becomes one batched call.

    ``jax.vmap`` of a function of one matrix (``distla.linalg.solve`` of an
    ``[n, n]`` matrix, say) would otherwise run the distributed one-matrix
    algorithm under vmap. With this rule the mapped axis becomes the batch
    dimension of a stack, and each device solves its own members, with no
    communication when the mapped axis is sharded. Use it as::

        f = jax.custom_batching.custom_vmap(one_matrix_solve)
        f.def_vmap(functools.partial(_batched.vmap_rule, "solve"))

    Args:
      op: ``"solve"``, ``"lu_factor"``, ``"lu_solve"`` (keyword ``trans``),
        ``"det"``, ``"slogdet"`` or ``"inv"``; the arguments are those of the
        functions of this module (``lu_solve(lu, piv, b)``), one matrix each.
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
                return solve(a, b[..., None])[..., 0], True
            return solve(a, b), True  # an unmapped a is factored once per device
        if op == "lu_solve":
            lu, piv, b = (
                x if mapped else jnp.broadcast_to(x, (axis_size, *x.shape))
                for x, mapped in zip(args, in_batched)
            )
            if b.ndim == lu.ndim - 1:  # one vector per member
                return lu_solve(lu, piv, b[..., None], **kw)[..., 0], True
            return lu_solve(lu, piv, b, **kw), True
        out = {"lu_factor": lu_factor, "det": det, "slogdet": slogdet, "inv": inv}[op](*args)
    return out, jax.tree.map(lambda _: True, out)


def with_vmap_rule(op: str, fn: Callable[..., Any], **static: Any) -> Callable[..., Any]:
    """``fn`` (a one-matrix ``op``) whose ``jax.vmap`` is one batched call (:func:`vmap_rule`).

    ``static`` (``trans=1`` for ``"lu_solve"``) is passed to the batched call;
    ``fn`` must close over it, since ``custom_vmap`` traces every argument.
    ``custom_vmap`` has no reverse-mode rule, so differentiate around it: a
    solve built as ``lax.custom_linear_solve(lambda x: a @ x, b, solve, transpose_solve)``
    from ``with_vmap_rule("lu_factor", ...)(lax.stop_gradient(a))`` and
    ``with_vmap_rule("lu_solve", ..., trans=0 / 1)`` (jax's own structure for
    ``jnp.linalg.solve``) supports ``grad``, ``jvp``, ``vmap`` and ``vmap`` of
    ``grad``, every vmapped piece batched (``tests/test_batched.py``).
    """
    f = jax.custom_batching.custom_vmap(fn)
    f.def_vmap(functools.partial(vmap_rule, op, **static))
    return f


# --------------------------------------------------------------------------- checks


def _check_solve(a: jax.Array, b: jax.Array, b_core: int) -> None:
    what = "distla.linalg.solve"
    _check_square(a, what, "a")
    n = a.shape[-1]
    if b.ndim == 1 and b.shape[0] != n:
        raise ShapeError(f"{what}: b of shape {b.shape} does not match a of shape {a.shape}")
    if b.ndim != 1 and b.shape[-2] != n:
        raise ShapeError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n}; got a of shape "
            f"{a.shape}, b of shape {b.shape}"
        )
    _broadcast_batch(what, ("a", a.shape[:-2]), ("b", b.shape[: b.ndim - b_core]))


def _check_square(a: jax.Array, what: str, name: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"{what}: {name} must be a stack (..., n, n); got {name} of shape {a.shape}"
        )


def _broadcast_batch(what: str, *named: tuple[str, tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(shape for _, shape in named)))
    except ValueError:
        got = ", ".join(f"{name} {shape}" for name, shape in named)
        raise ShapeError(f"{what}: batch dimensions do not broadcast: {got}") from None


# --------------------------------------------------------------------------- the call


def _dispatch(
    op: str,
    operands: tuple[jax.Array, ...],
    call: Plan | None,
    *,
    cores: tuple[int, ...],
    fills: tuple[str, ...],
    out_cores: tuple[tuple[int, ...], ...],
    trans: int = 0,
) -> tuple[jax.Array, ...]:
    if call is None:  # a call no public function resolved: read the mesh here
        mesh = operand_mesh(*operands, names=("a", "b", "c")[: len(operands)])
    else:
        mesh = call.mesh
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
    manual = mesh is not None and any(t == AxisType.Manual for t in mesh.axis_types)
    if mesh is None or manual or any(x.size == 0 for x in operands):
        # not on a mesh, already inside a shard_map (local blocks), or empty
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
