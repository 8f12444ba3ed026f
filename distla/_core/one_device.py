"""The one-device plan: a sharded call computed on ONE device and sharded back (private).

Below a memory budget (``distla._core.plan``), a small problem is often faster on
one device than distributed: the distributed algorithm pays per-step
collectives and, for the spectral family, several times LAPACK's flops. XLA's
own answer for a sharded operand (``jnp.linalg.eigh`` on a sharded matrix)
gathers the whole operand onto *every* device and repeats the work there.
:func:`on_one_device` moves it to one device instead:

1. every block of each operand goes to the mesh's first device through one
   ``ppermute`` per block holder (a device whose block another device with a
   lower index also holds sends nothing): the operand crosses the network once;
2. that device assembles the operands and runs the one-device function under
   ``lax.cond`` on its mesh index, so the others skip the work;
3. each output block goes back to the devices that hold it in the output
   layout (one ``ppermute`` per receiving device).

``distla.cost`` sees ``2·(p-1)`` collective-permutes of one block each: the
operand's bytes to one device and the result's bytes back. The other devices
hold zero-filled receive buffers of the blocks they do not own, so this plan's
peak memory per device is ``O(n²)``; the budget bounds ``n``.

That is the plan's program, what a caller's ``jax.jit`` traces. An eager call on
concrete arrays whose devices this process holds takes the same route as three
dispatches instead (:func:`_eagerly`): ``jax.device_put`` of each operand onto
the first device, the jitted one-device function there, ``jax.device_put`` of
each result into its layout. Same bytes, no collective: on 8 CPU devices the
program's ``2·(p-1)`` collective-permutes, each a rendezvous of every device,
made ``slogdet`` at n = 256 take 4.9 ms against 1.9 ms this way (jnp on the
sharded input: 4.6 ms). That call waits for its result: the other devices are
idle meanwhile, so the first device's LAPACK gets every BLAS thread back
(``distla._core.blas.every_blas_thread``; a 4096 solve 0.59 s -> 0.38 s here).
Under the program the other devices run too, and distla's one thread per LAPACK
call stays.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from . import plan as _plan
from . import workspace as _workspace
from .blas import every_blas_thread, lifts_blas_threads
from .checks import is_traced
from .eager import hashable
from .mesh import constrain, fitting_spec, grid_of, is_explicit, run_on_mesh, shard_map
from .stacked import stack, vmappable


def _axes_of(entry: Any) -> tuple[str, ...]:
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, str) else tuple(entry)


def _block_index(coords: dict[str, int], mesh: AbstractMesh, axes: tuple[str, ...]) -> int:
    """Which block along one dimension a device holds (spec axes, major to minor)."""
    index = 0
    for ax in axes:
        index = index * mesh.shape[ax] + coords[ax]
    return index


def _devices(mesh: AbstractMesh) -> list[dict[str, int]]:
    """Mesh coordinates of every device, in the linear order of ``ppermute``."""
    names = mesh.axis_names
    return [dict(zip(names, c)) for c in itertools.product(*(range(mesh.shape[a]) for a in names))]


def _blocks(spec: P, ndim: int, mesh: AbstractMesh) -> list[tuple[int, ...]]:
    """The block coordinates (one per dimension) each device holds under ``spec``."""
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return [tuple(_block_index(c, mesh, _axes_of(e)) for e in entries) for c in _devices(mesh)]


def _counts(spec: P, ndim: int, mesh: AbstractMesh) -> tuple[int, ...]:
    entries = tuple(spec) + (None,) * (ndim - len(spec))
    return tuple(math.prod(mesh.shape[a] for a in _axes_of(e)) for e in entries)


def _linear_index(mesh: AbstractMesh) -> jax.Array:
    index = jnp.int32(0)
    for ax in mesh.axis_names:
        index = index * mesh.shape[ax] + lax.axis_index(ax)
    return index


def _gather_to_first(x_blk: jax.Array, spec: P, mesh: AbstractMesh) -> dict:
    """Device 0's copy of every block of ``x`` (zeros elsewhere), keyed by block coordinate."""
    held = _blocks(spec, x_blk.ndim, mesh)
    got = {}
    for dev, blk in enumerate(held):
        if blk in got:
            continue
        if dev == 0:
            got[blk] = x_blk
        else:  # one message: the block's first holder -> device 0
            got[blk] = lax.ppermute(x_blk, mesh.axis_names, perm=[(dev, 0)])
    return got


