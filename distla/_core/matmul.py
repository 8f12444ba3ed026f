"""The library's own distributed product: operands already checked, mesh already read.

``distla.matmul`` declares its op here (:data:`MATMUL`, which jnp.linalg's
products reach through :func:`checked_product`): the route checks and
promotes its operands, reads their mesh once and calls :func:`product`; the
factorisations call :func:`product` directly with the mesh their plan
resolved, so an internal product never validates or reads the operands' mesh
again. SUMMA on any ``pr x pc`` grid, Cannon on a
square one, or XLA's own partitioning of ``jnp.matmul`` on the 2D block layout.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from distla.kernels.cannon import cannon_local
from distla.kernels.summa import summa_k_multiple, summa_local

from . import plan as _plan
from . import route
from .checks import ShapeError, canonical_precision, result_dtype
from .matrix import HIGHEST, pad_to, put, round_up
from .mesh import Grid, constrain, fitting_spec, grid_of, run_on_mesh, shard_map
from .plan import Plan

#: ``algorithm="xla"``: XLA's own partitioning of ``jnp.matmul`` on the 2D
#: block layout. It all-gathers A's block rows over the column axis and B's
#: block columns over the row axis (the panels SUMMA broadcasts, in one step),
#: never a whole operand, and measured faster than SUMMA for n <= 512 here
#: (docs/benchmarks-log.md). ``"auto"`` stays SUMMA: the distributed drivers call
#: this same entry point and their communication models assume SUMMA.
Algorithm = Literal["auto", "summa", "cannon", "xla"]
ALGORITHMS = ("auto", "summa", "cannon", "xla")


#: ``algorithm="auto"`` gathers A's whole block row and B's whole block column in one
#: step (SUMMA with one panel, which is also XLA's own partitioning) while the two
#: together hold at most this many bytes per device: below it, each further step
#: costs a rendezvous of every device that the smaller panels do not win back (n = 256
#: on 2x4: 1.28 ms in 4 steps, 0.91 ms in one, jnp on the same sharded input 0.73 ms
#: with the eager call's Python; docs/benchmarks-log.md). Up to n = 1792 for float32 on 2x4
#: (9.2 MiB) one step times as XLA's own partitioning, where SUMMA's four steps took
#: 1.02-1.25x in two runs; from n = 2048 (12 MiB) the steps are level or faster
#: (0.82-0.99x jnp from 2048 to 4096; docs/benchmarks-log.md, "Large products").
ONE_STEP_BYTES = 10 * 2**20


def auto_panels(grid: Grid, m: int, k: int, n: int, itemsize: int) -> int | None:
    """``algorithm="auto"``'s SUMMA steps: one while the gathered panels are small
    (:data:`ONE_STEP_BYTES`), else ``None`` (:func:`default_panels`)."""
    gathered = (-(-m // grid.pr) + -(-n // grid.pc)) * k * itemsize
    return 1 if gathered <= ONE_STEP_BYTES else None


def default_panels(grid: Grid, k: int) -> int:
    """SUMMA steps: ``4·max(pr, pc)``, so that each panel is at most a quarter of a block.

    The A-panel of a step is ``pc/panels`` of A's local block and the B-panel
    ``pr/panels`` of B's, so with ``4·max(pr, pc)`` steps the pair holds at most
    half a share of memory, whatever the mesh shape (with one step, an 8x1 mesh
    would gather all of B onto every device). Fewer steps (``2·max(pr, pc)``, then
    ``max(pr, pc)``) where more would pad ``k`` further (each padding is a copy of
    both operands), and fewer still when ``k`` is too short to cut that fine.
    """
    chunks = math.lcm(grid.pr, grid.pc)
    base = max(grid.pr, grid.pc)
    most = max(1, -(-k // chunks))  # slices at least one column wide
    least_padding = round_up(k, chunks * min(base, most))
    for steps in (4 * base, 2 * base):
        if steps <= most and round_up(k, chunks * steps) == least_padding:
            return steps
    return min(base, most)


def product(
    a: jax.Array,
    b: jax.Array,
    mesh: AbstractMesh | None,
    *,
    precision: lax.PrecisionLike = HIGHEST,
    algorithm: str = "summa",
    panels: int | None = None,
) -> jax.Array:
    """``a @ b`` of two matrices on ``mesh``, computed in ``jnp.result_type(a, b)``.

    Args:
      a: ``[m, k]`` on ``mesh`` (any layout), or on one device when ``mesh``
        is ``None``.
      b: ``[k, n]`` on the same mesh.
      mesh: the mesh the caller resolved (from its plan, or the mesh in
        context inside a body); ``None`` or one device runs ``jnp.matmul``.
      precision: of the local products; ``HIGHEST`` unless said otherwise.
      algorithm: ``"summa"``, ``"cannon"`` (square grids) or ``"xla"``.
      panels: SUMMA's steps over ``k`` (``None``: :func:`default_panels`).

    Returns:
      ``[m, n]`` in the largest even 2D block layout of ``mesh`` that fits.
    """
    if mesh is None or mesh.size <= 1:
        return jnp.matmul(a, b, precision=precision)
    _plan.note("matmul", algorithm)
    dtype = np.dtype(jnp.result_type(a, b))
    return _matmul(
        a, b, mesh=mesh, dtype=dtype, algorithm=algorithm, precision=precision, panels=panels
    )


@functools.partial(jax.jit, static_argnames=("mesh", "dtype", "algorithm", "precision", "panels"))
def _matmul(a, b, *, mesh, dtype, algorithm, precision, panels):
    grid = grid_of(mesh, what="distla.matmul")
    (m, k), n = a.shape, b.shape[1]
    blocks = grid.block_spec
    if algorithm == "xla":

        def xla(a, b):
            a, b = constrain(a.astype(dtype), blocks), constrain(b.astype(dtype), blocks)
            return jnp.matmul(a, b, precision=precision)

        return run_on_mesh(xla, mesh, fitting_spec((m, n), mesh, blocks), a, b)
    if algorithm == "cannon":
        mp, kp, np_ = (round_up(x, grid.pr) for x in (m, k, n))
        kernel = functools.partial(
            cannon_local, row_axis=grid.row, col_axis=grid.col, precision=precision
        )
    else:
        if panels is None:
            panels = default_panels(grid, k)
        kp = round_up(k, summa_k_multiple(grid.pr, grid.pc, panels))
        mp, np_ = round_up(m, grid.pr), round_up(n, grid.pc)
        kernel = functools.partial(
            summa_local,
            row_axis=grid.row,
            col_axis=grid.col,
            panels=panels,
            precision=precision,
        )

    def body(a, b):
        if 0 in (m, k, n):  # an empty product is zeros; no zero-size shard_map operand
            return jnp.zeros((m, n), dtype)
        a = constrain(pad_to(a.astype(dtype), (mp, kp)), blocks)
        b = constrain(pad_to(b.astype(dtype), (kp, np_)), blocks)
        c = shard_map(kernel, in_specs=(blocks, blocks), out_specs=blocks)(a, b)
        return c[:m, :n]

    out_spec = fitting_spec((m, n), mesh, blocks)
    return run_on_mesh(body, mesh, out_spec, a, b)


def matvec(
    a: jax.Array,
    x: jax.Array,
    mesh: AbstractMesh | None,
    *,
    precision: lax.PrecisionLike = HIGHEST,
) -> jax.Array:
    """``a @ x`` by :func:`product`, for a vector or a matrix ``x``."""
    if x.ndim == 1:
        return product(a, x[:, None], mesh, precision=precision)[:, 0]
    return product(a, x, mesh, precision=precision)


def product_here(
    a: jax.Array, b: jax.Array, *, precision: lax.PrecisionLike = HIGHEST
) -> jax.Array:
    """:func:`product` inside a body, on the mesh in context (``run_on_mesh``)."""
    return product(a, b, jax.sharding.get_abstract_mesh(), precision=precision)


def mm(a: jax.Array, b: jax.Array, spec: P) -> jax.Array:
    """``a @ b`` inside a body (SUMMA, ``HIGHEST``), put in ``spec``."""
    return put(product_here(a, b), spec)


def auto_product(
    a: jax.Array, b: jax.Array, mesh: AbstractMesh, *, precision: lax.PrecisionLike = None
) -> jax.Array:
    """``distla.matmul``'s ``algorithm="auto"`` of matrices already checked and on ``mesh``:
    SUMMA, in one step while the gathered panels are small (:data:`ONE_STEP_BYTES`)."""
    grid = grid_of(mesh, what="distla.matmul")
    itemsize = max(np.dtype(jnp.result_type(a, b)).itemsize, 4)
    panels = auto_panels(grid, a.shape[0], a.shape[1], b.shape[1], itemsize)
    return product(a, b, mesh, algorithm="summa", precision=precision, panels=panels)


def _check(what, a, b, *, algorithm, precision, panels):
    del precision
    if a.ndim != 2 or b.ndim != 2:
        raise ShapeError(
            f"{what} multiplies 2-D matrices; got a of shape {a.shape} and b of shape "
            f"{b.shape}. For stacks of matrices use jnp.matmul or jax.vmap."
        )
    if a.shape[1] != b.shape[0]:
        raise ShapeError(
            f"{what}: inner dimensions differ: a is {a.shape}, b is {b.shape} "
            f"({a.shape[1]} != {b.shape[0]})"
        )
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{what}: algorithm must be one of {ALGORITHMS}; got {algorithm!r}")
    if panels is not None and (not isinstance(panels, int) or panels < 1):
        raise ValueError(f"{what}: panels must be a positive int or None; got {panels!r}")


def _unsharded(a, b, *, algorithm, precision, panels):
    del algorithm, panels
    return jnp.matmul(a, b, precision=precision)


def _distributed(plan: Plan, a, b, *, algorithm, precision, panels):
    what = MATMUL.name
    grid = grid_of(plan.mesh, what=what)
    if algorithm == "cannon" and grid.pr != grid.pc:
        raise ValueError(
            f"{what}: algorithm='cannon' needs a square mesh; got a {grid.shape_str} mesh "
            f"{tuple(plan.mesh.axis_names)}. Use algorithm='summa' (any mesh shape)."
        )
    if algorithm == "auto":
        algorithm = "summa"
        if panels is None:
            itemsize = max(np.dtype(plan.dtype).itemsize, 4)
            panels = auto_panels(grid, a.shape[0], a.shape[1], b.shape[1], itemsize)
    options = dict(algorithm=algorithm, precision=precision, panels=panels)
    if plan.dtype == np.dtype(bool):  # logical and/or, as jnp.matmul: counted in int32
        a, b = a.astype(np.int32), b.astype(np.int32)
        return product(a, b, plan.mesh, **options) != 0
    return product(a, b, plan.mesh, **options)


#: ``distla.matmul``'s declaration: its checks, ``jnp.matmul``'s promotion (ints stay
#: ints) and fall-backs, then :func:`product` on the operands' mesh (the public
#: function documents it all)
MATMUL = route.Op(
    "distla.matmul",
    operands=("a", "b"),
    check=_check,
    promote=lambda what, a, b, **options: result_dtype(what, a, b, inexact=False),
    one_device=_unsharded,
    distributed=_distributed,
)


def checked_product(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    *,
    algorithm: str = "auto",
    precision: lax.PrecisionLike = None,
    panels: int | None = None,
) -> jax.Array:
    """``distla.matmul`` through the route (:data:`MATMUL`): for jnp.linalg's product
    signatures, which reach it from below the public module."""
    precision = canonical_precision(precision, MATMUL.name)
    return route.call(MATMUL, a, b, algorithm=algorithm, precision=precision, panels=panels)
