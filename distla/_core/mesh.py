"""Reading the mesh off the operands, and running a global-view body on it.

Every public distla function follows the same path: find the mesh the
operands live on (``operand_mesh``), map the problem onto a process grid of
that mesh (``grid_of``), then trace a body written for ``Auto`` axes inside
``run_on_mesh``, which makes ``Explicit`` meshes look like ``Auto`` ones for
the padding, re-layout and cropping around the ``shard_map`` kernel, and puts
the result in the layout the caller asked for.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
from jax._src import core as jax_core  # get_axis_env, trace_state_clean: no public query
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from .specs import entry_axes, layout_spec


@dataclasses.dataclass(frozen=True)
class Grid:
    """A ``pr x pc`` process grid laid on one or two axes of a mesh.

    ``row``/``col`` are mesh axis names; ``col`` is ``None`` on a 1-axis mesh
    (then ``pc == 1``).
    """

    mesh: AbstractMesh
    row: str | None
    col: str | None

    @property
    def pr(self) -> int:
        return 1 if self.row is None else self.mesh.shape[self.row]

    @property
    def pc(self) -> int:
        return 1 if self.col is None else self.mesh.shape[self.col]

    @property
    def size(self) -> int:
        return self.pr * self.pc

    @property
    def shape_str(self) -> str:
        return f"{self.pr}x{self.pc}"

    @property
    def block_spec(self) -> P:
        """The 2D block layout ``P(row, col)``."""
        return P(self.row, self.col)


def describe_mesh(mesh: AbstractMesh | jax.sharding.Mesh) -> str:
    """``"2x4 mesh ('rows', 'cols')"``-style text for error messages."""
    shape = "x".join(str(s) for s in mesh.axis_sizes) or "0-axis"
    return f"{shape} mesh {tuple(mesh.axis_names)}"


def tracing() -> bool:
    """True while jax traces a function (``jax.jit``, ``vmap``, a derivative).

    Also where every operand at hand is a concrete array: a jitted function that
    closes over sharded arrays passes them to distla as they are, yet the call is
    being traced, so nothing may run eagerly (``jax.set_mesh``, ``device_put``
    and waiting on results, a nested ``jit`` with compiler options).
    """
    return _TRACE_STATE_CLEAN is not None and not _TRACE_STATE_CLEAN()


# (read once; a jax without it leaves concrete operands to the eager routes, as before)
_TRACE_STATE_CLEAN = getattr(jax_core, "trace_state_clean", None)


def _concrete_devices(x: Any):
    sharding = getattr(x, "sharding", None)
    if isinstance(x, jax.core.Tracer) or not isinstance(sharding, NamedSharding):
        return None
    return tuple(d.id for d in sharding.mesh.devices.flat)


def operand_mesh(*operands: Any, names: Sequence[str]) -> AbstractMesh | None:
    """The mesh that the sharded operands share, or ``None`` if none is sharded.

    Works on concrete arrays and on tracers (the mesh is part of the abstract
    value in jax >= 0.9, for ``Auto`` and ``Explicit`` axes alike). Operands
    that are not jax arrays, or that live on a single device, do not vote.

    Inside ``jax.vmap`` over a batch sharded on ``Explicit`` axes, those axes
    belong to the vmap (jax marks them in its axis environment) and no
    ``shard_map`` may use them; each vmapped example is then a one-device
    problem and this returns ``None`` too, so the caller falls back to the
    jnp function, which jax batches along the sharded batch with no
    communication.

    Raises:
      ValueError: two operands live on different meshes.
    """
    found: list[tuple[str, AbstractMesh, Any]] = []
    for name, x in zip(names, operands, strict=True):
        if not isinstance(x, jax.Array):
            continue
        sharding = jax.typeof(x).sharding
        mesh = getattr(sharding, "mesh", None)
        if not isinstance(mesh, AbstractMesh) or mesh.size <= 1:
            continue
        found.append((name, mesh, _concrete_devices(x)))
    if not found:
        return None
    name0, mesh0, devs0 = found[0]
    for name, mesh, devs in found[1:]:
        same_devices = devs is None or devs0 is None or devs == devs0
        if mesh != mesh0 or not same_devices:
            differ = (
                ""
                if mesh != mesh0
                else (
                    f" (the same shape and axes, over different devices or a different device "
                    f"order: {name0} on devices {list(devs0)}, {name} on {list(devs)})"
                )
            )
            raise ValueError(
                f"operands are on different meshes: {name0} on {describe_mesh(mesh0)} "
                f"{mesh0.axis_types}, {name} on {describe_mesh(mesh)} {mesh.axis_types}"
                f"{differ}. Put both on the same mesh (distla.shard(x, mesh))."
            )
    if set(mesh0.axis_names) & _axes_taken_by_vmap():
        return None
    return mesh0


def held_by_vmap(*operands: Any) -> bool:
    """An operand lives on a mesh whose ``Explicit`` axes an enclosing ``jax.vmap`` holds
    (where :func:`operand_mesh` gives ``None``)."""
    taken = _axes_taken_by_vmap()
    if not taken:
        return False
    for x in operands:
        mesh = getattr(jax.typeof(x).sharding, "mesh", None) if isinstance(x, jax.Array) else None
        if isinstance(mesh, AbstractMesh) and mesh.size > 1 and set(mesh.axis_names) & taken:
            return True
    return False


def axes_taken_by_vmap() -> frozenset[str]:
    """Mesh axes that an enclosing ``jax.vmap`` over an Explicit-sharded batch holds."""
    return _axes_taken_by_vmap()


def _axes_taken_by_vmap() -> frozenset[str]:
    # jax has no public query for this; shard_map itself reads the same field.
    env = jax_core.get_axis_env()
    return frozenset(getattr(env, "explicit_mesh_axis_names", ()))


def grid_of(mesh: AbstractMesh, *, what: str) -> Grid:
    """Map a 1- or 2-axis mesh onto a ``pr x pc`` grid (axis 0 rows, axis 1 cols)."""
    names = tuple(mesh.axis_names)
    if len(names) == 1:
        return Grid(mesh, names[0], None)
    if len(names) == 2:
        return Grid(mesh, names[0], names[1])
    raise ValueError(
        f"{what} needs operands on a 1- or 2-axis mesh; got a {describe_mesh(mesh)}. "
        "Build one with distla.make_mesh((pr, pc))."
    )


def is_explicit(mesh: AbstractMesh) -> bool:
    return any(t == AxisType.Explicit for t in mesh.axis_types)


def fitting_spec(shape: Sequence[int], mesh: AbstractMesh, desired: P) -> P:
    """The largest even layout of ``mesh`` that fits ``shape``.

    ``desired`` (for example ``P('rows', 'cols')``) is used when every axis
    divides its dimension. Otherwise the mesh axes it names are moved (to
    another dimension, or dropped) so that the array is split over as many
    devices as possible with every split even; ties keep axes where
    ``desired`` put them. ``(1000, 1023)`` with ``P('r', 'c')`` on a 2x4 mesh
    gives ``P(('r', 'c'), None)``: 8 even shards rather than 2.
    """
    ndim = len(shape)
    desired = tuple(desired) + (None,) * (ndim - len(desired))
    named = [entry_axes(e) for e in desired]
    if all(n % math.prod(mesh.shape[a] for a in names) == 0 for n, names in zip(shape, named)):
        return layout_spec(named)  # desired itself, each dimension's axes in its own order
    home: dict[str, int] = {}
    for dim, names in enumerate(named):
        for ax in names:
            home[ax] = dim
    axes = [ax for ax in mesh.axis_names if ax in home]  # mesh order
    best_key, best = None, P(*([None] * ndim))
    for choice in itertools.product(range(ndim + 1), repeat=len(axes)):
        per_dim: list[list[str]] = [[] for _ in range(ndim)]
        for ax, dim in zip(axes, choice):
            if dim < ndim:
                per_dim[dim].append(ax)
        if any(shape[d] % math.prod(mesh.shape[a] for a in per_dim[d]) for d in range(ndim)):
            continue
        shards = math.prod(mesh.shape[a] for d in range(ndim) for a in per_dim[d])
        at_home = sum(1 for ax, dim in zip(axes, choice) if dim == home[ax])
        key = (shards, at_home, tuple(-d for d in choice))
        if best_key is None or key > best_key:
            best_key, best = key, layout_spec(per_dim)
    return best


def spec_groups(spec: P, ndim: int, sizes: Mapping[str, int]) -> tuple[tuple[str, ...], ...]:
    """``spec`` as one tuple of mesh axes per dimension (major first), size-1 axes dropped."""
    entries = (tuple(spec) + (None,) * ndim)[:ndim]
    return tuple(tuple(n for n in entry_axes(e) if sizes[n] > 1) for e in entries)


def same_layout(a: P, b: P, mesh: AbstractMesh, ndim: int) -> bool:
    """Whether ``a`` and ``b`` split an ``ndim``-D array the same way on ``mesh``."""
    sizes = dict(mesh.shape)
    return spec_groups(a, ndim, sizes) == spec_groups(b, ndim, sizes)


def natural_spec(ndim: int, mesh: AbstractMesh | jax.sharding.Mesh) -> P:
    """distla's natural layout for an ``ndim``-array on ``mesh``.

    Matrices: 2D blocks ``P(r, c)``. Volumes: pencils ``P(r, c, None)``.
    Vectors: ``P((r, c))``. Higher ranks: pencils over the first two axes.
    On a 1-axis mesh ``r``: ``P(r, None, ...)`` (rows, or slabs).
    """
    names = tuple(mesh.axis_names)
    if ndim == 0:
        return P()
    if ndim == 1:
        return P(names if len(names) > 1 else names[0])
    if len(names) == 1:
        return P(names[0], *([None] * (ndim - 1)))
    return P(names[0], names[1], *([None] * (ndim - 2)))


def shard_spec(shape: Sequence[int], mesh: AbstractMesh | jax.sharding.Mesh) -> P:
    """``distla.shard``'s layout for an array of ``shape``: :func:`natural_spec`, or the
    largest even layout that fits where the mesh does not divide ``shape``."""
    abstract = getattr(mesh, "abstract_mesh", mesh)
    return fitting_spec(tuple(shape), abstract, natural_spec(len(shape), mesh))


def constrain(x: jax.Array, spec: P) -> jax.Array:
    """``with_sharding_constraint`` on the mesh of the current context."""
    return jax.lax.with_sharding_constraint(
        x, NamedSharding(jax.sharding.get_abstract_mesh(), spec)
    )


def named_shardings(mesh: AbstractMesh, specs: Any) -> Any:
    """``NamedSharding(mesh, spec)`` for every ``PartitionSpec`` in the tree ``specs``."""
    return jax.tree.map(lambda s: NamedSharding(mesh, s), specs, is_leaf=lambda s: isinstance(s, P))


def run_on_mesh(body: Callable[..., Any], mesh: AbstractMesh, out_specs: Any, *args: Any) -> Any:
    """Trace ``body(*args)`` with ``mesh`` in context and return ``out_specs`` layouts.

    ``body`` is written for ``Auto`` axes: it may pad, slice and re-lay out its
    operands with ``constrain`` and call ``jax.shard_map``. On a mesh with
    ``Explicit`` axes it runs under ``jax.sharding.auto_axes``, so XLA's
    partitioner, not the sharding-in-types rules, handles those steps; the
    result comes back with the ``Explicit`` sharding ``out_specs`` names.
    Must be called while tracing (inside ``jax.jit``).
    """
    # written out, not named_shardings: one call fewer into this module per body
    # (tests/test_walk.py counts them)
    shardings = jax.tree.map(
        lambda s: NamedSharding(mesh, s), out_specs, is_leaf=lambda s: isinstance(s, P)
    )
    with jax.sharding.use_abstract_mesh(mesh):
        if is_explicit(mesh):
            return jax.sharding.auto_axes(body, out_sharding=shardings)(*args)
        out = body(*args)
        return jax.tree.map(jax.lax.with_sharding_constraint, out, shardings)


def shard_map(
    kernel: Callable[..., Any], *, in_specs: Any, out_specs: Any, check_vma: bool = True
) -> Callable[..., Any]:
    """``jax.shard_map`` over the mesh of the current context (see ``run_on_mesh``).

    ``check_vma=False`` for kernels whose replicated outputs (``P()``) jax
    cannot prove replicated, such as LU pivots agreed on through psums.
    """
    return jax.shard_map(
        kernel,
        mesh=jax.sharding.get_abstract_mesh(),
        in_specs=in_specs,
        out_specs=out_specs,
        check_vma=check_vma,
    )


def drop_trivial_sharding(x: Any) -> Any:
    """``x`` as jnp's function takes it where distla falls back to that function.

    On a one-device ``Explicit`` mesh ``x`` loses its sharding: jnp's
    sharding-in-types rules reject, for example, a matmul whose contracted
    dimensions are "sharded" over size-1 axes. Inside ``jax.vmap`` over a batch
    sharded on ``Explicit`` axes (where :func:`operand_mesh` gives ``None``),
    a member split over the mesh's other axes is made whole: its batch stays
    where it is, each device gets its members entire (jnp's one-matrix
    functions refuse split members: "must be unsharded on non-batch
    dimensions"), as distla's stacked path lays out a stack
    (``_core.stacked``).
    """
    return _whole_on_each_device(x, only_one_device=True)


def replicated(x: Any) -> Any:
    """``x`` with whole matrices on every device of its ``Explicit`` mesh, for the few
    documented paths that hand a sharded operand to a one-device jax routine whose
    sharding rule refuses split matrix dimensions (``qr(mode="raw")``, ``eig``). A
    stack keeps its batch dimensions' layout (each device its own members, as jnp's
    routines take them); a single matrix is replicated. Others as given."""
    return _whole_on_each_device(x, only_one_device=False, keep_batch=True)


def _whole_on_each_device(x: Any, *, only_one_device: bool, keep_batch: bool = False) -> Any:
    """``x`` resharded to ``P()`` if it is split on an ``Explicit`` mesh (of one device
    only, with ``only_one_device``; ``keep_batch``: a stack's batch dimensions keep their
    layout, its matrix dimensions are made whole); anything else as given."""
    if not isinstance(x, jax.Array):
        return x
    sharding = jax.typeof(x).sharding
    mesh = getattr(sharding, "mesh", None)
    if not isinstance(mesh, AbstractMesh) or not is_explicit(mesh):
        return x
    spec = tuple(sharding.spec) + (None,) * (x.ndim - len(sharding.spec))
    keep = spec[: x.ndim - 2] if keep_batch and x.ndim > 2 else ()
    vmapped = bool(set(mesh.axis_names) & _axes_taken_by_vmap())
    if (only_one_device and mesh.size != 1 and not vmapped) or all(
        e is None for e in spec[len(keep) :]
    ):
        return x
    concrete = getattr(x, "sharding", None)
    target = concrete.mesh if isinstance(concrete, NamedSharding) else mesh
    return jax.sharding.reshard(x, NamedSharding(target, P(*keep)))


def explicit_layout(x: jax.Array) -> tuple[tuple[str, ...], ...]:
    """The mesh axes each dimension of ``x``'s type is split over (``Explicit`` axes;
    ``()`` for a whole dimension, and for every dimension off an ``Explicit`` mesh)."""
    sharding = jax.typeof(x).sharding
    mesh = getattr(sharding, "mesh", None)
    if not isinstance(mesh, AbstractMesh) or not is_explicit(mesh):
        return ((),) * x.ndim
    return tuple(entry_axes(e) for e in (tuple(sharding.spec) + (None,) * x.ndim)[: x.ndim])


def with_layout(x: jax.Array, layout: Sequence[Sequence[str]]) -> jax.Array:
    """``x`` resharded on its ``Explicit`` mesh to ``layout`` (one tuple of mesh axes per
    dimension, as :func:`explicit_layout` gives); as given where that is its layout."""
    if tuple(map(tuple, layout)) == explicit_layout(x):
        return x
    concrete = getattr(x, "sharding", None)
    mesh = concrete.mesh if isinstance(concrete, NamedSharding) else jax.typeof(x).sharding.mesh
    return jax.sharding.reshard(x, NamedSharding(mesh, layout_spec(layout)))


def tangent_on_mesh(tangent: Any, primal: Any) -> Any:
    """``tangent`` replicated on ``primal``'s mesh when it lives on one device.

    ``jax.jacfwd`` (and ``jax.hessian``) push a one-device standard basis
    through a JVP rule whose primal is sharded; distla's rules run the tangent
    through programs on the primal's mesh, which cannot take an operand
    committed to another device assignment. A concrete sharded primal names the
    mesh; tracers and tangents already on a mesh come back as given.
    """
    if isinstance(primal, jax.core.Tracer):
        return tangent
    sharding = getattr(primal, "sharding", None)
    if not isinstance(sharding, NamedSharding) or sharding.mesh.size <= 1:
        return tangent
    if operand_mesh(tangent, names=("tangent",)) is not None:
        return tangent
    return jax.device_put(tangent, NamedSharding(sharding.mesh, P()))


def rule_on_mesh(rule: Callable[..., Any]) -> Callable[..., Any]:
    """A ``custom_jvp`` rule ``rule(primals, tangents)`` that also runs outside a mesh context.

    ``jax.jacfwd`` and ``jax.hessian`` run a rule eagerly (on concrete primals, or
    on the tracers of an enclosing derivative) with a one-device basis as
    tangents; outside ``jax.set_mesh`` the rule's eager re-layouts onto an
    ``Explicit`` mesh name no devices. Where a primal lives on a multi-device
    ``Explicit`` mesh the rule is traced as one program instead, whose devices
    the primals carry, with the tangents of concrete primals put on their mesh
    (under ``jax.jit`` this is a nested program, inlined); anywhere else it runs
    as given.
    """

    def wrapped(primals, tangents):
        meshes = [getattr(jax.typeof(p).sharding, "mesh", None) for p in jax.tree.leaves(primals)]
        on_explicit = any(
            isinstance(m, AbstractMesh) and m.size > 1 and is_explicit(m) for m in meshes
        )
        if not on_explicit:
            return rule(primals, tangents)
        anchor = next(
            (
                p
                for p in jax.tree.leaves(primals)
                if isinstance(getattr(p, "sharding", None), NamedSharding)
                and not isinstance(p, jax.core.Tracer)
            ),
            None,
        )
        if anchor is not None:
            tangents = jax.tree.map(lambda t: tangent_on_mesh(t, anchor), tangents)
        return jax.jit(rule)(primals, tangents)

    return wrapped
