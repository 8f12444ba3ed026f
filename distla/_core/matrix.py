"""Sharded-matrix primitives that every algorithm family uses, defined once.

Sizes on a process grid (``round_up``, ``pad_to``, ``pad_identity``), layouts
(``put`` on the mesh of the context, ``like`` another array's sharding type,
``natural``), the move of trailing columns a chunk at a time
(``columns_moved``), a move between the block layout and columns a chunk of rows at a
time (``rows_relaid``), the conjugate transpose on a mesh (``ct`` inside a body,
``ct_on`` from outside), the Hermitian part eigh and Cholesky read
(``hermitian_from``), triangle masks and the identity built from iotas
(never a replicated constant), the precision of the factorisations' products
(``HIGHEST``) and ``on_mesh``, the cached ``jax.jit`` of ``run_on_mesh``.

"Inside a body" means while ``run_on_mesh`` traces it: the mesh is then the
one in context (``jax.sharding.get_abstract_mesh()``), with ``Auto`` axes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import AbstractMesh, NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels._axes import round_up as round_up  # the kernels pad with the same rule

from .mesh import (
    explicit_layout,
    fitting_spec,
    grid_of,
    is_explicit,
    named_shardings,
    run_on_mesh,
    shard_spec,
)

#: The precision of every product a factorisation's error bound rests on
#: (TPU and TF32 defaults would otherwise dominate the error).
HIGHEST = lax.Precision.HIGHEST


def pad_to(x: jax.Array, shape: Sequence[int]) -> jax.Array:
    """Crop or zero-pad ``x`` at the end of each axis to ``shape``."""
    if tuple(x.shape) == tuple(shape):
        return x
    x = x[tuple(slice(0, min(n, m)) for n, m in zip(x.shape, shape))]
    return jnp.pad(x, [(0, m - n) for n, m in zip(x.shape, shape)])


def pad_identity(a: jax.Array, n_pad: int) -> jax.Array:
    """``a`` (``m x n``) padded to ``n_pad x n_pad`` with ones on the padded diagonal.

    For a square ``a`` the padded LU (or Cholesky) contains ``a``'s. For a
    wide ``a`` the padded rows ``[0 | I]`` have zeros under every real pivot
    column (never chosen, never updated). For a tall one the padded columns
    below row ``m`` are zero: they come after the real ones, stay zero, and a
    zero column interchanges nothing (LAPACK picks its first row), so the
    later steps do not permute ``L``. Either way the leading ``min(m, n)``
    steps are ``a``'s own factorisation.
    """
    m, n = a.shape
    if m == n == n_pad:
        return a
    a = jnp.pad(a, ((0, n_pad - m), (0, n_pad - n)))
    r = lax.broadcasted_iota(jnp.int32, a.shape, 0)
    c = lax.broadcasted_iota(jnp.int32, a.shape, 1)
    return jnp.where((r == c) & (r >= m), jnp.ones((), a.dtype), a)


# ------------------------------------------------------------------------ layouts


def put(x: jax.Array, spec: P) -> jax.Array:
    """``x`` laid out as ``spec`` on the mesh of the context (Explicit: resharded)."""
    mesh = jax.sharding.get_abstract_mesh()
    if is_explicit(mesh):
        return jax.sharding.reshard(x, NamedSharding(mesh, spec))
    return lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


def explicit_sharding(x: jax.Array) -> NamedSharding | None:
    """``x``'s sharding if it lives on an Explicit mesh of more than one device, else ``None``."""
    sharding = jax.typeof(x).sharding
    mesh = getattr(sharding, "mesh", None)
    if mesh is not None and mesh.size > 1 and is_explicit(mesh):
        return sharding
    return None


def like(x: jax.Array, ref: jax.Array) -> jax.Array:
    """``x`` with ``ref``'s sharding type on Explicit meshes (elsewhere ``x``).

    ``lax.custom_linear_solve`` and a while loop's carry check that type.
    """
    sharding = explicit_sharding(ref)
    if sharding is None:
        return x
    # a concrete x already so: no reshard (eagerly each is a dispatch); under a
    # transformation always (vmap's batched value is not the type it shows)
    if not isinstance(x, jax.core.Tracer) and jax.typeof(x).sharding == sharding:
        return x
    return jax.sharding.reshard(x, sharding)


def natural(x: jax.Array) -> jax.Array:
    """``x`` in distla's layout for its shape (largest even layout) on Explicit meshes."""
    sharding = explicit_sharding(x)
    if sharding is None:
        return x
    spec = shard_spec(x.shape, sharding.mesh)
    return jax.sharding.reshard(x, NamedSharding(sharding.mesh, spec))


def block_spec(mesh: AbstractMesh) -> P:
    """The 2D block layout ``P(r, c)`` of a 1- or 2-axis mesh."""
    return grid_of(mesh, what="distla.linalg").block_spec