def _assemble(got: dict, counts: tuple[int, ...]) -> jax.Array:
    def join(prefix: tuple[int, ...], dim: int) -> jax.Array:
        if dim == len(counts):
            return got[prefix]
        parts = [join(prefix + (i,), dim + 1) for i in range(counts[dim])]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=dim)

    return join((), 0)


def _scatter_from_first(y: jax.Array, spec: P, mesh: AbstractMesh, me: jax.Array) -> jax.Array:
    """Each device's block of ``y`` (valid on device 0) under ``spec``: one message per device."""
    counts = _counts(spec, y.ndim, mesh)
    shape = tuple(s // c for s, c in zip(y.shape, counts))

    def block(blk):
        starts = tuple(b * s for b, s in zip(blk, shape))
        return lax.slice(y, starts, tuple(st + s for st, s in zip(starts, shape)))

    held = _blocks(spec, y.ndim, mesh)
    mine = block(held[0])
    for dev, blk in enumerate(held):
        if dev == 0:
            continue
        recv = lax.ppermute(block(blk), mesh.axis_names, perm=[(0, dev)])
        mine = lax.select(jnp.broadcast_to(me == dev, shape), recv, mine)
    return mine


def on_one_device(
    fn: Callable[..., Any],
    *args: jax.Array,
    mesh: AbstractMesh,
    in_specs: tuple[P, ...],
    out_specs: tuple[P, ...],
    options: tuple[tuple[str, Any], ...] = (),
) -> Any:
    """``fn(*args)`` computed on the mesh's first device, returned in ``out_specs``.

    Args:
      fn: a one-device function of unsharded arrays (``jnp.linalg.eigh``),
        returning a pytree; a module-level function, so that its compiled
        program is cached.
      *args: operands on ``mesh``; they are laid out as ``in_specs`` first
        (free when they already are).
      mesh: the operands' mesh.
      in_specs: one even layout per operand (``_mesh.fitting_spec``).
      out_specs: the layouts of ``fn``'s outputs, one spec per leaf in
        ``jax.tree.leaves`` order: the layouts the distributed plan returns.

      options: static keyword arguments of ``fn``, as ``(name, value)`` pairs.

    Returns:
      ``fn(*args, **dict(options))``, sharded as ``out_specs`` on ``mesh``.
      Under ``jax.vmap`` each device computes ``fn`` on the members it holds
      (``distla._core.stacked.stack``), sharded along the batch.
    """
    if not is_traced(*args):
        concrete = _held_mesh(args, mesh)
        if concrete is not None:
            return _eagerly(fn, args, concrete, out_specs, options)
        return _on_one_device(
            fn, *args, mesh=mesh, in_specs=in_specs, out_specs=out_specs, options=options
        )
    # Under jax.vmap the batched plan would move every member to the first device
    # (the budget was checked for one member); each device computes its own members
    # instead, as jnp does on a stack sharded along its batch. Derivatives: the
    # plan's own (custom_vmap has none).
    call = functools.partial(
        _on_one_device, fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, options=options
    )
    primal = jax.custom_jvp(
        vmappable(call, functools.partial(_per_member, fn, dict(options), mesh))
    )
    static = {"fn": fn, "mesh": mesh, "in_specs": in_specs, "out_specs": out_specs}
    primal.defjvp(
        lambda primals, tangents: _jvp(
            primals, _instantiated(primals, tangents), **static, options=options
        ),
        symbolic_zeros=True,
    )
    return primal(*args)


def _instantiated(primals: tuple, tangents: tuple) -> tuple:
    """``tangents`` with each symbolic zero (an operand not differentiated) made an array
    like its primal. jax's own instantiation builds it from the aval alone, which on an
    ``Explicit`` mesh outside ``jax.set_mesh`` is a program with no devices ("Passing
    lowering_platforms ... is required when only AbstractMesh exists"); ``zeros_like``
    of the primal takes the primal's placement."""
    return tuple(
        (_zero_tangent(p) if isinstance(t, jax.custom_derivatives.SymbolicZero) else t)
        for p, t in zip(primals, tangents)
    )


def _zero_tangent(primal):
    """The zero tangent of ``primal``: ``float0`` for integer and bool operands (LU's
    pivots), as jax.jvp requires; zeros in the primal's placement otherwise."""
    if not jnp.issubdtype(primal.dtype, jnp.inexact):
        return np.zeros(primal.shape, jax.dtypes.float0)
    return jnp.zeros_like(primal)


@functools.partial(jax.jit, static_argnames=("fn", "mesh", "in_specs", "out_specs", "options"))
def _jvp(primals, tangents, *, fn, mesh, in_specs, out_specs, options):
    """The plan's derivative, traced as one program: jax.jvp makes the zero tangents of
    results that do not depend on the operands (LU's pivots) from their avals, which
    outside a program and ``jax.set_mesh`` is the same error as above."""
    call = functools.partial(
        _on_one_device, fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs, options=options
    )
    return jax.jvp(call, primals, tangents)


def _held_mesh(args: tuple, mesh: AbstractMesh) -> jax.sharding.Mesh | None:
    """The concrete mesh of ``args`` when every one is on it and this process holds all of
    its devices (the eager route moves arrays with ``jax.device_put``); else ``None``."""
    concrete = None
    for x in args:
        sharding = getattr(x, "sharding", None)
        if not isinstance(sharding, jax.sharding.NamedSharding):
            return None
        m = sharding.mesh
        if not isinstance(m, jax.sharding.Mesh) or m.abstract_mesh != mesh:
            return None
        if concrete is not None and m != concrete:
            return None
        concrete = m
    if concrete is None or not all(
        d.process_index == jax.process_index() for d in concrete.devices.flat
    ):
        return None
    return concrete


@functools.lru_cache(maxsize=256)
def _one_device_program(fn: Callable[..., Any], options: tuple) -> Callable[..., Any]:
    return jax.jit(functools.partial(fn, **dict(options)))


def _as_jit_returns(spec: P, mesh: jax.sharding.Mesh) -> P:
    """``spec`` as the plan's compiled program labels its results, so that an eager
    result's ``sharding`` equals the program's: on an ``Auto`` mesh jax reads the
    layout back from the compiled program, without trailing ``None`` entries; on an
    ``Explicit`` mesh the results keep their types' specs as written
    (tests/test_plans.py and tests/test_expm.py compare the two)."""
    if is_explicit(mesh.abstract_mesh):
        return spec
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    return P(*entries)


def _eagerly(fn, args, mesh: jax.sharding.Mesh, out_specs, options):
    """The plan for concrete operands: onto the mesh's first device, ``fn`` there, back
    in ``out_specs`` (``jax.device_put`` each way; the same bytes as the program)."""
    # a SingleDeviceSharding, not the device: the copy then drops an Explicit mesh's types
    first = jax.sharding.SingleDeviceSharding(mesh.devices.flat[0])
    if hashable(options):
        run = _one_device_program(fn, options)
    else:  # an unhashable option: a jit of its own
        run = jax.jit(functools.partial(fn, **dict(options)))
    # no context mesh while the operands sit on one of its devices (jax would refuse
    # them). Once they are there, the other devices wait, so this device's LAPACK may
    # use every BLAS thread (the operands' producers have finished by then), unless
    # its BLAS-2 calls would make the threads wait on each other (blas.keeps_one_blas_thread)
    threads = every_blas_thread() if lifts_blas_threads(fn) else contextlib.nullcontext()
    with jax.set_mesh(None):
        moved = jax.block_until_ready([jax.device_put(x, first) for x in args])
        with threads:
            out = jax.block_until_ready(run(*moved))
    leaves, treedef = jax.tree.flatten(out)
    if len(leaves) != len(out_specs):
        raise ValueError(f"{len(out_specs)} output specs for {len(leaves)} outputs of {fn}")
    placed = [
        jax.device_put(y, jax.sharding.NamedSharding(mesh, _as_jit_returns(s, mesh)))
        for y, s in zip(leaves, out_specs)
    ]
    return jax.tree.unflatten(treedef, placed)


def _per_member(fn: Callable[..., Any], options: dict, mesh: AbstractMesh, *xs: jax.Array):
    """``fn`` on every member of stacks ``xs`` (a mapped axis 0 each), each device on its own."""
    fn = functools.partial(fn, **options)
    leaves, treedef = jax.tree.flatten(
        jax.eval_shape(fn, *(jax.ShapeDtypeStruct(x.shape[1:], x.dtype) for x in xs))
    )
    core = max(o.ndim for o in leaves)

    def members(*ys):  # every result with ``core`` member dimensions (leading 1s), as stack needs
        outs = jax.tree.leaves(jax.vmap(fn)(*ys))
        return tuple(
            y.reshape(y.shape[:1] + (1,) * (core - y.ndim + 1) + y.shape[1:]) for y in outs
        )

    outs = stack(members, xs, tuple(x.ndim - 1 for x in xs), core, mesh=mesh)
    return jax.tree.unflatten(
        treedef, [y.reshape(y.shape[:1] + o.shape) for y, o in zip(outs, leaves)]
    )


@functools.partial(jax.jit, static_argnames=("fn", "mesh", "in_specs", "out_specs", "options"))
def _on_one_device(
    fn: Callable[..., Any],
    *args: jax.Array,
    mesh: AbstractMesh,
    in_specs: tuple[P, ...],
    out_specs: tuple[P, ...],
    options: tuple[tuple[str, Any], ...] = (),
) -> Any:

    fn = functools.partial(fn, **dict(options))
    out_shapes = jax.eval_shape(fn, *(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args))
    leaves, treedef = jax.tree.flatten(out_shapes)
    spec_leaves = tuple(out_specs)
    if len(spec_leaves) != len(leaves):
        raise ValueError(f"{len(spec_leaves)} output specs for {len(leaves)} outputs of {fn}")

    def kernel(*blks):
        me = _linear_index(mesh)
        gathered = [_gather_to_first(b, s, mesh) for b, s in zip(blks, in_specs)]
        counts = [_counts(s, b.ndim, mesh) for b, s in zip(blks, in_specs)]

        def compute(gathered):
            full = [_assemble(g, c) for g, c in zip(gathered, counts)]
            return jax.tree.leaves(fn(*full))

        def idle(gathered):
            return [jnp.zeros(o.shape, o.dtype) for o in leaves]

        outs = lax.cond(me == 0, compute, idle, gathered)
        return tuple(_scatter_from_first(y, s, mesh, me) for y, s in zip(outs, spec_leaves))

    def body(*xs):
        xs = [constrain(x, s) for x, s in zip(xs, in_specs)]
        outs = shard_map(
            kernel, in_specs=tuple(in_specs), out_specs=tuple(spec_leaves), check_vma=False
        )(*xs)
        return jax.tree.unflatten(treedef, list(outs))

    return run_on_mesh(body, mesh, jax.tree.unflatten(treedef, spec_leaves), *args)


def _results(fn: Callable[..., Any], args: tuple, options: tuple) -> tuple[list, Any]:
    """``(operand structs, result structs)`` of ``fn(*args, **dict(options))``, shapes alone.

    Each eager call chooses its plan from these, and tracing ``fn`` for them
    costs more than the rest of a small call's Python: they are kept per
    ``fn``, operand shapes and dtypes, options and the settings that change a
    result's dtype.
    """
    structs = tuple((tuple(x.shape), np.dtype(x.dtype)) for x in args)
    key = (
        fn,
        structs,
        options,
        bool(jax.config.jax_enable_x64),
        jax.config.jax_numpy_dtype_promotion,
    )
    try:
        return _results_of(*key)
    except TypeError:  # an unhashable option
        return _trace_results(fn, structs, options)


@functools.lru_cache(maxsize=1024)
def _results_of(fn, structs, options, x64, promotion):
    del x64, promotion  # in the key only: read by the trace below
    return _trace_results(fn, structs, options)


def _trace_results(fn, structs, options):
    operands = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in structs]
    # shapes and dtypes alone, outside the mesh in context: under an Explicit mesh some
    # of jax's one-device functions (jax.scipy.linalg.rsf2csf) refuse their own constants
    with jax.sharding.use_abstract_mesh(AbstractMesh((), ())):
        return operands, jax.eval_shape(functools.partial(fn, **dict(options)), *operands)


