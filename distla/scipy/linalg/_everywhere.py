"""jax's own call on sharded operands, as XLA partitions it (private).

The route of the functions with no distributed algorithm once their operands
exceed the one-device budget: jax's function traced with ``Auto`` axes
(``run_on_mesh``), so that XLA's partitioner gathers what it needs (the whole
matrix onto every device, as jax's call on the sharded input does), with the
results laid out as the one-device plan lays them out (matrices in the largest
even 2D block layout, vectors and scalars replicated): the same types, so either
can be a branch of one ``lax.cond``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from ..._core.matrix import block_spec
from ..._core.mesh import fitting_spec, run_on_mesh


def result_types(fn: Callable[..., Any], *args: Any) -> Any:
    """``jax.eval_shape`` of ``fn`` on ``args``' shapes and dtypes alone, outside any mesh
    in context (jax's own functions trace with sharding-typed constants under an
    ``Explicit`` mesh in context, which some of them refuse)."""
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in args]
    with jax.sharding.use_abstract_mesh(AbstractMesh((), ())):
        return jax.eval_shape(fn, *structs)


def everywhere(fn: Callable[..., Any], *args: jax.Array, mesh: AbstractMesh, options=()) -> Any:
    """``fn(*args, **dict(options))`` as XLA partitions it, in the one-device plan's layouts."""
    return _everywhere(*args, fn=fn, mesh=mesh, options=tuple(options))


@functools.partial(jax.jit, static_argnames=("fn", "mesh", "options"))
def _everywhere(*args, fn, mesh, options):
    call = functools.partial(fn, **dict(options))
    out = result_types(call, *args)
    specs = jax.tree.map(
        lambda o: fitting_spec(o.shape, mesh, block_spec(mesh)) if o.ndim == 2 else P(), out
    )
    return run_on_mesh(call, mesh, specs, *args)
