"""eigh's driver: ``eigh``, ``eigvalsh`` and ``svdvals`` by Householder reduction to condensed form.

LAPACK's route for eigenvalues (``xHETRD`` + ``xSTEBZ``), about ``4n³/3``
flops, on the 2D block layout (``kernels/tridiagonal.py``): no device holds
more than its block of the matrix, a few ``m x nb`` panels and the
``n``-vectors of ``T``. The reduction runs in ``PHASES`` calls of the kernel;
between them the trailing matrix is cut out and laid out evenly again
(collective-permutes, no gather), so that the matrix-vector product of each
step shrinks with it. Each device then bisects its ``n/p`` of the
eigenvalues; they are gathered into the replicated result.

``eigh`` (``xHEEVX``'s route) also accumulates ``Q`` during the reduction,
computes ``T``'s eigenvectors by inverse iteration, each device a range of
them (``kernels/tridiagonal_vectors.py``), checks and if need be repairs
their orthogonality across devices, and multiplies ``Q Z`` by SUMMA. An
eager call compiles the repair as a second program, only when a matrix needs
it (`eigh_2d`). `reduced_2d` and `eigh_from_reduced` are its two halves, for a
caller that transforms ``Q`` between them (the generalized eigh's ``L⁻ᴴ Q``).

``svdvals`` reduces to real bidiagonal form instead (LAPACK's ``xGEBRD``,
``kernels/bidiagonal.py``) and bisects the Golub–Kahan tridiagonal, whose
eigenvalues are ``±σ``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels import _axes
from distla.kernels._axes import round_up
from distla.kernels.bidiagonal import reduce_to_bidiagonal
from distla.kernels.tridiagonal import bisect, reduce_columns
from distla.kernels.tridiagonal_vectors import (
    CHUNKS,
    cuts,
    guard_of,
    inverse_iteration,
    rank_of,
    start_vectors,
    to_columns,
    window_rows,
)

from ..._core.checks import is_traced
from ..._core.matmul import mm
from ..._core.matrix import (
    HIGHEST,
    block_spec,
    columns_moved,
    eye,
    hermitian_from,
    once,
    pad_to,
    put,
    rows_moved,
    rows_relaid,
)
from ..._core.mesh import constrain, fitting_spec, grid_of, run_on_mesh, shard_map
from ..._core.plan import plan_here
from .. import _qr
from .._qdwh import unit_scaled

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


def _reduce_in_phases(x, reduce, *, grid, bounds, multiples, vectors=False):
    """``(d, e)`` of ``reduce`` (a kernel) over the columns ``bounds`` in phases.

    ``x`` (at least as many rows as columns) is padded to multiples of
    ``multiples`` (rows, columns), keeping rows >= columns; after each phase
    the trailing matrix is cut out and laid out evenly again. With
    ``vectors``, also ``Q`` (padded order) with ``Qᴴ x Q = T``: its columns
    that a phase no longer touches are cut off with the trailing matrix's, and
    the rest move a few rows at a time (`columns_moved`) once ``x`` has moved.
    """
    spec = grid.block_spec

    def even(x, rows=None):
        cols = round_up(x.shape[1], multiples[1])
        rows = round_up(max(x.shape[0], cols), multiples[0]) if rows is None else rows
        return constrain(pad_to(x, (rows, cols)), spec)

    x = even(x)
    order = x.shape[0]
    # Q's identity made once x exists: XLA made it at the program's start and held it
    # through what comes before (the generalized eigh's Cholesky and solves)
    q = once(eye(order, order, x.dtype, spec), x) if vectors else None
    ds, es, done = [], [], []
    for start, stop in zip(bounds, bounds[1:]):
        steps = stop - start
        kernel = functools.partial(
            reduce, steps=steps, nb=PANEL, row_axis=grid.row, col_axis=grid.col
        )
        if vectors:
            x, q, d, e = shard_map(
                kernel, in_specs=(spec, spec), out_specs=(spec, spec, P(), P()), check_vma=False
            )(x, q)
        else:
            x, d, e = shard_map(kernel, in_specs=spec, out_specs=(spec, P(), P()), check_vma=False)(
                x
            )
        ds.append(d)
        es.append(e)
        if stop < bounds[-1] and not vectors:  # the trailing matrix, laid out evenly again
            x = even(x[steps:, steps:])
        elif stop < bounds[-1]:
            # the trailing matrix's columns cut a few rows at a time, then its rows a few
            # columns at a time: XLA's halo exchange of the whole cut held its pieces and
            # their concatenation beside x (the generalized eigh's peak beside A, B and Q)
            cols = round_up(x.shape[1] - steps, multiples[1])
            rows = round_up(max(x.shape[0] - steps, cols), multiples[0])
            x = rows_moved(columns_moved(x, steps, cols, spec), steps, rows, spec)
            # then Q's, after x's move, not beside it
            done.append(q[:, :steps])
            q = columns_moved(q, steps, x.shape[1], spec, after=x)
    d, e = jnp.concatenate(ds), jnp.concatenate(es)
    return (d, e, jnp.concatenate(done + [q], axis=1)) if vectors else (d, e)


def _bisect(d, e, *, grid, count, first=0):
    """``count`` eigenvalues of the tridiagonal ``(d, e)`` from index ``first``, replicated."""
    axes = tuple(name for name in (grid.row, grid.col) if name is not None)
    per_device = -(-count // grid.size)
    w = shard_map(
        functools.partial(bisect, k=per_device, axis_names=axes, first=first),
        in_specs=(P(), P()),
        out_specs=P(axes),
        check_vma=False,
    )(d, e)
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
    d, e = _reduce_in_phases(h, reduce_columns, grid=grid, bounds=bounds, multiples=(even, even))
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


def _vectors_of_tridiagonal(d, e, w, *, grid, spec, after=None):
    """The ``n x n`` eigenvectors of ``T`` (columns, ascending ``w``), laid out as ``spec``:
    each device's range by inverse iteration (``distla.kernels.tridiagonal_vectors``),
    begun only once ``after`` (a matrix in ``spec``) exists, when given."""
    n = d.shape[0]
    # device ranges column-major over the grid: a grid column's devices hold its
    # columns, so the 2D layout is one all-to-all within each grid column away
    axes = tuple(name for name in (grid.col, grid.row) if name is not None)
    block = -(-n // grid.size)
    guard = guard_of(block)  # clusters wider than it straddling a cut: `_repaired`
    # whole chunks of inverse iteration (the rows past the range are never read)
    width = round_up(block + 2 * guard, CHUNKS)

    def kernel(d, e, w, *later):
        if later:  # d and w (the window's start) read only once the block exists
            zero = _axes.after(0, later[0])
            d, w = d + zero.astype(d.dtype), w + zero.astype(w.dtype)
        bounds = cuts(w, devices=grid.size, block=block, guard=guard)
        window = window_rows(d, e, w, bounds[rank_of(axes)], width=width, unit=False)
        return to_columns(window, bounds, block=block, guard=guard, axis_names=axes)

    ins, operands = (P(), P(), P()), (d, e, w)
    if after is not None:
        ins, operands = ins + (spec,), operands + (after,)
    z = shard_map(kernel, in_specs=ins, out_specs=P(None, axes), check_vma=False)(*operands)
    return constrain(z[:, :n], spec)


def _loose(z):
    """Whether a probe ``‖zᴴz r − r‖`` finds ``z``'s columns further from orthonormal
    than about ``√n·eps`` (then `_repaired`)."""
    n = z.shape[1]
    eps = jnp.finfo(z.dtype).eps
    probe = start_vectors(jnp.zeros((1,), jnp.int32), n, z.dtype)[0]
    zr = jnp.matmul(z, probe, precision=HIGHEST)
    # zᴴ(z r) as the row (z r)ᴴ z: a transposed z was one more matrix (svd held two)
    off = jnp.conj(jnp.matmul(jnp.conj(zr), z, precision=HIGHEST)) - probe
    return jnp.linalg.norm(off) > 10 * jnp.sqrt(float(n)) * eps * jnp.linalg.norm(probe)


def _repaired(z, d, e, w, *, grid, spec, needed=True):
    """``z`` (``n x n``, columns: eigenvectors of ``T`` for ``w``) with orthonormal columns,
    run when `_loose` finds them not.

    The ranges of different devices meet at wide gaps; only a cluster wider
    than the guard there (repeated or nearly repeated
    eigenvalues: identity-like or low-rank matrices) leaves vectors from the
    two sides non-orthogonal, or nearly parallel. Then: Householder QR (the
    distributed ``qr``: orthonormal to rounding whatever ``z``'s condition,
    once a pseudo-random nudge of ``eps^¼`` has made the columns of degenerate
    clusters independent; ``R``'s diagonal made positive, so that ``Q`` is
    Cholesky QR's), then twice an inverse-iteration sweep on every column (back
    into its eigenvalue's invariant subspace, the nudge gone) and Householder QR
    again. Mixing vectors of one cluster keeps their residuals. The QR forms
    ``Q`` over its reflectors in place, where the shifted Cholesky QR held
    ``Zᴴ``, SUMMA's copies, the Gram matrix and the solve beside ``Z``. With a
    traced ``needed`` (the probe) the repair is a loop of 3 or 0 steps on ``z``
    in place: under ``lax.cond`` XLA held the operand's buffer for the result
    beside the repair's (eigh's peak 8.5 -> 6.9 shares at ``n = 4096``,
    docs/memory.md).
    """
    n = z.shape[1]
    eps = jnp.finfo(z.dtype).eps
    axes = tuple(name for name in (grid.col, grid.row) if name is not None)
    cols = -(-n // grid.size) * grid.size

    # Degenerate clusters: eigenvalues within 8·eps·‖T‖ of a neighbour (repeated to
    # bisection's accuracy). Only their columns can be nearly parallel, so only they
    # are nudged; and the sweep gives them one shift, their width below the cluster
    # (a well-conditioned map on the cluster's columns that damps every other
    # eigenvector), every other column its eigenvalue.
    idx = jnp.arange(n)
    t_norm = jnp.max(jnp.abs(w))
    new = jnp.concatenate([jnp.ones((1,), bool), w[1:] - w[:-1] > 8 * eps * t_norm])
    first = lax.cummax(jnp.where(new, idx, 0))
    last = jnp.flip(lax.cummin(jnp.flip(jnp.where(jnp.roll(new, -1) | (idx == n - 1), idx, n))))
    degenerate = last > first
    width = w[last] - w[first]
    sweep_shift = jnp.where(degenerate, w[first] - width, w)

    columns = P(None, axes)
    # Z moves to columns and back a few rows at a time (one all-to-all of the whole Z
    # was eigh's peak); sizes the mesh does not divide take XLA's move
    chunked = cols == n and spec[0] is not None

    def sweep(k, z):  # each device its columns, all rows; step 0 leaves z as it is
        def kernel(apply, d, e, shift, x):
            return inverse_iteration(d, e, shift, x, columns=True, apply=apply)

        # the moves run at every step and the step's flag picks the vectors: no
        # collective inside a cond (a loop of them there hung XLA:CPU's rendezvous)
        x = rows_relaid(z, spec, columns) if chunked else constrain(pad_to(z, (n, cols)), columns)
        shift = pad_to(sweep_shift, (cols,))
        x = shard_map(
            kernel,
            in_specs=(P(), P(), P(), P(axes), columns),
            out_specs=columns,
            check_vma=False,
        )(k > 0, d, e, shift, x)
        return rows_relaid(x, columns, spec) if chunked else put(x[:, :n], spec)

    def householder_qr(k, z):  # z = Q R, R's diagonal positive (as Cholesky QR's): z ← Q
        # R is never formed: its diagonal's signs come from the reflectors (one matrix
        # fewer in the step, the generalized eigh's peak)
        return put(_qr.positive_q(sweep(k, z), call=plan_here(z.dtype)), spec)

    # a pseudo-random nudge of eps^¼ makes nearly parallel columns independent
    # (smallest singular value about eps^¼/n); the sweeps take it out again
    nudge = start_vectors(jnp.arange(n, dtype=jnp.int32), n, z.dtype) / jnp.sqrt(float(n))
    nudge = jnp.where(degenerate[None, :], nudge, 0)
    nudge = jnp.sqrt(jnp.sqrt(eps)).astype(z.dtype) * put(nudge, spec)
    if needed is True:
        return lax.fori_loop(0, 3, householder_qr, put(z + nudge, spec))
    # a loop of 0 or 3 steps on z in place (a cond would hold its operand's buffer for
    # its result beside the repair's)
    z = put(jnp.where(needed, z + nudge, z), spec)
    return lax.fori_loop(0, jnp.where(needed, 3, 0), householder_qr, z)


def _reduction_parts(h: jax.Array, *, mesh):
    """``(w, q, d, e, scale)`` of the Hermitian ``h`` (``n x n``): the reduction and bisection.

    ``Qᴴ (scale·h) Q = T`` by the reduction (``Q`` accumulated, cut to ``n x n``),
    ``T = (d, e)``'s eigenvalues ``w`` by bisection.
    """
    grid = grid_of(mesh, what="distla.linalg.eigh")
    n = h.shape[0]
    spec = fitting_spec((n, n), mesh, grid.block_spec)
    bounds = phase_bounds(n)
    h, scale = unit_scaled(h)
    h = pad_to(h, (bounds[-1], bounds[-1]))
    even = math.lcm(grid.pr, grid.pc)
    d, e, q = _reduce_in_phases(
        h, reduce_columns, grid=grid, bounds=bounds, multiples=(even, even), vectors=True
    )
    d, e = d[:n], e[:n]
    w = d if n == 1 else _bisect(d, e, grid=grid, count=n)
    return w, put(q[:n, :n], spec), d, e, scale


def _window_parts(w, d, e, *, mesh, after=None):
    """``(z, loose)``: ``T``'s eigenvectors by inverse iteration on each device's range
    (once ``after`` exists), and whether the probe finds them in need of `_repaired`."""
    grid = grid_of(mesh, what="distla.linalg.eigh")
    spec = fitting_spec((d.shape[0],) * 2, mesh, grid.block_spec)
    z = _vectors_of_tridiagonal(d, e, w, grid=grid, spec=spec, after=after)
    return z, _loose(z)


def _eigenpairs_parts(h: jax.Array, *, mesh):
    """``(w, z, q, d, e, scale, loose)`` of the Hermitian ``h`` (``n x n``) before any repair:
    `_reduction_parts`, then `_window_parts`."""
    w, q, d, e, scale = _reduction_parts(h, mesh=mesh)
    z, loose = _window_parts(w, d, e, mesh=mesh)
    return w, z, q, d, e, scale, loose


def _eigenpairs_finish(w, z, q, d, e, scale, *, spec):
    """``(w, v = Q Z)`` by SUMMA, eigenvalues scaled back; NaN for a non-finite ``T``."""
    v = put(mm(q, z.astype(q.dtype), spec), spec)
    finite = jnp.isfinite(jnp.sum(d) + jnp.sum(e))
    return jnp.where(finite, w / scale, jnp.nan), jnp.where(finite, v, jnp.nan)


def eigenpairs_body(h: jax.Array, *, mesh):
    """``(w, v)`` of the Hermitian ``h`` (``n x n``): ``w`` ascending, replicated; ``v``
    in the 2D block layout that fits.

    Traced inside ``run_on_mesh``: `_eigenpairs_parts`, the repair (a loop of
    no steps unless the probe fires), ``v = Q Z``. A non-finite ``h``
    gives NaN.
    """
    grid = grid_of(mesh, what="distla.linalg.eigh")
    spec = fitting_spec(h.shape, mesh, grid.block_spec)
    w, z, q, d, e, scale, loose = _eigenpairs_parts(h, mesh=mesh)
    z = _repaired(z, d, e, w, grid=grid, spec=spec, needed=loose)
    return _eigenpairs_finish(w, z, q, d, e, scale, spec=spec)


def _pair_specs(mesh, n):
    return (P(), fitting_spec((n, n), mesh, block_spec(mesh)))


@functools.partial(jax.jit, static_argnames=("mesh", "symmetrize", "lower"))
def _eigh_program(a: jax.Array, *, mesh, symmetrize: bool, lower: bool):
    """`eigh_2d` as one program (a traced ``a``)."""

    def body(a):
        h = hermitian_from(a, symmetrize=symmetrize, lower=lower)
        return eigenpairs_body(h, mesh=mesh)

    return run_on_mesh(body, mesh, _pair_specs(mesh, a.shape[0]), a)


@functools.partial(jax.jit, static_argnames=("mesh", "symmetrize", "lower"))
def _eigh_unrepaired(a: jax.Array, *, mesh, symmetrize: bool, lower: bool):
    """The eager call's first program: ``(w, v)`` as if no repair were needed, ``loose``,
    and what `_eigh_repair` needs when it is."""
    n = a.shape[0]
    pair = _pair_specs(mesh, n)
    spec = pair[1]

    def body(a):
        h = hermitian_from(a, symmetrize=symmetrize, lower=lower)
        w, z, q, d, e, scale, loose = _eigenpairs_parts(h, mesh=mesh)
        return _eigenpairs_finish(w, z, q, d, e, scale, spec=spec), loose, (w, z, q, d, e, scale)

    out = (pair, P(), (P(), spec, spec, P(), P(), P()))
    return run_on_mesh(body, mesh, out, a)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _eigh_repair(w, z, q, d, e, scale, *, mesh):
    """The eager call's second program, run only when the probe fired: repair, ``Q Z``."""
    grid = grid_of(mesh, what="distla.linalg.eigh")
    pair = _pair_specs(mesh, z.shape[0])

    def body(w, z, q, d, e, scale):
        z = _repaired(z, d, e, w, grid=grid, spec=pair[1])
        return _eigenpairs_finish(w, z, q, d, e, scale, spec=pair[1])

    return run_on_mesh(body, mesh, pair, w, z, q, d, e, scale)


