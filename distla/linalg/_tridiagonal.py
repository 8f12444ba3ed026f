"""Distributed ``eigvalsh`` and ``svdvals``: Householder reduction to tridiagonal form, then bisection.

LAPACK's route for eigenvalues alone (``xHETRD`` + ``xSTEBZ``), about
``4n³/3`` flops, on the 2D block layout (``kernels/tridiagonal.py``): no
device holds more than its block of the matrix, a few ``m x nb`` panels and
the ``n``-vectors of ``T``. The reduction runs in ``PHASES`` calls of the
kernel; between them the trailing matrix is cut out and laid out evenly
again (collective-permutes, no gather), so that the matrix-vector product of
each step shrinks with it. Each device then bisects its ``n/p`` of the
eigenvalues; they are gathered into the replicated result.

``svdvals`` takes the same route through the Jordan–Wielandt matrix
``[[0, r], [rᴴ, 0]]`` of order ``2k`` (``r``: ``a``, or the triangle of its QR
when not square), whose eigenvalues are ``±σ``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._core.matrix import block_spec, pad_to, put
from .._core.mesh import constrain, fitting_spec, grid_of, run_on_mesh, shard_map
from .._core.plan import plan_here
from distla.kernels._axes import round_up
from distla.kernels.tridiagonal import bisect, reduce_columns
from ._eigh import hermitian_from, unit_scaled
from ._qr import qr_2d

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


def eigenvalues_body(h: jax.Array, *, mesh) -> jax.Array:
    """Ascending eigenvalues of the Hermitian ``h`` (``n x n``, any layout), replicated.

    Traced inside ``run_on_mesh`` (Auto axes in context). A non-finite ``h``
    gives NaN eigenvalues.
    """
    grid = grid_of(mesh, what="distla.linalg.eigvalsh")
    n = h.shape[0]
    spec = grid.block_spec
    even = math.lcm(grid.pr, grid.pc)
    bounds = phase_bounds(n)
    h, scale = unit_scaled(h)
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


@functools.partial(jax.jit, static_argnames=("mesh", "symmetrize", "lower"))
def eigvalsh_2d(a: jax.Array, *, mesh, symmetrize: bool, lower: bool) -> jax.Array:
    """Eigenvalues (ascending, real, replicated) of the Hermitian ``a`` on a 1- or 2-axis mesh.

    ``a`` is read as ``eigh`` reads it (``symmetrize``, else the ``lower`` or
    upper triangle). A non-finite ``a`` gives NaN eigenvalues.
    """

    def body(a):
        h = hermitian_from(a, symmetrize=symmetrize, lower=lower)
        return eigenvalues_body(h, mesh=mesh)

    return run_on_mesh(body, mesh, P(), a)


@functools.partial(jax.jit, static_argnames=("mesh",))
def svdvals_2d(a: jax.Array, *, mesh) -> jax.Array:
    """Singular values (descending, real, replicated) of the ``m x n`` ``a`` on a mesh.

    The eigenvalues of the Hermitian ``[[0, r], [rᴴ, 0]]`` (Jordan–Wielandt)
    are ``±σ(r)``: their top ``k = min(m, n)`` are ``r``'s singular values,
    to within a few ``k·eps·σ₁`` as LAPACK's. ``r = a`` when square, else the
    ``k x k`` triangle of the QR of ``a`` (or of ``aᴴ``: wide), which has
    ``a``'s singular values. A non-finite ``a`` gives NaN.
    """
    m, n = a.shape
    k = min(m, n)
    spec = block_spec(mesh)

    def body(a):
        a, scale = unit_scaled(a)  # before the QR: its column norms square
        r = a
        if m != n:
            x = put(a if m > n else jnp.conj(a.T), fitting_spec((max(m, n), k), mesh, spec))
            r = qr_2d(x, mode="r", call=plan_here(a.dtype))[:k]
        zero = jnp.zeros((k, k), a.dtype)
        jw = jnp.concatenate([jnp.concatenate([zero, r], axis=1),
                              jnp.concatenate([jnp.conj(r.T), zero], axis=1)], axis=0)
        w = eigenvalues_body(put(jw, fitting_spec(jw.shape, mesh, spec)), mesh=mesh)
        return jnp.maximum(jnp.flip(w[k:]), 0) / scale

    return run_on_mesh(body, mesh, P(), a)
