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

from distla.kernels.cholesky import cholesky_block_cyclic
from distla.kernels.cyclic import from_block_cyclic, relayout_fraction, to_block_cyclic
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


@functools.partial(
    jax.jit, static_argnames=("dtype", "block_size", "symmetrize", "read_upper", "upper")
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


def factor(a, *, dtype, upper=False, symmetrize=True, read_upper=False, block_size=None):
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
    dtype: jax.typing.DTypeLike,
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
    nb, w, n_pad = plan(Grid(mesh, "r", "c"), n, block_size)
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


# ------------------------------------------------------------------ public functions
# One matrix on a mesh runs the distributed programs above; a stack sharded along
# its batch runs jax's one-device function on each device's members (no
# collective); an unsharded operand falls back to jax. Derivatives reuse the
# factor: solves are lax.custom_linear_solve (their transpose is the solve with
# the transposed triangle), and cholesky's JVP is jax's rule written with the
# distributed triangular solves and matmul.


def _mesh_of(*xs, names):
    from ._blas import single_thread_lapack_for_cpu_devices
    from ._mesh import operand_mesh

    mesh = operand_mesh(*xs, names=names)
    if mesh is not None:
        single_thread_lapack_for_cpu_devices()
    return mesh


def _square(a, what: str) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{what}: a must have shape (..., n, n); got a of shape {a.shape}")


def _explicit_sharding(x):
    from ._mesh import is_explicit

    sharding = jax.typeof(x).sharding
    mesh = getattr(sharding, "mesh", None)
    if mesh is not None and mesh.size > 1 and is_explicit(mesh):
        return sharding
    return None


def _like(x, ref):
    """``x`` with ``ref``'s sharding type on Explicit meshes (lax.custom_linear_solve needs it)."""
    sharding = _explicit_sharding(ref)
    return x if sharding is None else jax.sharding.reshard(x, sharding)


def _one_device(x):
    from ._mesh import drop_trivial_sharding

    return drop_trivial_sharding(x)


def _stack(fn, xs, cores, out_core):
    """``fn`` (a jax function of stacks) on operands sharded along their batch: no collective.

    The stacked operands are put in the batch layout of distla's batched solves
    (``distla._batched.kernel_layout``: every mesh axis on a batch dimension,
    moved one axis at a time), the largest even one that fits; XLA then runs
    ``fn`` on each device's members.
    """
    from . import _batched

    names = tuple(f"x{i}" for i in range(len(xs)))
    mesh = _mesh_of(*xs, names=names)
    batches = [x.shape[: x.ndim - c] for x, c in zip(xs, cores)]
    full = tuple(jnp.broadcast_shapes(*batches))
    source = None
    for x, bt in zip(xs, batches):
        if bt == full:
            source = _batched._source_layout(x, mesh)
            source = None if source is None else source[: len(full)]
            break
    layout, _ = _batched.kernel_layout(full, source, mesh)

    def spec(shape, core):
        return fitting_spec(shape, mesh, _batched._spec(layout + ((),) * core))

    out = jax.eval_shape(fn, *(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs))
    out_specs = jax.tree.map(lambda o: spec(o.shape, out_core), out)

    in_specs = tuple(
        spec(x.shape, c) if bt == full else P() for x, bt, c in zip(xs, batches, cores)
    )
    local = all(  # every device holds whole members: run fn on them in shard_map
        all(e is None for e in tuple(s)[len(full) :])
        for s in (*in_specs, *jax.tree.leaves(out_specs, is_leaf=lambda s: isinstance(s, P)))
    )

    sources = [_batched._source_layout(x, mesh) for x in xs]  # read outside: see _batched

    def body(*ys):
        moved = []
        for y, bt, s, src in zip(ys, batches, in_specs, sources):
            if bt == full:
                dst = tuple(_batched._axes(e) for e in tuple(s) + (None,) * y.ndim)[: y.ndim]
                y = _batched._relayout(y, src, dst, mesh)
            moved.append(y)
        if local:
            return shard_map(fn, in_specs=in_specs, out_specs=out_specs)(*moved)
        return fn(*moved)  # members split over devices: XLA partitions fn

    return jax.jit(lambda *ys: run_on_mesh(body, mesh, out_specs, *ys))(*xs)


def _vmappable(one, stacked):
    """``one`` (a one-matrix call) whose ``jax.vmap`` runs ``stacked`` on the stack instead."""
    f = jax.custom_batching.custom_vmap(one)

    def rule(axis_size, in_batched, *args):
        args = [
            x if mapped else jnp.broadcast_to(x, (axis_size, *x.shape))
            for x, mapped in zip(args, in_batched)
        ]
        with jax.numpy_rank_promotion("allow"):
            out = stacked(*args)
        return out, jax.tree.map(lambda _: True, out)

    f.def_vmap(rule)
    return f


@jax.jit
def _ct(x):
    """``xᴴ`` of a matrix on a mesh, in the mesh's 2D block layout."""
    grid = _grid(x, names=("x",))
    out = fitting_spec(x.shape[::-1], grid.mesh, grid.block_spec)
    return run_on_mesh(lambda x: jnp.conj(x.T), grid.mesh, out, x)


def _phi(x):
    """Lower triangle of ``x`` with its diagonal halved (jax's Cholesky JVP)."""
    half = jnp.where(_tril(x, -1), jnp.ones((), x.dtype), jnp.full((), 0.5, x.dtype))
    return jnp.where(_tril(x), x * half, jnp.zeros((), x.dtype))


def _tri_2d(a, b, *, trans, lower, unit_diagonal, dtype):
    """``op(T)⁻¹ b`` for one matrix, differentiable in ``a`` and ``b`` (custom_linear_solve)."""
    flags = dict(lower=lower, unit_diagonal=unit_diagonal)

    def kernel(t):
        def solve(a, rhs):
            return triangular_solve(a, rhs, dtype=dtype, trans=t, **flags)

        def stacked(a, rhs):
            if rhs.ndim == a.ndim - 1:
                rhs = rhs[..., None]
                return _stack(
                    functools.partial(jax.scipy.linalg.solve_triangular, trans=t, **flags),
                    (a, rhs), (2, 2), 2,
                )[..., 0]
            return _stack(
                functools.partial(jax.scipy.linalg.solve_triangular, trans=t, **flags),
                (a, rhs), (2, 2), 2,
            )

        return _vmappable(solve, stacked)

    a_fixed = lax.stop_gradient(a)

    def matvec(x):
        return _like(triangle_matvec(a, x, trans=trans, **flags), x)

    def solve(_, rhs):
        return _like(kernel(trans)(a_fixed, rhs), rhs)

    def transpose_solve(_, rhs):
        if trans == 2:  # the linear transpose of x -> T^-H x is x -> conj(T^-1 conj(x))
            x = jnp.conj(kernel(0)(a_fixed, jnp.conj(rhs)))
        else:
            x = kernel(1 - trans)(a_fixed, rhs)
        return _like(x, rhs)

    return lax.custom_linear_solve(matvec, b, solve, transpose_solve)


def _chol_2d(a, *, dtype, upper, symmetrize, read_upper, block_size=None):
    """Cholesky of one matrix with jax's JVP rule, its solves and products distributed."""
    flags = dict(dtype=dtype, symmetrize=symmetrize, read_upper=read_upper, block_size=block_size)

    def stacked(a):
        def f(a):  # the same on each member, with jax's one-device Cholesky
            if read_upper:
                a = jnp.conj(jnp.swapaxes(a, -1, -2))
            l = jnp.linalg.cholesky(a, symmetrize_input=symmetrize)
            return jnp.conj(jnp.swapaxes(l, -1, -2)) if upper else l

        return _stack(f, (a,), (2,), 2)

    primal = jax.custom_jvp(
        _vmappable(lambda a: factor(a, upper=upper, **flags), stacked)
    )

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        out = primal(a)
        low = _ct(out) if upper else out
        da = da.astype(dtype)
        if read_upper:
            da = _ct(da)
        if symmetrize:
            da = (da + _ct(da)) / 2
        tri = dict(lower=True, unit_diagonal=False, dtype=dtype)
        y = _tri_2d(low, da, trans=0, **tri)  # L^-1 dA
        m = _ct(_tri_2d(low, _ct(y), trans=0, **tri))  # L^-1 dA L^-H
        from .matmul import matmul

        dl = matmul(low, _phi(m))
        return out, (_ct(dl) if upper else dl)

    primal.defjvp(rule)
    return primal(a)


def _b_core(a, b) -> int:
    """1 when ``b`` is a vector (or, as jax still reads it, a stack of vectors), else 2."""
    return 1 if b.ndim == 1 or (a.ndim == b.ndim + 1 and b.shape[-1] == a.shape[-1]) else 2


def _checked_solve_shapes(a, b, what):
    """jax.scipy's shape rule: ``b`` is ``(n,)`` or ``(..., n, k)``."""
    n = a.shape[-1]
    if b.ndim == 0:
        rows = -1
    else:
        rows = b.shape[-1] if _b_core(a, b) == 1 else b.shape[-2]
    if rows != n:
        raise ValueError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n}; got a of shape "
            f"{a.shape}, b of shape {b.shape}"
        )


