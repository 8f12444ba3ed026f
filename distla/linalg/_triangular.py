"""Distributed triangular solves: ``distla.linalg.solve_triangular`` (private module).

One matrix on a mesh is solved by blocked substitution on the 2D block-cyclic
layout (the LU's ``distla.kernels.trsm``), with the call's
``distla._core.plan.Plan``; a stack sharded along its batch runs jax's one-device
solve on each device's members (``distla._core.stacked``). Derivatives: each
solve is a ``lax.custom_linear_solve`` whose transpose is the solve with the
transposed triangle.

`SOLVE_TRIANGULAR` declares the public function for the route
(``distla._core.route``); `solve_2d` and `solve_linear` are the
family's solves for the others (Cholesky, expm, eigh's repair), and `sweeps_2d`
several solves with one matrix in one program (``cho_solve``'s two, with many
right-hand sides).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax

from distla.kernels.cyclic import from_block_cyclic_2d, to_block_cyclic_2d
from distla.kernels.trsm import trsm_few, trsm_many

from .._core import route
from .._core.block_cyclic import blocking, result_spec, rhs_of, solve_layouts, to_cyclic
from .._core.checks import rhs_core, square
from .._core.matmul import matvec
from .._core.matrix import HIGHEST, diag_mask, like, pad_identity, tril, triu
from .._core.mesh import constrain, run_on_mesh, shard_map
from .._core.plan import Plan
from .._core.stacked import stack


def _trans_code(trans, what: str) -> int:
    codes = {0: 0, "N": 0, "n": 0, 1: 1, "T": 1, "t": 1, 2: 2, "C": 2, "c": 2}
    if isinstance(trans, bool) or trans not in codes:
        raise ValueError(f"{what}: trans must be 0, 1, 2, 'N', 'T' or 'C'; got {trans!r}")
    return codes[trans]


@functools.partial(jax.jit, static_argnames=("call", "trans", "lower", "unit_diagonal"))
def triangular_solve(a, b, *, call: Plan, trans, lower, unit_diagonal):
    """``op(T)⁻¹ b`` for one matrix: ``T`` the ``lower``/upper triangle of ``a`` (no derivative)."""
    if many_rhs(call, b):
        # T's block columns move, B stays on T's grid for every trans
        sweep = ((trans, lower),)
        return triangular_sweeps(a, b, call=call, sweeps=sweep, unit_diagonal=unit_diagonal)
    # few right-hand sides: they move, not T; op(T) of a block-cyclic T is the local
    # transpose on the transposed grid
    grid = call.grid
    nb, n_pad = blocking(grid, a.shape[0])
    blocks = grid.block_spec
    rhs = rhs_of(grid, b.shape, trans)
    rows, cols = (grid.row, grid.col) if trans == 0 else (grid.col, grid.row)
    tri_lower = lower if trans == 0 else not lower
    solve = dict(lower=tri_lower, unit_diagonal=unit_diagonal, row_axis=rows, col_axis=cols)
    solve |= dict(nb=nb, precision=HIGHEST)

    def body(a, b):
        a = constrain(pad_identity(a.astype(call.dtype), n_pad), blocks)

        def kernel(a_blk, b_blk):
            x = to_block_cyclic_2d(b_blk, row_axis=rows, col_axis=None, nb=nb)
            t = to_cyclic(a_blk, grid, nb)
            if trans:
                t = t.T.conj() if trans == 2 else t.T
            x = trsm_few(t, x, **solve)
            return from_block_cyclic_2d(x, row_axis=rows, col_axis=None, nb=nb)

        x = shard_map(kernel, in_specs=(blocks, rhs.spec), out_specs=rhs.spec, check_vma=False)(
            a, rhs.pad(b, n_pad, call.dtype)
        )
        return rhs.crop(x)

    return run_on_mesh(body, grid.mesh, result_spec(grid, b.shape), a, b)


def many_rhs(call: Plan, b) -> bool:
    """Whether ``b`` is ``[n, k]`` with more than a few columns: the solves that move
    ``T``'s block columns, ``B`` on ``T``'s grid for every ``trans`` (`triangular_sweeps`)."""
    return b.ndim == 2 and not rhs_of(call.grid, b.shape, 0).few


@functools.partial(jax.jit, static_argnames=("call", "sweeps", "unit_diagonal"))
def triangular_sweeps(a, b, *, call: Plan, sweeps, unit_diagonal=False):
    """``op_s(T_s)⁻¹ ⋯ op_1(T_s)⁻¹ b`` in one program, for many right-hand sides (no derivative).

    ``sweeps`` is ``((trans, lower), ...)``, applied in order; ``T`` each time the
    ``lower``/upper triangle of ``a``. ``b`` (``[n, k]``, ``k`` more than
    ``FEW_RHS``) goes to block-cyclic rows once and stays on ``T``'s grid through
    every sweep (``trsm_many``; ``trans`` 1 and 2 gather ``T``'s block rows,
    ``same_grid``), and comes back once: between two sweeps no solution is held in
    the 2D block layout beside its block-cyclic copy (``cho_solve``'s two sweeps:
    ``a``, ``b``, ``x`` and the panels, where two programs held a fourth share).
    """
    grid = call.grid
    nb, n_pad = blocking(grid, a.shape[0])
    blocks = grid.block_spec
    rhs = rhs_of(grid, b.shape, 0)  # rows over the grid's rows, columns over its columns
    axes = dict(row_axis=grid.row, col_axis=grid.col, nb=nb, precision=HIGHEST)

    def body(a, b):
        a = constrain(pad_identity(a.astype(call.dtype), n_pad), blocks)

        def kernel(a_blk, b_blk):
            x = to_block_cyclic_2d(b_blk, row_axis=grid.row, col_axis=None, nb=nb)
            for trans, lower in sweeps:
                # T stays in the contiguous order, its block columns (trans 0) or block
                # rows (1, 2: B need not go to the transposed grid and back, two more
                # shares) moved step by step: a block-cyclic copy of T would be one more
                # share beside T, B and X; op(T) is lower for T lower and trans 0
                tri_lower = lower if trans == 0 else not lower
                x = trsm_many(
                    a_blk,
                    x,
                    lower=tri_lower,
                    unit_diagonal=unit_diagonal,
                    contiguous=True,
                    op=trans,
                    same_grid=trans != 0,
                    **axes,
                )
            return from_block_cyclic_2d(x, row_axis=grid.row, col_axis=None, nb=nb)

        x = shard_map(kernel, in_specs=(blocks, rhs.spec), out_specs=rhs.spec, check_vma=False)(
            a, rhs.pad(b, n_pad, call.dtype)
        )
        return rhs.crop(x)

    return run_on_mesh(body, grid.mesh, result_spec(grid, b.shape), a, b)


@functools.partial(jax.jit, static_argnames=("trans", "lower", "unit_diagonal", "mesh"))
def triangle_matvec(a, x, *, trans, lower, unit_diagonal, mesh):
    """``op(T) @ x`` with ``T`` the triangle of ``a`` that a solve reads (for derivatives)."""
    t = tril(a) if lower else triu(a)
    if unit_diagonal:
        t = jnp.where(diag_mask(a), jnp.ones((), a.dtype), t)
    if trans:
        t = jnp.conj(t.T) if trans == 2 else t.T
    return matvec(t, x, mesh)


def _stacked_solve(plan: Plan, a, rhs, **flags):
    """jax's ``solve_triangular`` on each device's members (vmap of a one-matrix solve)."""
    ref = functools.partial(jsl.solve_triangular, **flags)
    if rhs.ndim == a.ndim - 1:  # one vector per member
        return stack(ref, (a, rhs[..., None]), (2, 2), 2, mesh=plan.mesh)[..., 0]
    return stack(ref, (a, rhs), (2, 2), 2, mesh=plan.mesh)


# (a, rhs) -> op(T)^-1 rhs whose jax.vmap is one stacked call: each device solves its own
# members (distla._core.stacked). No derivative: solve_linear's solves.
_SOLVE = route.Op(
    "distla.linalg.solve_triangular",
    one_device=jsl.solve_triangular,
    distributed=lambda plan, a, b, **flags: triangular_solve(a, b, call=plan, **flags),
    vmap=route.by_stacks(_stacked_solve),
)


def _solve(plan: Plan, a, b, **flags):
    return route.distributed(_SOLVE, plan, a, b, **flags)


def solve_linear(a, b, *, trans, lower, unit_diagonal, call: Plan):
    """``op(T)⁻¹ b`` as ``lax.custom_linear_solve``: linear in ``b`` (its transpose is the
    solve with the transposed triangle), differentiable in ``a`` through ``op(T) x``.

    For derivative rules, whose tangents must be transposable; elsewhere use
    `solve_2d`, whose ``jax.vmap`` is one stacked call.
    """
    flags = dict(lower=lower, unit_diagonal=unit_diagonal)
    a_fixed = lax.stop_gradient(a)

    def product(a, x):
        return triangle_matvec(
            a, x, trans=trans, mesh=call.mesh, lower=lower, unit_diagonal=unit_diagonal
        )

    # Transposing op(T) x (custom_linear_solve does, for its vecmat) would hoist what it
    # computes from a alone inside run_on_mesh, typed for Auto axes, out as constants;
    # jax.vmap then moves them in an Explicit context, which jax refuses. Saving
    # nothing, the transpose recomputes them from a (one product) instead.
    product = jax.checkpoint(product, policy=jax.checkpoint_policies.nothing_saveable)

    def mv(x):
        return like(product(a, x), x)

    def solve(_, rhs):
        return like(_solve(call, a_fixed, rhs, trans=trans, **flags), rhs)

    def transpose_solve(_, rhs):
        if trans == 2:  # the linear transpose of x -> T^-H x is x -> conj(T^-1 conj(x))
            x = jnp.conj(_solve(call, a_fixed, jnp.conj(rhs), trans=0, **flags))
        else:
            x = _solve(call, a_fixed, rhs, trans=1 - trans, **flags)
        return like(x, rhs)

    return lax.custom_linear_solve(mv, b, solve, transpose_solve)


def _solve_2d_jvp(fn, plan: Plan, primals, tangents, **flags):
    return route.jvp_in_live(functools.partial(solve_linear, call=plan, **flags), primals, tangents)


# op(T)^-1 b for one matrix: its primal is one solve whose jax.vmap is one stacked call
# (each device its own members, no collective when the mapped axis is sharded); its
# derivatives are solve_linear's, whose solves are the same stacked calls under jax.vmap.
_SOLVE_2D = route.Op(
    "distla.linalg.solve_triangular",
    one_device=jsl.solve_triangular,
    distributed=lambda plan, a, b, **flags: like(_solve(plan, a, b, **flags), b),
    jvp=_solve_2d_jvp,
    symbolic_zeros=True,
    on_mesh=False,
)


def solve_2d(a, b, *, trans, lower, unit_diagonal, call: Plan):
    """``op(T)⁻¹ b`` for one matrix, differentiable in ``a`` and ``b`` to any order.

    The primal is one solve whose ``jax.vmap`` is one stacked call (each
    device solves its own members, with no collective when the mapped axis is
    sharded); its derivatives are `solve_linear`'s, whose solves are
    the same stacked calls under ``jax.vmap``.
    """
    flags = dict(trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    return route.distributed(_SOLVE_2D, call, a, b, **flags)


def _sweeps_one(a, b, *, sweeps, unit_diagonal):
    """`triangular_sweeps` with jax's solves (one device, or one member of a stack)."""
    for trans, lower in sweeps:
        b = jsl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    return b


