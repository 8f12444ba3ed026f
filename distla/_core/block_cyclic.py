"""One matrix on the 2D block-cyclic layout, and the right-hand sides of its solves (private).

What the LU, triangular, Cholesky, QR and mixed-precision drivers share
(ScaLAPACK's layout, ``distla.kernels.cyclic``): the LU's block size and
padded order (:func:`blocking`), a local block put in block-cyclic order on
both axes and back (:func:`to_cyclic`, :func:`from_cyclic`), and where the
right-hand sides of a solve go (:class:`Rhs`, :func:`rhs_of`) and where its
solution comes back (:func:`result_spec`), which the one-device plan of the
solves returns too (:func:`solve_layouts`).

Names: ``nb`` the block size; ``n_pad`` the padded order, ``nb`` times a
multiple of ``pr`` and ``pc``; ``trans`` 0, 1, 2 for ``A``, ``Aᵀ``, ``Aᴴ``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from distla.kernels.cyclic import from_block_cyclic_2d, to_block_cyclic_2d

from .mesh import Grid, constrain, fitting_spec, is_explicit
from .one_device import block_layout
from .plan import Plan, check_block_size

# Panel widths the default block size aims at (the measurements behind them are
# in docs/benchmarks.md, LU section): wider panels make faster trailing GEMMs but
# leave the busiest device more masked work, so 192 once every device keeps 4
# block columns and 128 below that, where a wider panel starves the grid.
DEFAULT_BLOCK = 128
WIDE_BLOCK = 192
# Up to this many right-hand sides, the solves move the solution, not the factors.
FEW_RHS = 128


def blocking(grid: Grid, n: int, block_size: int | None = None) -> tuple[int, int]:
    """``(nb, n_pad)``: block size and padded order for an ``n x n`` LU on ``grid``.

    The number of blocks ``n_pad / nb`` must be a multiple of ``pr`` and
    ``pc`` (each device owns as many block rows and columns). With no
    ``block_size`` the block is chosen near ``WIDE_BLOCK`` (when that leaves
    at least 4 block columns per device) or ``DEFAULT_BLOCK``: the widest block
    from ``DEFAULT_BLOCK`` up to that aim that divides ``n`` into such a number of
    blocks (no padding: a padded matrix is one more copy of the block on every
    device, and its crop moves rows and columns between devices), else the one
    near the aim that pads least (``n = 4096`` on 2x4: 128, where 171 would pad).
    """
    q = math.lcm(grid.pr, grid.pc)
    target = WIDE_BLOCK if n >= 4 * q * WIDE_BLOCK else DEFAULT_BLOCK
    if block_size is not None:
        check_block_size(block_size)
        nb = block_size
        nbr = -(-max(1, -(-n // nb)) // q) * q
    else:
        exact = [b for b in range(DEFAULT_BLOCK, target + 1) if n % (b * q) == 0]
        if exact:
            return exact[-1], n
        nbr = -(-max(1, -(-n // target)) // q) * q
        nb = -(-n // nbr)
    return nb, nb * nbr


def to_cyclic(x_blk, grid: Grid, nb: int):
    """A local 2D block in block-cyclic order on ``grid`` (both dimensions), in place."""
    return to_block_cyclic_2d(x_blk, row_axis=grid.row, col_axis=grid.col, nb=nb)


def from_cyclic(x_cyc, grid: Grid, nb: int):
    """A local block-cyclic block back in the contiguous 2D block order, in place."""
    return from_block_cyclic_2d(x_cyc, row_axis=grid.row, col_axis=grid.col, nb=nb)


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


class Rhs(NamedTuple):
    """The right-hand sides ``b`` (``[n]`` or ``[n, k]``) of a solve on a grid.

    ``spec`` is their layout inside the solve (padded to ``[n_pad, k_pad]``),
    ``few`` whether the solution blocks move rather than the factors'.
    """

    n: int
    k: int
    vector: bool
    spec: P
    few: bool
    k_pad: int

    def pad(self, b: jax.Array, n_pad: int, dtype) -> jax.Array:
        """``b`` as an ``[n_pad, k_pad]`` matrix of zeros around it, in ``spec``."""
        b2 = b.astype(dtype).reshape(self.n, self.k)
        return constrain(jnp.pad(b2, ((0, n_pad - self.n), (0, self.k_pad - self.k))), self.spec)

    def crop(self, x: jax.Array) -> jax.Array:
        """The solution in ``b``'s shape, from the padded one."""
        x = x[: self.n, : self.k]
        return x[:, 0] if self.vector else x


def rhs_of(grid: Grid, shape: tuple[int, ...], trans: int) -> Rhs:
    """:class:`Rhs` for right-hand sides of ``shape`` solved with ``op(A)`` (``trans``)."""
    vector = len(shape) == 1
    k = 1 if vector else shape[1]
    spec, few = _rhs_layout(grid, k, trans)
    return Rhs(shape[0], k, vector, spec, few, _k_pad(grid, k, trans, few))


def _natural_rhs_spec(grid: Grid, ndim: int) -> P:
    if ndim == 1:
        return P(tuple(a for a in (grid.row, grid.col) if a is not None))
    return grid.block_spec


def result_spec(grid: Grid, shape: tuple[int, ...]) -> P:
    """Where a solution of ``shape`` comes back: the mesh's layout, or the largest even one."""
    return fitting_spec(shape, grid.mesh, _natural_rhs_spec(grid, len(shape)))


def solve_layouts(plan: Plan, *operands, results, like_b: bool = False, **options):
    """The one-device plan's layouts of a solve with factors (the last operand is ``b``).

    The factor matrices go in the 2D block layout and pivot vectors replicated,
    and ``x`` comes back where the distributed solves return it: in ``b``'s
    layout on an ``Explicit`` mesh for those that return it ``like_b`` (their
    ``lax.custom_linear_solve`` keeps ``b``'s type), else in :func:`result_spec`'s.
    """
    del results, options
    *factors, b = operands
    keep_b = like_b and is_explicit(plan.mesh)
    specs = (
        *(block_layout(f.shape, plan.mesh) if f.ndim == 2 else P(None) for f in factors),
        P(*jax.typeof(b).sharding.spec) if keep_b else result_spec(plan.grid, b.shape),
    )
    return specs, specs[-1:]