def result_structs(fn: Callable[..., Any], args: tuple, options: tuple) -> list:
    """The result structs (shapes and dtypes, ``jax.tree.leaves`` order) of
    ``fn(*args, **dict(options))``, traced once per signature."""
    return jax.tree.leaves(_results(fn, args, options)[1])


def moved_bytes(fn: Callable[..., Any], *args: Any, **options: Any) -> int:
    """Bytes the one-device plan of ``fn(*args, **options)`` moves: operands there, results back."""
    structs, out = _results(fn, args, tuple(options.items()))
    return int(
        sum(
            math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves((structs, out))
        )
    )


def one_device_peak(
    family: str, fn: Callable[..., Any], *args: Any, **options: Any
) -> tuple[int, int, int]:
    """``(moved, peak, lapack)`` bytes of the one-device plan of ``fn(*args, **options)``:
    what it moves, its modelled peak on its device (operands, results, the function's
    temporaries and LAPACK's workspace: ``distla._core.workspace``), and the LAPACK part,
    which XLA's memory analysis does not see."""
    structs, out = _results(fn, args, tuple(options.items()))
    moved = moved_bytes(fn, *args, **options)
    found = _workspace.footprint(family, _workspace.call_of(structs, jax.tree.leaves(out), options))
    return moved, moved + found.temporaries + found.lapack, found.lapack


