"""Meshes and layouts: ``distla.make_mesh`` and ``distla.shard``."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._core.mesh import describe_mesh, shard_spec


def squarest_grid(n: int) -> tuple[int, int]:
    """The factorisation ``pr x pc = n`` with ``pr <= pc`` closest to square."""
    pr = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return pr, n // pr


def make_mesh(
    shape: Sequence[int] | None = None,
    axis_names: Sequence[str] = ("rows", "cols"),
    *,
    devices: Sequence[jax.Device] | None = None,
    axis_types: AxisType | Sequence[AxisType] | None = None,
) -> Mesh:
    """A device mesh for distla.

    Args:
      shape: mesh shape, for example ``(2, 4)``. ``None`` means the most
        square 2D factorisation ``pr x pc`` (``pr <= pc``) of the device count:
        8 devices give ``(2, 4)``, 7 give ``(1, 7)``.
      axis_names: one name per mesh axis.
      devices: the devices to use (default: all of ``jax.devices()``, which
        spans every process under ``jax.distributed``); a sequence, or an array
        of devices such as a mesh's ``.devices``, read in row-major order.
        Their count must equal the product of ``shape``.
      axis_types: ``AxisType.Explicit`` or ``AxisType.Auto`` (one for all
        axes, or one per axis). ``None`` keeps ``jax.make_mesh``'s default
        (``Explicit`` since jax 0.9). distla works on both.

    Returns:
      A ``jax.sharding.Mesh``.

    Raises:
      ValueError: the shape is not a tuple of positive ints, does not match
        the device count or the names; no devices, duplicate devices or
        duplicate axis names.
      TypeError: ``shape`` is not a sequence (``make_mesh(8)``: use ``(8,)``).

    Examples:
      On 8 devices (8 simulated CPU devices here):

      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> mesh.axis_names, mesh.devices.shape
      (('rows', 'cols'), (2, 4))
      >>> distla.make_mesh().devices.shape  # the most square grid
      (2, 4)
      >>> distla.make_mesh((8,), ("x",)).axis_names
      ('x',)
    """
    # an array of devices (a mesh's .devices) counts as its devices in row-major order
    devs = list(jax.devices() if devices is None else np.asarray(devices, dtype=object).flat)
    if not devs:
        raise ValueError("make_mesh: devices is empty; pass devices=None for jax.devices()")
    if len(set(devs)) != len(devs):
        raise ValueError(f"make_mesh: devices lists a device twice: {devs}")
    if isinstance(axis_names, str):
        raise TypeError(
            f"make_mesh: axis_names must be a sequence of names; got the string "
            f"{axis_names!r}. For one axis write ({axis_names!r},)."
        )
    axis_names = tuple(axis_names)
    if len(set(axis_names)) != len(axis_names):
        raise ValueError(f"make_mesh: axis_names must differ; got {axis_names}")
    if shape is None:
        if len(axis_names) != 2:
            raise ValueError(
                f"make_mesh(shape=None) builds a 2-axis mesh; got axis_names={axis_names}"
            )
        shape = squarest_grid(len(devs))
    shape = _mesh_shape(shape)
    if len(shape) != len(axis_names):
        raise ValueError(
            f"make_mesh: shape {shape} has {len(shape)} axes but axis_names {axis_names} "
            f"has {len(axis_names)}"
        )
    if math.prod(shape) != len(devs):
        need = math.prod(shape)
        fix = (
            f"Pass devices=jax.devices()[:{need}] to use fewer."
            if need < len(devs)
            else "Start jax with more devices (on CPU: "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={need}, before jax is "
            f"imported), or use a mesh of {len(devs)} devices (make_mesh() picks one)."
        )
        raise ValueError(
            f"make_mesh: a {'x'.join(map(str, shape))} mesh needs {need} devices; "
            f"{len(devs)} given. {fix}"
        )
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,) * len(shape)
    if axis_types is not None:
        axis_types = tuple(axis_types)
    return jax.make_mesh(shape, axis_names, axis_types=axis_types, devices=devs)


def _mesh_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints; errors that say what was wrong."""
    if isinstance(shape, (int, np.integer)):
        raise TypeError(
            f"make_mesh: shape must be a tuple of axis sizes; got the int {shape}. "
            f"Write ({shape},) for a 1-axis mesh or, say, (2, {int(shape) // 2}) for two."
        )
    try:
        sizes = tuple(shape)
    except TypeError:
        raise TypeError(
            f"make_mesh: shape must be a tuple of axis sizes; got {type(shape).__name__}"
        ) from None
    for s in sizes:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(
                f"make_mesh: every axis size must be a positive int; got shape {shape}"
            )
    return tuple(int(s) for s in sizes)


