"""``jnp.linalg``'s products on distla's SUMMA: matmul, multi_dot, tensordot, matrix_power.

``distla.matmul`` multiplies two sharded matrices without gathering either
(its op, ``distla._core.matmul.MATMUL``); these functions give it
``jnp.linalg``'s signatures: ``matmul`` with jnp's batch broadcasting and
``preferred_element_type``, ``multi_dot`` with the cheapest parenthesisation of
the chain, ``tensordot`` for contractions that are one matrix product.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.batch_layout import live, source_layout
from .._core.checks import ShapeError, as_array, canonical_precision, onto_mesh, result_dtype
from .._core.eager import hashable, on_one_mesh
from .._core.matmul import MATMUL, product_here
from .._core.matmul import checked_product as _summa
from .._core.matrix import explicit_sharding
from .._core.mesh import fitting_spec, run_on_mesh, shard_spec
from .._core.plan import Plan
from .._core.specs import layout_spec
from ._lu.inverse import inv


def _preferred(what, a, b, *, preferred_element_type, **options):
    """The dtype the product is computed and returned in."""
    del options
    dtype = result_dtype(what, a, b, inexact=False)
    if preferred_element_type is not None:
        dtype = np.dtype(jax.dtypes.canonicalize_dtype(preferred_element_type))
    return dtype


def _batch_only(plan: Plan, a, b) -> bool:
    """True when both stacks are seen sharded along batch dimensions only."""
    layouts = [live(source_layout(x, plan.mesh), plan.mesh) for x in (a, b)]
    return all(lay is not None and not any(lay[-2:]) for lay in layouts)


def _check_matmul(what, a, b, **options):
    del options
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(
            f"{what}: operands must be at least 1-D; got shapes {a.shape} and {b.shape}. "
            "For a scalar factor use multiplication (x1 * x2)."
        )
    if a.ndim > 1 and b.ndim > 1 and a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"{what}: inner dimensions differ: x1 is {a.shape}, x2 is {b.shape} "
            f"({a.shape[-1]} != {b.shape[-2]})"
        )


def _matmul_one(a, b, *, precision, preferred_element_type):
    return jnp.linalg.matmul(
        a, b, precision=precision, preferred_element_type=preferred_element_type
    )


def _matmul(plan: Plan, a, b, *, precision, preferred_element_type):
    what = MATMUL.name
    if a.ndim == 1 or b.ndim == 1:
        return _matmul_one(a, b, precision=precision, preferred_element_type=preferred_element_type)
    if a.ndim == 2 and b.ndim == 2:
        product = dict(
            algorithm="auto", precision=canonical_precision(precision, what), panels=None
        )
        return route.on_plan(MATMUL, plan, a, b, **product)
    if _batch_only(plan, a, b):  # each device multiplies its own members: nothing to exchange
        return jnp.linalg.matmul(a, b, precision=precision)
    if a.ndim == 2 or b.ndim == 2:  # one matrix against a stack: one product (below)
        return _with_one_matrix(
            a,
            b,
            precision=canonical_precision(precision, what),
            mesh=plan.mesh,
            out_spec=_one_matrix_spec(a, b, plan.mesh),
        )
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, batch + a.shape[-2:])
    b = jnp.broadcast_to(b, batch + b.shape[-2:])
    f = lambda a, b: _summa(a, b, precision=precision)  # noqa: E731
    for _ in batch:
        f = jax.vmap(f)
    return f(a, b)


LINALG_MATMUL = route.Op(
    "distla.linalg.matmul",
    operands=("x1", "x2"),
    check=_check_matmul,
    promote=_preferred,
    unsharded=lambda a, b, *, precision, preferred_element_type: jnp.linalg.matmul(
        a, b, precision=precision
    ),
    one_device=_matmul_one,
    distributed=_matmul,
)


@route.public
def matmul(
    x1: jax.typing.ArrayLike,
    x2: jax.typing.ArrayLike,
    /,
    *,
    precision: lax.PrecisionLike = None,
    preferred_element_type: jax.typing.DTypeLike | None = None,
) -> jax.Array:
    """Matrix product, as ``jnp.linalg.matmul``, on distla's SUMMA.

    Args:
      x1: ``[..., m, k]`` array (or ``[k]``: a vector, as numpy reads it),
        sharded on a 1- or 2-axis mesh in any layout.
      x2: ``[..., k, n]`` array (or ``[k]``) on the same mesh.
      precision: ``lax.Precision`` of the local products (``None``: distla's
        ``HIGHEST``, see ``distla.matmul``).
      preferred_element_type: dtype of the result (and of the accumulation),
        as ``jnp.linalg.matmul``'s.

    Returns:
      ``[..., m, n]`` (batch dimensions broadcast as ``jnp.linalg.matmul``
      broadcasts them). Two matrices run ``distla.matmul``: the result is in
      the 2D block layout ``P(r, c)`` where the mesh divides ``(m, n)``,
      otherwise in the largest even layout that fits. Stacks sharded along
      their batch dimensions only run ``jnp.linalg.matmul`` (each device
      multiplies its own members; no communication) and keep that layout;
      stacks with sharded matrix dimensions run ``distla.matmul`` under
      ``jax.vmap`` (each member multiplied without a gather); a stack against
      one matrix is one ``distla.matmul`` of the members' rows (or columns)
      stacked into one matrix, returned in the stack's batch layout, as jnp. Vector operands run
      ``jnp.linalg.matmul`` (a matrix-vector product: XLA reduces partial
      sums; the vector is replicated as jnp replicates it).

    Raises:
      ValueError: a scalar operand, or inner dimensions that differ.
      TypeError: dtypes jnp would not combine (for example under strict
        promotion).

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((256, 128)), mesh)
      >>> b = distla.shard(jnp.ones((128, 64)), mesh)
      >>> c = distla.linalg.matmul(a, b)
      >>> c.shape, c.sharding.spec
      ((256, 64), P('rows', 'cols'))
    """
    options = dict(precision=precision, preferred_element_type=preferred_element_type)
    return route.call(LINALG_MATMUL, x1, x2, **options)


def _product_shape(a, b) -> tuple[int, ...]:
    return np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])


@functools.partial(jax.jit, static_argnames=("precision", "mesh", "out_spec"))
def _with_one_matrix(a, b, *, precision, mesh, out_spec):
    """``a @ b`` where one of them is a matrix and the other a stack, as one SUMMA product.

    A stack times a matrix is its members' rows, stacked into one tall matrix, times
    it; a matrix times a stack is it times the members' columns, side by side in one
    wide matrix. One product over the whole batch: no operand is broadcast to the
    batch, so no device holds copies of the matrix, and the stack keeps its batch
    layout where the product's layout allows it (``out_spec``).
    """
    out_shape = _product_shape(a, b)

    def body(a, b):
        if b.ndim == 2:
            rows = product_here(a.reshape(-1, a.shape[-1]), b, precision=precision)
            return rows.reshape(out_shape)
        cols = jnp.moveaxis(b, -2, 0).reshape(b.shape[-2], -1)  # (k, batch·n)
        out = product_here(a, cols, precision=precision).reshape(
            (a.shape[0], *b.shape[:-2], b.shape[-1])
        )
        return jnp.moveaxis(out, 0, -2)

    return run_on_mesh(body, mesh, out_spec, a, b)


def _one_matrix_spec(a, b, mesh) -> P:
    """Where ``a @ b`` (one a matrix, one a stack) comes back: the stack's batch layout,
    the rows as ``a``'s and the columns as ``b``'s, as jnp's product leaves them (each
    mesh axis once, the largest even layout that fits); distla.shard's layout where
    the operands' layouts cannot be seen."""
    shape = _product_shape(a, b)
    la, lb = source_layout(a, mesh), source_layout(b, mesh)
    if la is None or lb is None:
        return shard_spec(shape, mesh)
    stack = la if a.ndim > 2 else lb
    entries = [*stack[:-2], la[-2], lb[-1]]
    seen: set[str] = set()
    for i, e in enumerate(entries):  # an axis used twice keeps its first place
        entries[i] = tuple(ax for ax in e if ax not in seen)
        seen.update(e)
    return fitting_spec(shape, mesh, layout_spec(entries))