def cholesky(
    a: jax.typing.ArrayLike,
    *,
    upper: bool = False,
    symmetrize_input: bool = True,
    block_size: int | None = None,
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
    from ._checks import as_array, is_empty, result_dtype

    what = "distla.linalg.cholesky"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        x = _one_device(a).astype(dtype) if mesh is None else jnp.zeros(a.shape, dtype)
        return jnp.linalg.cholesky(x, upper=upper, symmetrize_input=symmetrize_input)
    a = a.astype(dtype)
    if a.ndim > 2:
        return _stack(
            functools.partial(
                jnp.linalg.cholesky, upper=upper, symmetrize_input=symmetrize_input
            ),
            (a,), (2,), 2,
        )
    return _chol_2d(
        a, dtype=dtype, upper=upper, symmetrize=symmetrize_input, read_upper=False,
        block_size=block_size,
    )


def cho_factor(
    a: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
) -> tuple[jax.Array, bool]:
    """Cholesky factor for :func:`cho_solve`, as ``jax.scipy.linalg.cho_factor``.

    Args:
      a: ``[n, n]`` Hermitian positive definite matrix on a mesh (or a stack
        sharded along its batch). Only the triangle named by ``lower`` is read.
      lower: factor as ``a = L Lᴴ`` (``True``) or ``a = Uᴴ U`` (``False``,
        the default, reading the upper triangle).
      overwrite_a: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.

    Returns:
      ``(c, lower)``: ``c`` is ``L`` or ``U`` with zeros in the other triangle,
      in the mesh's 2D block layout (a stack: sharded along its batch). Not
      positive definite gives NaN, as jax.

    See also: ``jax.scipy.linalg.cho_factor``.
    """
    from ._checks import as_array, is_empty, result_dtype

    del overwrite_a, check_finite
    what = "distla.linalg.cho_factor"
    a = as_array(a, "a", what)
    _square(a, what)
    dtype = result_dtype(what, a)
    mesh = _mesh_of(a, names=("a",))
    if mesh is None or is_empty(a):
        x = _one_device(a).astype(dtype) if mesh is None else jnp.zeros(a.shape, dtype)
        return jax.scipy.linalg.cho_factor(x, lower=lower)
    a = a.astype(dtype)
    if a.ndim > 2:
        c = _stack(
            lambda x: jax.scipy.linalg.cho_factor(x, lower=lower)[0], (a,), (2,), 2
        )
        return c, lower
    c = _chol_2d(a, dtype=dtype, upper=not lower, symmetrize=False, read_upper=not lower)
    return c, lower


def _cho_solve_2d(c, b, *, lower, dtype):
    tri = dict(lower=lower, unit_diagonal=False, dtype=dtype)
    if lower:  # L y = b, then L^H x = y
        return _tri_2d(c, _tri_2d(c, b, trans=0, **tri), trans=2, **tri)
    return _tri_2d(c, _tri_2d(c, b, trans=2, **tri), trans=0, **tri)  # U^H y = b, U x = y


def _solve_prologue(what, a, b):
    from ._checks import as_array, result_dtype

    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    _square(a, what)
    _checked_solve_shapes(a, b, what)
    return a, b, result_dtype(what, a, b)


def cho_solve(
    c_and_lower: tuple[jax.typing.ArrayLike, bool],
    b: jax.typing.ArrayLike,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Solve ``a x = b`` from :func:`cho_factor`, as ``jax.scipy.linalg.cho_solve``.

    Two distributed triangular solves with the factor (``Lᴴ x = L⁻¹ b`` or
    ``U x = U⁻ᴴ b``).

    Args:
      c_and_lower: ``(c, lower)`` from :func:`cho_factor`.
      b: ``[n]`` or ``[n, k]`` right-hand side(s) on the same mesh, any
        layout (with ``c``'s batch dimensions in front for a stack).
      overwrite_b: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      a: mixed precision (a distla extension): the Hermitian matrix that was
        factored, in the system's precision, when ``c`` is its factor in the
        lower precision (float32 for float64, complex64 for complex128). The
        solve is then refined against ``a`` to ``a``'s precision (as
        :func:`lu_solve` with ``a``; NaN where refinement does not converge).
        With a factor of any other dtype ``a`` is ignored; without ``a`` the
        semantics are jax's.

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the mesh's 2D block layout,
      ``[n]`` split over all devices (the largest even layout that fits).
      Differentiable in ``c`` and ``b`` to any order.

    Raises:
      ValueError: shapes that do not match.

    See also: ``jax.scipy.linalg.cho_solve``.
    """
    from ._checks import is_empty

    del overwrite_b, check_finite
    what = "distla.linalg.cho_solve"
    c, lower = c_and_lower
    c, b, dtype = _solve_prologue(what, c, b)
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        from . import _refine

        x = _refine.cho_solve_mixed(c_and_lower[0], lower, b, a=a)  # the factor's own dtype
        if x is not None:
            return x
    mesh = _mesh_of(c, b, names=("c", "b"))
    if mesh is None or is_empty(c, b):
        c, b = (_one_device(x).astype(dtype) for x in (c, b))
        if mesh is not None:
            c, b = jnp.zeros(c.shape, dtype), jnp.zeros(b.shape, dtype)
        return jax.scipy.linalg.cho_solve((c, lower), b)
    c, b = c.astype(dtype), b.astype(dtype)
    if c.ndim > 2 or b.ndim > 2:
        return _stack(
            lambda c, b: jax.scipy.linalg.cho_solve((c, lower), b),
            (c, b), (2, _b_core(c, b)), _b_core(c, b),
        )
    return _cho_solve_2d(c, b, lower=bool(lower), dtype=dtype)


def solve_triangular(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    trans: int | str = 0,
    lower: bool = False,
    unit_diagonal: bool = False,
    overwrite_b: bool = False,
    debug: object = None,
    check_finite: bool = True,
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

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the mesh's 2D block layout,
      ``[n]`` split over all devices. A zero on the diagonal gives inf/nan,
      as LAPACK. Differentiable in ``a`` and ``b`` to any order.

    Raises:
      ValueError: shapes that do not match, or a ``trans`` jax does not take.

    See also: ``jax.scipy.linalg.solve_triangular``.
    """
    from ._checks import is_empty

    del overwrite_b, debug, check_finite
    what = "distla.linalg.solve_triangular"
    t = _trans_code(trans, what)
    a, b, dtype = _solve_prologue(what, a, b)
    flags = dict(trans=t, lower=bool(lower), unit_diagonal=bool(unit_diagonal))
    mesh = _mesh_of(a, b, names=("a", "b"))
    if mesh is None or is_empty(a, b):
        a, b = (_one_device(x).astype(dtype) for x in (a, b))
        if mesh is not None:
            a, b = jnp.zeros(a.shape, dtype), jnp.zeros(b.shape, dtype)
        return jax.scipy.linalg.solve_triangular(a, b, **flags)
    a, b = a.astype(dtype), b.astype(dtype)
    if a.ndim > 2 or b.ndim > 2:
        b_core = _b_core(a, b)
        return _stack(
            functools.partial(jax.scipy.linalg.solve_triangular, **flags), (a, b), (2, b_core),
            b_core,
        )
    return _tri_2d(a, b, dtype=dtype, **flags)


def solve_pos(a: jax.typing.ArrayLike, b: jax.typing.ArrayLike, *, lower: bool = False):
    """``a x = b`` for Hermitian positive definite ``a``, through Cholesky.

    What ``jax.scipy.linalg.solve(a, b, assume_a="pos", lower=lower)`` does,
    distributed: factor ``a`` (reading its ``lower`` or upper triangle) with
    :func:`cho_factor` and solve with :func:`cho_solve`; as a
    ``lax.custom_linear_solve`` whose derivatives reuse the factor
    (``distla.linalg.solve(..., assume_a="pos")`` calls it).

    Args:
      a: ``[n, n]`` on a mesh, or a stack ``[..., n, n]`` sharded along its batch.
      b: ``[n]`` or ``[n, k]`` (stacks: ``[..., n, k]``) on the same mesh.
      lower: which triangle of ``a`` is factored.

    Returns:
      ``x`` with ``b``'s shape, in the mesh's 2D block layout (``[n]``: split
      over all devices). Not positive definite gives NaN.
    """
    from ._checks import is_empty
    from .matmul import matmul

    what = "distla.linalg.solve"
    a, b, dtype = _solve_prologue(what, a, b)
    mesh = _mesh_of(a, b, names=("a", "b"))
    if mesh is None or is_empty(a, b):
        a, b = (_one_device(x).astype(dtype) for x in (a, b))
        if mesh is not None:
            a, b = jnp.zeros(a.shape, dtype), jnp.zeros(b.shape, dtype)
        return jax.scipy.linalg.solve(a, b, assume_a="pos", lower=lower)
    a, b = a.astype(dtype), b.astype(dtype)
    if a.ndim > 2 or b.ndim > 2:
        b_core = 1 if b.ndim == 1 else 2
        return _stack(
            lambda a, b: jax.scipy.linalg.solve(a, b, assume_a="pos", lower=lower),
            (a, b), (2, b_core), b_core,
        )
    c, _ = cho_factor(lax.stop_gradient(a), lower=lower)

    def matvec(x):
        y = matmul(a, x[:, None])[:, 0] if x.ndim == 1 else matmul(a, x)
        return _like(y, x)

    def solve(_, rhs):
        return _like(_cho_solve_2d(c, rhs, lower=lower, dtype=dtype), rhs)

    return lax.custom_linear_solve(matvec, b, solve, symmetric=True)
