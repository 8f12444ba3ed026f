"""Eager square factorisations on a few padded orders, so nearby sizes share a program (private).

jax compiles one program per operand shape, and a distributed factorisation
compiles for seconds (docs/benchmarks.md, "First call"). With shape buckets on
([`set_shape_buckets`][distla.linalg.set_shape_buckets], or ``DISTLA_SHAPE_BUCKETS`` in the
environment at
import), an eager call of ``lu_factor``, ``solve`` (the LU and the Cholesky
route) or ``cholesky`` on a square matrix of order ``n`` runs its kernel on the
order `bucket` ``(n)``, one of ``steps`` orders per doubling. The matrix
is padded with the identity (``pad_identity``: the padded factorisation is the
block diagonal of ``a``'s and the identity's, with the same pivots) and
right-hand sides with zero rows (whose solution rows are zero); the results
are cropped back. All orders of a bucket share the kernel's compiled program;
each new order compiles only the small padding and cropping programs.

Off by default: the padded order (up to ``n / steps`` more rows, so up to
``3 / steps`` more flops) and the two extra reshards cost every call up to
about 10% at n = 1500-2000 on 2x4 (docs/benchmarks.md, "Shape buckets"), for
a first call that compiles in a fraction of a second instead of seconds.

Traced calls (a caller's ``jax.jit``, ``vmap``, derivatives, ``distla.cost``)
run on the operands' own shape: the caller's program is compiled per shape
anyway, and padding there would only add work.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .checks import is_traced
from .matrix import pad_identity
from .mesh import run_on_mesh, shard_spec
from .plan import Plan


def _checked(steps: Any, where: str = "shape buckets: steps") -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0 or steps & (steps - 1):
        raise ValueError(f"{where} must be 0 (off) or a power of two, got {steps!r}")
    return steps


def _from_environment() -> int:
    text = os.environ.get("DISTLA_SHAPE_BUCKETS", "0")
    where = "the environment variable DISTLA_SHAPE_BUCKETS"
    try:
        steps = int(text)
    except ValueError:
        raise ValueError(f"{where} must be 0 (off) or a power of two, got {text!r}") from None
    return _checked(steps, where)


_steps = [_from_environment()]


def set_shape_buckets(steps: int) -> int:
    """Run eager square factorisations on ``steps`` orders per doubling; returns the
    previous setting.

    ``0`` (the default) runs each call on its own order. With ``steps = 32``,
    the distributed ``lu_factor``, ``solve`` (``assume_a`` ``"gen"`` and
    ``"pos"``), ``cholesky`` and ``cho_factor`` of one ``n x n`` matrix,
    called eagerly, run on ``n`` rounded up to a multiple of ``2^k / 32``
    (``2^k < n <= 2^(k+1)``): matrices of order 993 to 1008 then share one
    compiled program, each new order compiling only a padding and a cropping
    step (a fraction of a second). The padded order costs each call up to
    ``3 / steps`` more flops, and the padding and cropping two reshards
    (docs/caveats.md). Results and their layouts are those of the unpadded
    call, the values equal up to rounding (the padded order may take another
    block size). Calls traced by ``jax.jit``, ``jax.vmap`` or derivatives,
    and the one-device plan, are not changed; ``det``, ``slogdet``, ``inv`` and
    ``lu`` are not bucketed.

    Args:
      steps: orders per doubling, ``0`` (off) or a power of two.

    Returns:
      The setting in force before the call.

    Raises:
      ValueError: ``steps`` is not 0 or a power of two.

    Examples:
      >>> import distla
      >>> previous = distla.linalg.set_shape_buckets(0)
      >>> distla.linalg.shape_buckets()
      0
      >>> _ = distla.linalg.set_shape_buckets(previous)
    """
    previous, _steps[0] = _steps[0], _checked(steps)
    return previous


def shape_buckets() -> int:
    """The orders per doubling of [`set_shape_buckets`][distla.linalg.set_shape_buckets] (``0``:
    off).

    Examples:
      >>> import distla
      >>> distla.linalg.shape_buckets() >= 0
      True
    """
    return _steps[0]


def bucket(n: int, steps: int | None = None) -> int:
    """The order an eager factorisation of order ``n`` runs on: ``n`` rounded up to
    a multiple of ``2^k / steps`` for ``2^k < n <= 2^(k+1)`` (``n`` itself when
    ``steps`` is 0 or ``n <= 2 * steps``). With 32: ``bucket(1000) == 1008``,
    ``bucket(1025) == 1056``. ``steps`` defaults to the current setting."""
    steps = _steps[0] if steps is None else steps
    if not steps:
        return n
    step = 1 << max(0, (n - 1).bit_length() - steps.bit_length())
    return -(-n // step) * step


def on_bucket(
    kernel: Callable[..., Any],
    a: jax.Array,
    *rhs: jax.Array,
    call: Plan,
    results: Callable[[], tuple[Sequence[tuple[int, ...]], Sequence[P]]],
) -> tuple[jax.Array, ...]:
    """``kernel(a, *rhs)`` run on `bucket`'s order, cropped to the results' shapes.

    Args:
      kernel: a jitted factorisation or solve of one square matrix on
        ``call``'s mesh, returning a tuple of arrays whose leading extents
        (rows, and columns of the matrices) follow the order of ``a``.
      a: ``[n, n]`` on ``call``'s mesh (traced: the kernel on ``a`` itself).
      rhs: right-hand sides ``[n]`` or ``[n, k]``, padded with zero rows.
      call: the call's plan (mesh, dtype, block size).
      results: ``() -> (shapes, specs)``: each result's shape for the order
        ``n``, and where it comes back (the layouts, as spelled, that the kernel
        gives for the order ``n``). Called only when the order is padded, so
        that a call with buckets off does no more than the kernel.

    Returns:
      The tuple of results, each cropped to its shape and laid out as named.
    """
    n = a.shape[0]
    n_pad = bucket(n)
    if n_pad == n or is_traced(a, *rhs):  # traced: the caller's program is per shape anyway
        return kernel(a, *rhs)
    shapes, specs = results()
    padded = _grow(a, *rhs, n_pad=n_pad, call=call)
    return _crop(kernel(*padded), shapes=tuple(shapes), specs=tuple(specs), call=call)


@functools.partial(jax.jit, static_argnames=("n_pad", "call"))
def _grow(a, *rhs, n_pad: int, call: Plan):
    """``a`` padded with the identity and ``rhs`` with zero rows, to order ``n_pad``."""

    def body(a, *rhs):
        rows = [jnp.pad(b, [(0, n_pad - b.shape[0])] + [(0, 0)] * (b.ndim - 1)) for b in rhs]
        return (pad_identity(a, n_pad), *rows)

    shapes = [(n_pad, n_pad)] + [(n_pad, *b.shape[1:]) for b in rhs]
    specs = tuple(shard_spec(s, call.mesh) for s in shapes)
    return run_on_mesh(body, call.mesh, specs, a, *rhs)


@functools.partial(jax.jit, static_argnames=("shapes", "specs", "call"))
def _crop(outs, *, shapes, specs, call: Plan):
    """Each of ``outs`` cropped to its shape in ``shapes``, in the layout ``specs`` names."""

    def body(*outs):
        return tuple(o[tuple(slice(0, s) for s in shape)] for o, shape in zip(outs, shapes))

    return run_on_mesh(body, call.mesh, specs, *outs)
