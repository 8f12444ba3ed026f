"""One call, resolved once: the plan a public function hands down (private).

A public function of ``distla.linalg`` checks and promotes its operands
(``distla._core.checks``) and then calls :func:`resolve` once, which reads the
mesh the operands share (``distla._core.mesh.operand_mesh``). The resulting
:class:`Plan` goes down to the algorithm modules (``_lu``, ``_cholesky``,
``_triangular``, ``_qr``, ``_batched``): they take it as a static argument of
their compiled programs and never read the operands' mesh, or check the
operands, again. The shapes stay with the arrays; what a plan adds is what
the arrays do not say: the mesh (also for tracers that carry none of its
device ids), the process grid on it, the dtype the call computes in and the
caller's block size.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from jax.sharding import AbstractMesh

from .blas import single_thread_lapack_for_cpu_devices
from .mesh import Grid, grid_of, operand_mesh


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one public call resolved: hashable, so compiled programs take it as static.

    Attributes:
      mesh: the mesh every sharded operand lives on (more than one device).
      dtype: the dtype the call computes in (``_checks.result_dtype``).
      block_size: the caller's block size, ``None`` for the algorithm's choice.
    """

    mesh: AbstractMesh
    dtype: np.dtype
    block_size: int | None = None

    @property
    def grid(self) -> Grid:
        """The ``pr x pc`` process grid of a 1- or 2-axis mesh (``ValueError`` otherwise)."""
        return grid_of(self.mesh, what="distla.linalg")


def mesh_of(*operands: Any, names: tuple[str, ...]) -> AbstractMesh | None:
    """The operands' mesh, or ``None`` when no operand is sharded (the jnp fall-back).

    On a mesh, the CPU BLAS is limited first (``distla._core.blas``), once per process.
    """
    mesh = operand_mesh(*operands, names=names)
    if mesh is not None:
        single_thread_lapack_for_cpu_devices()
    return mesh


def resolve(
    *operands: Any, names: tuple[str, ...], dtype: Any, block_size: int | None = None
) -> Plan | None:
    """The :class:`Plan` of a call on ``operands``, or ``None`` when none is sharded."""
    mesh = mesh_of(*operands, names=names)
    if mesh is None:
        return None
    return Plan(mesh, np.dtype(dtype), block_size)
