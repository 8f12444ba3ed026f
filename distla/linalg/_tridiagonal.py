"""Distributed ``eigvalsh``: Householder reduction to tridiagonal form, then bisection.

LAPACK's route for eigenvalues alone (``xHETRD`` + ``xSTEBZ``), about
``4n³/3`` flops, on the 2D block layout (``kernels/tridiagonal.py``): no
device holds more than its block of the matrix, a few ``m x nb`` panels and
the ``n``-vectors of ``T``. The reduction runs in ``PHASES`` calls of the
kernel; between them the trailing matrix is cut out and laid out evenly
again (collective-permutes, no gather), so that the matrix-vector product of
each step shrinks with it. Each device then bisects its ``n/p`` of the
eigenvalues; they are gathered into the replicated result.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._core.matrix import pad_to
from .._core.mesh import constrain, grid_of, run_on_mesh, shard_map
from distla.kernels._axes import round_up
from distla.kernels.tridiagonal import bisect, reduce_columns
from ._eigh import hermitian_from, unit_scaled

#: Columns per deferred update (LAPACK's ``xLATRD`` block).
PANEL = 32
#: Most reduction phases (each its own loop body); one per ``PHASE_ORDER`` rows below that.
PHASES = 4
PHASE_ORDER = 256


def phase_bounds(n: int) -> tuple[int, ...]:
    """Column bounds of the reduction's phases: multiples of ``PANEL`` from 0 to ``⌈n⌉``."""
    total = round_up(n, PANEL)
    phases = max(1, min(PHASES, n // PHASE_ORDER))
    return tuple(sorted({round_up(total * t // phases, PANEL) for t in range(phases + 1)}))


@functools.partial(jax.jit, static_argnames=("mesh", "symmetrize", "lower"))
def eigvalsh_2d(a: jax.Array, *, mesh, symmetrize: bool, lower: bool) -> jax.Array:
    """Eigenvalues (ascending, real, replicated) of the Hermitian ``a`` on a 1- or 2-axis mesh.

    ``a`` is read as ``eigh`` reads it (``symmetrize``, else the ``lower`` or
    upper triangle). A non-finite ``a`` gives NaN eigenvalues.
    """
    grid = grid_of(mesh, what="distla.linalg.eigvalsh")
    n = a.shape[0]
    spec = grid.block_spec
    even = math.lcm(grid.pr, grid.pc)
    bounds = phase_bounds(n)

    def body(a):
        h, scale = unit_scaled(hermitian_from(a, symmetrize=symmetrize, lower=lower))
        size = round_up(bounds[-1], even)
        h = constrain(pad_to(h, (size, size)), spec)
        ds, es = [], []
        for start, stop in zip(bounds, bounds[1:]):
            steps = stop - start
            kernel = functools.partial(reduce_columns, steps=steps, nb=PANEL,
                                       row_axis=grid.row, col_axis=grid.col)
            h, d, e = shard_map(kernel, in_specs=spec, out_specs=(spec, P(), P()),
                                check_vma=False)(h)
            ds.append(d)
            es.append(e)
            if stop < bounds[-1]:  # the trailing matrix, laid out evenly again
                rest = round_up(h.shape[0] - steps, even)
                h = constrain(pad_to(h[steps:, steps:], (rest, rest)), spec)
        d = jnp.concatenate(ds)[:n]
        e = jnp.concatenate(es)[:n]
        axes = tuple(x for x in (grid.row, grid.col) if x is not None)
        per_device = -(-n // grid.size)
        w = shard_map(functools.partial(bisect, k=per_device, axis_names=axes),
                      in_specs=(P(), P()), out_specs=P(axes), check_vma=False)(d, e)
        w = (d if n == 1 else w[:n]) / scale  # bisection is within eps·‖T‖; one entry is exact
        finite = jnp.isfinite(jnp.sum(d) + jnp.sum(e))
        return jnp.where(finite, w, jnp.nan)

    return run_on_mesh(body, mesh, P(), a)
