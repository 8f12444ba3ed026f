"""Distributed Hessenberg reduction: ``distla.scipy.linalg.hessenberg`` (private).

One matrix on a mesh is reduced by blocked Householder transformations from both
sides on the 2D block-cyclic layout of the LU and QR (ScaLAPACK's PDGEHRD,
``distla.kernels.hessenberg``): ``A = Q H Qᴴ`` with no device holding more than
its block of ``A`` (and of ``Q``), a few replicated ``n x nb`` panels and
``n``-vectors. Stacks sharded along their batch run jax's ``hessenberg`` on each
device's members; unsharded operands are jax's own. Below the one-device budget
``plan="auto"`` may move the matrix to one device (LAPACK's ``gehrd``) where that
measured faster (``distla._core.plan.CROSSOVER["hessenberg"]``).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic
from distla.kernels.hessenberg import hessenberg_block_cyclic
from distla.kernels.qr import global_index

from ..._core import route
from ..._core.blas import keeps_one_blas_thread
from ..._core.checks import ShapeError, is_empty
from ..._core.matrix import pad_to, round_up
from ..._core.mesh import Grid, constrain, fitting_spec, run_on_mesh, shard_map
from ..._core.plan import Plan

#: fori_loops the panels are split over (as the QR's: about 1/STAGES of the
#: products' work is masked, for STAGES loop bodies to compile).
STAGES = 4


def blocking(grid: Grid, n: int, block_size: int | None = None) -> tuple[int, int]:
    """``(nb, n_pad)``: panel width and padded order on ``grid``.

    ``nb`` grows with ``n`` (8 to 32): every device repeats each column's ``n x nb``
    products with ``V`` and ``Y`` (about ``10·n²·nb`` flops in all), against the
    trailing products' ``≈ 10/3·n³/p``. At ``n = 1024`` on 2x4, ``nb`` 32 executed
    1.39e9 flops per device, 16 1.20e9 and 8 1.10e9 (``distla.cost``), and 16
    ran 0.74x the time of 32 (docs/scipy-linalg-timings.md); from ``n = 4096`` the
    repeated work is a few percent and 32 keeps the panels' GEMMs wide. ``n_pad`` is
    a multiple of ``nb·pr`` and ``nb·pc`` (the block-cyclic layout's).
    """
    if block_size is None:
        block_size = 32 if n >= 4096 else 16 if n >= 256 else 8
    multiple = block_size * math.lcm(grid.pr, grid.pc)
    return block_size, round_up(max(n, 1), multiple)


def stages_for(panels: int) -> int:
    return max(1, min(STAGES, panels // 4))


def reduce_2d(a, *, call: Plan, calc_q: bool):
    """``H`` (and ``Q``) of one matrix on ``call.mesh``, inside a body (``run_on_mesh``).

    ``a``: ``[n, n]`` in any layout; the results in the 2D block layout ``P(r, c)``
    of the padded order, cropped to ``[n, n]``.
    """
    grid = call.grid
    blocks = grid.block_spec
    row, col = grid.row, grid.col
    n = a.shape[0]
    nb, n_pad = blocking(grid, n, call.block_size)
    panels = -(-(n - 1) // nb)
    stages = stages_for(panels)
    a = constrain(pad_to(a.astype(call.dtype), (n_pad, n_pad)), blocks)

    def kernel(a_blk):
        def cyclic(x):
            x = to_block_cyclic(x, axis=0, axis_name=row, nb=nb)
            return to_block_cyclic(x, axis=1, axis_name=col, nb=nb)

        def contiguous(x):
            x = from_block_cyclic(x, axis=1, axis_name=col, nb=nb)
            return from_block_cyclic(x, axis=0, axis_name=row, nb=nb)

        x = cyclic(a_blk)
        grow = global_index(x.shape[0], row, nb)
        gcol = global_index(x.shape[1], col, nb)
        q = (grow[:, None] == gcol[None, :]).astype(x.dtype) if calc_q else None
        h, q = hessenberg_block_cyclic(
            x, q, row_axis=row, col_axis=col, nb=nb, panels=panels, stages=stages
        )
        h = jnp.where(grow[:, None] <= gcol[None, :] + 1, h, jnp.zeros((), h.dtype))
        return tuple(contiguous(y) for y in ((h, q) if calc_q else (h,)))

    outs = shard_map(kernel, in_specs=blocks, out_specs=(blocks,) * (1 + calc_q), check_vma=False)(
        a
    )
    outs = tuple(y[:n, :n] for y in outs)
    return outs if calc_q else outs[0]


@functools.partial(jax.jit, static_argnames=("call", "calc_q"))
def _hessenberg_2d(a, *, call: Plan, calc_q: bool):
    spec = fitting_spec(a.shape, call.mesh, call.grid.block_spec)
    body = functools.partial(reduce_2d, call=call, calc_q=calc_q)
    return run_on_mesh(body, call.mesh, (spec, spec) if calc_q else spec, a)


@keeps_one_blas_thread  # gehrd's panel: a BLAS-2 product per column (blas.py)
def _one_device(a, *, calc_q):
    """jax's ``hessenberg`` (LAPACK's ``gehrd``/``orghr``), the one-device plan's function."""
    return jsl.hessenberg(a, calc_q=calc_q)


