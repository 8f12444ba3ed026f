"""The LU family's distributed programs: one matrix on a mesh (private; see distla.linalg).

Each function here takes one matrix on a mesh and the call's
``distla._core.plan.Plan`` (its mesh, dtype and block size, resolved once by the
public function), pads the matrix (with an identity block, so the padded
factorisation contains the original one), converts it to block-cyclic order
inside ``shard_map``, runs the kernels of ``distla.kernels.lu`` /
``distla.kernels.trsm``, and returns the results in the caller's 2D block
layout. Nothing here reads the operands' mesh or checks them again.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cyclic import (
    from_block_cyclic_2d,
    global_blocks,
    relayout_fraction,
    to_block_cyclic_2d,
)
from distla.kernels.lu import lu_block_cyclic
from distla.kernels.lu import phases as lu_phases
from distla.kernels.trsm import lu_solve_block_cyclic

from ..._core.block_cyclic import blocking, from_cyclic, result_spec, rhs_of, to_cyclic
from ..._core.matrix import HIGHEST, diag_mask, pad_identity, tril_mask, triu
from ..._core.mesh import Grid, constrain, fitting_spec, run_on_mesh, shard_map
from ..._core.plan import Plan


def _factor_local(a_blk, *, grid: Grid, nb: int):
    a = to_cyclic(a_blk, grid, nb)
    return lu_block_cyclic(a, row_axis=grid.row, col_axis=grid.col, nb=nb, precision=HIGHEST)


def _solve_local(lu_cyc, piv, b_blk, *, grid: Grid, nb: int, trans: int, few: bool):
    rows = grid.row if trans == 0 else grid.col
    # the rows to block-cyclic order and back in place, column slice by column slice
    b = to_block_cyclic_2d(b_blk, row_axis=rows, col_axis=None, nb=nb)
    x = _solve_cyclic(lu_cyc, piv, b, grid=grid, nb=nb, trans=trans, few=few)
    return from_block_cyclic_2d(x, row_axis=rows, col_axis=None, nb=nb)


def _solve_cyclic(lu_cyc, piv, b, *, grid: Grid, nb: int, trans: int, few: bool):
    return lu_solve_block_cyclic(
        lu_cyc,
        piv,
        b,
        trans=trans,
        few=few,
        row_axis=grid.row,
        col_axis=grid.col,
        nb=nb,
        precision=HIGHEST,
    )


def _identity_cyclic(shape, dtype, *, n: int, grid: Grid, nb: int, few: bool):
    """This device's block of the ``n``-column identity, rows in block-cyclic order.

    ``shape`` is the local ``(rows, columns)`` of the right-hand sides (padded);
    the columns are contiguous over the mesh columns (all of them when ``few``).
    Made from iotas where it lies: no identity is built and then moved.
    """
    rows, cols = shape
    row_g = jnp.repeat(global_blocks(rows // nb, grid.row), nb) * nb + jnp.tile(
        jnp.arange(nb, dtype=jnp.int32), rows // nb
    )
    first = 0 if few or grid.col is None else lax.axis_index(grid.col) * cols
    col_g = first + jnp.arange(cols, dtype=jnp.int32)
    return ((row_g[:, None] == col_g[None, :]) & (col_g[None, :] < n)).astype(dtype)


@functools.partial(jax.jit, static_argnames=("call",))
def lu_factor(a, *, call: Plan):
    """``(lu, piv)`` of one matrix, as ``jax.scipy.linalg.lu_factor``."""
    grid, dtype = call.grid, call.dtype
    m, n = a.shape  # rectangular: the LU of a square padding (see pad_identity)
    nb, n_pad = blocking(grid, max(m, n), call.block_size)
    blocks = grid.block_spec

    def body(a):
        a = constrain(pad_identity(a.astype(dtype), n_pad), blocks)

        def kernel(a_blk):
            lu, piv = _factor_local(a_blk, grid=grid, nb=nb)
            return from_cyclic(lu, grid, nb), piv

        lu, piv = shard_map(kernel, in_specs=blocks, out_specs=(blocks, P()), check_vma=False)(a)
        return lu[:m, :n], piv[: min(m, n)]

    out = (fitting_spec((m, n), grid.mesh, blocks), P())
    return run_on_mesh(body, grid.mesh, out, a)


@functools.partial(jax.jit, static_argnames=("call", "trans"))
def lu_solve(lu, piv, b, *, call: Plan, trans: int):
    """``op(A)^-1 b`` from ``lu_factor``'s ``(lu, piv)``, as ``jax.scipy.linalg.lu_solve``.

    The solve's block size is its own (the default for ``n``), whatever
    block the factorisation used: it only orders the solve's blocks.
    """
    grid, dtype = call.grid, call.dtype
    n = lu.shape[0]
    nb, n_pad = blocking(grid, n)
    blocks = grid.block_spec
    rhs = rhs_of(grid, b.shape, trans)

    def body(lu, piv, b):
        lu = constrain(pad_identity(lu.astype(dtype), n_pad), blocks)
        piv = jnp.concatenate([piv.astype(jnp.int32), jnp.arange(n, n_pad, dtype=jnp.int32)])

        def kernel(lu_blk, piv, b_blk):
            lu_cyc = to_cyclic(lu_blk, grid, nb)
            return _solve_local(lu_cyc, piv, b_blk, grid=grid, nb=nb, trans=trans, few=rhs.few)

        x = shard_map(
            kernel, in_specs=(blocks, P(), rhs.spec), out_specs=rhs.spec, check_vma=False
        )(lu, piv, rhs.pad(b, n_pad, dtype))
        return rhs.crop(x)

    return run_on_mesh(body, grid.mesh, result_spec(grid, b.shape), lu, piv, b)


@functools.partial(jax.jit, static_argnames=("call",))
def solve(a, b, *, call: Plan):
    """``a^-1 b``: factorisation and solves in one program."""
    grid, dtype = call.grid, call.dtype
    nb, n_pad = blocking(grid, a.shape[0], call.block_size)
    blocks = grid.block_spec
    rhs = rhs_of(grid, b.shape, 0)

    def body(a, b):
        a = constrain(pad_identity(a.astype(dtype), n_pad), blocks)

        def kernel(a_blk, b_blk):
            lu, piv = _factor_local(a_blk, grid=grid, nb=nb)
            return _solve_local(lu, piv, b_blk, grid=grid, nb=nb, trans=0, few=rhs.few)

        x = shard_map(kernel, in_specs=(blocks, rhs.spec), out_specs=rhs.spec, check_vma=False)(
            a, rhs.pad(b, n_pad, dtype)
        )
        return rhs.crop(x)

    return run_on_mesh(body, grid.mesh, result_spec(grid, b.shape), a, b)


@functools.partial(jax.jit, static_argnames=("call",))
def inv(a, *, call: Plan):
    """``a^-1``: the solve against the identity, which each device makes in place.

    The identity's rows are made in the solve's block-cyclic order and the
    solution overwrites them, so a device holds its block of ``a``, of the
    factors and of the inverse, not a fourth block of identity.
    """
    grid, dtype = call.grid, call.dtype
    n = a.shape[0]
    nb, n_pad = blocking(grid, n, call.block_size)
    blocks = grid.block_spec
    rhs = rhs_of(grid, (n, n), 0)

    def body(a):
        a = constrain(pad_identity(a.astype(dtype), n_pad), blocks)

        def kernel(a_blk):
            lu, piv = _factor_local(a_blk, grid=grid, nb=nb)
            cols = rhs.k_pad if rhs.few else rhs.k_pad // grid.pc
            b = _identity_cyclic((lu.shape[0], cols), dtype, n=n, grid=grid, nb=nb, few=rhs.few)
            x = _solve_cyclic(lu, piv, b, grid=grid, nb=nb, trans=0, few=rhs.few)
            return from_block_cyclic_2d(x, row_axis=grid.row, col_axis=None, nb=nb)

        x = shard_map(kernel, in_specs=blocks, out_specs=rhs.spec, check_vma=False)(a)
        return rhs.crop(x)

    return run_on_mesh(body, grid.mesh, result_spec(grid, (n, n)), a)


def _unpack(lu: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    """``(L [m, k], U [k, n])`` from ``lu`` (``m x n``, ``k = min(m, n)``)."""
    m, n = lu.shape
    k = min(m, n)
    low, up = lu[:, :k], lu[:k, :]
    unit = jnp.where(diag_mask(low), jnp.ones((), dtype), jnp.zeros((), dtype))
    lower = jnp.where(tril_mask(low, -1), low, unit)
    return lower, triu(up).astype(dtype)


@functools.partial(jax.jit, static_argnames=("call",))
def plu(lu, piv, *, call: Plan):
    """``(p, l, u)`` with ``a = p l u`` from ``lu_factor``'s ``(lu, piv)``."""
    grid = call.grid
    m, n = lu.shape
    k = min(m, n)
    dtype = lu.dtype
    specs = tuple(fitting_spec(s, grid.mesh, grid.block_spec) for s in ((m, m), (m, k), (k, n)))

    def body(lu, piv):
        lower, upper = _unpack(lu, dtype)
        perm = lax.linalg.lu_pivots_to_permutation(piv, m)
        # P A = L U with P[i, perm[i]] = 1, so A = P^T L U: return P^T
        rows = lax.broadcasted_iota(jnp.int32, (m, m), 0)
        p = (perm[None, :] == rows).astype(dtype)
        return p, lower, upper

    return run_on_mesh(body, grid.mesh, specs, lu, piv)


