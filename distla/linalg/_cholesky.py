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
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.cholesky import cholesky_block_cyclic
from distla.kernels.cyclic import relayout_fraction

from .._core import route
from .._core.block_cyclic import from_cyclic, solve_layouts, to_cyclic
from .._core.buckets import on_bucket
from .._core.checks import as_array, empty_or_one_device, result_dtype, rhs_core, square
from .._core.matmul import matvec, product
from .._core.matrix import (
    HIGHEST,
    ct_on,
    diag_mask,
    hermitian_from,
    like,
    once,
    pad_identity,
    tril_mask,
)
from .._core.mesh import Grid, constrain, fitting_spec, run_on_mesh, shard_map, tangent_on_mesh
from .._core.plan import Plan, check_block_size
from .._core.stacked import stack
from ._refine import Factorisation, check_system, lower_precision, refine
from ._triangular import many_rhs, solve_2d, solve_linear, sweeps_2d

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


def _all_devices(ok, grid: Grid):
    axes = tuple(a for a in (grid.row, grid.col) if a is not None)
    bad = (~ok).astype(jnp.int32)
    # psum over the grid -> the number of devices that saw a failed potrf
    return (lax.psum(bad, axes) if axes else bad) == 0


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
            a = hermitian_from(a, symmetrize=True, lower=True)  # (a + aᴴ)/2, as jnp's
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
            return from_cyclic(l_cyc, grid, nb), _all_devices(ok, grid)

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
    segments and panels of `blocking`. ``symmetrize`` adds the transpose
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

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> distla.linalg.cholesky_model_bytes(8192, (2, 4), jnp.float32) > 0
      True
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


def _factor_members(a, *, upper, symmetrize, read_upper):
    """The factor of each member with jax's one-device Cholesky (a stack's, under jax.vmap)."""
    if read_upper:
        a = jnp.conj(jnp.swapaxes(a, -1, -2))
    l = jnp.linalg.cholesky(a, symmetrize_input=symmetrize)
    return jnp.conj(jnp.swapaxes(l, -1, -2)) if upper else l


def _factor_2d(plan: Plan, a, **flags):
    """The factor of one matrix; called eagerly, on the shape bucket's order."""
    n = a.shape[0]
    (l,) = on_bucket(
        lambda a: (factor(a, call=plan, **flags),),
        a,
        call=plan,
        results=lambda: (((n, n),), (fitting_spec((n, n), plan.mesh, plan.grid.block_spec),)),
    )
    return l


@functools.cache
def _jax_reads_the_lower_tangent() -> bool:
    """Whether the installed jax's Cholesky JVP reads only the tangent's lower triangle.

    The factor reads only A's lower triangle, and since jax 0.11 its JVP reads only the
    tangent's too (the Hermitian matrix of that triangle): the derivative of
    ``cho_factor`` then lies in the triangle it reads. jax 0.10 used the whole tangent.
    Probed once: an upper-only tangent moves the factor only where the whole is used.
    """
    with jax.ensure_compile_time_eval():
        a = jnp.array([[4.0, 2.0], [2.0, 5.0]], jnp.float32)
        upper_only = jnp.array([[0.0, 1.0], [0.0, 0.0]], jnp.float32)
        _, dl = jax.jvp(
            lambda a: lax.linalg.cholesky(a, symmetrize_input=False), (a,), (upper_only,)
        )
        return not bool(jnp.any(dl != 0))


