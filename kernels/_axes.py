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
    one that makes ``x``: XLA's CPU scheduler otherwise runs independent operations
    in any order, for example every chunk's GEMM of a step before the first of
    them is added into the result, and holds every product at once.
    ``lax.optimization_barrier`` does not order them on XLA:CPU. ``isnan`` of one
    entry of ``x`` is 0 or 1, and its minimum with 0 is 0.
    """
    first = lax.index_in_dim(x.reshape(-1), 0, keepdims=False)
    return index + jax.numpy.minimum(jax.numpy.isnan(first).astype("int32"), 0)


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