def eigh_2d(a: jax.Array, *, mesh, symmetrize: bool, lower: bool):
    """``(w, v)`` of the Hermitian ``a`` on a 1- or 2-axis mesh (`eigenpairs_body`).

    ``a`` is read as ``eigh`` reads it (``symmetrize``, else the ``lower`` or
    upper triangle). A traced ``a`` gives one program. A concrete one runs the
    program without the repair first and the repair's program (Householder QR and
    inverse-iteration sweeps, about a third of the compile) only when the probe
    fires: clusters wider than a device's guard (repeated or nearly repeated
    eigenvalues), so a first call compiles it only for such a matrix.
    """
    if is_traced(a):
        return _eigh_program(a, mesh=mesh, symmetrize=symmetrize, lower=lower)
    pair, loose, parts = _eigh_unrepaired(a, mesh=mesh, symmetrize=symmetrize, lower=lower)
    if bool(loose):
        return _eigh_repair(*parts, mesh=mesh)
    return pair


@functools.partial(jax.jit, static_argnames=("mesh", "symmetrize", "lower"))
def reduced_2d(a: jax.Array, *, mesh, symmetrize: bool, lower: bool):
    """`eigh_2d`'s first half: ``(w, q, d, e, scale)``, the reduction ``Qᴴ (scale·a) Q = T``
    (``q`` in the 2D block layout that fits) and ``T``'s eigenvalues ``w``, for
    `eigh_from_reduced`.

    Between the two a caller may transform ``q`` (the generalized eigh's ``L⁻ᴴ Q``,
    so that ``L`` is gone before inverse iteration's window exists): the
    eigenvectors come back as ``q Z``.
    """
    n = a.shape[0]
    spec = _pair_specs(mesh, n)[1]

    def body(a):
        h = hermitian_from(a, symmetrize=symmetrize, lower=lower)
        return _reduction_parts(h, mesh=mesh)

    return run_on_mesh(body, mesh, (P(), spec, P(), P(), P()), a)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _from_reduced_program(w, q, d, e, scale, *, mesh):
    """`eigh_from_reduced` as one program (traced operands)."""
    grid = grid_of(mesh, what="distla.linalg.eigh")
    pair = _pair_specs(mesh, q.shape[0])

    def body(w, q, d, e, scale):
        # the window once the caller's q exists: XLA's scheduler otherwise made it beside
        # what makes q (the generalized eigh's L and L⁻ᴴ Q's solve)
        z, loose = _window_parts(w, d, e, mesh=mesh, after=q)
        z = _repaired(z, d, e, w, grid=grid, spec=pair[1], needed=loose)
        return _eigenpairs_finish(w, z, q, d, e, scale, spec=pair[1])

    return run_on_mesh(body, mesh, pair, w, q, d, e, scale)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _from_reduced_unrepaired(w, q, d, e, scale, *, mesh):
    """The eager `eigh_from_reduced`'s first program, as `_eigh_unrepaired`'s."""
    pair = _pair_specs(mesh, q.shape[0])
    spec = pair[1]

    def body(w, q, d, e, scale):
        # the window once the caller's q exists: XLA's scheduler otherwise made it beside
        # what makes q (the generalized eigh's L and L⁻ᴴ Q's solve)
        z, loose = _window_parts(w, d, e, mesh=mesh, after=q)
        return _eigenpairs_finish(w, z, q, d, e, scale, spec=spec), loose, (w, z, q, d, e, scale)

    out = (pair, P(), (P(), spec, spec, P(), P(), P()))
    return run_on_mesh(body, mesh, out, w, q, d, e, scale)