def block_layout(shape: tuple[int, ...], mesh: AbstractMesh) -> P:
    """The largest even 2D block layout that fits a matrix (row blocks for a vector).

    The one-device plan gathers its operands from this layout (a reshard
    first, free when they are already in it), as the distributed plan does.
    """
    grid = grid_of(mesh, what="distla.linalg")
    return fitting_spec(shape, mesh, grid.block_spec if len(shape) >= 2 else P(grid.row))


def choose_plan(
    family: str,
    plan: str,
    fn: Callable[..., Any],
    *args: Any,
    what: str,
    options: tuple[tuple[str, Any], ...] = (),
) -> str:
    """``_plan.choose`` for ``fn(*args)``: an ``n x n``-sized problem, its bytes moved,
    its modelled peak on one device (:func:`one_device_peak`) and whether the plan
    would take the eager route (:func:`_eagerly`)."""
    n = max(max(x.shape[-2:], default=0) for x in args)
    moved, peak, lapack = one_device_peak(family, fn, *args, **dict(options))
    return _plan.choose(
        family,
        plan,
        n=n,
        nbytes=moved,
        peak=peak,
        workspace=lapack,
        what=what,
        eager=_eager_route(args),
    )


def _eager_route(args: tuple) -> bool:
    """Whether :func:`on_one_device` would run ``args`` by the eager route."""
    if is_traced(*args):
        return False
    mesh = getattr(getattr(args[0], "sharding", None), "mesh", None)
    return isinstance(mesh, jax.sharding.Mesh) and _held_mesh(args, mesh.abstract_mesh) is not None