def _stacked_sweeps(plan: Plan, a, rhs, **flags):
    """`_sweeps_one` on each device's members (vmap of the sweeps of one matrix)."""
    ref = functools.partial(_sweeps_one, **flags)
    return stack(ref, (a, rhs), (2, 2), 2, mesh=plan.mesh)


# (a, b) -> the sweeps' solution in one program, whose jax.vmap is one stacked call
_SWEEPS = route.Op(
    "distla.linalg.solve_triangular",
    one_device=_sweeps_one,
    distributed=lambda plan, a, b, **flags: triangular_sweeps(a, b, call=plan, **flags),
    vmap=route.by_stacks(_stacked_sweeps),
)


def _sweeps_jvp(fn, plan: Plan, primals, tangents, *, sweeps, unit_diagonal):
    def chain(a, b):  # the same solves one by one, each solve_linear's rules
        for trans, lower in sweeps:
            flags = dict(trans=trans, lower=lower, unit_diagonal=unit_diagonal)
            b = solve_linear(a, b, call=plan, **flags)
        return b

    return route.jvp_in_live(chain, primals, tangents)


_SWEEPS_2D = route.Op(
    "distla.linalg.solve_triangular",
    one_device=_sweeps_one,
    distributed=lambda plan, a, b, **flags: like(
        route.distributed(_SWEEPS, plan, a, b, **flags), b
    ),
    jvp=_sweeps_jvp,
    symbolic_zeros=True,
    on_mesh=False,
)


