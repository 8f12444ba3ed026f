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