def _as_spec(spec: Any, what: str = "shard") -> P:
    """``spec`` as a ``PartitionSpec``: a tuple is read as one, a string is refused."""
    if spec is None or isinstance(spec, P):
        return spec
    if isinstance(spec, str):
        raise ValueError(
            f"{what}: spec must be a PartitionSpec (one entry per dimension); got the string "
            f"{spec!r}. Write jax.sharding.PartitionSpec({spec!r}) to split dimension 0 "
            f"over mesh axis {spec!r}."
        )
    if isinstance(spec, (tuple, list)):
        for entry in spec:
            ok = (
                entry is None
                or isinstance(entry, str)
                or (isinstance(entry, (tuple, list)) and all(isinstance(e, str) for e in entry))
            )
            if not ok:
                raise ValueError(
                    f"{what}: spec {spec!r}: each entry must be None, a mesh axis name or a "
                    f"tuple of names; got {entry!r}"
                )
        return P(*(tuple(e) if isinstance(e, list) else e for e in spec))
    raise ValueError(
        f"{what}: spec must be a PartitionSpec or a tuple of entries; got {type(spec).__name__}"
    )


def natural_sharding(shape: Sequence[int], mesh: Mesh, spec: P | None = None) -> NamedSharding:
    """The ``NamedSharding`` that [`shard`][distla.shard] gives an array of ``shape`` on ``mesh``.

    Use it to build a global array piece by piece, each process filling only
    its own devices' shards (nothing is gathered or compared)::

        sharding = distla.layout.natural_sharding(shape, mesh)
        x = jax.make_array_from_callback(shape, sharding, lambda idx: block_for(idx))

    Args:
      shape: the global shape.
      mesh: the target mesh (may span several processes).
      spec: an explicit ``PartitionSpec``; must divide ``shape`` evenly.

    Returns:
      ``NamedSharding(mesh, spec)``, with ``spec`` distla's natural layout
      (2D blocks for matrices, pencils for volumes) or the largest even
      layout that fits when ``spec`` is ``None``.

    Raises:
      ValueError: ``mesh`` is not a ``Mesh``, or ``spec`` names an axis the
        mesh lacks or does not divide ``shape``.
    """
    if not isinstance(mesh, Mesh):
        raise ValueError(f"shard: mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    shape = tuple(int(s) for s in shape)
    spec = _as_spec(spec)
    if spec is None:
        spec = shard_spec(shape, mesh)
    else:
        _check_spec(shape, mesh, spec)
    return NamedSharding(mesh, spec)


def shard(x: Any, mesh: Mesh, spec: P | None = None) -> jax.Array:
    """Place ``x`` on ``mesh`` in distla's natural layout (or in ``spec``).

    Without ``spec``, matrices go in 2D blocks ``P(r, c)`` and volumes in
    pencils ``P(r, c, None)``; a dimension the mesh does not divide falls back
    to the largest even layout that fits (jax refuses uneven shardings): a
    ``(1000, 1023)`` matrix on a 2x4 mesh goes in ``P(('r', 'c'), None)``.

    Across processes (``jax.distributed``, a mesh with devices of several
    processes) host data follows the multi-controller rule: every process
    passes the same whole array, and each keeps only its own devices'
    shards. distla checks that rule with a 32-bit checksum per process (one
    tiny collective) instead of gathering the data, and raises a
    ``ValueError`` naming the processes that differ. Where each process holds
    only its own part, build the array with ``jax.make_array_from_callback``
    and `natural_sharding` instead. Every process must call ``shard``
    for the same arrays in the same order.

    Args:
      x: a numpy or jax array (or anything ``np.asarray`` accepts). A jax
        array that spans processes is re-laid out on the same devices.
      mesh: the target mesh.
      spec: an explicit ``PartitionSpec`` (a tuple such as ``("rows", "cols")``
        is read as ``P("rows", "cols")``); must divide ``x``'s shape evenly.

    Returns:
      ``x`` as a ``jax.Array`` with ``NamedSharding(mesh, spec)``.

    Raises:
      ValueError: ``spec`` names an axis the mesh lacks or does not divide
        the shape; ``x`` spans devices of other processes that are not the
        mesh's; or, across processes, host data (shape, dtype or values)
        that differs between processes.

    Examples:
      >>> import numpy as np
      >>> from jax.sharding import PartitionSpec as P
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> distla.shard(np.ones((512, 256)), mesh).sharding.spec  # 2D blocks
      P('rows', 'cols')
      >>> distla.shard(np.ones((1000, 1023)), mesh).sharding.spec  # 4 does not divide 1023
      P(('rows', 'cols'), None)
      >>> distla.shard(np.ones((64, 32, 32)), mesh, P(("rows", "cols"))).sharding.spec
      P(('rows', 'cols'),)
    """
    sharding = natural_sharding(np.shape(x), mesh, spec)
    if isinstance(x, jax.core.Tracer):
        return jax.device_put(x, sharding)
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if not _spans_same_devices(x, mesh):
            raise ValueError(
                "shard: x spans devices of other processes and a different mesh; re-shard it "
                "with jax.sharding.reshard inside jax.jit instead."
            )
        return jax.device_put(x, sharding)
    if sharding.is_fully_addressable:
        return jax.device_put(x if isinstance(x, jax.Array) else np.asarray(x), sharding)
    # Host data (or an array on this process's devices) onto a mesh that spans processes.
    host = np.asarray(x)
    _check_same_on_every_process(host, sharding)
    return jax.make_array_from_callback(host.shape, sharding, lambda idx: host[idx])


def _fingerprint(x: np.ndarray) -> np.ndarray:
    """Two 32-bit checksums: of the shape and dtype, and of the bytes."""
    meta = f"{x.shape}/{x.dtype.str}".encode()
    data = np.ascontiguousarray(x).reshape(-1).view(np.uint8)  # no copy when contiguous
    return np.array([zlib.crc32(meta), zlib.crc32(data)], np.uint32)


def _check_same_on_every_process(x: np.ndarray, sharding: NamedSharding) -> None:
    """ValueError on every process when processes pass different host data to ``shard``."""
    from jax.experimental import multihost_utils

    prints = np.asarray(multihost_utils.process_allgather(_fingerprint(x)))
    prints = prints.reshape(jax.process_count(), 2)
    differ = [i for i in range(len(prints)) if (prints[i] != prints[0]).any()]
    if differ:
        what = "shape or dtype" if (prints[differ[0], 0] != prints[0, 0]) else "values"
        raise ValueError(
            f"shard: the host data differs between processes ({what} on process(es) "
            f"{differ} differ from process 0; this process has shape {x.shape} {x.dtype}). "
            "Across processes every process must pass the same whole array; to give each "
            "process only its own part, use jax.make_array_from_callback(shape, "
            "distla.layout.natural_sharding(shape, mesh), callback)."
        )


def _spans_same_devices(x: jax.Array, mesh: Mesh) -> bool:
    return set(x.sharding.device_set) == set(mesh.devices.flat)


def _check_spec(shape: tuple[int, ...], mesh: Mesh, spec: P) -> None:
    if len(spec) > len(shape):
        raise ValueError(f"shard: spec {spec} has more entries than x has dimensions {shape}")
    for dim, entry in enumerate(spec):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        for ax in axes:
            if ax not in mesh.shape:
                raise ValueError(
                    f"shard: spec {spec} names axis {ax!r}, which the {describe_mesh(mesh)} "
                    "does not have"
                )
        parts = math.prod(mesh.shape[a] for a in axes)
        if shape[dim] % parts:
            raise ValueError(
                f"shard: spec {spec} splits dimension {dim} of shape {shape} into {parts} "
                f"parts, which does not divide {shape[dim]}. Omit spec to let distla pick "
                "the largest even layout."
            )