def once(y: jax.Array, x: jax.Array) -> jax.Array:
    """``y`` as a value that XLA can compute only once ``x`` exists: ``y + min(isnan(x₀), 0)``.

    XLA's CPU scheduler runs independent operations in any order (often all at once,
    or one that makes a workspace first thing): the operation that reads ``once(y, x)``
    runs after ``x`` is made, so two relayouts run one after the other, or a product's
    workspace is made only when it is needed. ``y`` itself, to the bit.
    """
    # one entry sliced out (a reshape of a sharded x to a vector would gather it); on an
    # Explicit mesh jax's rules refuse the slice of a split dimension: x's sum there
    first = jnp.sum(jnp.real(x)) if any(explicit_layout(x)) else jnp.real(x[(0,) * x.ndim])
    zero = jnp.minimum(jnp.isnan(first).astype(jnp.finfo(y.dtype).dtype), 0)
    return y + zero.astype(y.dtype)


def columns_moved(
    x: jax.Array, start: int, cols: int, spec: P, *, pieces: int = 8, after: jax.Array | None = None
) -> jax.Array:
    """``x[:, start:]`` cropped or zero-padded to ``cols`` columns and laid out as
    ``spec`` (2D), a few rows of every device's block at a time. Inside a body.

    XLA moves the cut of a sharded matrix by a halo exchange that holds about two
    more copies of the source (its shifted pieces and their concatenation) beside the
    result. Here a loop moves ``pieces`` chunks of the rows of every device's block
    (the same local rows on each), each written in place into the result: the source,
    the result and one chunk's exchange. ``x``'s rows must divide evenly over
    ``spec``'s row axes. With ``after``, the move starts once ``after`` exists
    (`once`: two moves one after the other, not side by side).
    """
    return _cut_moved(x, start, cols, spec, axis=1, pieces=pieces, after=after)


def rows_moved(
    x: jax.Array, start: int, rows: int, spec: P, *, pieces: int = 8, after: jax.Array | None = None
) -> jax.Array:
    """``x[start:, :]`` cropped or zero-padded to ``rows`` rows and laid out as ``spec``
    (2D), a few columns of every device's block at a time: `columns_moved` with rows
    and columns exchanged (a chunk is the same local columns on every device, its rows
    moved by XLA's halo exchange). ``x``'s columns must divide evenly over ``spec``'s
    column axes."""
    return _cut_moved(x, start, rows, spec, axis=0, pieces=pieces, after=after)


def _cut_moved(x, start, size, spec, *, axis, pieces, after):
    """`columns_moved` (``axis=1``) and `rows_moved` (``axis=0``): ``x`` from ``start``
    along ``axis``, to ``size``, a chunk of the other dimension's local part at a time."""
    mesh = jax.sharding.get_abstract_mesh()
    other = 1 - axis
    names = spec[other] if isinstance(spec[other], tuple) else (spec[other],)
    parts = math.prod(1 if name is None else mesh.shape[name] for name in names)
    local = x.shape[other] // parts
    chunks = math.gcd(local, pieces)
    height = local // chunks
    # the other dimension as (devices, local): a chunk is the same local rows (columns)
    # on every device; in this view x's cut dimension is `cut`, the chunks' `along`
    if other == 0:
        view_shape, view_spec = (parts, local, x.shape[1]), P(spec[0], None, spec[1])
        cut_at, along = 2, 1
    else:
        view_shape, view_spec = (x.shape[0], parts, local), P(spec[0], spec[1], None)
        cut_at, along = 0, 2
    view_spec = NamedSharding(mesh, view_spec)
    view = lax.with_sharding_constraint(x.reshape(view_shape), view_spec)
    kept = min(x.shape[axis], start + size) - start
    widths = [(0, 0)] * 3
    widths[cut_at] = (0, size - kept)

    def cut(chunk):
        if (start, kept) != (0, chunk.shape[cut_at]):
            chunk = lax.slice_in_dim(chunk, start, start + kept, axis=cut_at)
        return lax.with_sharding_constraint(jnp.pad(chunk, widths), view_spec)

    if chunks == 1:
        out = cut(view if after is None else once(view, after))
    else:
        # zeros made from a scalar that exists only with x (and after): XLA makes a
        # broadcast of a constant at the program's start and holds it until the loop
        zero = once(jnp.zeros((), x.dtype), x if after is None else after)
        out_shape = list(view_shape)
        out_shape[cut_at] = size
        out = lax.with_sharding_constraint(jnp.broadcast_to(zero, out_shape), view_spec)

        def step(i, out):
            chunk = lax.dynamic_slice_in_dim(view, i * height, height, axis=along)
            return lax.dynamic_update_slice_in_dim(out, cut(chunk), i * height, axis=along)

        out = lax.fori_loop(0, chunks, step, out)
    shape = (x.shape[0], size) if axis == 1 else (size, x.shape[1])
    return lax.with_sharding_constraint(out.reshape(shape), NamedSharding(mesh, spec))


