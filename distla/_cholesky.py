"""Distributed Cholesky, triangular solves and SPD solves (see ``distla.linalg``).

The global view: each function takes one matrix on a mesh, pads it with an
identity block (the factor of ``[[A, 0], [0, I]]`` contains ``A``'s), puts
it in block-cyclic order inside ``shard_map`` (``distla.kernels.cyclic``),
runs ``distla.kernels.cholesky`` or the triangular solves of
``distla.kernels.trsm`` (the LU's), and returns the result in the mesh's 2D
block layout. Stacks of matrices sharded along their batch dimensions are
factored and solved locally on each device, with no collective.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cholesky import _chunks, cholesky_block_cyclic
from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic
from distla.kernels.trsm import trsm_few, trsm_many

from ._lu import _grid, _k_pad, _natural_rhs_spec, _pad_identity, _rhs_layout
from ._lu import plan as lu_plan
from ._mesh import Grid, constrain, fitting_spec, run_on_mesh, shard_map

# Panel width the default block size aims at, and the most segments (fori_loops)
# one factorisation compiles into (see kernels/cholesky.py).
DEFAULT_BLOCK = 128
MAX_SEGMENTS = 16
_PRECISION = lax.Precision.HIGHEST


def plan(grid: Grid, n: int, block_size: int | None = None) -> tuple[int, int, int]:
    """``(nb, w, n_pad)``: block size, panels per segment and padded order.

    ``n_pad = nb·nbr`` with ``nbr`` a multiple of ``w`` and ``w`` a multiple of
    ``lcm(pr, pc)``; ``w`` is the smallest such that there are at most
    ``MAX_SEGMENTS`` segments. With no ``block_size``, ``nb`` is the block
    near ``DEFAULT_BLOCK`` that pads least.
    """
    q = math.lcm(grid.pr, grid.pc)
    if block_size is not None:
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive int; got {block_size!r}")
        target = block_size
    else:
        target = DEFAULT_BLOCK
    nbr0 = max(1, -(-n // target))
    w = q * -(-nbr0 // (q * MAX_SEGMENTS))
    nbr = -(-nbr0 // w) * w
    nb = target if block_size is not None else -(-n // nbr)
    return nb, w, nb * nbr


def _to_cyclic(x_blk, grid: Grid, nb: int):
    x = to_block_cyclic(x_blk, axis=0, axis_name=grid.row, nb=nb)
    return to_block_cyclic(x, axis=1, axis_name=grid.col, nb=nb)


def _from_cyclic(x_cyc, grid: Grid, nb: int):
    x = from_block_cyclic(x_cyc, axis=1, axis_name=grid.col, nb=nb)
    return from_block_cyclic(x, axis=0, axis_name=grid.row, nb=nb)


def _all_devices(ok, grid: Grid):
    axes = tuple(a for a in (grid.row, grid.col) if a is not None)
    bad = (~ok).astype(jnp.int32)
    # psum over the grid -> the number of devices that saw a failed potrf
    return (lax.psum(bad, axes) if axes else bad) == 0


def _tril(x, k=0):
    r = lax.broadcasted_iota(jnp.int32, x.shape, 0)
    c = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    return r + k >= c


def hermitian_part(a: jax.Array) -> jax.Array:
    """``(a + aᴴ) / 2``, as ``jnp.linalg.cholesky(symmetrize_input=True)`` computes it."""
    return (a + jnp.conj(a.T)) / 2


@functools.partial(jax.jit, static_argnames=("dtype", "block_size", "symmetrize", "read_upper", "upper")
)
def _cholesky(a, *, dtype, block_size, symmetrize, read_upper, upper):
    grid = _grid(a, names=("a",))
    n = a.shape[0]
    nb, w, n_pad = plan(grid, n, block_size)
    blocks = grid.block_spec

    def body(a):
        a = a.astype(dtype)
        if read_upper:  # scipy's lower=False reads the upper triangle: factor aᴴ instead
            a = jnp.conj(a.T)
        if symmetrize:
            a = hermitian_part(a)
        a = constrain(_pad_identity(a, n_pad), blocks)

        def kernel(a_blk):
            l_cyc, ok = cholesky_block_cyclic(
                _to_cyclic(a_blk, grid, nb),
                row_axis=grid.row, col_axis=grid.col, nb=nb, w=w, precision=_PRECISION,
            )
            return _from_cyclic(l_cyc, grid, nb), _all_devices(ok, grid)

        l, ok = shard_map(kernel, in_specs=blocks, out_specs=(blocks, P()), check_vma=False)(a)
        l = l[:n, :n]
        # jnp's conventions: zeros above the diagonal, NaN below it when not positive definite
        l = jnp.where(_tril(l), jnp.where(ok, l, jnp.nan), jnp.zeros((), dtype))
        return jnp.conj(l.T) if upper else l

    out = fitting_spec((n, n), grid.mesh, blocks)
    return run_on_mesh(body, grid.mesh, out, a)


def cholesky(a, *, dtype, upper=False, symmetrize=True, read_upper=False, block_size=None):
    """Cholesky factor of one sharded matrix (the public functions check and call it).

    ``upper`` returns ``Lᴴ``; ``read_upper`` factors from ``a``'s upper
    triangle (``aᴴ``'s lower one), as ``jax.scipy.linalg.cholesky(lower=False)``.
    """
    return _cholesky(
        a, dtype=dtype, block_size=block_size, symmetrize=symmetrize, read_upper=read_upper,
        upper=upper,
    )


# ------------------------------------------------------------------ triangular solves


def _trans_code(trans, what: str) -> int:
    codes = {0: 0, "N": 0, "n": 0, 1: 1, "T": 1, "t": 1, 2: 2, "C": 2, "c": 2}
    if isinstance(trans, bool) or trans not in codes:
        raise ValueError(f"{what}: trans must be 0, 1, 2, 'N', 'T' or 'C'; got {trans!r}")
    return codes[trans]


@functools.partial(jax.jit, static_argnames=("dtype", "trans", "lower", "unit_diagonal"))
def _triangular_solve(a, b, *, dtype, trans, lower, unit_diagonal):
    """``op(T) x = b`` for one matrix: ``T`` the ``lower``/upper triangle of ``a``."""
    grid = _grid(a, b, names=("a", "b"))
    n = a.shape[0]
    vector = b.ndim == 1
    k = 1 if vector else b.shape[1]
    nb, n_pad = lu_plan(grid, n)
    blocks = grid.block_spec
    b_spec, few = _rhs_layout(grid, k, trans)
    k_pad = _k_pad(grid, k, trans, few)
    # op(T) of a block-cyclic T is the local transpose on the transposed grid
    rows, cols = (grid.row, grid.col) if trans == 0 else (grid.col, grid.row)
    tri_lower = lower if trans == 0 else not lower
    trsm = trsm_few if few else trsm_many

    def body(a, b):
        a = constrain(_pad_identity(a.astype(dtype), n_pad), blocks)
        b2 = b.astype(dtype).reshape(n, k)
        b2 = constrain(jnp.pad(b2, ((0, n_pad - n), (0, k_pad - k))), b_spec)

        def kernel(a_blk, b_blk):
            t = _to_cyclic(a_blk, grid, nb)
            if trans:
                t = t.T.conj() if trans == 2 else t.T
            x = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=nb)
            x = trsm(
                t, x, lower=tri_lower, unit_diagonal=unit_diagonal, row_axis=rows, col_axis=cols,
                nb=nb, precision=_PRECISION,
            )
            return from_block_cyclic(x, axis=0, axis_name=rows, nb=nb)

        x = shard_map(kernel, in_specs=(blocks, b_spec), out_specs=b_spec, check_vma=False)(a, b2)
        x = x[:n, :k]
        return x[:, 0] if vector else x

    out = fitting_spec(b.shape, grid.mesh, _natural_rhs_spec(grid, b.ndim))
    return run_on_mesh(body, grid.mesh, out, a, b)


def triangular_solve(a, b, *, dtype, trans, lower, unit_diagonal):
    """``op(T)⁻¹ b`` for one sharded matrix (no derivative rule; see ``distla.linalg``)."""
    return _triangular_solve(
        a, b, dtype=dtype, trans=trans, lower=lower, unit_diagonal=unit_diagonal
    )


@functools.partial(jax.jit, static_argnames=("trans", "lower", "unit_diagonal"))
def triangle_matvec(a, x, *, trans, lower, unit_diagonal):
    """``op(T) @ x`` with ``T`` the triangle of ``a`` that a solve reads (for derivatives)."""
    from .matmul import matmul

    t = jnp.where(_tril(a) if lower else _tril(a.T).T, a, jnp.zeros((), a.dtype))
    if unit_diagonal:
        eye = _tril(a) & _tril(a.T).T
        t = jnp.where(eye, jnp.ones((), a.dtype), t)
    if trans:
        t = jnp.conj(t.T) if trans == 2 else t.T
    if x.ndim == 1:
        return matmul(t, x[:, None])[:, 0]
    return matmul(t, x)


# --------------------------------------------------------------------- communication


def model_bytes(
    n: int,
    grid: tuple[int, int],
    dtype,
    *,
    block_size: int | None = None,
    symmetrize: bool = True,
) -> float:
    """Bytes one device receives in ``distla.linalg.cholesky`` of an ``n x n`` matrix.

    The model of docs/cholesky.md, for a ``pr x pc`` grid, counted as
    ``distla.cost`` counts (all-gather and all-to-all ``(g-1)/g`` of their
    result, all-reduce ``2(g-1)/g``), summed step by step over the
    segments and panels of :func:`plan`. ``symmetrize`` adds the transpose
    that ``symmetrize_input=True`` needs (one all-to-all of the local block).
    """
    pr, pc = grid
    mesh = jax.sharding.AbstractMesh((pr, pc), ("r", "c"))
    nb, w, n_pad = plan(Grid(mesh, "r", "c"), n, block_size)
    item = jnp.dtype(dtype).itemsize
    nbr, mloc, nloc = n_pad // nb, n_pad // pr, n_pad // pc
    block = mloc * nloc

    def relayout(local_blocks, p):
        if p == 1 or local_blocks == 1:
            return 0.0
        if local_blocks % p == 0:
            return (p - 1) / p
        return (p * -(-local_blocks // p) - local_blocks // p) / local_blocks

    def reduce(g):  # all-reduce, per element
        return 2 * (g - 1) / g

    elements = 2 * block * (relayout(mloc // nb, pr) + relayout(nloc // nb, pc))
    if symmetrize and pr * pc > 1:
        elements += block * ((pr * pc - 1) / (pr * pc) if pr != pc else 0.0)
        elements += block if pr > 1 and pc > 1 else 0.0
    for seg in range(nbr // w):
        k0 = seg * w
        h = mloc - (k0 // pr) * nb
        wc = (w // pc) * nb
        # per panel: diagonal block, panel along mesh rows, its transpose along mesh columns
        elements += w * (reduce(pr) * nb * nb + reduce(pc) * h * nb + reduce(pr) * wc * nb)
        k1 = k0 + w
        if k1 < nbr:  # the segment's transpose for the trailing columns
            elements += reduce(pr) * (nloc - (k1 // pc) * nb) * w * nb
    return elements * item
