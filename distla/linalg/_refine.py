"""Mixed-precision solves: factor in low precision, refine in the input's (private).

The algorithm of LAPACK's ``dsgesv``/``zcgesv`` (Langou, Luszczek, Kurzak,
Buttari, Dongarra 2006), with GMRES-based refinement (Carson and Higham
2017, 2018) where the classical one stalls, on distla's distributed
operations:

1. ``P A = L U`` in ``factor_dtype`` (float32 for float64 input, complex64
   for complex128) with the distributed LU: half the bytes, and on CPUs and
   GPUs about twice the flop rate of the input precision (or a factor the
   caller made once: `lu_solve_mixed`, `cho_solve_mixed`);
2. classical iterative refinement from ``x = 0``: ``r = b - A x`` in the
   input precision, ``d = U^-1 L^-1 P r`` with the factors' values (exact in
   the input precision, and applied in it: the triangular solves are O(n²)
   against the factorisation's O(n³)), ``x += d``;
3. where a step shrinks the residual of a column still to converge by less
   than a factor 4 (``cond(A)`` above a few times 1e7 for a float32 factor;
   ``_refine_loop.CLASSICAL_CONTRACTION`` says why 4) or after
   ``MAX_ITERATIONS`` steps, GMRES-IR: each
   correction ``d`` is ``GMRES_BASIS`` steps of GMRES on the preconditioned
   system ``U^-1 L^-1 P A d = U^-1 L^-1 P r``, matvecs and preconditioner in
   the input precision. The iteration counts are static and the Krylov basis
   is ``GMRES_BASIS + 1`` vectors laid out like ``b``, so the program has a
   fixed shape and no device holds more than its share of ``n``. Classical
   steps and GMRES steps share one loop and one call site of the triangular
   solves (a classical step is the first pass of the Arnoldi loop);
4. stop when every column meets dsgesv's test
   ``‖r‖∞ ≤ ‖x‖∞ · ‖A‖∞ · eps · sqrt(n)`` (``eps`` of the input
   precision), which puts the backward error well inside the scaled solve
   ratio; or when a GMRES-IR step shrinks the residual by less than half,
   or after ``GMRES_STEPS`` of them.

Where neither converges (``cond(A)`` near ``1/eps`` of the input precision,
or values that overflow ``factor_dtype``) every entry of the solution is NaN:
where dsgesv falls back to a full-precision factorisation, distla leaves that
choice to the caller (``solve`` without ``factor_dtype``), so that the
compiled program holds one factorisation.

Layouts. For one sharded matrix (up to ``FEW_RHS`` right-hand sides) all of
it is one ``shard_map`` program on the block-cyclic layout: ``A`` (and a
given factor) is re-laid out once, the factors never leave that layout, and
each matvec, triangular solve and inner product moves ``O(n·k)`` words.
Stacks, one-device operands, many right-hand sides and Cholesky factors go
through the family's own factor and solves, which it hands in as a
`Factorisation` (the LU's: the batched LU for stacks, jax's functions on
one device), and the library's distributed product. The call's plan comes with
them (``None``: one device); nothing here reads the operands' mesh.

Derivatives: `solve_mixed` is a ``lax.custom_linear_solve`` whose
solve and transpose solve are mixed solves with the same low-precision
factor (``trans`` 0 and 1), so ``jax.grad``, ``jax.jvp`` and higher orders
give the derivatives of ``A^-1 b`` at the input precision.

Names: ``_cyc`` block-cyclic local blocks; ``rows``/``cols`` the mesh axes
of ``op(A)``'s rows and columns (swapped for ``trans`` 1, 2).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cyclic import from_block_cyclic, global_blocks, to_block_cyclic
from distla.kernels.lu import lu_block_cyclic
from distla.kernels.trsm import lu_solve_block_cyclic

from .._core.block_cyclic import FEW_RHS, blocking, result_spec, to_cyclic
from .._core.matmul import matvec as product_matvec
from .._core.matrix import HIGHEST, like, pad_identity
from .._core.mesh import constrain, run_on_mesh, shard_map
from .._core.plan import Plan
from ._refine_loop import GMRES_BASIS, GMRES_STEPS, MAX_ITERATIONS, Ops, dsgesv_test, iterate

# the low precision of each input precision (LAPACK's dsgesv, zcgesv)
_LOWER = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}


class MixedSolve(NamedTuple):
    """What `refine` returns.

    Attributes:
      x: the solution in the input precision (NaN where not converged).
      iterations: classical refinement steps taken (0: the low-precision
        solve passed).
      converged: whether dsgesv's test passed.
      gmres_steps: GMRES-IR corrections taken after classical refinement
        (0: it was not needed).
    """

    x: jax.Array
    iterations: jax.Array
    converged: jax.Array
    gmres_steps: jax.Array


def check_factor_dtype(dtype, factor_dtype, what: str) -> np.dtype:
    """The factorisation dtype, or ``TypeError`` naming the pairs distla accepts."""
    try:
        factor = np.dtype(factor_dtype)
    except TypeError:
        factor = None
    dtype = np.dtype(dtype)
    if factor == dtype:
        return factor
    lower = _LOWER.get(dtype)  # (not compared with None: np.dtype(None) is float64)
    if factor is None or lower is None or lower != factor:
        pairs = ", ".join(f"{k} -> {v}" for k, v in _LOWER.items())
        raise TypeError(
            f"{what}: factor_dtype {factor_dtype!r} cannot factor a {dtype} system; mixed "
            f"precision takes {pairs} (or factor_dtype equal to the input's, or None, for "
            "the plain solve)."
        )
    return factor


def lower_precision(dtype) -> np.dtype | None:
    """The factor dtype mixed precision takes for a ``dtype`` system, or ``None``."""
    return _LOWER.get(np.dtype(dtype))


@dataclasses.dataclass(frozen=True)
class Factorisation:
    """A family's factorisation as refinement uses it (module-level functions: static).

    Attributes:
      factor: ``factor(plan, a)`` -> the factors of ``a`` (already in the low
        precision) as a tuple; ``None`` where the caller always gives them.
      solve: ``solve(plan, factors, r, trans)`` -> ``op(A)⁻¹ r`` with the
        factors (cast to the input precision), for a stack, one matrix or one
        device (``plan`` ``None``).
      fused: one sharded matrix with few right-hand sides runs the one fused
        program of this module (the LU's block-cyclic kernels).
    """

    factor: Callable | None
    solve: Callable
    fused: bool = False


def _op(a, trans: int):
    """``op(a)``: ``a``, ``aᵀ`` or ``aᴴ`` (the last two axes)."""
    if trans == 0:
        return a
    at = jnp.swapaxes(a, -1, -2)
    return jnp.conj(at) if trans == 2 else at


# --------------------------------------------------------------- one sharded matrix
# One shard_map program: the matrix goes to block-cyclic order once, is factored
# there in factor_dtype (or its given factor is re-laid out there) and stays
# there; each step is a matvec with the block-cyclic matrix (x all-gathered
# along mesh rows, n·k words; partial products psummed along mesh columns), the
# two triangular solves of kernels/trsm.py with few right-hand sides, and
# per-column inner products psummed along the mesh rows (O(n·k) words per step).


def _matvec_cyc(a_cyc, x, *, row_axis, col_axis, nb):
    """``A x`` for block-cyclic ``A`` and ``x``'s rows block-cyclic over ``row_axis``.

    ``x`` (``mloc, k``) is the same on every device of a mesh row; so is the result.
    """
    pr = 1 if row_axis is None else lax.axis_size(row_axis)
    mloc, k = x.shape
    full = x[None] if row_axis is None else lax.all_gather(x, row_axis, axis=0)
    # (pr, mloc, k) in block-cyclic order -> (blocks, nb, k) in global block order
    full = full.reshape(pr, mloc // nb, nb, k).swapaxes(0, 1).reshape(-1, nb, k)
    cols = full[global_blocks(a_cyc.shape[1] // nb, col_axis)].reshape(-1, k)
    y = jnp.dot(a_cyc, cols, precision=HIGHEST)
    # psum along the mesh row -> (mloc, k): this device row's rows of A x
    return y if col_axis is None else lax.psum(y, col_axis)


def _refine_local(a_blk, b_blk, lu_blk, piv, *, grid, nb, n, factor_dtype, trans, counts):
    row, col = grid.row, grid.col
    dtype = a_blk.dtype
    a = to_cyclic(a_blk, grid, nb)  # (mloc, nloc), input precision
    if lu_blk is None:
        lu, piv = lu_block_cyclic(
            a.astype(factor_dtype), row_axis=row, col_axis=col, nb=nb, precision=HIGHEST
        )
    else:
        lu = to_cyclic(lu_blk, grid, nb)
    # op(A) block-cyclic over (rows, cols); b and every vector: rows block-cyclic
    # over `rows`, (rows_loc, k), the same on every device along `cols`
    rows, cols = (row, col) if trans == 0 else (col, row)
    op_a = _op(a, trans)
    b = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=nb)
    # the factors' values, exact in the input precision: every solve with them
    # (classical corrections and GMRES's preconditioner) runs in that precision
    lu_in = lu.astype(dtype)

    def solve_with(factors, v):
        return lu_solve_block_cyclic(
            factors,
            piv,
            v,
            trans=trans,
            few=True,
            row_axis=row,
            col_axis=col,
            nb=nb,
            precision=HIGHEST,
        )

    def matvec(v):
        return _matvec_cyc(op_a, v, row_axis=rows, col_axis=cols, nb=nb)

    def dot(u, v):
        s = jnp.sum(jnp.conj(u) * v, axis=-2)
        return s if rows is None else lax.psum(s, rows)

    axes = tuple(x for x in (row, col) if x is not None)

    def pmax(v):
        return lax.pmax(v, axes) if axes else v

    # ||op(A)||inf over the real rows (the padding's identity rows left out)
    mloc = op_a.shape[0]
    blocks = jnp.repeat(global_blocks(mloc // nb, rows), nb)
    grow = blocks * nb + jnp.tile(jnp.arange(nb), mloc // nb)  # global row of each local row
    sums = jnp.sum(jnp.abs(op_a), axis=1)
    sums = sums if cols is None else lax.psum(sums, cols)
    anorm = pmax(jnp.max(jnp.where(grow < n, sums, 0)))

    ops = Ops(
        precond=functools.partial(solve_with, lu_in),
        matvec=matvec,
        dot=dot,
        spread=lambda c: jnp.expand_dims(c, -2),
        measure=dsgesv_test(anorm, n, dtype, lambda v: pmax(jnp.max(jnp.abs(v), axis=0))),
        same=lambda v: v,
    )
    x, its, converged, steps = iterate(ops, b, **counts)
    return from_block_cyclic(x, axis=0, axis_name=rows, nb=nb), its, converged, steps


@functools.partial(jax.jit, static_argnames=("plan", "factor_dtype", "trans", "counts"))
def _refine_2d(a, b, lu, piv, *, plan: Plan, factor_dtype, trans, counts):
    grid = plan.grid
    n = a.shape[0]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[1]
    nb, n_pad = blocking(grid, n)
    blocks = grid.block_spec
    b_spec = P(grid.row if trans == 0 else grid.col, None)
    given = lu is not None

    def body(a, b, *factors):
        a = constrain(pad_identity(a, n_pad), blocks)
        b2 = constrain(jnp.pad(b.reshape(n, k), ((0, n_pad - n), (0, 0))), b_spec)
        if given:
            lu, piv = factors
            lu = constrain(pad_identity(lu, n_pad), blocks)
            piv = jnp.concatenate([piv.astype(jnp.int32), jnp.arange(n, n_pad, dtype=jnp.int32)])
            factors = (lu, piv)
        kernel = functools.partial(
            _refine_local,
            grid=grid,
            nb=nb,
            n=n,
            factor_dtype=factor_dtype,
            trans=trans,
            counts=dict(counts),
        )
        if not given:
            kernel = functools.partial(kernel, lu_blk=None, piv=None)
        x, its, converged, steps = shard_map(
            kernel,
            in_specs=(blocks, b_spec) + ((blocks, P()) if given else ()),
            out_specs=(b_spec, P(), P(), P()),
            check_vma=False,
        )(a, b2, *factors)
        x = x[:n]
        return (x[:, 0] if vector else x), its, converged, steps

    out = (result_spec(grid, b.shape), P(), P(), P())
    args = (a, b) + ((lu, piv) if given else ())
    return MixedSolve(*run_on_mesh(body, grid.mesh, out, *args))


# ------------------------------------------------ stacks, one device, many columns
# The same refinement with the family's own factor and solves, on the call's plan
# (None: one device, jax's functions).


@functools.partial(
    jax.jit, static_argnames=("plan", "factorisation", "factor_dtype", "trans", "counts")
)
def _refine_generic(a, b, factors, *, plan, factorisation, factor_dtype, trans, counts):
    """`refine` for stacks, one device and many columns, on ``plan`` (or ``None``).

    ``factors``: ``None`` (``factorisation.factor`` makes them here, in
    ``factor_dtype``) or the family's factors of ``a`` in ``factor_dtype``.
    """
    dtype = a.dtype
    n = a.shape[-1]
    vector = b.ndim == a.ndim - 1
    if factors is None:
        factors = factorisation.factor(plan, a.astype(factor_dtype))

    def solve(f, r):
        return factorisation.solve(plan, f, r, trans)

    factors_in = tuple(
        f.astype(dtype) if jnp.issubdtype(f.dtype, jnp.inexact) else f for f in factors
    )
    op_a = _op(a, trans)

    def matvec(v):  # HIGHEST: the residual is the refinement's accuracy
        if a.ndim > 2:
            return (
                jnp.matmul(op_a, v[..., None], precision=HIGHEST)[..., 0]
                if vector
                else jnp.matmul(op_a, v, precision=HIGHEST)
            )
        return product_matvec(op_a, v, None if plan is None else plan.mesh)

    # x0: the first correction; every later vector keeps its layout
    x0 = solve(factors_in, b)
    same = functools.partial(like, ref=x0)
    rows = -1 if vector else -2  # the axis of the n rows

    def column_max(v):
        return jnp.max(jnp.abs(v), axis=rows)

    # dsgesv's test on every right-hand side: ||op(A)||inf per matrix of the stack
    anorm = jnp.max(jnp.sum(jnp.abs(op_a), axis=-1), axis=-1)
    anorm = anorm if vector else anorm[..., None]
    ops = Ops(
        precond=lambda v: solve(factors_in, v),
        matvec=matvec,
        dot=lambda u, v: jnp.sum(jnp.conj(u) * v, axis=rows),
        spread=lambda c: jnp.expand_dims(c, rows),
        measure=dsgesv_test(anorm, n, dtype, column_max),
        same=same,
    )
    return MixedSolve(*iterate(ops, same(b), x0, **dict(counts)))


def _counts(max_iterations, gmres_steps, gmres_basis):
    return (("max_iterations", max_iterations), ("gmres_steps", gmres_steps), ("m", gmres_basis))


def refine(
    a,
    b,
    *,
    plan: Plan | None,
    factorisation: Factorisation,
    factor_dtype,
    factors=None,
    trans: int = 0,
    max_iterations: int = MAX_ITERATIONS,
    gmres_steps: int = GMRES_STEPS,
    gmres_basis: int = GMRES_BASIS,
) -> MixedSolve:
    """Solve ``op(a) x = b`` with a factor in ``factor_dtype`` refined in ``a``'s precision.

    Args:
      a: ``[n, n]`` matrix on ``plan``'s mesh (one distributed program, see
        above, for a fused factorisation), or on one device, or a stack
        ``[..., n, n]`` (through the family's calls); already of the system's dtype.
      b: ``[n]`` or ``[..., n, k]`` right-hand sides of the same dtype.
      plan: the call's plan (``None``: one device).
      factorisation: the family's factor and solves (the LU's, or a Cholesky
        factor's).
      factor_dtype: the low precision (checked by `check_factor_dtype`).
      factors: ``None`` (factor ``a`` here), or the family's factors of ``a`` in
        ``factor_dtype`` (``(lu, piv)`` from ``lu_factor``, ``(c,)`` from
        ``cho_factor``).
      trans: 0, 1 or 2 (LU only): solve with ``a``, ``aᵀ`` or ``aᴴ``.
      max_iterations: most classical refinement steps.
      gmres_steps: most GMRES-IR corrections after them (0: none).
      gmres_basis: Krylov vectors per GMRES-IR correction.

    Returns:
      `MixedSolve` ``(x, iterations, converged, gmres_steps)``.
    """
    factor_dtype = np.dtype(factor_dtype)
    counts = _counts(max_iterations, gmres_steps, gmres_basis)
    if plan is not None:  # the plan of the input precision; the block sizes are the LU's own
        plan = dataclasses.replace(plan, dtype=np.dtype(a.dtype), block_size=None)
    few = b.ndim == 1 or (b.ndim == 2 and b.shape[1] <= FEW_RHS)
    if factorisation.fused and a.ndim == 2 and few and plan is not None:
        lu, piv = factors if factors is not None else (None, None)
        return _refine_2d(
            a, b, lu, piv, plan=plan, factor_dtype=factor_dtype, trans=trans, counts=counts
        )
    return _refine_generic(
        a,
        b,
        factors,
        plan=plan,
        factorisation=factorisation,
        factor_dtype=factor_dtype,
        trans=trans,
        counts=counts,
    )


# ------------------------------------------------------------------ the solves


def solve_mixed(plan: Plan | None, a, b, *, factorisation: Factorisation, factor_dtype):
    """Solve ``a x = b`` factoring ``a`` in ``factor_dtype`` and refining in ``a``'s dtype.

    LAPACK's ``dsgesv``/``zcgesv``: the family's factorisation in ``factor_dtype``
    (float32 for a float64 system, complex64 for complex128), then classical
    iterative refinement with residuals in the input precision, and
    GMRES-IR where that stalls (module docstring), until dsgesv's test
    holds (backward error at the input precision: the scaled solve ratio
    well under 30).

    Args:
      plan: the call's plan (``None``: one device).
      a: ``[n, n]`` matrix on ``plan``'s mesh as for ``distla.linalg.solve``
        (or a stack, with ``b``'s batch), of the system's dtype.
      b: ``[n]`` vector or ``[..., n, k]`` right-hand sides of that dtype.
      factorisation: the family's factor and solves.
      factor_dtype: the factorisation's dtype, lower than the system's.

    Returns:
      ``x`` as ``distla.linalg.solve`` returns it (same shape, dtype and
      layout). Where neither refinement converges (``cond(a)`` near ``1/eps``
      of the input precision, or entries that overflow ``factor_dtype``),
      every entry of ``x`` is NaN: solve again without ``factor_dtype``.
      Differentiable to any order (a ``lax.custom_linear_solve`` whose
      solves, with ``a`` and ``aᵀ``, are mixed solves with the same factor).

    Raises:
      TypeError: a ``factor_dtype`` that is not the lower precision of the
        system's dtype (float64 -> float32, complex128 -> complex64).
    """
    factor = check_factor_dtype(a.dtype, factor_dtype, "distla.linalg.solve")
    return _solve_mixed(a, b, plan, factorisation, factor)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _solve_mixed(a, b, plan, factorisation, factor_dtype):
    # the primal: one program that factors and refines (the fused path above)
    return refine(a, b, plan=plan, factorisation=factorisation, factor_dtype=factor_dtype).x


@_solve_mixed.defjvp
def _solve_mixed_jvp(plan, factorisation, factor_dtype, primals, tangents):
    # derivatives: the same solve written with lax.custom_linear_solve, which jax
    # differentiates (and transposes, for reverse mode) to any order
    linear = functools.partial(
        _linear_solve, plan=plan, factorisation=factorisation, factor_dtype=factor_dtype
    )
    return jax.jvp(linear, primals, tangents)


@functools.partial(jax.jit, static_argnames=("plan", "factorisation", "factor_dtype"))
def _linear_solve(a, b, *, plan, factorisation, factor_dtype):
    """``a^-1 b`` as ``lax.custom_linear_solve``: ``a`` and ``aᵀ`` solves share one factor."""
    a_const = lax.stop_gradient(a)
    factor_plan = None if plan is None else dataclasses.replace(plan, dtype=np.dtype(factor_dtype))
    factors = factorisation.factor(factor_plan, a_const.astype(factor_dtype))
    vector = b.ndim == a.ndim - 1

    def matvec(x):  # the default precision, as jnp.linalg.solve's derivative
        if a.ndim > 2:
            return jnp.matmul(a, x[..., None])[..., 0] if vector else jnp.matmul(a, x)
        return product_matvec(a, x, None if plan is None else plan.mesh, precision=None)

    def solver(trans):
        def solve(_, r):
            x = refine(
                a_const,
                r,
                plan=plan,
                factorisation=factorisation,
                factor_dtype=factor_dtype,
                factors=factors,
                trans=trans,
            ).x
            return like(x, r)

        return solve

    return lax.custom_linear_solve(
        lambda x: like(matvec(x), x), b, solve=solver(0), transpose_solve=solver(1)
    )


def check_system(what: str, factor, a, b) -> None:
    """``a`` (the factored matrix) and ``b`` match a factor for a refined solve (``ValueError``)."""
    n = factor.shape[-1]
    if (
        a.shape != factor.shape
        or a.ndim < 2
        or b.shape[: a.ndim - 2] != a.shape[:-2]
        or b.ndim not in (a.ndim - 1, a.ndim)
        or b.shape[a.ndim - 2] != n
    ):
        raise ValueError(
            f"{what}: with a, the factor {factor.shape}, a {a.shape} and b {b.shape} must "
            f"match: a the factorised matrix ({factor.shape}), b (..., {n}) or (..., {n}, k) "
            "with a's batch dimensions"
        )
