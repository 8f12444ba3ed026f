"""Distributed ``eigvalsh`` and ``svdvals``: Householder reduction to tridiagonal form, then bisection.

LAPACK's route for eigenvalues alone (``xHETRD`` + ``xSTEBZ``), about
``4n³/3`` flops, on the 2D block layout (``kernels/tridiagonal.py``): no
device holds more than its block of the matrix, a few ``m x nb`` panels and
the ``n``-vectors of ``T``. The reduction runs in ``PHASES`` calls of the
kernel; between them the trailing matrix is cut out and laid out evenly
again (collective-permutes, no gather), so that the matrix-vector product of
each step shrinks with it. Each device then bisects its ``n/p`` of the
eigenvalues; they are gathered into the replicated result.

``svdvals`` reduces to real bidiagonal form instead (LAPACK's ``xGEBRD``,
``kernels/bidiagonal.py``) and bisects the Golub–Kahan tridiagonal, whose
eigenvalues are ``±σ``.
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
from distla.kernels.bidiagonal import reduce_to_bidiagonal
from distla.kernels.tridiagonal import bisect, reduce_columns
from ._eigh import hermitian_from, unit_scaled

#: Columns per deferred update (LAPACK's ``xLATRD`` block).
PANEL = 16
#: Most reduction phases (each its own loop body); one per ``PHASE_ORDER`` rows below that.
PHASES = 4
PHASE_ORDER = 256


def phase_bounds(n: int) -> tuple[int, ...]:
    """Column bounds of the reduction's phases: multiples of ``PANEL`` from 0 to ``⌈n⌉``."""
    total = round_up(n, PANEL)
    phases = max(1, min(PHASES, n // PHASE_ORDER))
    return tuple(sorted({round_up(total * t // phases, PANEL) for t in range(phases + 1)}))


def _reduce_in_phases(x, reduce, *, grid, bounds, multiples):
    """``(d, e)`` of ``reduce`` (a kernel) over the columns ``bounds`` in phases.

    ``x`` (at least as many rows as columns) is padded to multiples of
    ``multiples`` (rows, columns), keeping rows >= columns; after each phase
    the trailing matrix is cut out and laid out evenly again.
    """
    spec = grid.block_spec

    def even(x):
        cols = round_up(x.shape[1], multiples[1])
        rows = round_up(max(x.shape[0], cols), multiples[0])
        return constrain(pad_to(x, (rows, cols)), spec)

    x = even(x)
    ds, es = [], []
    for start, stop in zip(bounds, bounds[1:]):
        steps = stop - start
        kernel = functools.partial(reduce, steps=steps, nb=PANEL,
                                   row_axis=grid.row, col_axis=grid.col)
        x, d, e = shard_map(kernel, in_specs=spec, out_specs=(spec, P(), P()),
                            check_vma=False)(x)
        ds.append(d)
        es.append(e)
        if stop < bounds[-1]:  # the trailing matrix, laid out evenly again
            x = even(x[steps:, steps:])
    return jnp.concatenate(ds), jnp.concatenate(es)


def _bisect(d, e, *, grid, count, first=0):
    """``count`` eigenvalues of the tridiagonal ``(d, e)`` from index ``first``, replicated."""
    axes = tuple(name for name in (grid.row, grid.col) if name is not None)
    per_device = -(-count // grid.size)
    w = shard_map(functools.partial(bisect, k=per_device, axis_names=axes, first=first),
                  in_specs=(P(), P()), out_specs=P(axes), check_vma=False)(d, e)
    return w[:count]


def eigenvalues_body(h: jax.Array, *, mesh) -> jax.Array:
    """Ascending eigenvalues of the Hermitian ``h`` (``n x n``, any layout), replicated.

    Traced inside ``run_on_mesh`` (Auto axes in context). A non-finite ``h``
    gives NaN eigenvalues.
    """
    grid = grid_of(mesh, what="distla.linalg.eigvalsh")
    n = h.shape[0]
    bounds = phase_bounds(n)
    h, scale = unit_scaled(h)
    h = pad_to(h, (bounds[-1], bounds[-1]))
    even = math.lcm(grid.pr, grid.pc)
    d, e = _reduce_in_phases(h, reduce_columns, grid=grid, bounds=bounds,
                             multiples=(even, even))
    d, e = d[:n], e[:n]
    w = _bisect(d, e, grid=grid, count=n)
    w = (d if n == 1 else w) / scale  # bisection is within eps·‖T‖; one entry is exact
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

    Bidiagonal reduction (``distla.kernels.bidiagonal``) of ``a`` (or of ``aᴴ``
    when wide), in phases as :func:`eigenvalues_body`'s; the singular values
    of ``B`` are the top ``k = min(m, n)`` eigenvalues of the Golub–Kahan
    tridiagonal of order ``2k``, bisected ``k/p`` per device. Within a few
    ``k·eps·σ₁`` of LAPACK's; a non-finite ``a`` gives NaN.
    """
    m, n = a.shape
    k = min(m, n)
    grid = grid_of(mesh, what="distla.linalg.svdvals")
    bounds = phase_bounds(k)

    def body(a):
        x, scale = unit_scaled(a if m >= n else jnp.conj(a.T))  # tall: rows >= columns
        x = pad_to(x, (max(x.shape[0], bounds[-1]), bounds[-1]))
        d, e = _reduce_in_phases(x, reduce_to_bidiagonal, grid=grid, bounds=bounds,
                                 multiples=(grid.pr, grid.pc))
        d, e = d[:k], e[:k]
        # Golub–Kahan: zero diagonal, off-diagonal d₀, e₀, d₁, e₁, …, d_{k−1} (and one unread)
        off = jnp.stack([d, jnp.where(jnp.arange(k) < k - 1, e, 0)], axis=1).reshape(2 * k)
        w = _bisect(jnp.zeros((2 * k,), d.dtype), off, grid=grid, count=k, first=k)
        s = jnp.maximum(jnp.flip(w), 0) / scale
        if k == 1:
            s = jnp.abs(d) / scale
        finite = jnp.isfinite(jnp.sum(d) + jnp.sum(e))
        return jnp.where(finite, s, jnp.nan)

    return run_on_mesh(body, mesh, P(), a)