def sweeps_2d(a, b, *, sweeps, call: Plan, unit_diagonal: bool = False):
    """`triangular_sweeps` (``[n, k]`` ``b``, ``k`` more than a few: `many_rhs`),
    differentiable in ``a`` and ``b`` to any order.

    The primal is one program (its ``jax.vmap`` one stacked call); the derivatives are
    those of the same solves made one by one with `solve_linear`.
    """
    flags = dict(sweeps=tuple(sweeps), unit_diagonal=unit_diagonal)
    return route.distributed(_SWEEPS_2D, call, a, b, **flags)


def _check(what, a, b, **flags):
    """A square ``a`` and a matching ``b`` (jax.scipy's rule)."""
    del flags
    square(a, what)
    rhs_core(a, b, what)


def _stacked(plan: Plan, a, b, **flags):
    core = rhs_core(a, b)
    return stack(
        functools.partial(jsl.solve_triangular, **flags), (a, b), (2, core), core, mesh=plan.mesh
    )


SOLVE_TRIANGULAR = route.Op(
    "distla.linalg.solve_triangular",
    operands=("a", "b"),
    check=_check,
    one_device=jsl.solve_triangular,
    is_stack=route.beyond(2, 2),
    stacked=_stacked,
    family="solve_triangular",
    layouts=functools.partial(solve_layouts, like_b=True),
    distributed=lambda plan, a, b, **flags: solve_2d(a, b, call=plan, **flags),
)