def _check_square(what, a, **options):
    del options
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{what}: a must be square, (..., n, n); got a of shape {a.shape}")


def _nothing_to_reduce(a, **options):
    """jax's function takes the call: an empty matrix, or ``1 x 1``."""
    del options
    return is_empty(a) or a.shape[-1] == 1


def _reduced(plan: Plan, a, *, calc_q):
    return _hessenberg_2d(a, call=plan, calc_q=calc_q)


def _result(out, *, calc_q):
    return tuple(out) if calc_q else out


HESSENBERG = route.Op(
    "distla.scipy.linalg.hessenberg",
    one_device=_one_device,
    distributed=_reduced,
    check=_check_square,
    empty=_nothing_to_reduce,
    is_stack=route.beyond(2),
    stacked=route.members(_one_device, (2,), 2),
    family="hessenberg",
    result=_result,
)


@route.public
def hessenberg(
    a: jax.typing.ArrayLike,
    *,
    calc_q: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Hessenberg form ``a = Q H Qᴴ``, as ``jax.scipy.linalg.hessenberg``.

    One matrix sharded over a mesh is reduced by blocked Householder transformations
    from both sides on the 2D block-cyclic layout (ScaLAPACK's PDGEHRD): per column,
    one distributed matrix-vector product (a psum of two local row pieces over the
    mesh row and an all-gather over the mesh column); per panel of ``nb`` columns,
    the trailing update ``A ← Q_pᴴ (A Q_p)`` as local GEMMs and one psum of an
    ``nb``-row panel. ``Q`` is accumulated the same way (compact WY, ``Q Q_p``). No
    device holds more than its block of ``a`` and ``Q``, and ``O(n·nb)`` of panels.
    A stack sharded along its batch runs jax's ``hessenberg`` on each device.

    Args:
      a: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh (any layout), or a stack
        ``[..., n, n]``. Integers and bools promote to the default float.
      calc_q: also return ``Q``.
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      block_size: the panel width ``nb`` (``None``: 8 to 32 by ``n``, 16 at 1024).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` (LAPACK on one device,
        one BLAS thread; ``"auto"`` takes it up to ``n = 4096`` within the budget of
        ``distla.linalg.set_plan_budget``, where it measured faster on the test bed).

    Returns:
      ``H`` (``[n, n]``, exactly zero below the first subdiagonal) or ``(H, Q)``
      (``Q`` unitary), in the mesh's 2D block layout ``P(r, c)`` (the largest even
      layout that fits); a stack: sharded along its batch. The reflectors are
      LAPACK's (``xLARFG``), so ``H`` and ``Q`` agree with jax's to rounding where
      the reduction is well conditioned. Not differentiable (neither is jax's).

    Raises:
      ValueError: ``a`` is not square.

    See also: ``jax.scipy.linalg.hessenberg``, ``scipy.linalg.hessenberg``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.arange(256.0 * 256).reshape(256, 256) % 7, mesh)
      >>> h, q = sla.hessenberg(a, calc_q=True)
      >>> h.shape, q.shape
      ((256, 256), (256, 256))
      >>> np.allclose(np.tril(np.asarray(h), -2), 0)
      True
      >>> np.allclose(np.asarray(q) @ np.asarray(h) @ np.asarray(q).T, np.asarray(a), atol=1e-3)
      True
    """
    del overwrite_a, check_finite
    return route.call(HESSENBERG, a, plan=plan, block_size=block_size, calc_q=bool(calc_q))