def rows_relaid(x: jax.Array, source: P, target: P, *, pieces: int = 8) -> jax.Array:
    """``x`` (2D, laid out as ``source``) laid out as ``target``, a few rows of every
    device's block at a time. Inside a body.

    For a move between layouts of which one splits the rows and the other does not
    (the 2D block layout ``P(r, c)`` and columns ``P(None, (c, r))``, either way):
    XLA's all-to-all of the whole matrix holds the source's pieces and the
    exchanged pieces beside both. Here a loop moves ``pieces`` chunks (the same
    local rows of every row block), each written in place into the result: the
    source, the result and one chunk's exchange. The rows must divide evenly over
    the split side's row axes.
    """
    mesh = jax.sharding.get_abstract_mesh()
    split = source[0] if source[0] is not None else target[0]
    if split is None or (source[0] is not None and target[0] is not None):
        raise ValueError(f"rows_relaid: one of {source} and {target} must split the rows")
    names = split if isinstance(split, tuple) else (split,)
    parts = math.prod(mesh.shape[name] for name in names)
    rows, cols = x.shape
    local = rows // parts
    chunks = math.gcd(local, pieces)
    height = local // chunks
    into = NamedSharding(mesh, P(target[0], None, target[1]))
    # the rows as (row blocks, local): free in both layouts
    held = NamedSharding(mesh, P(source[0], None, source[1]))
    view = lax.with_sharding_constraint(x.reshape(parts, local, cols), held)
    if chunks == 1:
        out = lax.with_sharding_constraint(view, into)
    else:
        # zeros made from a scalar that exists only with x (see columns_moved)
        zero = once(jnp.zeros((), x.dtype), x)
        out = lax.with_sharding_constraint(jnp.broadcast_to(zero, (parts, local, cols)), into)

        def step(i, out):
            # the slice in the source's layout, then its exchange (else XLA exchanges
            # the whole view at every step and slices the result)
            chunk = lax.dynamic_slice_in_dim(view, i * height, height, axis=1)
            chunk = lax.with_sharding_constraint(lax.with_sharding_constraint(chunk, held), into)
            return lax.dynamic_update_slice_in_dim(out, chunk, i * height, axis=1)

        out = lax.fori_loop(0, chunks, step, out)
    return lax.with_sharding_constraint(out.reshape(rows, cols), NamedSharding(mesh, target))


# ------------------------------------------------------- conjugate transpose


def ct(x: jax.Array, spec: P) -> jax.Array:
    """``xᴴ`` put in ``spec`` inside a body (a distributed transpose: all-to-all, no gather)."""
    return put(jnp.conj(x.T), spec)


def ct_moved(x: jax.Array, spec: P, *, pieces: int = 8) -> jax.Array:
    """``xᴴ`` of the 2D ``x`` (laid out as ``spec``, ``P(r, c)``) laid out as ``spec``, a
    few columns of every device's block at a time. Inside a body.

    XLA's distributed transpose (`ct`) is one all-to-all of the whole matrix: it holds
    the source's pieces and the exchanged pieces beside the result (1.75 shares on 4x2).
    Here a loop moves ``pieces`` chunks (the same local columns of every one of
    ``lcm(r, c)`` column blocks, each a row chunk of the result), each transposed and
    written in place into the result: the source, the result and one chunk's exchange
    (as `rows_relaid` moves a relayout). Falls back to `ct` where the blocks do not divide.
    """
    mesh = jax.sharding.get_abstract_mesh()

    def count(name):
        names = name if isinstance(name, tuple) else (name,)
        return math.prod(1 if n is None else mesh.shape[n] for n in names)

    rows, cols = x.shape
    parts = math.lcm(count(spec[0]), count(spec[1]))
    local = cols // parts
    chunks = math.gcd(local, pieces) if cols % parts == 0 else 1
    if chunks == 1:
        return ct(x, spec)
    height = local // chunks
    # x's columns as (column blocks, local), free in spec; the result's rows the same
    held = NamedSharding(mesh, P(spec[0], spec[1], None))
    into = NamedSharding(mesh, P(spec[0], None, spec[1]))
    view = lax.with_sharding_constraint(x.reshape(rows, parts, local), held)
    # zeros made from a scalar that exists only with x (see columns_moved)
    zero = once(jnp.zeros((), x.dtype), x)
    out = lax.with_sharding_constraint(jnp.broadcast_to(zero, (parts, local, rows)), into)

    def step(i, out):
        # the slice in the source's layout, then its transpose's exchange
        chunk = lax.with_sharding_constraint(
            lax.dynamic_slice_in_dim(view, i * height, height, axis=2), held
        )
        chunk = lax.with_sharding_constraint(jnp.conj(jnp.transpose(chunk, (1, 2, 0))), into)
        return lax.dynamic_update_slice_in_dim(out, chunk, i * height, axis=1)

    out = lax.fori_loop(0, chunks, step, out)
    return lax.with_sharding_constraint(out.reshape(cols, rows), NamedSharding(mesh, spec))