def chain_order(shapes: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Where to split each sub-chain so the whole chain costs fewest flops.

    The classic dynamic programme over matrix-chain shapes (Cormen et al.,
    "Introduction to Algorithms", section 15.2): ``split[i][j]`` is the ``s``
    that computes ``(A_i..A_s)(A_s+1..A_j)`` last.
    """
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    k = len(shapes)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


@route.public
def multi_dot(
    arrays: Sequence[jax.typing.ArrayLike], *, precision: lax.PrecisionLike = None
) -> jax.Array:
    """Chained product ``arrays[0] @ ... @ arrays[-1]``, as ``jnp.linalg.multi_dot``.

    The parenthesisation with the fewest flops is chosen from the shapes
    (the classic O(k^3) dynamic programme), and every product runs
    ``distla.matmul``: no operand is gathered.

    Args:
      arrays: two or more arrays on one mesh: the first may be a ``[k]``
        vector (a row), the last a ``[k]`` vector (a column), the others
        ``[m, k]`` matrices in any layout.
      precision: ``lax.Precision`` of the local products.

    Returns:
      The product, 2-D in the largest even layout of the mesh that fits it
      (``distla.matmul``'s result), 1-D or 0-D where an end is a vector, as
      ``jnp.linalg.multi_dot``.

    Raises:
      ValueError: fewer than two arrays, a middle operand that is not 2-D,
        or inner dimensions that differ.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((256, 128)), mesh)
      >>> b = distla.shard(jnp.ones((128, 256)), mesh)
      >>> c = distla.shard(jnp.ones((256, 8)), mesh)
      >>> distla.linalg.multi_dot([a, b, c]).shape
      (256, 8)
    """
    what = "distla.linalg.multi_dot"
    arrays = [as_array(x, f"arrays[{i}]", what) for i, x in enumerate(arrays)]
    # onto the mesh first: the products of one-device operands below are jnp's
    arrays = list(onto_mesh(*arrays))
    if on_one_mesh(*arrays) and hashable(precision):
        return _compiled_chain(arrays, precision=precision)
    return _chain(arrays, precision=precision)


def _chain(arrays: list[jax.Array], *, precision: lax.PrecisionLike) -> jax.Array:
    """[`multi_dot`][distla.linalg.multi_dot] of jax arrays."""
    what = "distla.linalg.multi_dot"
    if len(arrays) < 2:
        raise ValueError(f"{what}: needs at least two arrays; got {len(arrays)}")
    first_vec, last_vec = arrays[0].ndim == 1, arrays[-1].ndim == 1
    mats = list(arrays)
    if first_vec:
        mats[0] = mats[0][None, :]
    if last_vec:
        mats[-1] = mats[-1][:, None]
    for i, m in enumerate(mats):
        if m.ndim != 2:
            raise ShapeError(
                f"{what}: arrays[{i}] must be 2-D (the ends may be 1-D); got shape "
                f"{arrays[i].shape}"
            )
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise ShapeError(
                f"{what}: arrays[{i}] of shape {arrays[i].shape} and arrays[{i + 1}] of shape "
                f"{arrays[i + 1].shape} do not chain"
            )
    dtype = result_dtype(what, *mats, inexact=False)
    mats = [m.astype(dtype) for m in mats]
    split = chain_order([m.shape for m in mats])

    def product(i, j):
        if i == j:
            return mats[i]
        s = split[i][j]
        return _summa(product(i, s), product(s + 1, j), precision=precision)

    out = product(0, len(mats) - 1)
    if first_vec and last_vec:
        return out[0, 0]
    if first_vec:
        return out[0]
    if last_vec:
        return out[:, 0]
    return out


# An eager call on a mesh as one jax.jit of the whole chain (as distla.matmul's): one
# dispatch, not one per product.
_compiled_chain = jax.jit(_chain, static_argnames=("precision",))


def _contraction_axes(a, b, axes, what):
    """jnp.tensordot's ``axes`` as two lists of non-negative axes."""
    if isinstance(axes, Sequence) and not isinstance(axes, str) and len(axes) == 2:
        ca, cb = axes
        ca = [ca] if np.ndim(ca) == 0 else list(ca)
        cb = [cb] if np.ndim(cb) == 0 else list(cb)
    else:
        try:
            k = operator.index(axes)
        except TypeError:
            raise TypeError(
                f"{what}: axes must be an int or a pair of sequences of ints; got {axes!r}"
            ) from None
        if k < 0 or k > min(a.ndim, b.ndim):
            raise ValueError(
                f"{what}: axes={k} must be in [0, {min(a.ndim, b.ndim)}] for shapes "
                f"{a.shape} and {b.shape}"
            )
        ca, cb = list(range(a.ndim - k, a.ndim)), list(range(k))
    return [operator.index(x) % max(a.ndim, 1) for x in ca], [
        operator.index(x) % max(b.ndim, 1) for x in cb
    ]


def _free_axes_sharding(plan: Plan, a, b, free_a, free_b):
    """The result sharding jnp asks for on an ``Explicit`` mesh: it refuses to decide one
    where a contracted axis is split. The free axes keep their operands' mesh axes (each
    mesh axis once, the first operand's first); ``None`` where jnp decides itself."""
    on_mesh = [x for x in (a, b) if explicit_sharding(x) is not None]
    if plan is None or not on_mesh:
        return None
    entries, used = [], set()
    for x, free in ((a, free_a), (b, free_b)):
        spec = tuple(jax.typeof(x).sharding.spec) + (None,) * x.ndim
        for i in free:
            axes = (spec[i],) if isinstance(spec[i], str) else tuple(spec[i] or ())
            keep = bool(axes) and not used.intersection(axes)
            entries.append(spec[i] if keep else None)
            used.update(axes if keep else ())
    return jax.typeof(on_mesh[0]).sharding.update(spec=P(*entries))


def _contraction(a, b, axes, what):
    """``(ca, cb, free_a, free_b, one_product)`` of jnp.tensordot's ``axes``: one product
    where one axis is contracted and at most one is free on each side."""
    ca, cb = _contraction_axes(a, b, axes, what)
    free_a = [i for i in range(a.ndim) if i not in ca]
    free_b = [i for i in range(b.ndim) if i not in cb]
    one_product = (
        len(ca) == 1
        and len(cb) == 1
        and len(free_a) <= 1
        and len(free_b) <= 1
        and a.shape[ca[0]] == b.shape[cb[0]]
        and a.ndim + b.ndim >= 3
    )
    return ca, cb, free_a, free_b, one_product


def _check_tensordot(what, a, b, *, axes, **options):
    del options
    _contraction_axes(a, b, axes, what)


def _tensordot(plan: Plan | None, a, b, *, axes, precision, preferred_element_type, out_sharding):
    what = TENSORDOT.name
    ca, cb, free_a, free_b, one_product = _contraction(a, b, axes, what)
    if not one_product or out_sharding is not None or plan is None:
        if out_sharding is None:
            out_sharding = _free_axes_sharding(plan, a, b, free_a, free_b)
        return jnp.linalg.tensordot(
            a,
            b,
            axes=axes,
            precision=precision,
            preferred_element_type=preferred_element_type,
            out_sharding=out_sharding,
        )
    dtype = _preferred(what, a, b, preferred_element_type=preferred_element_type)
    a, b = a.astype(dtype), b.astype(dtype)
    a2 = a[None, :] if a.ndim == 1 else (a.T if ca[0] == 0 else a)
    b2 = b[:, None] if b.ndim == 1 else (b.T if cb[0] == 1 else b)
    precision = canonical_precision(precision, MATMUL.name)
    out = route.on_plan(MATMUL, plan, a2, b2, algorithm="auto", precision=precision, panels=None)
    if a.ndim == 1:
        out = out[0]
    elif b.ndim == 1:
        out = out[:, 0]
    return out


# a contraction that is one matrix product runs distla.matmul's; every other is jnp's
# (its operands as given: jnp promotes them itself, preferred_element_type and all)
TENSORDOT = route.Op(
    "distla.linalg.tensordot",
    operands=("x1", "x2"),
    check=_check_tensordot,
    promote=lambda what, a, b, **options: jnp.result_type(a, b),
    cast=lambda dtype, *operands, **options: operands,
    one_device=functools.partial(_tensordot, None),
    distributed=_tensordot,
)


@route.public
def tensordot(
    x1: jax.typing.ArrayLike,
    x2: jax.typing.ArrayLike,
    /,
    *,
    axes: int | tuple[Sequence[int], Sequence[int]] = 2,
    precision: lax.PrecisionLike = None,
    preferred_element_type: jax.typing.DTypeLike | None = None,
    out_sharding: jax.sharding.NamedSharding | jax.sharding.PartitionSpec | None = None,
) -> jax.Array:
    """Tensor contraction, as ``jnp.linalg.tensordot``.

    A contraction that is one matrix product (one contracted axis, at most
    one free axis on each side: ``[m, k] x [k, n]`` up to transposition) runs
    ``distla.matmul``: no operand is gathered (XLA's own ``dot_general`` on
    two 2D-block matrices gathers a block row and a block column whole).
    Every other contraction, and any call with ``out_sharding``, is
    ``jnp.linalg.tensordot``'s; on an ``Explicit`` mesh, where jnp refuses to
    choose the result's sharding when a contracted axis is split, the free axes
    keep their operands' mesh axes.

    Args:
      x1: array, sharded in any layout.
      x2: array on the same mesh.
      axes: int ``k`` (``x1``'s last ``k`` axes with ``x2``'s first ``k``) or
        a pair of axis sequences, as jnp's.
      precision: ``lax.Precision`` of the local products.
      preferred_element_type: dtype of the result, as jnp's.
      out_sharding: the result's sharding, as jnp's (jnp's path).

    Returns:
      ``x1``'s free axes followed by ``x2``'s; a matrix result is in the
      largest even layout of the mesh that fits it.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((256, 128)), mesh)
      >>> b = distla.shard(jnp.ones((128, 64)), mesh)
      >>> distla.linalg.tensordot(a, b, axes=1).shape
      (256, 64)
    """
    options = dict(
        axes=axes,
        precision=precision,
        preferred_element_type=preferred_element_type,
        out_sharding=out_sharding,
    )
    return route.call(TENSORDOT, x1, x2, **options)


@route.public
def matrix_power(a: jax.typing.ArrayLike, n: int) -> jax.Array:
    """``a`` to the integer power ``n``, as ``jnp.linalg.matrix_power``.

    Repeated squaring: about ``2 log2 |n|`` products on SUMMA
    (``distla.matmul``; stacks under ``jax.vmap``), after [`inv`][distla.linalg.inv] when
    ``n < 0``. No operand is gathered.

    Args:
      a: ``[..., m, m]`` square matrix or stack, in any layout.
      n: a Python int (negative powers invert ``a`` first).

    Returns:
      ``[..., m, m]`` in ``a``'s dtype for ``n >= 0`` (ints stay ints, as
      jnp's), in the largest even layout of the mesh that fits ``(m, m)``;
      ``n = 0`` gives the identity replicated, as jnp's.

    Raises:
      TypeError: ``n`` is not an integer.
      ValueError: ``a`` is not a square matrix or stack.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(2.0 * jnp.eye(256), mesh)
      >>> float(np.asarray(distla.linalg.matrix_power(a, 3))[0, 0])
      8.0
      >>> float(np.asarray(distla.linalg.matrix_power(a, -1))[0, 0])
      0.5
    """
    what = "distla.linalg.matrix_power"
    a = as_array(a, "a", what)
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{what}: n must be an integer; got {n!r}") from None
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(
            f"{what}: a must be a square matrix or a stack of them ([..., m, m]); got "
            f"shape {a.shape}"
        )
    if n != 0 and on_one_mesh(a):  # (n = 0 builds the identity: no product to compile)
        return _compiled_power(a, n)
    return _power(a, n)


def _power(a: jax.Array, n: int) -> jax.Array:
    """[`matrix_power`][distla.linalg.matrix_power] of a square jax array or stack and a Python
    int."""
    if n == 0:  # jnp's identity, replicated as jnp's is whatever a's layout; no
        # dependence on a (whose sharding, under a transformation outside jax.set_mesh,
        # names a mesh but no devices)
        return jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    if n < 0:
        a, n = inv(a), -n
    result = None
    while True:  # binary powering: result = a^(bits of n seen so far)
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if not n:
            return result
        a = matmul(a, a)


# An eager call on a mesh as one jax.jit of the whole powering (as distla.matmul's).
_compiled_power = jax.jit(_power, static_argnums=1)
