"""Mixed-precision solve: factor in low precision, refine in the input's (private).

The algorithm of LAPACK's ``dsgesv``/``zcgesv`` (Langou, Luszczek, Kurzak,
Buttari, Dongarra 2006) on distla's distributed operations:

1. ``P A = L U`` in ``factor_dtype`` (float32 for float64 input, complex64
   for complex128) with the distributed LU — half the bytes, and on CPUs and
   GPUs about twice the flop rate of the input precision;
2. ``x = U^-1 L^-1 P b`` in ``factor_dtype``, then classical iterative
   refinement in the input precision: ``r = b - A x``, ``d`` solved from
   ``r`` with the low-precision factors, ``x += d``. For one sharded matrix
   (up to ``FEW_RHS`` right-hand sides) all of it is one ``shard_map``
   program on the block-cyclic layout: ``A`` is re-laid out once, its
   factors never leave that layout, and each step moves ``O(n·k)`` words (a
   block-cyclic matvec and ``kernels/trsm.py``'s few-right-hand-side
   solves). Stacks, one-device operands and many right-hand sides go through
   ``distla.linalg.lu_factor``/``lu_solve`` and ``distla.matmul``
   (``jnp.matmul`` for stacks);
3. stop when every column meets dsgesv's test
   ``‖r‖∞ ≤ ‖x‖∞ · ‖A‖∞ · eps · sqrt(n)`` (``eps`` of the input
   precision), which puts the backward error well inside DESIGN.md's solve
   ratio; or after ``max_iterations`` corrections (dsgesv's ``ITERMAX = 30``),
   or as soon as the residual stops decreasing (a stall, which dsgesv would
   ride out to ``ITERMAX``).

Non-convergence (``cond(A)`` near ``1/eps`` of ``factor_dtype`` or worse, a
stall, or values that overflow ``factor_dtype``) is reported as NaN in every
entry of the solution: where dsgesv falls back to a full-precision
factorisation, distla leaves that choice to the caller (``solve`` without
``factor_dtype``), so that the compiled program holds one factorisation.
No GMRES-IR.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cyclic import from_block_cyclic, global_blocks, to_block_cyclic
from distla.kernels.lu import lu_block_cyclic
from distla.kernels.trsm import lu_solve_block_cyclic

from . import _lu
from ._mesh import constrain, fitting_spec, is_explicit, operand_mesh, run_on_mesh, shard_map

MAX_ITERATIONS = 30  # LAPACK dsgesv's ITERMAX

# the low precision of each input precision (LAPACK's dsgesv, zcgesv)
_LOWER = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}


class MixedSolve(NamedTuple):
    """What :func:`refine` returns.

    Attributes:
      x: the solution in the input precision (NaN where not converged).
      iterations: refinement steps taken (0: the low-precision solve passed).
      converged: whether dsgesv's test passed.
    """

    x: jax.Array
    iterations: jax.Array
    converged: jax.Array


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


def _same_type(x, ref):
    """``x`` laid out as ``ref`` on an Explicit mesh (a while loop's carry keeps its type)."""
    sharding = jax.typeof(ref).sharding
    mesh = getattr(sharding, "mesh", None)
    if mesh is None or mesh.size == 1 or not is_explicit(mesh):
        return x
    return jax.sharding.reshard(x, sharding)


def _column_max(x, vector: bool):
    """``max |x|`` over the rows of each right-hand side: ``[..., k]``."""
    return jnp.max(jnp.abs(x), axis=-1 if vector else -2)


def _ops(a, vector: bool, two_d: bool):
    """``(factor, solve, matvec)`` for ``a``: distla's LU and matmul, or their stacks."""
    from . import linalg
    from .matmul import matmul

    def factor(a_low):
        return linalg.lu_factor(a_low)

    def solve(lu_piv, rhs):
        return linalg.lu_solve(lu_piv, rhs)

    def matvec(x):
        if not two_d:
            return jnp.matmul(a, x[..., None])[..., 0] if vector else jnp.matmul(a, x)
        return matmul(a, x[:, None])[:, 0] if vector else matmul(a, x)

    return factor, solve, matvec



# --------------------------------------------------------------- one sharded matrix
# One shard_map program: the matrix goes to block-cyclic order once, is factored
# there in factor_dtype and stays there; each refinement step is a matvec with
# the block-cyclic float64 matrix (x all-gathered along mesh rows, n·k words;
# partial products psummed along mesh columns) and the two triangular solves of
# kernels/trsm.py with few right-hand sides (O(n·k) words per step).


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
    y = jnp.dot(a_cyc, cols, precision=lax.Precision.HIGHEST)
    # psum along the mesh row -> (mloc, k): this device row's rows of A x
    return y if col_axis is None else lax.psum(y, col_axis)


def _refine_local(a_blk, b_blk, *, grid, nb, n, factor_dtype, max_iterations):
    row, col = grid.row, grid.col
    axes = tuple(x for x in (row, col) if x is not None)
    dtype = a_blk.dtype
    a = to_block_cyclic(a_blk, axis=0, axis_name=row, nb=nb)
    a = to_block_cyclic(a, axis=1, axis_name=col, nb=nb)  # (mloc, nloc), input precision
    lu, piv = lu_block_cyclic(
        a.astype(factor_dtype), row_axis=row, col_axis=col, nb=nb, precision=_lu._PRECISION
    )
    b = to_block_cyclic(b_blk, axis=0, axis_name=row, nb=nb)  # (mloc, k) on every mesh column

    def low_solve(r):
        x = lu_solve_block_cyclic(
            lu, piv, r.astype(factor_dtype), trans=0, few=True, row_axis=row, col_axis=col,
            nb=nb, precision=_lu._PRECISION,
        )
        return x.astype(dtype)

    def residual(x):
        return b - _matvec_cyc(a, x, row_axis=row, col_axis=col, nb=nb)

    def pmax(v):
        return lax.pmax(v, axes) if axes else v

    # ||A||inf over the real rows (the padding's identity rows left out)
    mloc = a.shape[0]
    blocks = jnp.repeat(global_blocks(mloc // nb, row), nb)
    grow = blocks * nb + jnp.tile(jnp.arange(nb), mloc // nb)  # global row of each local row
    sums = jnp.sum(jnp.abs(a), axis=1)
    sums = sums if col is None else lax.psum(sums, col)
    anorm = pmax(jnp.max(jnp.where(grow < n, sums, 0)))
    cte = anorm * jnp.finfo(dtype).eps * np.sqrt(n)

    def measure(x, r):
        rnorm = pmax(jnp.max(jnp.abs(r), axis=0))  # (k,)
        xnorm = pmax(jnp.max(jnp.abs(x), axis=0))
        return jnp.all(rnorm <= xnorm * cte), jnp.max(rnorm)

    x = low_solve(b)
    r = residual(x)
    converged, worst = measure(x, r)
    it, x, converged = _iterate(x, r, converged, worst, low_solve, residual, measure,
                                max_iterations=max_iterations, same=lambda v: v)
    x = jnp.where(converged, x, jnp.full_like(x, jnp.nan))
    return from_block_cyclic(x, axis=0, axis_name=row, nb=nb), it, converged


@functools.partial(jax.jit, static_argnames=("factor_dtype", "max_iterations"))
def _refine_2d(a, b, *, factor_dtype, max_iterations):
    grid = _lu._grid(a, b, names=("a", "b"))
    n = a.shape[0]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[1]
    nb, n_pad = _lu.plan(grid, n)
    blocks = grid.block_spec
    b_spec = P(grid.row, None)

    def body(a, b):
        a = constrain(_lu._pad_identity(a, n_pad), blocks)
        b2 = constrain(jnp.pad(b.reshape(n, k), ((0, n_pad - n), (0, 0))), b_spec)
        kernel = functools.partial(
            _refine_local, grid=grid, nb=nb, n=n, factor_dtype=factor_dtype,
            max_iterations=max_iterations,
        )
        x, it, converged = shard_map(
            kernel, in_specs=(blocks, b_spec), out_specs=(b_spec, P(), P()), check_vma=False
        )(a, b2)
        x = x[:n]
        return (x[:, 0] if vector else x), it, converged

    out = (fitting_spec(b.shape, grid.mesh, _lu._natural_rhs_spec(grid, b.ndim)), P(), P())
    x, it, converged = run_on_mesh(body, grid.mesh, out, a, b)
    return MixedSolve(x, it, converged)


def _iterate(x, r, converged, worst, low_solve, residual, measure, *, max_iterations, same):
    """Classical refinement ``x += A_low^-1 (b - A x)`` until converged, stalled or out of steps."""

    def keep_going(state):
        it, _, _, converged, stalled, _ = state
        return (it < max_iterations) & ~converged & ~stalled

    def step(state):
        it, x, r, _, _, worst = state
        x = same(x + low_solve(r))
        r = residual(x)
        converged, new_worst = measure(x, r)
        # no progress (or inf/nan): refinement in factor_dtype cannot converge
        stalled = ~(new_worst < worst)
        return it + 1, x, r, converged, stalled, new_worst

    state = (jnp.int32(0), x, r, converged, ~jnp.isfinite(worst), worst)
    it, x, _, converged, _, _ = lax.while_loop(keep_going, step, state)
    return it, x, converged


def refine(a, b, *, factor_dtype, max_iterations: int = MAX_ITERATIONS) -> MixedSolve:
    """Solve ``a x = b`` with an LU in ``factor_dtype`` refined in ``a``'s precision.

    Args:
      a: ``[n, n]`` matrix sharded on a mesh (one distributed program, see
        above), or on one device, or a stack ``[..., n, n]`` (jax's LU through
        ``distla.linalg``); already of the system's dtype.
      b: ``[n]`` or ``[..., n, k]`` right-hand sides of the same dtype.
      factor_dtype: the low precision (checked by :func:`check_factor_dtype`).
      max_iterations: most refinement steps.

    Returns:
      :class:`MixedSolve` ``(x, iterations, converged)``.
    """
    factor_dtype = np.dtype(factor_dtype)
    few = b.ndim == 1 or (b.ndim == 2 and b.shape[1] <= _lu.FEW_RHS)
    if a.ndim == 2 and few and operand_mesh(a, b, names=("a", "b")) is not None:
        return _refine_2d(a, b, factor_dtype=factor_dtype, max_iterations=max_iterations)
    return _refine_generic(a, b, factor_dtype=factor_dtype, max_iterations=max_iterations)


@functools.partial(jax.jit, static_argnames=("factor_dtype", "max_iterations"))
def _refine_generic(a, b, *, factor_dtype, max_iterations):
    """:func:`refine` through the public LU and matmul: stacks, one device, many columns."""
    dtype = a.dtype
    n = a.shape[-1]
    vector = b.ndim == a.ndim - 1
    factor, solve, matvec = _ops(a, vector, a.ndim == 2)
    lu_piv = factor(a.astype(factor_dtype))

    # x0: the low-precision solve; every later x and r keep its layout
    x0 = solve(lu_piv, b.astype(factor_dtype)).astype(dtype)

    def correction(r):
        return _same_type(solve(lu_piv, r.astype(factor_dtype)).astype(dtype), x0)

    b_x = _same_type(b, x0)

    def residual(x):
        return b_x - _same_type(matvec(x), x0)

    # dsgesv's test: ||r||inf <= ||x||inf ||A||inf eps sqrt(n), every right-hand side
    anorm = jnp.max(jnp.sum(jnp.abs(a), axis=-1), axis=-1)
    cte = anorm * jnp.finfo(dtype).eps * np.sqrt(n)
    if not vector:
        cte = cte[..., None]

    def measure(x, r):
        rnorm = _column_max(r, vector)
        return jnp.all(rnorm <= _column_max(x, vector) * cte), jnp.max(rnorm)

    x = x0
    r = residual(x)
    converged, worst = measure(x, r)

    it, x, converged = _iterate(
        x, r, converged, worst, correction, residual, measure, max_iterations=max_iterations,
        same=lambda v: _same_type(v, x0),
    )
    x = jnp.where(converged, x, jnp.full_like(x, jnp.nan))
    return MixedSolve(x, it, converged)


def solve_mixed(a, b, *, factor_dtype) -> jax.Array:
    """Solve ``a x = b`` factoring ``a`` in ``factor_dtype`` and refining in ``a``'s dtype.

    LAPACK's ``dsgesv``/``zcgesv``: the distributed LU in ``factor_dtype``
    (float32 for a float64 system, complex64 for complex128), then classical
    iterative refinement with residuals in the input precision (one
    distributed program, module docstring), until dsgesv's test holds (backward error at the input
    precision: DESIGN.md's solve ratio well under 30). Takes about
    ``log(eps_in)/log(cond(a)·eps_factor)`` steps.

    Args:
      a: ``[n, n]`` matrix sharded over a mesh as for ``distla.linalg.solve``
        (a one-device matrix or a stack uses jax's LU the same way).
      b: ``[n]`` vector or ``[..., n, k]`` right-hand sides.
      factor_dtype: the factorisation's dtype; equal to the system's dtype
        means the plain solve.

    Returns:
      ``x`` as ``distla.linalg.solve`` returns it (same shape, dtype and
      layout). Where refinement does not converge within 30 steps or stalls
      (``cond(a)`` near ``1/eps`` of ``factor_dtype`` or beyond, or entries
      that overflow ``factor_dtype``), every entry of ``x`` is NaN: solve again
      without ``factor_dtype``. (dsgesv falls back to the full-precision LU by
      itself; distla leaves that to the caller.) Forward-mode derivatives go
      through the iteration; reverse mode does not (``lax.while_loop``).

    Raises:
      TypeError: a ``factor_dtype`` that is not the lower precision of the
        system's dtype (float64 -> float32, complex128 -> complex64) or the
        system's dtype itself.
    """
    from . import linalg

    what = "distla.linalg.solve"
    dtype = np.dtype(jnp.result_type(a, b))
    factor = check_factor_dtype(dtype, factor_dtype, what)
    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    if factor == dtype:
        return linalg.solve(a, b)
    return refine(a, b, factor_dtype=factor).x
