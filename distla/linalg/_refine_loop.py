"""The refinement loop of the mixed-precision solves (private): classical, then GMRES-IR.

Written once for every layout on abstract operators (`Ops`): the
vectors are x-shaped arrays whose rows ``dot`` reduces (a psum over the mesh
rows inside ``shard_map``, a plain sum outside) and whose per-column values
``spread`` broadcasts back over the rows. ``distla/linalg/_refine.py`` builds the
operators for one sharded matrix and for everything else; the algorithm
(LAPACK's dsgesv with Carson and Higham's GMRES-IR) is described there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import lax

MAX_ITERATIONS = 30  # LAPACK dsgesv's ITERMAX: classical refinement steps
GMRES_BASIS = 12  # Krylov vectors per GMRES-IR correction (m of GMRES(m))
GMRES_STEPS = 8  # most GMRES-IR corrections after classical refinement gives up
# When to leave each kind of correction: after the first step that does not
# shrink the residual of every column still to converge (not yet passing
# dsgesv's test) by the factor below; inf/nan counts as no progress.
#
# LAPACK's dsgesv has no such test: it stops on its ITERMAX (30) and refactors
# in double precision. The test here before was "the residual no longer falls
# at all", which leaves the switch to rounding where refinement crawls: at
# cond(A) = 2e8 (the tests' matrix) it ran all 30 classical steps on one CPU,
# the residual falling by 0.2 to 0.8 per step, before one GMRES-IR step
# converged. So, as in LAPACK's extra-precise refinement (xGERFSX: "no
# progress" once ||dx_{i+1}|| > RTHRESH ||dx_i||, RTHRESH = 0.5) and Oktay and
# Carson's multistage refinement (switch to GMRES-IR when a step contracts too
# little), each phase must contract by a fixed factor per step. We measure the
# residual, not the correction: it is what dsgesv's test measures, and at
# cond(A) = 2e8 the correction ratios sit near 1/2 (0.29 to 0.95 per step on
# the tests' matrix), where a threshold of 1/2 would again be rounding luck.
# The figures below: random matrices with singular values logspaced from 1 to
# 1/cond, n = 90, on a 2x4 mesh.
#
# Classical -> GMRES-IR at 1/4, a cost break-even: a GMRES-IR step costs about
# GMRES_BASIS = 12 classical ones (12 preconditioner solves and matvecs) and
# shrinks the residual by 2.4e-8 or less where it works (40 matrices at
# cond 2e8), so a classical step that shrinks it by less than about
# (2.4e-8)**(1/12) = 0.23 is the dearer way. The classical rate is about
# cond(A) * eps(float32): 0.013 to 0.08 per step at cond 1e7 (20 matrices;
# converged in 6 to 8 steps), while at 2e8 the first refined residual is 0.34
# to 3.7 times ||b|| and the next 0.24 to 6.2 times the first (40 matrices):
# the switch comes after one or two classical steps, whatever the rounding.
CLASSICAL_CONTRACTION = 0.25
# GMRES-IR gives up at 1/2: its remaining steps (GMRES_STEPS = 8 in all) could
# gain at most 2.4 digits at that rate. At cond 1e10, where it cannot converge,
# the residual changes by a factor 0.002 to 6.7 in its first step, 0.39 to 2.5
# in the second and 0.64 to 1.9 in the third (40 matrices): NaN after at most
# three GMRES-IR steps.
GMRES_CONTRACTION = 0.5


class Ops(NamedTuple):
    precond: Callable  # v -> (L U)^-1 P v: the low-precision factors in input-precision arithmetic
    matvec: Callable  # v -> op(A) v (input precision)
    dot: Callable  # (u, v) -> per column sum(conj(u) v) over the rows (leading axes kept)
    spread: Callable  # per-column values -> broadcastable against vectors
    measure: Callable  # (x, r) -> per column (passes dsgesv's test, ||r||inf)
    same: Callable  # x -> x in the loop carry's layout


def _norm2(ops: Ops, v):
    return jnp.sqrt(jnp.real(ops.dot(v, v)))


def _givens(a, b):
    """``(c, s)`` of the rotation ``[c, s; -conj(s), c]`` (``c`` real) that maps ``(a, b)`` to
    ``(ρ, 0)``, elementwise; ``(1, 0)`` where both are zero."""
    r = jnp.sqrt(jnp.abs(a) ** 2 + jnp.abs(b) ** 2)
    abs_a = jnp.abs(a)
    safe_r = jnp.where(r > 0, r, 1)
    phase = jnp.where(abs_a > 0, a / jnp.where(abs_a > 0, abs_a, 1), 1)  # a/|a| (1 for a = 0)
    c = jnp.where(r > 0, abs_a / safe_r, 1)
    s = jnp.where(r > 0, phase * jnp.conj(b) / safe_r, 0)
    return c.astype(a.dtype), s


def _least_squares(hess, beta, *, m: int):
    """``y`` minimising ``||beta e1 - H y||`` for each column: ``H`` (``hess``) is ``(m+1, m,
    *cols)`` upper Hessenberg, ``beta`` ``(*cols)``; ``y`` is ``(m, *cols)``.

    GMRES's own least squares: Givens rotations make ``H`` upper triangular (``R``) and
    rotate ``beta e1`` with it (``g``), then ``R y = g`` by back substitution. Plain
    element-wise arithmetic over the columns, unrolled over the ``m`` rows. (Not LAPACK:
    jaxlib 0.10.2's CPU kernels split a large batch over XLA's intra-op thread pool and
    block until it is done; when every device of a mesh reaches the batched call at
    once, each holds a pool thread waiting on work queued behind the others, and the
    program never finishes: a batched SVD here hung ``cho_solve`` with ``a`` and 131
    right-hand sides on 2x4.) After a breakdown (a zero Krylov vector, whose columns of
    ``H`` are zero, or a diagonal of ``R`` under ``m·eps`` of the largest) the
    corresponding entries of ``y`` are 0, as the SVD's cut-off left them before.
    """
    rows = [[hess[i, j] for j in range(m)] for i in range(m + 1)]
    g = [beta] + [jnp.zeros_like(beta) for _ in range(m)]
    for i in range(m):  # zero H[i+1, i], rotating rows i and i+1 of H and g
        c, s = _givens(rows[i][i], rows[i + 1][i])
        for j in range(i, m):
            top, bot = rows[i][j], rows[i + 1][j]
            rows[i][j] = c * top + s * bot
            rows[i + 1][j] = -jnp.conj(s) * top + c * bot
        g[i], g[i + 1] = c * g[i] + s * g[i + 1], -jnp.conj(s) * g[i]
    diag = [jnp.abs(rows[i][i]) for i in range(m)]
    cut = functools.reduce(jnp.maximum, diag) * m * jnp.finfo(beta.dtype).eps
    y = [None] * m
    for i in reversed(range(m)):  # R y = g, with y_i = 0 where R_ii is under the cut-off
        rest = g[i] - sum((rows[i][j] * y[j] for j in range(i + 1, m)), jnp.zeros_like(beta))
        keep = diag[i] > cut
        y[i] = jnp.where(keep, rest / jnp.where(keep, rows[i][i], 1), 0)
    return jnp.stack(y)


def _correction(ops: Ops, r, steps, *, m: int):
    """``d ≈ A^-1 r``: ``M^-1 r`` (``steps == 0``, classical refinement) or GMRES.

    With ``steps = m`` (dynamic, at most the static ``m``), ``m`` steps of
    GMRES on ``M^-1 A d = M^-1 r`` (``M = P^T L U``) from 0. The
    preconditioner is applied at one call site (the loop's first pass gives
    ``M^-1 r``, each later one ``M^-1 A v_j``), so the program holds one copy
    of the triangular solves.
    """
    dtype = r.dtype
    safe = lambda s: jnp.where(s > 0, s, 1).astype(dtype)  # noqa: E731 (breakdown: keep 0)
    basis = jnp.zeros((m + 1, *r.shape), dtype) + (r * 0)[None]  # r's layout, m+1 vectors
    beta = _norm2(ops, r) * 0  # per column
    # beta's layout (on an Explicit mesh the columns may be split, as the dots give them)
    hess = jnp.zeros((m + 1, m, *beta.shape), dtype) + jnp.zeros_like(beta, dtype)[None, None]

    def arnoldi(j, state):
        basis, hess, beta = state
        prev = basis[jnp.maximum(j - 1, 0)]
        u = lax.cond(j == 0, lambda: r, lambda: ops.same(ops.matvec(prev)))
        w = ops.same(ops.precond(u))
        h_all = jnp.zeros_like(hess[:, 0])
        # classical Gram-Schmidt twice against v_0..v_{j-1} (later basis vectors are 0)
        for _ in range(2):
            h = ops.dot(basis, w[None])  # (m+1, cols)
            w = w - jnp.sum(basis * ops.spread(h), axis=0)
            h_all = h_all + h
        hn = _norm2(ops, w)
        col = jnp.maximum(j - 1, 0)
        h_all = h_all.at[j].set(hn.astype(dtype))
        hess = jnp.where(j == 0, hess, hess.at[:, col].set(h_all))
        beta = jnp.where(j == 0, hn, beta)
        return basis.at[j].set(w / ops.spread(safe(hn))), hess, beta

    basis, hess, beta = lax.fori_loop(0, steps + 1, arnoldi, (basis, hess, beta))
    y = jnp.where(steps == 0, 0, _least_squares(hess, beta.astype(dtype), m=m))  # (m, cols)
    # d = sum_i y_i v_i (i < m); classical: d = beta v_0 = M^-1 r
    coef = jnp.concatenate([y, jnp.zeros_like(y[:1])])
    coef = coef.at[0].add(jnp.where(steps == 0, beta.astype(dtype), 0))
    return jnp.sum(basis * ops.spread(coef), axis=0)


def iterate(ops: Ops, b, x0=None, *, max_iterations: int, gmres_steps: int, m: int):
    """Refinement from ``x = 0``: ``(x, classical steps, converged, GMRES-IR steps)``.

    (From ``x0 = M^-1 b``, counted as the first classical step, where given.)

    One loop: classical corrections while each one shrinks the residual of
    every column still to converge by ``CLASSICAL_CONTRACTION`` (at most
    ``max_iterations`` of them), then GMRES-IR corrections while each shrinks
    it by ``GMRES_CONTRACTION`` (at most ``gmres_steps``), until dsgesv's test
    passes on every column.
    """
    residual = lambda x: ops.same(b - ops.same(ops.matvec(x)))  # noqa: E731
    its = jnp.int32(0 if x0 is None else 1)
    x = ops.same(jnp.zeros_like(b) if x0 is None else x0)
    r = b if x0 is None else residual(x)
    passed, rnorm = ops.measure(x, r)

    def refine_step(state):
        its, steps, x, r, _, phase, rnorm = state
        in_gmres = phase > 0
        x = ops.same(x + _correction(ops, r, jnp.where(in_gmres, m, 0), m=m))
        r = residual(x)
        passed, new_rnorm = ops.measure(x, r)
        # too little progress (or inf/nan) on a column still to converge: this
        # kind of correction ends here (the constants' comment says why)
        enough = jnp.where(in_gmres, GMRES_CONTRACTION, CLASSICAL_CONTRACTION) * rnorm
        slow = jnp.any(~passed & ~(new_rnorm <= enough))
        its = its + (~in_gmres).astype(jnp.int32)
        steps = steps + in_gmres.astype(jnp.int32)
        # phase 0: classical, 1: GMRES-IR, 2: done (GMRES-IR too slow as well)
        phase = jnp.where(
            in_gmres, jnp.where(slow, 2, 1), jnp.where(slow | (its >= max_iterations), 1, 0)
        ).astype(jnp.int32)
        return its, steps, x, r, jnp.all(passed), phase, new_rnorm

    def keep(state):
        its, steps, _, _, converged, phase, _ = state
        return ~converged & ((phase == 0) | (phase == 1) & (steps < gmres_steps))

    zero = jnp.int32(0)
    state = (its, zero, x, r, jnp.all(passed), zero, rnorm)
    its, steps, x, _, converged, _, _ = lax.while_loop(keep, refine_step, state)
    x = jnp.where(converged, x, jnp.full_like(x, jnp.nan))
    return x, its, converged, steps


def dsgesv_test(anorm, n, dtype, reduce_max):
    """``measure`` for `Ops`: per column, dsgesv's test and ``||r||inf``."""
    cte = anorm * jnp.finfo(dtype).eps * np.sqrt(n)

    def measure(x, r):
        rnorm, xnorm = reduce_max(r), reduce_max(x)
        return rnorm <= xnorm * cte, rnorm

    return measure
