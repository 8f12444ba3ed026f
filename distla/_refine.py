"""Mixed-precision solve: factor in low precision, refine in the input's (private).

The algorithm of LAPACK's ``dsgesv``/``zcgesv`` (Langou, Luszczek, Kurzak,
Buttari, Dongarra 2006) on distla's distributed operations:

1. ``P A = L U`` in ``factor_dtype`` (float32 for float64 input, complex64
   for complex128) with the distributed LU — half the bytes, and on CPUs and
   GPUs about twice the flop rate of the input precision;
2. ``x = U^-1 L^-1 P b`` in ``factor_dtype``, then classical iterative
   refinement in the input precision: ``r = b - A x`` (``distla.matmul``,
   or ``jnp.matmul`` for stacks and one-device operands), ``d`` solved from
   ``r`` with the low-precision factors, ``x += d``;
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

from ._mesh import is_explicit

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


@functools.partial(jax.jit, static_argnames=("factor_dtype", "max_iterations"))
def refine(a, b, *, factor_dtype, max_iterations: int = MAX_ITERATIONS) -> MixedSolve:
    """Solve ``a x = b`` with an LU in ``factor_dtype`` refined in ``a``'s precision.

    Args:
      a: ``[n, n]`` matrix (sharded on a mesh: distributed; on one device or a
        stack: jax's LU), already of the system's dtype.
      b: ``[n]`` or ``[..., n, k]`` right-hand sides of the same dtype.
      factor_dtype: the low precision (checked by :func:`check_factor_dtype`).
      max_iterations: most refinement steps.

    Returns:
      :class:`MixedSolve` ``(x, iterations, converged)``.
    """
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

    def keep_going(state):
        it, _, _, converged, stalled, _ = state
        return (it < max_iterations) & ~converged & ~stalled

    def step(state):
        it, x, r, _, _, worst = state
        x = _same_type(x + correction(r), x0)
        r = residual(x)
        converged, new_worst = measure(x, r)
        # no progress (or inf/nan): refinement in factor_dtype cannot converge
        stalled = ~(new_worst < worst)
        return it + 1, x, r, converged, stalled, new_worst

    state = (jnp.int32(0), x, r, converged, ~jnp.isfinite(worst), worst)
    it, x, _, converged, _, _ = lax.while_loop(keep_going, step, state)
    x = jnp.where(converged, x, jnp.full_like(x, jnp.nan))
    return MixedSolve(x, it, converged)


def solve_mixed(a, b, *, factor_dtype) -> jax.Array:
    """Solve ``a x = b`` factoring ``a`` in ``factor_dtype`` and refining in ``a``'s dtype.

    LAPACK's ``dsgesv``/``zcgesv``: the distributed LU in ``factor_dtype``
    (float32 for a float64 system, complex64 for complex128), then classical
    iterative refinement with residuals from ``distla.matmul`` in the input
    precision, until dsgesv's test holds (backward error at the input
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