def _factor_jvp(fn, plan: Plan, primals, tangents, *, upper, symmetrize, read_upper):
    """jax's Cholesky rule ``dL = L Φ(L⁻¹ dA L⁻ᴴ)``, its solves and products distributed
    (the tangent read as the installed jax reads it, `_jax_reads_the_lower_tangent`)."""
    (a,), (da,) = primals, tangents
    mesh = plan.mesh
    out = fn(a)
    low = ct_on(out, mesh=mesh) if upper else out
    da = tangent_on_mesh(da, a).astype(plan.dtype)  # jax.jacfwd's one-device basis
    if read_upper:
        da = ct_on(da, mesh=mesh)
    if symmetrize:
        da = (da + ct_on(da, mesh=mesh)) / 2
    elif _jax_reads_the_lower_tangent():  # the Hermitian matrix of da's lower triangle
        strict = jnp.where(tril_mask(da, -1), da, jnp.zeros((), da.dtype))
        diagonal = jnp.where(diag_mask(da), jnp.real(da), 0).astype(da.dtype)
        da = strict + ct_on(strict, mesh=mesh) + diagonal
    tri = dict(lower=True, unit_diagonal=False, call=plan)
    # tangents: the linear solves (transposable in the right-hand side)
    y = solve_linear(low, da, trans=0, **tri)  # L^-1 dA
    m = solve_linear(low, ct_on(y, mesh=mesh), trans=0, **tri)
    m = ct_on(m, mesh=mesh)  # L^-1 dA L^-H
    dl = product(low, _phi(m), mesh)
    return out, (ct_on(dl, mesh=mesh) if upper else dl)


def _factor_stacks(plan: Plan, a, **flags):
    return stack(functools.partial(_factor_members, **flags), (a,), (2,), 2, mesh=plan.mesh)


# The factor of one matrix, with jax's JVP rule; its jax.vmap runs jax's Cholesky on
# each device's members. Options: upper (return Lᴴ), symmetrize, read_upper (factor
# from the upper triangle, as jax.scipy.linalg.cholesky(lower=False)).
FACTOR = route.Op(
    "distla.linalg.cholesky",
    one_device=_factor_members,
    distributed=_factor_2d,
    jvp=_factor_jvp,
    vmap=route.by_stacks(_factor_stacks),
)


def chol_2d(a, *, call: Plan, upper, symmetrize, read_upper):
    """Cholesky of one matrix with jax's JVP rule, its solves and products distributed."""
    flags = dict(upper=upper, symmetrize=symmetrize, read_upper=read_upper)
    return route.distributed(FACTOR, call, a, **flags)


CHOLESKY = route.Op(
    "distla.linalg.cholesky",
    check=route.square,
    one_device=jnp.linalg.cholesky,
    is_stack=route.beyond(2),
    stacked=route.members(jnp.linalg.cholesky, (2,), 2),
    family="cholesky",
    distributed=lambda plan, a, *, upper, symmetrize_input: chol_2d(
        a, call=plan, upper=upper, symmetrize=symmetrize_input, read_upper=False
    ),
    keep_replicated=True,
)


@route.public
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
      a stack sharded along its batch; a replicated ``a`` (``P()`` on an
      ``Explicit`` mesh) gives a replicated factor, as jnp's (factored
      distributed all the same). A matrix that is not positive definite
      gives NaN in the lower (upper) triangle, as jnp: no exception.

    Raises:
      ValueError: ``a`` is not square or has fewer than 2 dimensions.
      TypeError: ``a`` is float16/bfloat16 or not numeric.

    Differentiable to any order (jax's rule; the solves reuse the factor).

    See also: ``jnp.linalg.cholesky``, [`cho_factor`][distla.linalg.cho_factor].

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + 1.0, mesh)
      >>> l = distla.linalg.cholesky(a)
      >>> l.shape, l.sharding.spec
      ((256, 256), P('rows', 'cols'))
      >>> np.allclose(np.asarray(l) @ np.asarray(l).T, np.asarray(a), atol=1e-4)
      True
    """
    return route.call(
        CHOLESKY,
        a,
        block_size=block_size,
        plan=plan,
        upper=bool(upper),
        symmetrize_input=bool(symmetrize_input),
    )


def _cho_factor_one(x, *, lower):
    """``jax.scipy.linalg.cho_factor``'s factor (its flag comes back beside it)."""
    return jsl.cho_factor(x, lower=lower)[0]


CHO_FACTOR = route.Op(
    "distla.linalg.cho_factor",
    check=route.square,
    one_device=_cho_factor_one,
    is_stack=route.beyond(2),
    stacked=route.members(_cho_factor_one, (2,), 2),
    distributed=lambda plan, a, *, lower: chol_2d(
        a, call=plan, upper=not lower, symmetrize=False, read_upper=not lower
    ),
    result=lambda c, *, lower: (c, lower),
    keep_replicated=True,
)