def lu(a, *, call: Plan):
    """``(p, l, u)`` of one matrix, as ``jax.scipy.linalg.lu``.

    Two programs, so that ``lu``, ``det`` and ``slogdet`` share
    [`lu_factor`][distla.linalg.lu_factor]'s compiled one.
    """
    return plu(*lu_factor(a, call=call), call=call)


def _diagonal_terms(lu, piv, dtype):
    """Pivot parity (+-1) and U's diagonal, for det and slogdet."""
    n = lu.shape[0]
    swaps = jnp.sum(piv != jnp.arange(n, dtype=piv.dtype))
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(dtype)
    return parity, jnp.diagonal(lu)


def _sign_logabs(lu, piv, dtype):
    """``(sign, logabsdet)`` from U's diagonal exactly as jnp's ``_slogdet_lu`` forms them.

    Real: the sign counts negative pivots (so an inf or nan entry keeps a
    sign of +-1, as in jnp); complex: the product of ``d / |d|``. A zero
    pivot gives sign 0 and ``-inf``.
    """
    parity, d = _diagonal_terms(lu, piv, dtype)
    absd = jnp.abs(d)
    is_zero = jnp.any(d == jnp.zeros((), dtype))
    if jnp.issubdtype(dtype, jnp.complexfloating):
        sign = parity * jnp.prod(d / absd.astype(dtype))
    else:
        negative = jnp.sum(d < 0)
        sign = parity * jnp.where(negative % 2 == 1, -1, 1).astype(dtype)
    sign = jnp.where(is_zero, jnp.zeros((), dtype), sign)
    logabs = jnp.where(is_zero, -jnp.inf, jnp.sum(jnp.log(absd)))
    return sign, logabs.astype(absd.dtype)


