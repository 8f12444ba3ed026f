"""Small helpers for kernels that run on 1- or 2-axis grids."""

from __future__ import annotations

import functools

import jax
from jax import lax


def round_up(n: int, multiple: int) -> int:
    """``n`` rounded up to a multiple of ``multiple`` (padded sizes on a grid)."""
    return -(-n // multiple) * multiple


def axis_size(name: str | None) -> int:
    """Size of mesh axis ``name`` inside ``shard_map``; 1 for ``None``."""
    return 1 if name is None else lax.axis_size(name)


def axis_index(name: str | None) -> jax.Array | int:
    """This device's index along mesh axis ``name``; 0 for ``None``."""
    return 0 if name is None else lax.axis_index(name)


def all_gather(x: jax.Array, name: str | None, *, axis: int, tiled: bool) -> jax.Array:
    """``lax.all_gather`` that is the identity (with the new axis) over ``None``."""
    if name is None:
        return x if tiled else jax.numpy.expand_dims(x, axis)
    return lax.all_gather(x, name, axis=axis, tiled=tiled)


def set_block(x: jax.Array, start: tuple[int, ...], value: jax.Array) -> jax.Array:
    """``x`` with ``value`` written at the static offset ``start`` (leading axes).

    Says what ``x.at[r0:, c0:].set(value)`` says without its scatter: a static
    slice from 0 in every indexed axis makes the scatter's index an ``int32[0]``
    constant, which ``shard_map`` hoists into a zero-size operand (jax 0.11.2's
    Shardy partitioner crashes on one). ``dynamic_update_slice`` with static
    starts carries no such constant.
    """
    start = tuple(start) + (0,) * (x.ndim - len(start))
    return lax.dynamic_update_slice(x, value.astype(x.dtype), start)


def add_block(x: jax.Array, start: tuple[int, ...], value: jax.Array) -> jax.Array:
    """``x`` with ``value`` added at the static offset ``start``; see ``set_block``."""
    start = tuple(start) + (0,) * (x.ndim - len(start))
    stop = tuple(s + d for s, d in zip(start, value.shape))
    return lax.dynamic_update_slice(x, lax.slice(x, start, stop) + value.astype(x.dtype), start)


def after(index: int, x: jax.Array) -> jax.Array:
    """The static ``index`` as a value that XLA can compute only once ``x`` exists.

    An operation that takes it (the start of a ``dynamic_slice``) runs after the
    one that makes ``x``: XLA's CPU scheduler (concurrency-optimised) otherwise runs
    independent operations in any order, for example every chunk's GEMM of an
    unrolled update before the first of them is added into the matrix, and holds
    every product at once. ``lax.optimization_barrier`` does not order them on
    XLA:CPU. ``isnan`` of one entry of ``x`` is 0 or 1, and its minimum with 0 is 0.
    Reading ``x`` is not linear: a kernel that jax may transpose
    (``jax.linear_transpose``, as ``lax.custom_linear_solve`` does with a product)
    orders its chunks with a loop instead (``summa.py``).
    It has jax's default integer type (``int64`` with x64), as a Python index
    beside it in a ``dynamic_slice`` start has: the starts must share one type.
    """
    first = lax.index_in_dim(x.reshape(-1), 0, keepdims=False)
    return index + jax.numpy.minimum(jax.numpy.isnan(first).astype(int), 0)


def zero_after(x: jax.Array, dtype) -> jax.Array:
    """A zero of ``dtype`` that XLA can make only once ``x`` exists (see :func:`after`):
    ``min(isnan(x₀), 0)`` of ``x``'s first entry. Added to a value, it makes that value's
    consumers wait for ``x`` (a mask or a sign that XLA would otherwise hoist to the
    program's start and hold throughout)."""
    first = x[(0,) * x.ndim]
    return jax.numpy.minimum(jax.numpy.isnan(first), False).astype(dtype)


def zeros_after(shape: tuple[int, ...], dtype, x: jax.Array) -> jax.Array:
    """``jnp.zeros(shape, dtype)`` made only once ``x`` exists (see :func:`after`).

    A plain ``jnp.zeros`` depends on nothing, and XLA's CPU scheduler makes it at
    the start of the program: a workspace of a later step (a segment's panels)
    would then be held from the first step on.
    """
    zero = lax.convert_element_type(after(0, x), dtype)
    return lax.broadcast(zero, tuple(shape))


#: A GEMM whose product is added into a matrix in place is cut into this many row
#: chunks (:func:`add_product`), so that a device holds a quarter of the product,
#: not all of it, beside the matrix.
ROW_CHUNKS = 4


def add_product(
    x: jax.Array,
    start: tuple[int, int],
    lhs: jax.Array,
    rhs: jax.Array,
    *,
    precision: lax.PrecisionLike,
    subtract: bool = False,
    chunks: int = ROW_CHUNKS,
) -> jax.Array:
    """``x`` with ``lhs @ rhs`` added (or subtracted) at the static offset ``start``.

    The product goes in ``chunks`` row chunks, each GEMM written into ``x`` in
    place before the next one runs (``after``): the whole product would be one
    more matrix of its size on the device, as large as ``x``'s block in a
    factorisation's first trailing update. Each chunk is added as ``add_block``
    adds the whole product, so the sums are the same.
    """
    rows = lhs.shape[0]
    chunks = max(1, min(chunks, rows))
    edges = [rows * c // chunks for c in range(chunks + 1)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        part = lhs if chunks == 1 else lax.dynamic_slice_in_dim(lhs, after(lo, x), hi - lo)
        prod = jax.numpy.dot(part, rhs, precision=precision)
        x = add_block(x, (start[0] + lo, start[1]), -prod if subtract else prod)
    return x


def solve_left(t: jax.Array, b: jax.Array, *, lower: bool, unit_diagonal: bool = False):
    """``t⁻¹ b`` for a triangular ``t``, as ``Xᵀ = bᵀ t⁻ᵀ`` (a right-side solve on the transposes).

    LAPACK's trsm reads and writes column-major: handed ``t`` and ``b``
    themselves, XLA lays out the whole matrices they are sliced from (a
    factorisation's matrix, the right-hand sides a solve carries) column-major,
    a copy of each beside it. Their transposes are their own row-major bytes.
    """
    xt = lax.linalg.triangular_solve(
        t.T, b.T, left_side=False, lower=not lower, unit_diagonal=unit_diagonal
    )
    return xt.T


def highest_precision(kernel):
    """``kernel`` traced with every ``@`` / ``jnp.matmul`` at ``Precision.HIGHEST``.

    jax's default matmul precision follows ``jax_default_matmul_precision``
    (on GPUs, TF32 for float32 by default): a two-sided reduction or an
    inverse iteration at that precision loses about three digits.
    """

    @functools.wraps(kernel)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return kernel(*args, **kwargs)

    return traced


def fori(lower: int, upper: int, body, init):
    """``lax.fori_loop`` over static bounds that is no loop at all when empty.

    A loop of zero steps is not free here: differentiated or linearised, its
    residuals are stacked over zero iterations (``float32[0, ...]``), and
    ``shard_map`` passes them on as zero-size operands.
    """
    if upper <= lower:
        return init
    return lax.fori_loop(lower, upper, body, init)