def planned(
    family: str,
    plan: str,
    fn: Callable[..., Any],
    *args: jax.Array,
    mesh: AbstractMesh,
    what: str,
    options: tuple[tuple[str, Any], ...] = (),
) -> Any | None:
    """``fn(*args)`` by the one-device plan if ``plan`` resolves to it, else ``None``.

    For functions whose distributed plan returns matrices in the largest even
    2D block layout and vectors and scalars replicated (the LU family).
    """
    if choose_plan(family, plan, fn, *args, what=what, options=options) != "one_device":
        return None
    outs = jax.tree.leaves(_results(fn, args, tuple(options))[1])
    # vectors (pivots) and scalars replicated, spelled as the distributed plan's (and jnp's)
    out_specs = tuple(
        block_layout(o.shape, mesh) if o.ndim == 2 else P(*[None] * o.ndim) for o in outs
    )
    return on_one_device(
        fn,
        *args,
        mesh=mesh,
        in_specs=tuple(block_layout(x.shape, mesh) for x in args),
        out_specs=out_specs,
        options=options,
    )


def replicated_on_one_device(
    family: str,
    plan: str,
    fn: Callable[..., Any],
    a: jax.Array,
    *,
    what: str,
    options: tuple[tuple[str, Any], ...] = (),
) -> Any | None:
    """``fn(a)`` by the one-device plan with replicated results, else ``None``.

    For the functions with no distributed algorithm (``eig``, ``eigvals``,
    ``qr(mode="raw")``), whose jnp call on a sharded matrix gathers it onto every
    device and returns replicated results: one sharded, non-empty matrix goes to
    one device instead when ``plan`` resolves to it (within the budget for
    ``"auto"``), and the results come back replicated, as jnp's. ``None`` for a
    stack, an unsharded or empty matrix, or the other plan: the caller's jnp call.
    """
    mesh = _plan.mesh_of(a, names=("a",))
    if mesh is None or a.ndim != 2 or 0 in a.shape:
        return None
    if choose_plan(family, plan, fn, a, what=what, options=options) != "one_device":
        return None
    outs = jax.tree.leaves(_results(fn, (a,), tuple(options))[1])
    return on_one_device(
        fn,
        a,
        mesh=mesh,
        in_specs=(block_layout(a.shape, mesh),),
        out_specs=(P(),) * len(outs),
        options=options,
    )