@functools.partial(jax.jit, static_argnames=("call",))
def _slogdet_from(lu, piv, *, call: Plan):
    def body(lu, piv):
        return _sign_logabs(lu, piv, lu.dtype)

    return run_on_mesh(body, call.mesh, (P(), P()), lu, piv)


@functools.partial(jax.jit, static_argnames=("call",))
def _slogdet_closed_form(a, *, call: Plan):
    return run_on_mesh(lambda a: tuple(jnp.linalg.slogdet(a)), call.mesh, (P(), P()), a)


def slogdet(a, *, call: Plan):
    """``(sign, logabsdet)`` of one matrix, as ``jnp.linalg.slogdet``.

    Orders 1 and 2 take jnp's closed forms from ``det`` itself, as jnp does
    (so a NaN entry gives a NaN sign, and an overflowing ``det`` ``inf``); from
    order 3 on the sign and logarithm come from the LU's pivots.
    """
    if a.shape[0] <= 2:
        return _slogdet_closed_form(a, call=call)
    return _slogdet_from(*lu_factor(a, call=call), call=call)


@functools.partial(jax.jit, static_argnames=("call",))
def _det_from(lu, piv, *, call: Plan):
    def body(lu, piv):
        # sign * exp(logabsdet), as jnp forms det: an overflow gives (+-)inf
        # (complex: inf in both parts), never the nan of an overflowing product
        sign, logabs = _sign_logabs(lu, piv, lu.dtype)
        return sign * jnp.exp(logabs).astype(lu.dtype)

    return run_on_mesh(body, call.mesh, P(), lu, piv)


