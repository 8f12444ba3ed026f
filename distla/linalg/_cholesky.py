"""Distributed Cholesky and SPD solves (see ``distla.linalg``).

The global view: the factorisation takes one matrix on a mesh and the call's
``distla._core.plan.Plan``, pads the matrix with an identity block (the factor of
``[[A, 0], [0, I]]`` contains ``A``'s), puts it in block-cyclic order inside
``shard_map`` (``distla.kernels.cyclic``), runs ``distla.kernels.cholesky``
and returns the result in the mesh's 2D block layout. Its solves are two
triangular solves (``distla.linalg._triangular``). Stacks of matrices sharded along
their batch dimensions are factored and solved locally on each device, with
no collective (``distla._core.stacked``).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cholesky import cholesky_block_cyclic
from distla.kernels.cyclic import from_block_cyclic_2d, relayout_fraction

from .._core.checks import (
    as_array,
    empty_or_one_device,
    is_empty,
    is_traced,
    result_dtype,
    rhs_core,
    square,
)
from .._core.eager import one_program
from .._core.matmul import matvec, product
from .._core.matrix import HIGHEST, ct_on, like, pad_identity, tril_mask
from .._core.mesh import (
    Grid,
    constrain,
    fitting_spec,
    rule_on_mesh,
    run_on_mesh,
    shard_map,
    tangent_on_mesh,
)
from .._core.one_device import block_layout, choose_plan, on_one_device
from .._core.plan import Plan, check_block_size, resolve
from .._core.stacked import stack, vmappable
from . import _buckets
from ._lu import solved_on_one_device
from ._triangular import checked_solve_operands, solve_2d, solve_linear, to_cyclic

# Panel width the default block size aims at, and the most segments (fori_loops)
# one factorisation compiles into (see kernels/cholesky.py). Each segment is
# compiled once (about 1.5 CPU s): four keep the first call short, for 20% more
# executed flops than sixteen at n = 4096 (docs/benchmarks.md, "First call").
DEFAULT_BLOCK = 128
MAX_SEGMENTS = 4


def blocking(grid: Grid, n: int, block_size: int | None = None) -> tuple[int, int, int]:
    """``(nb, w, n_pad)``: block size, panels per segment and padded order.

    ``n_pad = nb·nbr`` with ``nbr`` a multiple of ``w`` and ``w`` a multiple of
    ``lcm(pr, pc)``; ``w`` is the smallest such that there are at most
    ``MAX_SEGMENTS`` segments. With no ``block_size``, ``nb`` is the block
    near ``DEFAULT_BLOCK`` that pads least.
    """
    q = math.lcm(grid.pr, grid.pc)
    if block_size is not None:
        check_block_size(block_size)
        target = block_size
    else:
        target = DEFAULT_BLOCK
    nbr0 = max(1, -(-n // target))
    w = q * -(-nbr0 // (q * MAX_SEGMENTS))
    nbr = -(-nbr0 // w) * w
    nb = target if block_size is not None else -(-n // nbr)
    return nb, w, nb * nbr


def _from_cyclic(x_cyc, grid: Grid, nb: int):
    return from_block_cyclic_2d(x_cyc, row_axis=grid.row, col_axis=grid.col, nb=nb)


def _all_devices(ok, grid: Grid):
    axes = tuple(a for a in (grid.row, grid.col) if a is not None)
    bad = (~ok).astype(jnp.int32)
    # psum over the grid -> the number of devices that saw a failed potrf
    return (lax.psum(bad, axes) if axes else bad) == 0


def hermitian_part(a: jax.Array) -> jax.Array:
    """``(a + aᴴ) / 2``, as ``jnp.linalg.cholesky(symmetrize_input=True)`` computes it."""
    return (a + jnp.conj(a.T)) / 2


@functools.partial(jax.jit, static_argnames=("call", "upper", "symmetrize", "read_upper"))
def factor(a, *, call: Plan, upper=False, symmetrize=True, read_upper=False):
    """Cholesky factor of one sharded matrix (the public functions check and call it).

    ``upper`` returns ``Lᴴ``; ``read_upper`` factors from ``a``'s upper
    triangle (``aᴴ``'s lower one), as ``jax.scipy.linalg.cholesky(lower=False)``.
    """
    grid, dtype = call.grid, call.dtype
    n = a.shape[0]
    nb, w, n_pad = blocking(grid, n, call.block_size)
    blocks = grid.block_spec

    def body(a):
        a = a.astype(dtype)
        if read_upper:  # scipy's lower=False reads the upper triangle: factor aᴴ instead
            a = jnp.conj(a.T)
        if symmetrize:
            a = hermitian_part(a)
        a = constrain(pad_identity(a, n_pad), blocks)

        def kernel(a_blk):
            l_cyc, ok = cholesky_block_cyclic(
                to_cyclic(a_blk, grid, nb),
                row_axis=grid.row,
                col_axis=grid.col,
                nb=nb,
                w=w,
                precision=HIGHEST,
            )
            return _from_cyclic(l_cyc, grid, nb), _all_devices(ok, grid)

        l, ok = shard_map(kernel, in_specs=blocks, out_specs=(blocks, P()), check_vma=False)(a)
        l = l[:n, :n]
        # jnp's conventions: zeros above the diagonal, NaN below it when not positive definite
        l = jnp.where(tril_mask(l), jnp.where(ok, l, jnp.nan), jnp.zeros((), dtype))
        return jnp.conj(l.T) if upper else l

    out = fitting_spec((n, n), grid.mesh, blocks)
    return run_on_mesh(body, grid.mesh, out, a)


# --------------------------------------------------------------------- communication


def model_bytes(
    n: int,
    grid: tuple[int, int],
    dtype: jax.typing.DTypeLike,
    *,
    block_size: int | None = None,
    symmetrize: bool = True,
) -> float:
    """Bytes one device receives in ``distla.linalg.cholesky`` of an ``n x n`` matrix.

    The model of docs/cholesky.md, for a ``pr x pc`` grid, counted as
    ``distla.cost`` counts (all-gather and all-to-all ``(g-1)/g`` of their
    result, all-reduce ``2(g-1)/g``), summed step by step over the
    segments and panels of :func:`blocking`. ``symmetrize`` adds the transpose
    that ``symmetrize_input=True`` needs (one all-to-all of the local block).
    Public as ``distla.linalg.cholesky_model_bytes``.

    Args:
      n: the matrix order.
      grid: the mesh shape ``(pr, pc)``.
      dtype: the matrix dtype (its item size counts).
      block_size: the block size the call uses (``None``: distla's choice).
      symmetrize: whether the call symmetrizes its input.

    Returns:
      Bytes received per device, comparable to
      ``distla.cost(...).total_collective_bytes``.
    """
    pr, pc = grid
    mesh = jax.sharding.AbstractMesh((pr, pc), ("r", "c"))
    nb, w, n_pad = blocking(Grid(mesh, "r", "c"), n, block_size)
    item = jnp.dtype(dtype).itemsize
    nbr, mloc, nloc = n_pad // nb, n_pad // pr, n_pad // pc
    block = mloc * nloc

    def reduce(g):  # all-reduce, per element
        return 2 * (g - 1) / g

    elements = 2 * block * (relayout_fraction(mloc // nb, pr) + relayout_fraction(nloc // nb, pc))
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


# ------------------------------------------------------------------ the calls
# One matrix on a mesh runs the distributed programs above; a stack sharded along
# its batch runs jax's one-device function on each device's members (no
# collective); an unsharded operand falls back to jax. Derivatives reuse the
# factor: solves are lax.custom_linear_solve (their transpose is the solve with
# the transposed triangle), and cholesky's JVP is jax's rule written with the
# distributed triangular solves and matmul.


def _phi(x):
    """Lower triangle of ``x`` with its diagonal halved (jax's Cholesky JVP)."""
    half = jnp.where(tril_mask(x, -1), jnp.ones((), x.dtype), jnp.full((), 0.5, x.dtype))
    return jnp.where(tril_mask(x), x * half, jnp.zeros((), x.dtype))


def chol_2d(a, *, call: Plan, upper, symmetrize, read_upper):
    """Cholesky of one matrix with jax's JVP rule, its solves and products distributed."""
    flags = dict(symmetrize=symmetrize, read_upper=read_upper)

    def stacked(a):
        def f(a):  # the same on each member, with jax's one-device Cholesky
            if read_upper:
                a = jnp.conj(jnp.swapaxes(a, -1, -2))
            l = jnp.linalg.cholesky(a, symmetrize_input=symmetrize)
            return jnp.conj(jnp.swapaxes(l, -1, -2)) if upper else l

        return stack(f, (a,), (2,), 2, mesh=call.mesh)

    def one(a):
        return factor(a, call=call, upper=upper, **flags)

    if not is_traced(a):  # the rules act only under a transformation
        n = a.shape[0]
        (l,) = _buckets.on_bucket(
            lambda a: (one(a),),
            a,
            call=call,
            results=lambda: (((n, n),), (fitting_spec((n, n), call.mesh, call.grid.block_spec),)),
        )
        return l
    primal = jax.custom_jvp(vmappable(one, stacked))

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        out = primal(a)
        low = ct_on(out, mesh=call.mesh) if upper else out
        da = tangent_on_mesh(da, a).astype(call.dtype)  # jax.jacfwd's one-device basis
        if read_upper:
            da = ct_on(da, mesh=call.mesh)
        if symmetrize:
            da = (da + ct_on(da, mesh=call.mesh)) / 2
        tri = dict(lower=True, unit_diagonal=False, call=call)
        # tangents: the linear solves (transposable in the right-hand side)
        y = solve_linear(low, da, trans=0, **tri)  # L^-1 dA
        mesh = call.mesh
        m = solve_linear(low, ct_on(y, mesh=mesh), trans=0, **tri)
        m = ct_on(m, mesh=mesh)  # L^-1 dA L^-H
        dl = product(low, _phi(m), call.mesh)
        return out, (ct_on(dl, mesh=call.mesh) if upper else dl)

    primal.defjvp(rule_on_mesh(rule))
    return primal(a)


@one_program
def cholesky(
    a: jax.typing.ArrayLike,
    *,
    upper: bool = False,
    symmetrize_input: bool = True,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Cholesky factor of a Hermitian positive definite matrix, as ``jnp.linalg.cholesky``.

    A matrix on a mesh is factored by the distributed blocked Cholesky
    (ScaLAPACK's PDPOTRF on a 2D block-cyclic layout, ``kernels/cholesky.py``):
    no device holds the whole matrix. A stack sharded along its batch
    dimensions is factored on each device with no communication; an
    unsharded matrix falls back to ``jnp.linalg.cholesky``.

    Args:
      a: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh (any layout), or a
        stack ``[..., n, n]`` sharded along its batch dimensions. Integers
        and bools promote to the default float, as in jnp.
      upper: return ``U = Lᴴ`` (``a = Uᴴ U``) instead of ``L``.
      symmetrize_input: factor ``(a + aᴴ)/2`` (jnp's default); otherwise only
        the lower triangle of ``a`` is read.
      block_size: the distributed factorisation's block (panel width) ``nb``;
        ``None`` picks one near 128 that pads least.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as ``distla.linalg.solve``'s (the one-device plan runs
        ``jnp.linalg.cholesky`` and shards the factor back in the same layout).

    Returns:
      ``L`` (``[..., n, n]``, zeros above the diagonal) with ``a = L Lᴴ``, or
      ``U``. One matrix comes back in the mesh's 2D block layout ``P(r, c)``
      (the largest even layout that fits when the mesh does not divide ``n``),
      a stack sharded along its batch. A matrix that is not positive definite
      gives NaN in the lower (upper) triangle, as jnp: no exception.

    Raises:
      ValueError: ``a`` is not square or has fewer than 2 dimensions.
      TypeError: ``a`` is float16/bfloat16 or not numeric.

    Differentiable to any order (jax's rule; the solves reuse the factor).

    See also: ``jnp.linalg.cholesky``, :func:`cho_factor`.
    """
    what = "distla.linalg.cholesky"
    a = as_array(a, "a", what)
    square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    ref = functools.partial(jnp.linalg.cholesky, upper=upper, symmetrize_input=symmetrize_input)
    call = resolve(a, names=("a",), dtype=dtype, block_size=block_size)
    if call is None or is_empty(a):
        return empty_or_one_device(ref, a)
    if a.ndim > 2:
        return stack(ref, (a,), (2,), 2, mesh=call.mesh)
    options = (("upper", bool(upper)), ("symmetrize_input", bool(symmetrize_input)))
    if (
        choose_plan("cholesky", plan, jnp.linalg.cholesky, a, what=what, options=options)
        == "one_device"
    ):
        spec = block_layout(a.shape, call.mesh)
        return on_one_device(
            jnp.linalg.cholesky,
            a,
            mesh=call.mesh,
            in_specs=(spec,),
            out_specs=(spec,),
            options=options,
        )
    return chol_2d(a, call=call, upper=upper, symmetrize=symmetrize_input, read_upper=False)


@one_program
def cho_factor(
    a: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
) -> tuple[jax.Array, bool]:
    """Cholesky factor for :func:`cho_solve`, as ``jax.scipy.linalg.cho_factor``.

    Args:
      a: ``[n, n]`` Hermitian positive definite matrix on a mesh (or a stack
        sharded along its batch). Only the triangle named by ``lower`` is read.
      lower: factor as ``a = L Lᴴ`` (``True``) or ``a = Uᴴ U`` (``False``,
        the default, reading the upper triangle).
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      block_size: the distributed factorisation's block (panel width), as
        :func:`cholesky`'s; ``None`` picks one for the mesh.

    Returns:
      ``(c, lower)``: ``c`` is ``L`` or ``U`` with zeros in the other triangle,
      in the mesh's 2D block layout (a stack: sharded along its batch). Not
      positive definite gives NaN, as jax.

    See also: ``jax.scipy.linalg.cho_factor``.
    """
    del overwrite_a, check_finite
    what = "distla.linalg.cho_factor"
    a = as_array(a, "a", what)
    square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)

    def ref(x):
        return jsl.cho_factor(x, lower=lower)[0]

    call = resolve(a, names=("a",), dtype=dtype, block_size=block_size)
    if call is None or is_empty(a):
        return empty_or_one_device(ref, a), lower
    if a.ndim > 2:
        return stack(ref, (a,), (2,), 2, mesh=call.mesh), lower
    c = chol_2d(a, call=call, upper=not lower, symmetrize=False, read_upper=not lower)
    return c, lower


def cho_solve_2d(c, b, *, lower, call: Plan):
    tri = dict(lower=lower, unit_diagonal=False, call=call)
    if lower:  # L y = b, then L^H x = y
        return solve_2d(c, solve_2d(c, b, trans=0, **tri), trans=2, **tri)
    return solve_2d(c, solve_2d(c, b, trans=2, **tri), trans=0, **tri)  # U^H y = b, U x = y


def cho_solve(
    c_and_lower: tuple[jax.typing.ArrayLike, bool],
    b: jax.typing.ArrayLike,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    plan: str = "auto",
) -> jax.Array:
    """The plain solve of ``distla.linalg.cho_solve`` (its mixed-precision branch aside)."""
    del overwrite_b, check_finite
    what = "distla.linalg.cho_solve"
    c, lower = c_and_lower
    c, b, dtype = checked_solve_operands(what, c, b)

    def ref(c, b):
        return jsl.cho_solve((c, lower), b)

    call = resolve(c, b, names=("c", "b"), dtype=dtype)
    if call is None or is_empty(c, b):
        return empty_or_one_device(ref, c, b)
    if c.ndim > 2 or b.ndim > 2:
        core = rhs_core(c, b)
        return stack(ref, (c, b), (2, core), core, mesh=call.mesh)
    one = solved_on_one_device(
        "cho_solve",
        plan,
        _cho_solve_one,
        c,
        b,
        call=call,
        what=what,
        options=(("lower", bool(lower)),),
        like_b=True,
    )
    return one if one is not None else cho_solve_2d(c, b, lower=bool(lower), call=call)


def _cho_solve_one(c, b, *, lower):
    """``jax.scipy.linalg.cho_solve`` with the flag as a keyword (the one-device plan's)."""
    return jsl.cho_solve((c, lower), b)


def solve_pos(a: jax.Array, b: jax.Array, *, lower: bool, call: Plan) -> jax.Array:
    """``a x = b`` for Hermitian positive definite ``a``, through Cholesky.

    What ``jax.scipy.linalg.solve(a, b, assume_a="pos", lower=lower)`` does,
    distributed: factor ``a`` (reading its ``lower`` or upper triangle) as
    :func:`cho_factor` does and solve as :func:`cho_solve` does; as a
    ``lax.custom_linear_solve`` whose derivatives reuse the factor
    (``distla.linalg.solve(..., assume_a="pos")`` calls it, after its checks).

    Args:
      a: ``[n, n]`` on the call's mesh, of the call's dtype.
      b: ``[n]`` or ``[n, k]`` on the same mesh.
      lower: which triangle of ``a`` is factored.
      call: the solve's plan; its block size is the LU's, so the Cholesky
        factor here uses its own default block.

    Returns:
      ``x`` with ``b``'s shape, in the mesh's 2D block layout (``[n]``: split
      over all devices). Not positive definite gives NaN.
    """
    call = dataclasses.replace(call, block_size=None)
    c = chol_2d(
        lax.stop_gradient(a), call=call, upper=not lower, symmetrize=False, read_upper=not lower
    )

    def mv(x):
        return like(matvec(a, x, call.mesh), x)

    def solve(_, rhs):
        return like(cho_solve_2d(c, rhs, lower=lower, call=call), rhs)

    return lax.custom_linear_solve(mv, b, solve, symmetric=True)