def _conj_t(x: jax.Array) -> jax.Array:
    return jnp.conj(x.T)


@functools.partial(jax.jit, static_argnames=("mesh",))
def ct_on(x: jax.Array, *, mesh: AbstractMesh) -> jax.Array:
    """``xᴴ`` of a matrix on ``mesh``, in the largest even 2D block layout for its shape."""
    out = fitting_spec(x.shape[::-1], mesh, block_spec(mesh))
    return run_on_mesh(_conj_t, mesh, out, x)


# ------------------------------------------------------ masks and the identity


def tril_mask(x: jax.Array, k: int = 0) -> jax.Array:
    """``True`` on and below the ``k``-th diagonal of the matrix ``x`` (replicated iotas)."""
    r = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 2)
    c = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    return r + k >= c


def triu_mask(x: jax.Array, k: int = 0) -> jax.Array:
    """``True`` on and above the ``k``-th diagonal of the matrix ``x`` (replicated iotas)."""
    r = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 2)
    c = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    return r + k <= c


def diag_mask(x: jax.Array) -> jax.Array:
    """``True`` on the diagonal of the matrix ``x`` (replicated iotas)."""
    r = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 2)
    c = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    return r == c


def diagonal(x: jax.Array) -> jax.Array:
    """The diagonal of the square matrix ``x`` as a vector: a masked row reduction, so a
    sharded ``x`` is never gathered (``jnp.diagonal`` would index across shards)."""
    return jnp.sum(jnp.where(diag_mask(x), x, jnp.zeros((), x.dtype)), axis=1)


def tril(x: jax.Array, k: int = 0) -> jax.Array:
    """``jnp.tril(x, k)`` on any mesh (the mask from iotas, never a replicated constant)."""
    return jnp.where(tril_mask(x, k), x, jnp.zeros((), x.dtype))


def triu(x: jax.Array, k: int = 0) -> jax.Array:
    """``jnp.triu(x, k)`` on any mesh (the mask from iotas, never a replicated constant)."""
    return jnp.where(triu_mask(x, k), x, jnp.zeros((), x.dtype))


def hermitian_from(
    a: jax.Array, *, symmetrize: bool, lower: bool, transpose: Callable | None = None
) -> jax.Array:
    """The Hermitian matrix ``eigh`` reads: ``(a + aᴴ)/2``, or one triangle of ``a`` mirrored.

    ``transpose`` makes the conjugate transpose (jnp's, by default; `ct_moved` on a mesh
    moves it a chunk at a time)."""
    flip = _conj_t if transpose is None else transpose
    if symmetrize:  # halves first: a + aᴴ overflows for entries beyond half the largest
        return a / 2 + flip(a) / 2
    tri = tril(a, -1) if lower else triu(a, 1)
    return tri + flip(tri) + jnp.where(diag_mask(a), jnp.real(a), 0).astype(a.dtype)


def eye(n: int, m: int, dtype: Any, spec: P) -> jax.Array:
    """``jnp.eye(n, m)`` built in place from iotas inside a body, laid out as ``spec``."""
    r = lax.broadcasted_iota(jnp.int32, (n, m), 0)
    c = lax.broadcasted_iota(jnp.int32, (n, m), 1)
    return put((r == c).astype(dtype), spec)


# ---------------------------------------------------------------- compiled bodies


@functools.lru_cache(maxsize=512)
def on_mesh(
    fn: Callable[..., Any], mesh: AbstractMesh, out_specs: Any, static: tuple = ()
) -> Callable[..., Any]:
    """``jax.jit`` of ``fn(*args, **dict(static))`` run on ``mesh`` (``run_on_mesh``).

    Cached, so calls with the same body, mesh and layouts share one program.
    """
    kw = dict(static)

    def step(*args):
        return run_on_mesh(functools.partial(fn, **kw), mesh, out_specs, *args)

    # named after its body, so that compile logs and profiles say which step compiles
    step.__name__ = step.__qualname__ = getattr(fn, "__name__", step.__name__)
    # The result shardings are fixed here as well as inside: on an Explicit mesh they are
    # in the types, and naming them on an Auto mesh too makes the two programs one, so
    # that jax's persistent cache (when switched on) compiles a step once for both kinds.
    # The operands are kept even where the body reads only their shapes: they name the
    # devices that the mesh of those shardings stands for.
    return jax.jit(step, out_shardings=named_shardings(mesh, out_specs), keep_unused=True)