def det(a, *, call: Plan):
    """The determinant of one matrix, as ``jnp.linalg.det``."""
    return _det_from(*lu_factor(a, call=call), call=call)


@functools.partial(jax.jit, static_argnames=("call",))
def _cofactor_parts(lu, piv, *, call: Plan):
    """The pieces of jnp's ``_cofactor_solve`` that need the whole diagonal.

    Returns ``(lu2, det, pd, e)``: ``lu`` with ``U[n-1, n-1]`` replaced by
    ``1 / pd``, where ``pd`` is the determinant without that last pivot,
    ``det`` itself, and ``e = P^T e_{n-1}`` (so that ``lu_solve(lu2, e)`` is
    ``U2^-1 e_{n-1}``).
    """
    grid, dtype = call.grid, call.dtype
    n = lu.shape[0]
    blocks = fitting_spec((n, n), grid.mesh, grid.block_spec)

    def body(lu, piv):
        parity, d = _diagonal_terms(lu, piv, dtype)
        partial = jnp.cumprod(d) * parity
        det, pd = partial[-1], partial[-2]
        r = lax.broadcasted_iota(jnp.int32, (n, n), 0)
        c = lax.broadcasted_iota(jnp.int32, (n, n), 1)
        lu2 = jnp.where((r == n - 1) & (c == n - 1), (1 / pd).astype(dtype), lu)
        perm = lax.linalg.lu_pivots_to_permutation(piv, n)
        e = (jnp.arange(n, dtype=perm.dtype) == perm[n - 1]).astype(dtype)
        return lu2, det, pd, e

    return run_on_mesh(body, grid.mesh, (blocks, P(), P(), result_spec(grid, (n,))), lu, piv)


@functools.partial(jax.jit, static_argnames=("call",))
def _adjugate_from(y, v, det, pd, *, call: Plan):
    """``det * Y + (1 - det) * v w^T`` with ``w = Y[n-1] / pd``; zero if anything is not finite.

    ``Y = U2^-1 L^-1 P`` and ``v = U2^-1 e_{n-1}``: this is jnp's
    ``_cofactor_solve(a, I)``, the adjugate, written with whole solves
    (the last row of ``L^-1 P`` is ``Y[n-1] / pd`` since ``U2[n-1, n-1] = 1/pd``).
    """
    grid = call.grid
    n = y.shape[0]
    blocks = fitting_spec((n, n), grid.mesh, grid.block_spec)

    def body(y, v, det, pd):
        w = y[n - 1] / pd
        adj = det * y + (1 - det) * v[:, None] * w[None, :]
        bad = ~(jnp.all(jnp.isfinite(y)) & jnp.all(jnp.isfinite(v)) & jnp.isfinite(pd))
        bad = bad | ~jnp.all(jnp.isfinite(adj))
        return jnp.where(bad, jnp.zeros((), y.dtype), adj)

    return run_on_mesh(body, grid.mesh, blocks, y, v, det, pd)


def adjugate(a, *, call: Plan):
    """``adj(a)`` (``det(a) a^-1`` where ``a`` is regular), as jnp's ``_cofactor_solve``.

    Right for matrices of rank ``n - 1`` whose zero pivot comes last (as
    jnp's is); zero where rank is lower or anything overflows (jnp: zero).
    """
    n = a.shape[0]
    lu_, piv = lu_factor(a, call=call)
    if n == 1:
        return jnp.ones_like(lu_)
    lu2, det, pd, e = _cofactor_parts(lu_, piv, call=call)
    y = lu_solve(lu2, piv, jnp.eye(n, dtype=call.dtype), call=call, trans=0)
    v = lu_solve(lu2, piv, e, call=call, trans=0)
    return _adjugate_from(y, v, det, pd, call=call)