def eigh_from_reduced(w, q, d, e, scale, *, mesh):
    """`eigh_2d`'s second half: ``(w, q Z)`` from `reduced_2d`'s parts (``q`` as the caller
    left it): inverse iteration, the repair when the probe fires (for a concrete
    ``q`` a second program, run only then, as `eigh_2d`'s), the product by SUMMA."""
    if is_traced(w, q, d, e, scale):
        return _from_reduced_program(w, q, d, e, scale, mesh=mesh)
    pair, loose, parts = _from_reduced_unrepaired(w, q, d, e, scale, mesh=mesh)
    if bool(loose):
        return _eigh_repair(*parts, mesh=mesh)
    return pair


@functools.partial(jax.jit, static_argnames=("mesh",))
def svdvals_2d(a: jax.Array, *, mesh) -> jax.Array:
    """Singular values (descending, real, replicated) of the ``m x n`` ``a`` on a mesh.

    Bidiagonal reduction (``distla.kernels.bidiagonal``) of ``a`` (or of ``aᴴ``
    when wide), in phases as `eigenvalues_body`'s; the singular values
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
        d, e = _reduce_in_phases(
            x, reduce_to_bidiagonal, grid=grid, bounds=bounds, multiples=(grid.pr, grid.pc)
        )
        d, e = d[:k], e[:k]
        if k == 1:  # one value: |d₀| exactly
            s = jnp.abs(d) / scale
        else:  # Golub–Kahan: zero diagonal, off-diagonal d₀, e₀, d₁, …, d_{k−1} (one unread)
            off = jnp.stack([d, jnp.where(jnp.arange(k) < k - 1, e, 0)], axis=1).reshape(2 * k)
            w = _bisect(jnp.zeros((2 * k,), d.dtype), off, grid=grid, count=k, first=k)
            s = jnp.maximum(jnp.flip(w), 0) / scale
        finite = jnp.isfinite(jnp.sum(d) + jnp.sum(e))
        return jnp.where(finite, s, jnp.nan)

    return run_on_mesh(body, mesh, P(), a)
