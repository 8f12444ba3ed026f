"""Distributed ``svd`` by Householder reduction to bidiagonal form (see docs/spectral.md).

LAPACK's route (``xGEBRD`` + ``xORMBR``, ``xBDSVDX`` on ``B``) on the 2D block
layout, as ``eigh`` runs ``xHETRD`` + ``xSTEIN`` (``distla/linalg/_eigh/tridiagonal.py``):

1. **Reduction** ``Qᴴ x P = B`` (``kernels/bidiagonal.py``), in the tridiagonal
   reduction's phases; ``Q`` and ``P`` kept as their reflectors in the reduced
   part of ``x`` (LAPACK's ``xGEBRD``), never formed.
2. **Singular values** of ``B``: the top ``k`` eigenvalues of the Golub–Kahan
   tridiagonal ``TGK`` (order ``2k``), bisected ``k/p`` per device.
3. **Singular vectors**: ``TGK``'s eigenvectors by inverse iteration, each
   device a range (``kernels/bidiagonal_vectors.py``), split into ``V_B`` and
   ``U_B`` and each column of each half normalized (mixing with the partner for
   ``−σ`` only rescales the halves); then ``u = Q U_B``, ``v = P V_B`` by
   applying the reflectors to them in place, two panels at a time (LAPACK's
   ``xORMBR``), before they move to the 2D blocks (every entry of a vector on
   its device, each block of reflectors gathered whole): the reflectors are gone
   before the move (docs/memory.md; applied there, they were held beside the
   move, and ``Q`` and ``P`` accumulated and multiplied held two matrices beside
   inverse iteration's window). For a square real matrix the halves are
   normalized and the reflectors applied where inverse iteration's window holds
   them (its rows), and ``u`` and ``v`` are read out of it only then.
4. **Orthogonality, and values at the rounding level.** A probe
   ``‖vᴴ v r − r‖`` (and of ``u``) tells whether the halves are orthonormal
   (``Q`` and ``P`` are orthogonal: as ``V_B`` and ``U_B`` are): they are to
   about ``eps·‖B‖/σ`` (mixing with ``−σⱼ``), and
   across devices only up to clusters wider than a device's guard. Below
   ``max(m, n)·eps·σ₁`` they mean nothing, and ``B``'s own values there are
   the reduction's rounding (the
   blocked reduction's backward error on a rank-deficient matrix is about
   ``2·eps·σ₁``, as LAPACK's blocked ``xGEBRD``'s; see
   ``kernels/bidiagonal.py``). So those columns of ``u`` and ``v`` are
   completed (an orthonormal basis of the complement of the others, by QR),
   and their values are taken from the original matrix, ``|uᵢᴴ x vᵢ|``:
   ``uᵢ`` and ``vᵢ`` lie in the null spaces up to
   the backward error over the gap to the kept values, so the quotient is of
   second order in it and what is left is the product's rounding (a rank cut at
   ``eps·σ₁``, ``lstsq(rcond=-1)``'s, counts what LAPACK's unblocked
   reduction counts). The QR orthonormalizes the kept columns in order too,
   which repairs the probe's cases: within a cluster the two halves have the
   same Gram matrix (``u = x v/σ``, ``x/σ`` orthogonal on the cluster), so
   their QRs pair them again, and elsewhere a column moves by about
   ``eps·‖B‖/σ``, which costs ``eps·‖B‖`` of backward error. This runs only
   when some value is below the cut or the probe fires: ``lax.cond`` under a
   trace, a second program on concrete arrays.

About ``8n³/3`` (reduction) + ``8n³`` (applying the reflectors, which are not
trimmed to their nonzero length) flops for a square matrix, against the polar +
``eigh`` route's ``50n³`` it replaced.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from distla.kernels._axes import round_up
from distla.kernels.bidiagonal import (
    apply_reflectors,
    apply_reflectors_to_rows,
    reduce_to_bidiagonal,
)
from distla.kernels.bidiagonal_vectors import (
    golub_kahan,
    golub_kahan_vectors,
    halves,
    halves_of_rows,
)
from distla.kernels.tridiagonal_vectors import guard_of, start_vectors

from .._core.checks import is_traced
from .._core.matmul import mm
from .._core.matrix import block_spec, columns_moved, ct_on, on_mesh, once, pad_to, put
from .._core.mesh import constrain, fitting_spec, grid_of, run_on_mesh, shard_map
from .._core.plan import plan_here
from . import _qr
from ._eigh.tridiagonal import PANEL, PHASE_ORDER, _bisect, _loose
from ._qdwh import unit_scaled

#: The reduction with vectors runs in at most two phases (``eigvalsh`` and ``svdvals``
#: run four). Each phase is its own compiled kernel: the reduction with ``Q`` and ``P``
#: (accumulated then, as reflectors now) at n = 1024 took 2.6 / 6.1 / 13.5 CPU seconds
#: of XLA's compile for 1 / 2 / 4 phases on the test bed, whatever n, while two phases
#: already cut the work of the matrix-vector products to about 1.3x that of four.
#: The cut is where two phases' work is least: a cut at ``c·n`` leaves ``c + (1 − c)³``
#: of one phase's (the trailing matrix's area times the columns), least at
#: ``c = 1 − 1/√3 ≈ 0.42``.
PHASE_CUT = 0.42


def phase_bounds(n: int) -> tuple[int, ...]:
    """The reduction's column bounds: one phase below ``2·PHASE_ORDER`` columns (as
    ``_eigh.tridiagonal.phase_bounds``), else two, cut at `PHASE_CUT`."""
    total = round_up(n, PANEL)
    if n < 2 * PHASE_ORDER:
        return (0, total)
    return (0, round_up(int(total * PHASE_CUT), PANEL), total)


def _reduce_storing(x, *, grid):
    """``(d, e, r, taus)`` with ``Hᴴ x G = B`` (``x``: ``m x n``, ``m >= n``), ``B``'s
    diagonal ``d`` and superdiagonal ``e`` (``n`` each, padded), and the reflectors
    that make ``Q = H₀ H₁ ⋯`` and ``P = G₀ G₁ ⋯`` kept as LAPACK's ``xGEBRD`` keeps
    them: in ``r`` (``x``'s padded shape, ``x``'s buffer), their ``τ`` in ``taus``
    (``2 x K``); `_singular_vectors` applies them, so ``Q`` and ``P`` are never formed.

    ``x`` is padded with zeros to multiples of the grid's both sizes (then the
    padded rows and columns stay zero and ``B`` is ``x``'s bidiagonal padded
    with zeros); after each phase the trailing matrix is cut out and laid out
    evenly again, and the reflectors of the phases are put back together at the
    end.
    """
    m, n = x.shape
    bounds = phase_bounds(n)
    spec = grid.block_spec
    multiple = math.lcm(grid.pr, grid.pc)

    def even(y, rows=None):
        cols = round_up(y.shape[1], multiple)
        rows = round_up(max(y.shape[0], cols), multiple) if rows is None else rows
        return constrain(pad_to(y, (rows, cols)), spec)

    x = even(pad_to(x, (max(m, bounds[-1]), bounds[-1])))
    ds, es, taus, done = [], [], [], []
    for start, stop in zip(bounds, bounds[1:]):
        steps = stop - start
        kernel = functools.partial(
            reduce_to_bidiagonal,
            steps=steps,
            nb=PANEL,
            row_axis=grid.row,
            col_axis=grid.col,
            store=True,
        )
        x, t, d, e = shard_map(
            kernel, in_specs=(spec,), out_specs=(spec, P(), P(), P()), check_vma=False
        )(x)
        ds.append(d)
        es.append(e)
        taus.append(t)
        if stop < bounds[-1]:  # the trailing matrix carries on; the reflectors stay
            done.append((x, steps))
            # its columns first, a few rows at a time (`columns_moved`), then its rows:
            # XLA's cut of both at once held two more copies of x beside x (4x2)
            cols = round_up(x.shape[1] - steps, multiple)
            x = even(columns_moved(x, steps, cols, spec)[steps:])
    r = x
    for whole, steps in reversed(done):  # the later phases' reflectors in their place
        rows, cols = whole.shape
        right = jnp.concatenate([whole[:steps, steps:], r[: rows - steps, : cols - steps]])
        r = constrain(jnp.concatenate([whole[:, :steps], right], axis=1), spec)
    return jnp.concatenate(ds), jnp.concatenate(es), r, jnp.concatenate(taus, axis=1)


def vector_columns(grid) -> P:
    """The layout of ``TGK``'s eigenvectors: every row on each device, the columns split
    column-major over the grid (device ranges as eigh's), so that splitting the rows into
    ``V_B`` and ``U_B`` is local."""
    return P(None, tuple(name for name in (grid.col, grid.row) if name is not None))


def window_spec(grid) -> P:
    """The layout of inverse iteration's windows (`_tgk_vectors`): each device's rows
    (its range of ``TGK``'s eigenvectors, one a row, and the guards), the devices in
    `vector_columns`' order."""
    return P(vector_columns(grid)[1], None)


def _tgk_vectors(d, e, s, r, *, grid):
    """Inverse iteration's window of ``TGK``'s unit eigenvectors on each device
    (`window_spec`; ``golub_kahan_vectors(whole=True)``: its first ``block`` rows the
    device's vectors, for ``s`` ascending; those past ``k`` are not read), which
    `_singular_vectors` turns into ``Q U_B`` and ``P V_B``. The window waits for the
    reflectors ``r`` (XLA made it while the phases' reflectors were still being put
    together: their all-to-all's pieces beside it)."""
    k = d.shape[0]
    cols = vector_columns(grid)
    block = -(-k // grid.size)
    kernel = functools.partial(
        golub_kahan_vectors,
        block=block,
        guard=guard_of(block),
        axis_names=cols[1],
        whole=True,
    )
    return shard_map(
        kernel,
        in_specs=(P(), P(), P(), grid.block_spec),
        out_specs=window_spec(grid),
        check_vma=False,
    )(d, e, s, r)


def kept(s, rows):
    """Which singular values keep their computed vectors: ``s > max(rows, k)·eps·s₀``
    (``s`` descending); the others are completed (`completed`)."""
    k = s.shape[0]
    eps = float(jnp.finfo(s.dtype).eps)
    return s > s[0] * (max(rows, k) * eps)


def completed(u, keep, salt=0):
    """``u`` with its columns not in ``keep`` replaced by an orthonormal basis of the
    complement of the others: ``[u_keep | filler] = QR`` by distla's QR,
    ``u = Q·diag(phase(R_jj))`` (the kept columns, first since ``s`` is descending,
    come back as they were, orthonormalized in order). ``salt`` offsets the rows'
    indices that the pseudo-random filler hashes."""
    rows, k = u.shape
    mesh = jax.sharding.get_abstract_mesh()
    spec = fitting_spec(u.shape, mesh, block_spec(mesh))
    # an integer hash of (row, column), made where the select reads it: jax.random's
    # threefry would hold four integer matrices of u's size at once
    filler = start_vectors(jnp.arange(rows, dtype=jnp.int32) + salt, k, jnp.finfo(u.dtype).dtype)
    y = put(jnp.where(keep[None, :], u, put(filler.astype(u.dtype), spec)), spec)
    q, r = _qr.qr_2d(y, mode="reduced", call=plan_here(y.dtype))
    # R's diagonal by a mask salted as the filler: a loop-invariant mask XLA makes at the
    # program's start and holds throughout (a quarter share)
    at = lax.broadcasted_iota(jnp.int32, r.shape, 0) + salt
    d = jnp.sum(jnp.where(at == lax.broadcasted_iota(jnp.int32, r.shape, 1) + salt, r, 0), axis=1)
    mag = jnp.abs(d)
    phase = jnp.where(mag > 0, d / jnp.where(mag > 0, mag, 1).astype(d.dtype), 1)
    return put(q * phase[None, :].astype(q.dtype), spec)


def _parts(a, *, mesh):
    """The common path: ``(scale, r, taus, s, z)`` of the tall ``a``.

    ``x = a·scale`` (a power of two), ``Qᴴ x P = B`` with ``Q`` and ``P`` kept as
    reflectors (``r``, ``taus``: `_reduce_storing`), ``s`` ``B``'s singular values
    ascending, ``z`` ``TGK``'s eigenvectors for them.
    """
    grid = grid_of(mesh, what="distla.linalg.svd")
    m, k = a.shape
    x, scale = unit_scaled(a)
    d, e, r, taus = _reduce_storing(x, grid=grid)
    d, e = d[:k], e[:k]
    t_diag, t_off = golub_kahan(d, e)
    s = jnp.abs(d) if k == 1 else _bisect(t_diag, t_off, grid=grid, count=k, first=k)
    z = _tgk_vectors(d, e, s, r, grid=grid)
    finite = jnp.isfinite(jnp.sum(d) + jnp.sum(e))
    return scale, r, taus, jnp.where(finite, s, jnp.nan), z


def _vectors_of_b(z, s, r, taus, rows):
    """``(u, v, s, keep, loose)``: ``u = Q U_B``, ``v = P V_B`` from ``TGK``'s
    eigenvectors in inverse iteration's windows ``z`` (`_singular_vectors`), columns
    and ``s`` descending; ``keep`` (`kept`); ``loose``: whether the probe finds either
    further from orthonormal than about ``√k·eps``."""
    k = s.shape[0]
    m = rows
    mesh = jax.sharding.get_abstract_mesh()
    grid = grid_of(mesh, what="distla.linalg.svd")
    u, v = _singular_vectors(r, taus, z, grid=grid, square=m == k)

    def moved(h, rows):
        return put(jnp.flip(h[:rows, :k], axis=1), fitting_spec((rows, k), mesh, grid.block_spec))

    # v moves once u has (once): XLA cut both into their all-to-alls' pieces at once
    # (lstsq's peak at n = 4096, docs/memory.md)
    u = moved(u, m)
    v = moved(once(v, u), k)
    s = jnp.flip(s)
    keep = kept(s, m)
    return u, v, s, keep, _loose(u) | _loose(v)


def _singular_vectors(r, taus, z, *, grid, square):
    """``(Q U_B, P V_B)`` in `vector_columns` (every row on each device, padded to
    ``r``'s rows and columns) from inverse iteration's windows ``z`` (`window_spec`),
    the reflectors applied in this layout (each block of reflectors gathered whole),
    so that they die before the vectors move to the 2D blocks (docs/memory.md).

    For a square real ``B`` (``square``: ``U_B`` as long as ``V_B``) the reflectors
    are applied to the halves where the window holds them, in place
    (``apply_reflectors_to_rows``), and the results are read out of the window once
    the reflectors are gone: the halves made beside the window (2.5 shares) and the
    reflectors were svd's peak. Otherwise ``TGK``'s vectors are split into their
    halves (`halves`), each column made unit, and the reflectors applied to them
    (``apply_reflectors(whole=True)``)."""
    cols = vector_columns(grid)
    k = z.shape[1] // 2
    block = -(-k // grid.size)
    rows, columns = r.shape
    kw = {"nb": PANEL, "row_axis": grid.row, "col_axis": grid.col}

    def in_place(r, taus, z):
        z = apply_reflectors_to_rows(r, taus, z, count=block, **kw)
        return halves_of_rows(z, block, (rows, columns))

    def split(r, taus, z):
        both = halves(z[:block].T)
        u, v = (
            pad_to(_unit_columns(h).astype(r.dtype), (n, block))
            for h, n in ((both[k:], rows), (both[:k], columns))
        )
        return (
            apply_reflectors(r, taus, u, side="left", whole=True, **kw),
            apply_reflectors(r, taus, v, side="right", whole=True, **kw),
        )

    kernel = in_place if square and not jnp.iscomplexobj(r) else split
    return shard_map(
        kernel,
        in_specs=(grid.block_spec, P(), window_spec(grid)),
        out_specs=(cols, cols),
        check_vma=False,
    )(r, taus, z)


def _unit_columns(x):
    """``x`` with each column scaled to unit norm (zero columns stay zero)."""
    norm = jnp.linalg.norm(x, axis=0)
    return x / jnp.where(norm > 0, norm, 1).astype(x.dtype)[None, :]


def _complete_both(u_b, v_b, keep, when=None):
    """`completed` of both halves, one QR traced for the two (a loop of two); with
    ``when`` (a traced bool), a loop of two or of none.

    A loop, not a ``lax.cond`` and not a stack of the two: the loop updates ``u_b``
    and ``v_b`` in place, where a cond's results and a stack would each be more
    matrices of their size beside them (docs/memory.md). Each step completes the
    carry's first half and moves it behind the other, so two steps leave both in
    their places (choosing the half by the index, ``where(i == 0, u, v)``, and writing
    it back the same way held two more matrices of their size in the step). A tall
    matrix's ``u`` (``m`` rows, the reflectors applied) and ``v`` (``k``) take a loop
    each."""

    def one(i, halves):
        this, other = halves
        # the filler differs by half (salt): made from the loop's index, XLA cannot
        # hoist it out of the loop and hold it from the program's start
        done = completed(this, keep, salt=i * this.shape[0])
        return other, done  # after two steps (u done, v done), in their places

    if u_b.shape != v_b.shape:  # tall: u has m rows, v k; a loop of one step or none each
        steps = 1 if when is None else jnp.where(when, 1, 0)
        u_b = lax.fori_loop(0, steps, lambda i, u: completed(u, keep, salt=i), u_b)
        salt = v_b.shape[0]
        v_b = lax.fori_loop(0, steps, lambda i, v: completed(v, keep, salt=i + salt), v_b)
        return u_b, v_b
    steps = 2 if when is None else jnp.where(when, 2, 0)
    return lax.fori_loop(0, steps, one, (u_b, v_b))


def _products(x, scale, u, v, s, keep, *, quotients):
    """``(u, s, v)`` with, where ``quotients`` (``True``, ``False`` or a traced flag),
    the values not kept replaced by ``|uᵢᴴ x vᵢ|`` (sorted descending among themselves;
    they stay below the kept ones). ``x``: the tall matrix, unscaled."""
    m = x.shape[0]
    k = s.shape[0]
    mesh = jax.sharding.get_abstract_mesh()
    spec = block_spec(mesh)

    def with_quotients(s):
        xv = mm(x, v, fitting_spec((m, k), mesh, spec))
        quot = (scale * jnp.abs(jnp.sum(jnp.conj(u) * xv, axis=0))).astype(s.dtype)
        low = jnp.where(keep, jnp.inf, jnp.minimum(quot, s[0]))
        return jnp.where(keep, s, -jnp.sort(-low))

    if quotients is True:
        s = with_quotients(s)
    elif quotients is not False:
        s = lax.cond(quotients, with_quotients, lambda s: s, s)
    finite = jnp.isfinite(jnp.sum(s))
    return u, jnp.where(finite, s / scale, jnp.nan), v


def assemble(u, s, v, *, wide, full_matrices):
    """``(U, S, Vh)``: ``u`` completed to ``m x m`` for ``full_matrices``, NaN vectors
    for a NaN input (as LAPACK's), and ``a = xᴴ`` undone for a wide ``a``."""
    rows, k = u.shape
    if full_matrices and rows > k:
        # q[:, :k] = u·diag(±1): keep u, add the rest
        q, _ = _qr.qr_2d(u, mode="complete", call=plan_here(u.dtype))
        u = jnp.concatenate([u, q[:, k:]], axis=1)
    bad = jnp.isnan(jnp.sum(s))
    u = jnp.where(bad, jnp.asarray(jnp.nan, u.dtype), u)
    v = jnp.where(bad, jnp.asarray(jnp.nan, v.dtype), v)
    if wide:  # a = xᴴ = v s uᴴ
        return v, s, jnp.conj(u.T)
    return u, s, jnp.conj(v.T)


def out_specs(mesh, shape, full_matrices):
    """The layouts of ``(U, S, Vh)`` for an ``m x n`` matrix."""
    spec = block_spec(mesh)
    m, n = shape
    k = min(m, n)
    us = (m, m) if full_matrices else (m, k)
    vs = (n, n) if full_matrices else (k, n)
    return (fitting_spec(us, mesh, spec), P(), fitting_spec(vs, mesh, spec))


@functools.partial(jax.jit, static_argnames=("full_matrices", "mesh"))
def _svd_program(a, *, full_matrices, mesh):
    """The SVD of a traced matrix on ``mesh`` as one program: the repair and the
    completion under ``lax.cond``."""
    m, n = a.shape
    wide = m < n

    def body(a):
        x = jnp.conj(a.T) if wide else a
        scale, r, taus, s, z = _parts(x, mesh=mesh)
        u, v, s, keep, loose_halves = _vectors_of_b(z, s, r, taus, x.shape[0])
        incomplete = ~jnp.all(keep)
        u, v = _complete_both(u, v, keep, when=incomplete | loose_halves)
        u, s, v = _products(x, scale, u, v, s, keep, quotients=incomplete)
        return assemble(u, s, v, wide=wide, full_matrices=full_matrices)

    return run_on_mesh(body, mesh, out_specs(mesh, a.shape, full_matrices), a)


def _common(a, *, mesh, full_matrices, wide):
    """Eager first program: the answer if nothing needs repair or completion, the flags
    that say whether something does, and the parts the other programs start from."""
    scale, r, taus, s, z = _parts(a, mesh=mesh)
    u, v, s_desc, keep, loose = _vectors_of_b(z, s, r, taus, a.shape[0])
    u, s_out, v = _products(a, scale, u, v, s_desc, keep, quotients=False)
    out = assemble(u, s_out, v, wide=wide, full_matrices=full_matrices)
    return out, ~jnp.all(keep) | loose, (a, scale, r, taus, s, z)


def _rest(x, scale, r, taus, s, z, *, full_matrices, wide):
    """Eager second program, for a matrix that needs it: the completion of ``U_B`` and
    ``V_B`` (`_complete_both`) and the values below the cut from the original
    matrix."""
    u, v, s, keep, _ = _vectors_of_b(z, s, r, taus, x.shape[0])
    u, v = _complete_both(u, v, keep)
    u, s, v = _products(x, scale, u, v, s, keep, quotients=~jnp.all(keep))
    return assemble(u, s, v, wide=wide, full_matrices=full_matrices)


def svd_2d(a: jax.Array, *, full_matrices: bool, mesh: AbstractMesh):
    """``(U, S, Vh)`` of one matrix on a 1- or 2-axis mesh, as ``jnp.linalg.svd``.

    A traced ``a`` gives one program (`_svd_program`). A concrete one runs
    the common path first and a second program only for a matrix that needs the
    completion (values below the cut, or halves the probe finds not orthonormal),
    so a first call compiles it only for such a matrix. ``mesh``: the mesh ``a``
    lies on (the resolved plan's).
    """
    if is_traced(a):
        return _svd_program(a, full_matrices=full_matrices, mesh=mesh)
    m, n = a.shape
    wide = m < n
    x = ct_on(a, mesh=mesh) if wide else a
    specs = out_specs(mesh, a.shape, full_matrices)
    grid_spec = block_spec(mesh)
    part_specs = (
        fitting_spec(x.shape, mesh, grid_spec),
        P(),
        grid_spec,
        P(),
        P(),
        window_spec(grid_of(mesh, what="distla.linalg.svd")),
    )
    static = (("full_matrices", full_matrices), ("wide", wide))
    common = on_mesh(_common, mesh, (specs, P(), part_specs), static + (("mesh", mesh),))
    out, incomplete, parts = common(x)
    if not bool(incomplete):  # on the host: no program for the test
        return out
    return on_mesh(_rest, mesh, specs, static)(*parts)