@route.public
def solve_triangular(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    trans: int | str = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    debug: object = None,
    check_finite: bool = True,
    *,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``op(a) x = b`` for triangular ``a``, as ``jax.scipy.linalg.solve_triangular``.

    One matrix on a mesh is solved by blocked substitution on the 2D
    block-cyclic layout (the LU's ``kernels/trsm.py``): with up to 128
    right-hand sides the solution blocks move, with more the matrix's block
    columns do. A stack sharded along its batch is solved on each device.

    Args:
      a: ``[n, n]`` on a 1- or 2-axis mesh; only its ``lower`` (or upper)
        triangle is read, and not its diagonal if ``unit_diagonal``.
      b: ``[n]`` or ``[n, k]`` on the same mesh, any layout.
      trans: ``0``/``'N'`` solves ``a x = b``, ``1``/``'T'`` ``aᵀ x = b``,
        ``2``/``'C'`` ``aᴴ x = b``.
      lower: use the lower triangle (default: upper).
      unit_diagonal: assume a unit diagonal.
      overwrite_b: accepted and ignored, as in jax.
      debug: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as ``distla.linalg.solve``'s (the one-device plan runs
        ``jax.scipy.linalg.solve_triangular`` and shards ``x`` back in the
        same layout).

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the mesh's 2D block layout,
      ``[n]`` split over all devices. A zero on the diagonal gives inf/nan,
      as LAPACK. Differentiable in ``a`` and ``b`` to any order.

    Raises:
      ValueError: shapes that do not match, or a ``trans`` jax does not take.

    See also: ``jax.scipy.linalg.solve_triangular``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.tril(jnp.ones((256, 256))) + 255.0 * jnp.eye(256), mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> x = distla.linalg.solve_triangular(a, b, lower=True)
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    del overwrite_b, debug, check_finite
    t = _trans_code(trans, SOLVE_TRIANGULAR.name)
    flags = dict(trans=t, lower=bool(lower), unit_diagonal=bool(unit_diagonal))
    return route.call(SOLVE_TRIANGULAR, a, b, plan=plan, **flags)
