"""Meshes and layouts: ``distla.make_mesh`` and ``distla.shard``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._mesh import describe_mesh, fitting_spec


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
        spans every process under ``jax.distributed``). Their count must equal
        the product of ``shape``.
      axis_types: ``AxisType.Explicit`` or ``AxisType.Auto`` (one for all
        axes, or one per axis). ``None`` keeps ``jax.make_mesh``'s default
        (``Explicit`` since jax 0.9). distla works on both.

    Returns:
      A ``jax.sharding.Mesh``.

    Raises:
      ValueError: the shape does not match the device count or the names.
    """
    devs = list(jax.devices() if devices is None else devices)
    axis_names = tuple(axis_names)
    if shape is None:
        if len(axis_names) != 2:
            raise ValueError(
                f"make_mesh(shape=None) builds a 2-axis mesh; got axis_names={axis_names}"
            )
        shape = squarest_grid(len(devs))
    shape = tuple(int(s) for s in shape)
    if len(shape) != len(axis_names):
        raise ValueError(
            f"make_mesh: shape {shape} has {len(shape)} axes but axis_names {axis_names} "
            f"has {len(axis_names)}"
        )
    if math.prod(shape) != len(devs):
        raise ValueError(
            f"make_mesh: a {'x'.join(map(str, shape))} mesh needs {math.prod(shape)} devices; "
            f"{len(devs)} given. Pass devices=jax.devices()[:{math.prod(shape)}] to use fewer."
        )
    if isinstance(axis_types, AxisType):
        axis_types = (axis_types,) * len(shape)
    if axis_types is not None:
        axis_types = tuple(axis_types)
    return jax.make_mesh(shape, axis_names, axis_types=axis_types, devices=devs)


def natural_spec(ndim: int, mesh: Mesh | jax.sharding.AbstractMesh) -> P:
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


def shard(x: Any, mesh: Mesh, spec: P | None = None) -> jax.Array:
    """Place ``x`` on ``mesh`` in distla's natural layout (or in ``spec``).

    Without ``spec``, matrices go in 2D blocks ``P(r, c)`` and volumes in
    pencils ``P(r, c, None)``; a dimension the mesh does not divide falls back
    to the largest even layout that fits (jax refuses uneven shardings): a
    ``(1000, 1023)`` matrix on a 2x4 mesh goes in ``P(('r', 'c'), None)``.

    Under ``jax.distributed`` every process must pass the same host data (the
    usual multi-controller rule); each process keeps only its devices' shards.

    Args:
      x: a numpy or jax array (or anything ``np.asarray`` accepts).
      mesh: the target mesh.
      spec: an explicit ``PartitionSpec``; must divide ``x``'s shape evenly.

    Returns:
      ``x`` as a ``jax.Array`` with ``NamedSharding(mesh, spec)``.

    Raises:
      ValueError: ``spec`` names an axis the mesh lacks or does not divide
        the shape, or ``x`` is a jax array that this process cannot read.
    """
    if not isinstance(mesh, Mesh):
        raise ValueError(f"shard: mesh must be a jax.sharding.Mesh; got {type(mesh).__name__}")
    ndim = np.ndim(x)
    shape = tuple(np.shape(x))
    if spec is None:
        spec = fitting_spec(shape, mesh.abstract_mesh, natural_spec(ndim, mesh))
    else:
        _check_spec(shape, mesh, spec)
    sharding = NamedSharding(mesh, spec)
    if isinstance(x, jax.Array):
        if not x.is_fully_addressable and not _spans_same_devices(x, mesh):
            raise ValueError(
                "shard: x spans devices of other processes and a different mesh; re-shard it "
                "with jax.sharding.reshard inside jax.jit instead."
            )
        return jax.device_put(x, sharding)
    return jax.device_put(np.asarray(x), sharding)


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