@functools.partial(jax.jit, static_argnames=("call", "trans"))
def factors_matvec(lu, piv, x, *, call: Plan, trans: int):
    """``A x`` (``A^T x``, ``A^H x`` for ``trans`` 1, 2) with ``A = P^T L U`` from ``lu_factor``.

    Only differentiation uses it (``lax.custom_linear_solve`` differentiates
    ``lu_solve`` with respect to ``lu`` through it), so it is written with
    plain jnp operations and left to XLA's partitioner.
    """
    grid, dtype = call.grid, call.dtype
    n = lu.shape[0]

    def body(lu, piv, x):
        lower, upper = _unpack(lu.astype(dtype), dtype)
        perm = lax.linalg.lu_pivots_to_permutation(piv, n)
        hi = HIGHEST
        if trans == 0:
            y = jnp.matmul(lower, jnp.matmul(upper, x, precision=hi), precision=hi)
            return y[jnp.argsort(perm)]  # P^T y
        if trans == 2:
            lower, upper = jnp.conj(lower), jnp.conj(upper)
        px = x[perm]  # P x
        return jnp.matmul(upper.T, jnp.matmul(lower.T, px, precision=hi), precision=hi)

    return run_on_mesh(body, grid.mesh, result_spec(grid, x.shape), lu, piv, x)


def trace(x):
    """``jnp.trace`` of a matrix on a mesh, as a sum against a replicated identity.

    (``jnp.diagonal`` of an Explicit-sharded matrix is not supported in jax
    0.10.2, and wrapping it in ``auto_axes`` breaks its transpose.)
    """
    return jnp.sum(x * jnp.eye(x.shape[0], dtype=x.dtype))


def model_bytes(
    n: int,
    grid: tuple[int, int],
    dtype: jax.typing.DTypeLike,
    *,
    block_size: int | None = None,
    rhs: int | None = None,
) -> float:
    """Bytes one device receives in an ``n x n`` LU (``rhs=None``) or solve, per docs/lu.md.

    The model of ``lu_factor`` (``rhs=None``) or ``solve`` with ``rhs``
    right-hand sides (0 for a vector) on a ``pr x pc`` grid, for the busiest
    device (the owner of every panel it could own), counted as
    ``distla.cost`` counts: all-gather and all-to-all ``(g-1)/g`` of their
    result, all-reduce ``2(g-1)/g``. Public as ``distla.linalg.lu_model_bytes``.

    Args:
      n: the matrix order.
      grid: the mesh shape ``(pr, pc)``.
      dtype: the matrix dtype (its item size counts).
      block_size: the block size the call uses (``None``: distla's choice).
      rhs: ``None`` for ``lu_factor``; the number of right-hand sides for
        ``solve`` (0 for a vector).

    Returns:
      Bytes received per device, comparable to
      ``distla.cost(...).total_collective_bytes``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> distla.linalg.lu_model_bytes(8192, (2, 4), jnp.float32) > 0
      True
    """
    pr, pc = grid
    mesh = jax.sharding.AbstractMesh((pr, pc), ("r", "c"))
    nb, n_pad = blocking(Grid(mesh, "r", "c"), n, block_size)
    item = jnp.dtype(dtype).itemsize
    nbr, mloc, nloc = n_pad // nb, n_pad // pr, n_pad // pc
    block = mloc * nloc

    move = block * (relayout_fraction(mloc // nb, pr) + relayout_fraction(nloc // nb, pc))
    elements = move * (2 if rhs is None else 1)
    for k0, k1 in lu_phases(nbr, pr, pc):  # each loop moves its first step's window
        height = mloc - (k0 // pr) * nb
        cols = nloc - ((k0 + 1) // pc) * nb
        for _ in range(k0, k1):
            elements += (pr - 1) * height * nb  # panel gather (owner column)
            elements += 2 * (pc - 1) / pc * (height * nb + nb * nb + 4 * nb)  # panel broadcast
            elements += 2 * (pr - 1) / pr * 2 * nb * nloc  # row interchanges
            if cols and pr > 1:  # U12, solved 1/pr per device row and all-gathered
                elements += (pr - 1) * -(-cols // pr) * nb
    if rhs is not None:
        k = max(rhs, 1)
        elements += (pr - 1) / pr * n_pad * k  # pivots applied with one gather
        for _ in range(2):  # forward and back substitution
            elements += nbr * (2 * (pc - 1) / pc + 2 * (pr * pc - 1) / (pr * pc)) * nb * k
        elements += block_cyclic_rhs(n_pad, k, pr) * 2
    return elements * item


def block_cyclic_rhs(n_pad: int, k: int, pr: int) -> float:
    """Elements moved to put ``n_pad x k`` right-hand sides in block-cyclic order (and back)."""
    return (pr - 1) / pr * n_pad * k / pr
