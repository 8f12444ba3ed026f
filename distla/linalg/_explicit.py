"""jnp's ``diagonal``, ``vecdot``, ``outer`` and ``cross`` where jax refuses them.

On an ``Explicit`` mesh jax types every result from its operands' layouts, and
for these three its rules give up where the work is plain: ``diagonal`` of a
matrix split along either of its axes (a gather: "provide out_sharding"),
``vecdot`` of operands split along any axis (a batched ``dot_general``:
"Contracting dimensions are sharded"), ``outer`` of two vectors split over the
same mesh axes ("illegally sharded"), and so each under ``jax.jacfwd`` and
``jax.grad``. There the same values are computed in forms the rules type, with
the communication jnp's would have had on an ``Auto`` mesh (docs/namespace.md):
``diagonal`` and ``vecdot`` as an elementwise product and a sum (one all-reduce
of the result), ``outer`` with the second vector made whole over the axes the
first is split over (a vector's shards, not the result's). Everywhere else,
each is jnp's own function, its results where jnp puts them. ``vecdot``, ``outer``
and ``cross`` also move an operand committed to one device onto the mesh of a
sharded one beside it, as the route moves the operands of distla's own functions
(jnp's refuse the pair: "Received incompatible devices for jitted computation").
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh

from .._core.checks import empty_results, onto_mesh, result_types
from .._core.mesh import explicit_layout, is_explicit, with_layout


def _jnp_types(fn, *xs, **options):
    """``fn``'s result type for the operands' shapes and dtypes: jnp's checks (its
    exceptions for bad shapes and options) and its dtype, without its sharding rules."""
    structs = (jax.ShapeDtypeStruct(jnp.shape(x), jnp.result_type(x)) for x in xs)
    return jax.eval_shape(functools.partial(fn, **options), *structs)


def _on_explicit(x) -> bool:
    """``x`` is a jax array on an ``Explicit`` mesh of several devices."""
    mesh = getattr(jax.typeof(x).sharding, "mesh", None) if isinstance(x, jax.Array) else None
    return isinstance(mesh, AbstractMesh) and mesh.size > 1 and is_explicit(mesh)


def _split(*xs) -> bool:
    """Any of ``xs`` is a jax array split along some axis of an ``Explicit`` mesh."""
    return any(isinstance(x, jax.Array) and any(explicit_layout(x)) for x in xs)


def _empty(fn, *xs):
    """``fn``'s zero-size result for operands split on an ``Explicit`` mesh, in the layout
    jax's types give it: computed by a program, jax 0.10.2 returns its shards whole-size
    and ``np.asarray`` cannot read it back ("could not broadcast input array from shape
    (8, 0) into shape (1, 0)"); placed from the host, it reads back."""
    return empty_results(result_types(fn, xs), *xs)


def diagonal(x: jax.typing.ArrayLike, /, *, offset: int = 0) -> jax.Array:
    """The diagonals of the matrices of ``x``, as ``jnp.linalg.diagonal``.

    A matrix split along its rows or columns on an ``Explicit`` mesh (where jnp's
    gather asks for ``out_sharding``) takes the masked sum: the entries off the
    diagonal set to zero, each row (or column) summed, one all-reduce of the result
    over the axes the summed dimension is split over; an empty diagonal there is
    placed in jnp's layout. Everything else is jnp's.

    Args:
      x: ``[..., n, m]``, any layout.
      offset: the diagonal above (positive) or below (negative) the main one, a
        static integer.

    Returns:
      ``[..., k]`` with ``k = max(0, min(n + min(offset, 0), m - max(offset, 0)))``,
      ``x``'s dtype; the batch dimensions in ``x``'s layout, the diagonal in that of
      the dimension kept (whole where it must be cut to ``k``).

    Raises:
      ValueError: ``x`` has fewer than 2 dimensions, as jnp.
      TypeError: ``offset`` is not an integer, as jnp.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.arange(64.0).reshape(8, 8), mesh)
      >>> np.asarray(distla.linalg.diagonal(a, offset=1))[:3]
      array([ 1., 10., 19.], dtype=float32)
    """
    if not (_on_explicit(x) and x.ndim >= 2):
        return jnp.linalg.diagonal(x, offset=offset)
    offset = operator.index(offset)
    out = _jnp_types(jnp.linalg.diagonal, x, offset=offset)
    if out.size == 0:  # (jnp's gather of no entries fails there, even replicated)
        return _empty(functools.partial(jnp.linalg.diagonal, offset=offset), x)
    if not _split(x):
        return jnp.linalg.diagonal(x, offset=offset)
    layout = explicit_layout(x)
    n, m = x.shape[-2:]
    size = out.shape[-1]
    mask = (jnp.arange(n)[:, None] + offset) == jnp.arange(m)[None, :]
    # reduce the columns (each row keeps x[i, i + offset]) or the rows (each column keeps
    # x[j - offset, j]); the one whose kept dimension needs no cut, else no reshard
    candidates = []
    for axis, start, length in ((-1, max(-offset, 0), n), (-2, max(offset, 0), m)):
        kept = layout[-2] if axis == -1 else layout[-1]
        cut = start != 0 or size != length
        candidates.append((cut and bool(kept), cut, axis, start))
    _, cut, axis, start = min(candidates)
    if x.dtype == jnp.bool_:
        picked = jnp.any(jnp.where(mask, x, False), axis=axis)
    else:
        picked = jnp.sum(jnp.where(mask, x, jnp.zeros((), x.dtype)), axis=axis, dtype=x.dtype)
    if cut:  # jax's slice keeps a split dimension only where the cut falls on shards
        picked = with_layout(picked, explicit_layout(picked)[:-1] + ((),))
        picked = picked[..., start : start + size]
    return picked


def vecdot(
    x1: jax.typing.ArrayLike,
    x2: jax.typing.ArrayLike,
    /,
    *,
    axis: int = -1,
    precision: jax.lax.PrecisionLike = None,
    preferred_element_type: jax.typing.DTypeLike | None = None,
) -> jax.Array:
    """The conjugate dot product of vectors along ``axis``, as ``jnp.linalg.vecdot``.

    Operands split along any axis of an ``Explicit`` mesh (where jnp's batched
    ``dot_general`` is refused) take ``sum(conj(x1) * x2)`` along ``axis``, in jnp's
    result dtype: one all-reduce of the result where ``axis`` is split. Everything
    else is jnp's.

    Args:
      x1: ``[..., n, ...]``, any layout.
      x2: broadcast-compatible with ``x1``, the same length along ``axis``.
      axis: the axis of each operand the product runs along.
      precision: as jnp's (its ``dot_general``; the split form multiplies
        elementwise, exactly).
      preferred_element_type: the accumulation and result dtype, as jnp's.

    Returns:
      The broadcast batch, in the layout jax's elementwise rules give it.

    Raises:
      ValueError: the operands' lengths along ``axis`` differ, as jnp.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((8, 8)), mesh)
      >>> np.asarray(distla.linalg.vecdot(a, a))[:2]
      array([8., 8.], dtype=float32)
    """
    options = dict(axis=axis, precision=precision, preferred_element_type=preferred_element_type)
    # an operand on one device beside one on a mesh (or a derivative's tracer of one) joins
    # that mesh, as the route moves it
    x1, x2 = onto_mesh(x1, x2)
    if not _split(x1, x2):
        return jnp.linalg.vecdot(x1, x2, **options)
    dtype = _jnp_types(jnp.linalg.vecdot, x1, x2, **options).dtype
    a = jnp.moveaxis(x1, axis, -1).astype(dtype)
    b = jnp.moveaxis(x2, axis, -1).astype(dtype)
    return jnp.sum(jnp.conj(a) * b, axis=-1, dtype=dtype)


def outer(x1: jax.typing.ArrayLike, x2: jax.typing.ArrayLike, /) -> jax.Array:
    """The outer product of two vectors, as ``jnp.linalg.outer``.

    Where both are split over the same axes of an ``Explicit`` mesh (jnp's product
    would split both dimensions of the result over them: "illegally sharded"),
    ``x2`` is first made whole over the axes ``x1`` is split over. Everything else
    is jnp's.

    Args:
      x1: ``[m]``, any layout.
      x2: ``[n]``, any layout.

    Returns:
      ``[m, n]``: rows in ``x1``'s layout, columns in ``x2``'s less the axes of
      ``x1``'s.

    Raises:
      ValueError: either operand is not one-dimensional, as jnp.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> v = distla.shard(jnp.arange(8.0), mesh)
      >>> np.asarray(distla.linalg.outer(v, v))[2, :3]
      array([0., 2., 4.], dtype=float32)
    """
    # an operand on one device beside one on a mesh joins that mesh, as the route moves it
    x1, x2 = onto_mesh(x1, x2)
    if _split(x1, x2) and isinstance(x1, jax.Array) and isinstance(x2, jax.Array):
        if x1.ndim == 1 and x2.ndim == 1:
            (rows,), (cols,) = explicit_layout(x1), explicit_layout(x2)
            if set(rows) & set(cols):
                x2 = with_layout(x2, (tuple(a for a in cols if a not in rows),))
            if x1.size == 0 or x2.size == 0:  # where jnp puts it, and readable (see _empty)
                return _empty(jnp.linalg.outer, x1, x2)
    return jnp.linalg.outer(x1, x2)


def cross(x1: jax.typing.ArrayLike, x2: jax.typing.ArrayLike, /, *, axis: int = -1) -> jax.Array:
    """The cross product of 3-vectors along ``axis``, as ``jnp.linalg.cross``.

    An operand on one device (or a derivative's tracer of one) beside one on a mesh
    joins that mesh first, replicated, as the route moves the operands of distla's
    own functions: jnp's refuses the pair ("Received incompatible devices for jitted
    computation"). Everything else is jnp's, its results where jnp puts them (the
    work is elementwise: no communication on a sharded operand).

    Args:
      x1: ``[..., 3, ...]``, any layout, ``3`` along ``axis``.
      x2: broadcast-compatible with ``x1``, ``3`` along ``axis``.
      axis: the axis of each operand that holds the vectors.

    Returns:
      The broadcast shape, ``3`` along ``axis``, in the layout jax's elementwise
      rules give it; jnp's result dtype.

    Raises:
      ValueError: an operand's length along ``axis`` is not 3, as jnp.
      TypeError: an operand is not an array or scalar (a list), as jnp.

    Examples:
      >>> import distla, jax, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.tile(jnp.array([1.0, 0.0, 0.0]), (8, 1)), mesh)
      >>> b = jax.device_put(jnp.tile(jnp.array([0.0, 1.0, 0.0]), (8, 1)), jax.devices()[0])
      >>> np.asarray(distla.linalg.cross(a, b))[0]
      array([0., 0., 1.], dtype=float32)
    """
    # an operand on one device beside one on a mesh (or a derivative's tracer of one) joins
    # that mesh, as the route moves it
    x1, x2 = onto_mesh(x1, x2)
    return jnp.linalg.cross(x1, x2, axis=axis)