@route.public
def cho_factor(
    a: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
) -> tuple[jax.Array, bool]:
    """Cholesky factor for [`cho_solve`][distla.linalg.cho_solve], as
    ``jax.scipy.linalg.cho_factor``.

    Args:
      a: ``[n, n]`` Hermitian positive definite matrix on a mesh (or a stack
        sharded along its batch). Only the triangle named by ``lower`` is read.
      lower: factor as ``a = L Lᴴ`` (``True``) or ``a = Uᴴ U`` (``False``,
        the default, reading the upper triangle).
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      block_size: the distributed factorisation's block (panel width), as
        [`cholesky`][distla.linalg.cholesky]'s; ``None`` picks one for the mesh.

    Returns:
      ``(c, lower)``: ``c`` is ``L`` or ``U`` with zeros in the other triangle,
      in the mesh's 2D block layout (a stack: sharded along its batch; a
      replicated ``a``: replicated, as jax's). Not positive definite gives NaN,
      as jax.

    See also: ``jax.scipy.linalg.cho_factor``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + 1.0, mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> c_and_lower = distla.linalg.cho_factor(a)
      >>> x = distla.linalg.cho_solve(c_and_lower, b)
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    del overwrite_a, check_finite
    return route.call(CHO_FACTOR, a, block_size=block_size, lower=lower)


def cho_solve_2d(c, b, *, lower, call: Plan):
    first, second = (0, 2) if lower else (2, 0)  # L y = b, L^H x = y; or U^H y = b, U x = y
    if many_rhs(call, b):
        # both sweeps in one program, b on c's grid throughout: c, b, x and the panels
        # (3.7 shares at n = 4096; 4.7 as the two programs below, whose once(c, y) XLA
        # made as a copy of c, held through the second sweep)
        return sweeps_2d(c, b, sweeps=((first, lower), (second, lower)), call=call)
    tri = dict(lower=lower, unit_diagonal=False, call=call)
    y = solve_2d(c, b, trans=first, **tri)
    # the second sweep reads c once y exists: XLA otherwise relays c out for both
    # sweeps at the start and holds the two block-cyclic copies at once (4.3 shares,
    # 3.3 so)
    return solve_2d(once(c, y), y, trans=second, **tri)


def _cho_solve_one(c, b, *, lower):
    """``jax.scipy.linalg.cho_solve`` with the flag as a keyword (the one-device plan's)."""
    return jsl.cho_solve((c, lower), b)


def _check_solve(what, c, b, **options):
    """A square factor and a matching ``b`` (jax.scipy's rule)."""
    del options
    square(c, what)
    rhs_core(c, b, what)


def _cho_solve_stacks(plan: Plan, c, b, *, lower):
    core = rhs_core(c, b)
    fn = functools.partial(_cho_solve_one, lower=lower)
    return stack(fn, (c, b), (2, core), core, mesh=plan.mesh)


# The plain solve of distla.linalg.cho_solve (its mixed-precision branch aside): two
# distributed triangular solves, whose rules are the derivatives.
CHO_SOLVE = route.Op(
    "distla.linalg.cho_solve",
    operands=("c", "b"),
    check=_check_solve,
    one_device=_cho_solve_one,
    is_stack=route.beyond(2, 2),
    stacked=_cho_solve_stacks,
    family="cho_solve",
    layouts=functools.partial(solve_layouts, like_b=True),
    distributed=lambda plan, c, b, *, lower: cho_solve_2d(c, b, lower=lower, call=plan),
    keep_replicated=True,
)


# ------------------------------------------------------------- mixed precision
# A Cholesky factor as refinement's factorisation (distla.linalg._refine): the solves on
# the call's plan, jax's on one device (plan None); the factor is the caller's.


def _refine_solve(plan: Plan | None, factors, r, trans, *, lower):
    del trans  # (a Hermitian system)
    (c,) = factors
    ref = functools.partial(_cho_solve_one, lower=lower)
    if plan is None:
        return empty_or_one_device(ref, c, r)
    if c.ndim > 2:
        core = rhs_core(c, r)
        return stack(ref, (c, r), (2, core), core, mesh=plan.mesh)
    plan = dataclasses.replace(plan, dtype=np.dtype(c.dtype))
    return cho_solve_2d(c, r, lower=lower, call=plan)


@functools.cache
def _factorisation(lower: bool) -> Factorisation:
    return Factorisation(factor=None, solve=functools.partial(_refine_solve, lower=lower))


def _system_dtype(what, c, b, a, **options):
    """The system's dtype: ``a``'s with ``b`` promoted against the factor first."""
    del options
    return result_dtype(what, a, result_dtype(what, c, b))


def _check_refined(what, c, b, a, **options):
    _check_solve(what, c, b)
    check_system(what, c, a, b)


def _cast_refined(dtype, c, b, a, **options):
    del options
    return c, b.astype(dtype), a.astype(dtype)


def _refined(plan: Plan | None, c, b, a, *, lower):
    fn = _factorisation(lower)
    return refine(a, b, plan=plan, factorisation=fn, factor_dtype=c.dtype, factors=(c,)).x


# cho_solve with a: a lower-precision factor refined against the Hermitian a
CHO_SOLVE_MIXED = route.Op(
    "distla.linalg.cho_solve",
    operands=("c", "b", "a"),
    check=_check_refined,
    promote=_system_dtype,
    cast=_cast_refined,
    one_device=functools.partial(_refined, None),
    distributed=_refined,
)


@route.public
def cho_solve(
    c_and_lower: tuple[jax.typing.ArrayLike, bool],
    b: jax.typing.ArrayLike,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b`` from [`cho_factor`][distla.linalg.cho_factor], as
    ``jax.scipy.linalg.cho_solve``.

    Two distributed triangular solves with the factor (``Lᴴ x = L⁻¹ b`` or
    ``U x = U⁻ᴴ b``); with more than 128 right-hand sides both in one program, ``b``
    solved where it lies on the factor's grid.

    Args:
      c_and_lower: ``(c, lower)`` from [`cho_factor`][distla.linalg.cho_factor].
      b: ``[n]`` or ``[n, k]`` right-hand side(s) on the same mesh, any
        layout (with ``c``'s batch dimensions in front for a stack).
      overwrite_b: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      a: mixed precision (a distla extension): the Hermitian matrix that was
        factored, in the system's precision, when ``c`` is its factor in the
        lower precision (float32 for float64, complex64 for complex128). The
        solve is then refined against ``a`` to ``a``'s precision (as
        [`lu_solve`][distla.linalg.lu_solve] with ``a``; NaN where refinement does not converge).
        With a factor of any other dtype ``a`` is ignored; without ``a`` the
        semantics are jax's.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        factor, as [`solve`][distla.linalg.solve]'s; ``"auto"`` takes one device only when
        called eagerly (as a compiled program the plan's collectives cost
        more than the two triangular solves).

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the mesh's 2D block layout,
      ``[n]`` split over all devices (the largest even layout that fits).
      Differentiable in ``c`` and ``b`` to any order.

    Raises:
      ValueError: shapes that do not match.

    See also: ``jax.scipy.linalg.cho_solve``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + 1.0, mesh)
      >>> b = distla.shard(jnp.ones((256, 8)), mesh)
      >>> x = distla.linalg.cho_solve(distla.linalg.cho_factor(a, lower=True), b)
      >>> float(np.abs(np.asarray(a) @ np.asarray(x) - np.asarray(b)).max()) < 1e-4
      True
    """
    del overwrite_b, check_finite
    c, lower = c_and_lower
    what = CHO_SOLVE.name
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        c, b, a = as_array(c, "c", what), as_array(b, "b", what), as_array(a, "a", what)
        if lower_precision(_system_dtype(what, c, b, a)) == c.dtype:
            return route.call(CHO_SOLVE_MIXED, c, b, a, lower=bool(lower))
    return route.call(CHO_SOLVE, c, b, plan=plan, lower=bool(lower))


def solve_pos(a: jax.Array, b: jax.Array, *, lower: bool, call: Plan) -> jax.Array:
    """``a x = b`` for Hermitian positive definite ``a``, through Cholesky.

    What ``jax.scipy.linalg.solve(a, b, assume_a="pos", lower=lower)`` does,
    distributed: factor ``a`` (reading its ``lower`` or upper triangle) as
    [`cho_factor`][distla.linalg.cho_factor] does and solve as
    [`cho_solve`][distla.linalg.cho_solve] does; as a
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
