"""Global view of the distributed LU and its solves (private; see distla.linalg).

Each function here takes one matrix on a mesh, pads it (with an identity
block, so the padded factorisation contains the original one), converts it
to block-cyclic order inside ``shard_map``, runs the kernels of
``distla.kernels.lu`` / ``distla.kernels.trsm``, and returns the results in
the caller's 2D block layout.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cyclic import from_block_cyclic, relayout_fraction, to_block_cyclic
from distla.kernels.lu import lu_block_cyclic
from distla.kernels.lu import phases as lu_phases
from distla.kernels.trsm import lu_solve_block_cyclic

from ._mesh import Grid, constrain, fitting_spec, grid_of, operand_mesh, run_on_mesh, shard_map

# Panel widths the default block size aims at (measured in benchmarks/bench_lu.py).
# Wider panels make faster trailing GEMMs (rank-256 updates run near twice as
# fast as rank-128 ones on CPU) but leave the busiest device more masked work
# (flop efficiency at n = 4096 on 2x4: 0.89 with nb = 128, 0.855 with 171,
# 0.80 with 256). Near 192 (nb = 171 at n = 4096: 1.98 s against 2.10 s with
# 256 and 2.61 s with 128, interleaved) once every device keeps 4 block
# columns; 128 below that, where a wider panel starves the grid.
DEFAULT_BLOCK = 128
WIDE_BLOCK = 192
# Up to this many right-hand sides, the solves move the solution, not the factors.
FEW_RHS = 128
_PRECISION = lax.Precision.HIGHEST


def plan(grid: Grid, n: int, block_size: int | None = None) -> tuple[int, int]:
    """``(nb, n_pad)``: block size and padded order for an ``n x n`` LU on ``grid``.

    The number of blocks ``n_pad / nb`` must be a multiple of ``pr`` and
    ``pc`` (each device owns as many block rows and columns). With no
    ``block_size`` the block is chosen near ``WIDE_BLOCK`` (when that leaves
    at least 4 block columns per device) or ``DEFAULT_BLOCK``, so that the
    padding is as small as possible.
    """
    q = math.lcm(grid.pr, grid.pc)
    target = WIDE_BLOCK if n >= 4 * q * WIDE_BLOCK else DEFAULT_BLOCK
    if block_size is not None:
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive int; got {block_size!r}")
        nb = block_size
        nbr = -(-max(1, -(-n // nb)) // q) * q
    else:
        nbr = -(-max(1, -(-n // target)) // q) * q
        nb = -(-n // nbr)
    return nb, nb * nbr


def _grid(*xs, names) -> Grid:
    return grid_of(operand_mesh(*xs, names=names), what="distla.linalg")


def _pad_identity(a: jax.Array, n_pad: int) -> jax.Array:
    """``a`` (``m x n``) padded to ``n_pad x n_pad`` with ones on the padded diagonal.

    For a square ``a`` the padded LU contains ``a``'s. For a wide ``a`` the
    padded rows ``[0 | I]`` have zeros under every real pivot column (never
    chosen, never updated). For a tall one the padded columns below row
    ``m`` are zero: they come after the real ones, stay zero, and a zero
    column interchanges nothing (LAPACK picks its first row), so the later
    steps do not permute ``L``. Either way the leading ``min(m, n)`` steps
    are ``a``'s own LU.
    """
    m, n = a.shape
    if m == n == n_pad:
        return a
    a = jnp.pad(a, ((0, n_pad - m), (0, n_pad - n)))
    r = lax.broadcasted_iota(jnp.int32, a.shape, 0)
    c = lax.broadcasted_iota(jnp.int32, a.shape, 1)
    return jnp.where((r == c) & (r >= m), jnp.ones((), a.dtype), a)


def _factor_local(a_blk, *, grid: Grid, nb: int):
    a = to_block_cyclic(a_blk, axis=0, axis_name=grid.row, nb=nb)
    a = to_block_cyclic(a, axis=1, axis_name=grid.col, nb=nb)
    return lu_block_cyclic(a, row_axis=grid.row, col_axis=grid.col, nb=nb, precision=_PRECISION)


def _contiguous(lu_cyc, grid: Grid, nb: int):
    lu = from_block_cyclic(lu_cyc, axis=1, axis_name=grid.col, nb=nb)
    return from_block_cyclic(lu, axis=0, axis_name=grid.row, nb=nb)


def _rhs_layout(grid: Grid, k: int, trans: int) -> tuple[P, bool]:
    """Layout of the right-hand sides for the solves, and whether k counts as few."""
    few = k <= FEW_RHS
    rows = grid.row if trans == 0 else grid.col
    cols = grid.col if trans == 0 else grid.row
    return P(rows, None if few else cols), few


def _k_pad(grid: Grid, k: int, trans: int, few: bool) -> int:
    if few:
        return k
    split = grid.pc if trans == 0 else grid.pr
    return -(-k // split) * split


def _solve_local(lu_cyc, piv, b_blk, *, grid: Grid, nb: int, trans: int, few: bool):
    rows = grid.row if trans == 0 else grid.col
    b = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=nb)
    x = lu_solve_block_cyclic(
        lu_cyc, piv, b, trans=trans, few=few, row_axis=grid.row, col_axis=grid.col, nb=nb,
        precision=_PRECISION,
    )
    return from_block_cyclic(x, axis=0, axis_name=rows, nb=nb)


@functools.partial(jax.jit, static_argnames=("dtype", "block_size"))
def _lu_factor(a, *, dtype, block_size):
    grid = _grid(a, names=("a",))
    m, n = a.shape  # rectangular: the LU of a square padding (see _pad_identity)
    nb, n_pad = plan(grid, max(m, n), block_size)
    blocks = grid.block_spec

    def body(a):
        a = constrain(_pad_identity(a.astype(dtype), n_pad), blocks)

        def kernel(a_blk):
            lu, piv = _factor_local(a_blk, grid=grid, nb=nb)
            return _contiguous(lu, grid, nb), piv

        lu, piv = shard_map(kernel, in_specs=blocks, out_specs=(blocks, P()), check_vma=False)(a)
        return lu[:m, :n], piv[: min(m, n)]

    out = (fitting_spec((m, n), grid.mesh, blocks), P())
    return run_on_mesh(body, grid.mesh, out, a)


def lu_factor(a, *, dtype, block_size=None):
    return _lu_factor(a, dtype=dtype, block_size=block_size)


@functools.partial(jax.jit, static_argnames=("dtype", "trans"))
def _lu_solve(lu, piv, b, *, dtype, trans):
    grid = _grid(lu, b, names=("lu", "b"))
    n = lu.shape[0]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[1]
    nb, n_pad = plan(grid, n)
    blocks = grid.block_spec
    b_spec, few = _rhs_layout(grid, k, trans)
    k_pad = _k_pad(grid, k, trans, few)

    def body(lu, piv, b):
        lu = constrain(_pad_identity(lu.astype(dtype), n_pad), blocks)
        piv = jnp.concatenate([piv.astype(jnp.int32), jnp.arange(n, n_pad, dtype=jnp.int32)])
        b2 = b.astype(dtype).reshape(n, k)
        b2 = constrain(jnp.pad(b2, ((0, n_pad - n), (0, k_pad - k))), b_spec)

        def kernel(lu_blk, piv, b_blk):
            lu_cyc = to_block_cyclic(lu_blk, axis=0, axis_name=grid.row, nb=nb)
            lu_cyc = to_block_cyclic(lu_cyc, axis=1, axis_name=grid.col, nb=nb)
            return _solve_local(lu_cyc, piv, b_blk, grid=grid, nb=nb, trans=trans, few=few)

        x = shard_map(kernel, in_specs=(blocks, P(), b_spec), out_specs=b_spec, check_vma=False)(
            lu, piv, b2
        )
        x = x[:n, :k]
        return x[:, 0] if vector else x

    out = fitting_spec(b.shape, grid.mesh, _natural_rhs_spec(grid, b.ndim))
    return run_on_mesh(body, grid.mesh, out, lu, piv, b)


def _natural_rhs_spec(grid: Grid, ndim: int) -> P:
    if ndim == 1:
        return P(tuple(a for a in (grid.row, grid.col) if a is not None))
    return grid.block_spec


def lu_solve(lu, piv, b, *, trans, dtype):
    return _lu_solve(lu, piv, b, dtype=dtype, trans=trans)


@functools.partial(jax.jit, static_argnames=("dtype", "block_size"))
def _solve(a, b, *, dtype, block_size):
    grid = _grid(a, b, names=("a", "b"))
    n = a.shape[0]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[1]
    nb, n_pad = plan(grid, n, block_size)
    blocks = grid.block_spec
    b_spec, few = _rhs_layout(grid, k, 0)
    k_pad = _k_pad(grid, k, 0, few)

    def body(a, b):
        a = constrain(_pad_identity(a.astype(dtype), n_pad), blocks)
        b2 = b.astype(dtype).reshape(n, k)
        b2 = constrain(jnp.pad(b2, ((0, n_pad - n), (0, k_pad - k))), b_spec)

        def kernel(a_blk, b_blk):
            lu, piv = _factor_local(a_blk, grid=grid, nb=nb)
            return _solve_local(lu, piv, b_blk, grid=grid, nb=nb, trans=0, few=few)

        x = shard_map(kernel, in_specs=(blocks, b_spec), out_specs=b_spec, check_vma=False)(a, b2)
        x = x[:n, :k]
        return x[:, 0] if vector else x

    out = fitting_spec(b.shape, grid.mesh, _natural_rhs_spec(grid, b.ndim))
    return run_on_mesh(body, grid.mesh, out, a, b)


def solve(a, b, *, dtype, block_size=None):
    return _solve(a, b, dtype=dtype, block_size=block_size)


@functools.partial(jax.jit, static_argnames=("dtype", "block_size"))
def _inv(a, *, dtype, block_size):
    # lu_solve against the identity, made in the right-hand sides' layout
    return _solve(a, jnp.eye(a.shape[0], dtype=dtype), dtype=dtype, block_size=block_size)


def inv(a, *, dtype, block_size=None):
    return _inv(a, dtype=dtype, block_size=block_size)


def _unpack(lu: jax.Array, dtype) -> tuple[jax.Array, jax.Array]:
    """``(L [m, k], U [k, n])`` from ``lu`` (``m x n``, ``k = min(m, n)``)."""
    m, n = lu.shape
    k = min(m, n)
    low, up = lu[:, :k], lu[:k, :]
    r = lax.broadcasted_iota(jnp.int32, (m, k), 0)
    c = lax.broadcasted_iota(jnp.int32, (m, k), 1)
    lower = jnp.where(r > c, low, jnp.where(r == c, jnp.ones((), dtype), jnp.zeros((), dtype)))
    r = lax.broadcasted_iota(jnp.int32, (k, n), 0)
    c = lax.broadcasted_iota(jnp.int32, (k, n), 1)
    upper = jnp.where(r <= c, up, jnp.zeros((), dtype))
    return lower, upper


@jax.jit
def _plu(lu, piv):
    grid = _grid(lu, names=("lu",))
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


def lu(a, *, dtype, block_size=None):
    # two programs, so that lu, det and slogdet share lu_factor's compiled one
    return _plu(*_lu_factor(a, dtype=dtype, block_size=block_size))


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


@jax.jit
def _slogdet_from(lu, piv):
    grid = _grid(lu, names=("lu",))

    def body(lu, piv):
        return _sign_logabs(lu, piv, lu.dtype)

    return run_on_mesh(body, grid.mesh, (P(), P()), lu, piv)


def slogdet(a, *, dtype, block_size=None):
    return _slogdet_from(*_lu_factor(a, dtype=dtype, block_size=block_size))


@jax.jit
def _det_from(lu, piv):
    grid = _grid(lu, names=("lu",))

    def body(lu, piv):
        # sign * exp(logabsdet), as jnp forms det: an overflow gives (+-)inf
        # (complex: inf in both parts), never the nan of an overflowing product
        sign, logabs = _sign_logabs(lu, piv, lu.dtype)
        return sign * jnp.exp(logabs).astype(lu.dtype)

    return run_on_mesh(body, grid.mesh, P(), lu, piv)


@functools.partial(jax.jit, static_argnames=("dtype",))
def _cofactor_parts(lu, piv, *, dtype):
    """The pieces of jnp's ``_cofactor_solve`` that need the whole diagonal.

    Returns ``(lu2, det, pd, e)``: ``lu`` with ``U[n-1, n-1]`` replaced by
    ``1 / pd``, where ``pd`` is the determinant without that last pivot,
    ``det`` itself, and ``e = P^T e_{n-1}`` (so that ``lu_solve(lu2, e)`` is
    ``U2^-1 e_{n-1}``).
    """
    grid = _grid(lu, names=("lu",))
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

    vec = fitting_spec((n,), grid.mesh, _natural_rhs_spec(grid, 1))
    return run_on_mesh(body, grid.mesh, (blocks, P(), P(), vec), lu, piv)


@jax.jit
def _adjugate_from(y, v, det, pd):
    """``det * Y + (1 - det) * v w^T`` with ``w = Y[n-1] / pd``; zero if anything is not finite.

    ``Y = U2^-1 L^-1 P`` and ``v = U2^-1 e_{n-1}``: this is jnp's
    ``_cofactor_solve(a, I)``, the adjugate, written with whole solves
    (the last row of ``L^-1 P`` is ``Y[n-1] / pd`` since ``U2[n-1, n-1] = 1/pd``).
    """
    grid = _grid(y, names=("y",))
    n = y.shape[0]
    blocks = fitting_spec((n, n), grid.mesh, grid.block_spec)

    def body(y, v, det, pd):
        w = y[n - 1] / pd
        adj = det * y + (1 - det) * v[:, None] * w[None, :]
        bad = ~(jnp.all(jnp.isfinite(y)) & jnp.all(jnp.isfinite(v)) & jnp.isfinite(pd))
        bad = bad | ~jnp.all(jnp.isfinite(adj))
        return jnp.where(bad, jnp.zeros((), y.dtype), adj)

    return run_on_mesh(body, grid.mesh, blocks, y, v, det, pd)


def adjugate(a, *, dtype, block_size=None):
    """``adj(a)`` (``det(a) a^-1`` where ``a`` is regular), as jnp's ``_cofactor_solve``.

    Right for matrices of rank ``n - 1`` whose zero pivot comes last (as
    jnp's is); zero where rank is lower or anything overflows (jnp: zero).
    """
    n = a.shape[0]
    lu_, piv = _lu_factor(a, dtype=dtype, block_size=block_size)
    if n == 1:
        return jnp.ones_like(lu_)
    lu2, det, pd, e = _cofactor_parts(lu_, piv, dtype=dtype)
    y = _lu_solve(lu2, piv, jnp.eye(n, dtype=dtype), dtype=dtype, trans=0)
    v = _lu_solve(lu2, piv, e, dtype=dtype, trans=0)
    return _adjugate_from(y, v, det, pd)


def det(a, *, dtype, block_size=None):
    return _det_from(*_lu_factor(a, dtype=dtype, block_size=block_size))


@functools.partial(jax.jit, static_argnames=("trans", "dtype"))
def factors_matvec(lu, piv, x, *, trans, dtype):
    """``A x`` (``A^T x``, ``A^H x`` for ``trans`` 1, 2) with ``A = P^T L U`` from ``lu_factor``.

    Only differentiation uses it (``lax.custom_linear_solve`` differentiates
    ``lu_solve`` with respect to ``lu`` through it), so it is written with
    plain jnp operations and left to XLA's partitioner.
    """
    grid = _grid(lu, x, names=("lu", "x"))
    n = lu.shape[0]

    def body(lu, piv, x):
        lower, upper = _unpack(lu.astype(dtype), dtype)
        perm = lax.linalg.lu_pivots_to_permutation(piv, n)
        hi = lax.Precision.HIGHEST
        if trans == 0:
            y = jnp.matmul(lower, jnp.matmul(upper, x, precision=hi), precision=hi)
            return y[jnp.argsort(perm)]  # P^T y
        if trans == 2:
            lower, upper = jnp.conj(lower), jnp.conj(upper)
        px = x[perm]  # P x
        return jnp.matmul(upper.T, jnp.matmul(lower.T, px, precision=hi), precision=hi)

    out = fitting_spec(x.shape, grid.mesh, _natural_rhs_spec(grid, x.ndim))
    return run_on_mesh(body, grid.mesh, out, lu, piv, x)


def trace(x):
    """``jnp.trace`` of a matrix on a mesh, as a sum against a replicated identity.

    (``jnp.diagonal`` of an Explicit-sharded matrix is not supported in jax
    0.10.2, and wrapping it in ``auto_axes`` breaks its transpose.)
    """
    return jnp.sum(x * jnp.eye(x.shape[0], dtype=x.dtype))


def model_bytes(
    n: int,
    grid: tuple[int, int],
    dtype,
    *,
    block_size: int | None = None,
    rhs: int | None = None,
) -> float:
    """Bytes one device receives in an ``n x n`` LU (``rhs=None``) or solve, per docs/lu.md.

    The model of ``lu_factor`` (``rhs=None``) or ``solve`` with ``rhs``
    right-hand sides (0 for a vector) on a ``pr x pc`` grid, for the busiest
    device (the owner of every panel it could own), counted as
    ``distla.cost`` counts: all-gather and all-to-all ``(g-1)/g`` of their
    result, all-reduce ``2(g-1)/g``.
    """
    pr, pc = grid
    mesh = jax.sharding.AbstractMesh((pr, pc), ("r", "c"))
    nb, n_pad = plan(Grid(mesh, "r", "c"), n, block_size)
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
