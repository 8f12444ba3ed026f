"""Validation and dtype promotion shared by every public function (private).

One path for every entry point, so that distla promotes, refuses and
short-cuts exactly where ``jnp`` does:

- :func:`as_array` turns anything ``jnp.asarray`` accepts into an array;
- :func:`result_dtype` is ``jnp.linalg``'s promotion (the operands' common
  dtype by ``jnp.result_type``, which honours
  ``jax_numpy_dtype_promotion="strict"``; integers and bools then go to the
  default float as ``jnp.linalg`` sends them: int8..int32, uint8..uint32 and
  bool to float32, int64/uint64 to float64, each canonicalised for x64 off);
  ``result_dtype(..., inexact=False)`` is ``jnp.matmul``'s (ints stay ints);
- :func:`is_empty` says when an operand has no elements: the public
  functions then return what the one-device jnp function returns
  (``det`` of a 0x0 matrix is 1), with no mesh involved.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .mesh import drop_trivial_sharding, tracing

# jnp.linalg's promotion of non-inexact dtypes (jax.dtypes.to_inexact_dtype).
_TO_INEXACT = {
    np.dtype(k): np.dtype(v)
    for k, v in [
        ("bool", "float32"),
        ("uint8", "float32"),
        ("int8", "float32"),
        ("uint16", "float32"),
        ("int16", "float32"),
        ("uint32", "float32"),
        ("int32", "float32"),
        ("uint64", "float64"),
        ("int64", "float64"),
    ]
}
# dtypes jax's LAPACK path (lu, triangular_solve) does not take on CPU.
_NO_LAPACK = (np.dtype(jnp.float16), np.dtype(jnp.bfloat16))


class ShapeError(ValueError, TypeError):
    """An operand of the wrong shape: not square, too few dimensions, or dimensions
    that do not match or broadcast.

    A `ValueError`, as distla's documentation says, and a `TypeError` too: jnp
    raises a `TypeError` for some of the same shapes (`cholesky` or `eigh` of a
    non-square matrix, `qr`/`svd`/`lu` of a vector, `matmul` of mismatched
    dimensions) and a `ValueError` for others, so code written against jnp catches
    either. (numpy's `AxisError` is a `ValueError` and an `IndexError` for the
    same reason.) The message names the function, the shapes received and the
    shapes expected. Public as `distla.ShapeError`.

    Examples:
      >>> import jax.numpy as jnp
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((16, 8)), mesh)
      >>> try:
      ...     distla.matmul(a, a)
      ... except distla.ShapeError as e:
      ...     print(type(e).__module__, type(e).__name__, isinstance(e, ValueError))
      distla ShapeError True
    """

    # users meet it as distla.ShapeError (tracebacks and reprs print this path)
    __module__ = "distla"


def as_array(x: Any, name: str, what: str) -> jax.Array:
    """``x`` as a jax array (jax arrays and tracers pass through untouched)."""
    if isinstance(x, jax.Array):
        return x
    try:
        return jnp.asarray(x)
    except TypeError as e:
        raise TypeError(f"{what}: {name} must be an array, got {type(x).__name__}") from e


def result_dtype(what: str, *arrays: Any, inexact: bool = True) -> np.dtype:
    """The dtype ``jnp`` computes ``arrays`` in.

    Args:
      what: the public function's name, for error messages.
      *arrays: the operands (arrays or dtypes).
      inexact: ``True`` for ``jnp.linalg``'s rule (integers and bools become
        the default float), ``False`` for ``jnp.matmul``'s (they stay).

    Raises:
      jax.dtypes.TypePromotionError: mixed kinds under strict promotion, as
        ``jnp`` raises it.
      TypeError: a dtype with no numeric meaning, or float16/bfloat16 for
        ``jnp.linalg`` (jax's LAPACK kernels have no half precision).
    """
    dtype = np.dtype(jnp.result_type(*arrays))
    if not (jnp.issubdtype(dtype, jnp.number) or dtype == np.dtype(bool)):
        got = ", ".join(
            str(jnp.asarray(a).dtype if not hasattr(a, "dtype") else a.dtype) for a in arrays
        )
        raise TypeError(f"{what} works on numeric arrays; got dtype {got}.")
    if not inexact:
        return dtype
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(_TO_INEXACT.get(dtype, dtype)))
    if dtype in _NO_LAPACK:
        raise TypeError(
            f"{what} does not accept dtype {dtype} (jax's LAPACK kernels have no half "
            "precision, and jnp.linalg raises too). Cast first: x.astype(jnp.float32)."
        )
    return dtype


def square(a: jax.Array, what: str, *, batch: bool = True) -> None:
    """Check that ``a`` is a square matrix (``batch``: or a stack of them)."""
    want = "(..., n, n)" if batch else "(n, n)"
    if a.ndim < 2 or (not batch and a.ndim != 2):
        raise ShapeError(f"{what}: a must have shape {want}; got a of shape {a.shape}")
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{what}: a must be square, {want}; got a of shape {a.shape}")


def rhs_core(a: jax.Array, b: jax.Array, what: str | None = None) -> int:
    """Core dimensions of the right-hand side ``b`` of ``a`` in ``jax.scipy.linalg``'s rule.

    1 when ``b`` is a vector (or, as jax still reads it, a stack of vectors:
    one dimension fewer than ``a``, ending in ``n``), else 2. With ``what``,
    also check that ``b`` is ``(n,)`` or ``(..., n, k)``.

    Raises:
      ValueError: (with ``what``) ``b`` does not match ``a``.
    """
    n = a.shape[-1]
    core = 1 if b.ndim == 1 or (a.ndim == b.ndim + 1 and b.shape[-1] == n) else 2
    if what is not None and (b.ndim == 0 or b.shape[-core] != n):
        raise ShapeError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n}; got a of shape "
            f"{a.shape}, b of shape {b.shape}"
        )
    return core


def scipy_flags(what: str, **flags: Any) -> None:
    """``check_finite``/``overwrite_*``: accepted and ignored, as in jax.scipy.linalg."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(
                f"{what}: {name} must be a bool (ignored, as in jax.scipy); got {value!r}"
            )


def is_empty(*arrays: jax.Array) -> bool:
    """True when any operand has no elements (jnp's result needs no mesh)."""
    return any(0 in np.shape(x) for x in arrays)


def empty_like(x: jax.Array, dtype=None) -> jax.Array:
    """A fresh unsharded zero-size array of ``x``'s shape (for the empty short cut)."""
    return jnp.zeros(np.shape(x), dtype if dtype is not None else x.dtype)


def empty_or_one_device(ref, *xs):
    """``ref`` (the jnp / jax.scipy function) on operands that need no mesh.

    Operands on one device (or unsharded) run as they are; with an empty
    operand the result is what ``ref`` gives for the same shapes (``det`` of a
    0x0 matrix is 1, ``solve`` with ``k = 0`` right-hand sides an empty
    array). Empty results come back where jnp puts them: on an ``Explicit``
    mesh in the layout jax's types give (``P('x', None, None)`` for a solve of
    a ``(0, n, n)`` stack in ``P('x')``), on an ``Auto`` mesh replicated over
    it (traced there, unsharded, as before). ``ref`` is not run for them: jax's
    own functions can refuse empty operands' ``Explicit`` shardings.
    """
    if is_empty(*xs):
        shapes = result_types(ref, xs)
        if all(np.prod(s.shape) == 0 for s in jax.tree.leaves(shapes)):
            return empty_results(shapes, *xs)
        values = ref(*(empty_like(x) if is_empty(x) else drop_trivial_sharding(x) for x in xs))
        if all(map(is_empty, xs)):  # constants (slogdet's (1, 0)): put where jnp puts them
            return jax.tree.map(lambda v, s: _constant_result(v, s, *xs), values, shapes)
        return values
    return ref(*(drop_trivial_sharding(x) for x in xs))


def empty_results(types, *xs):
    """Zero-size arrays of ``types`` (a pytree of ``jax.ShapeDtypeStruct``s, with the
    shardings ``jax.eval_shape`` gives on ``Explicit`` meshes) for the operands ``xs``,
    where jnp puts them (see :func:`empty_or_one_device`)."""
    traced = tracing() or not all(map(_concrete, xs))
    mesh = None if traced else _concrete_mesh(xs)
    anchor = next((x for x in xs if _explicit(jax.typeof(x).sharding)), None)
    return jax.tree.map(lambda s: _empty_result(s, mesh, anchor), types)


def _constant_result(value, struct, *xs):
    """``value`` (a result of empty operands that does not depend on them, as ``slogdet``'s
    sign 1 and log 0) where jnp puts it: on the operands' mesh in jax's layout, and, traced
    on an ``Explicit`` mesh, computed from an operand so that a derivative's zero cotangent
    is a program on its mesh (outside ``jax.set_mesh`` jax cannot build one from the
    operand's type alone)."""
    if isinstance(value, jax.core.Tracer):
        return value
    tie = empty_results(struct, *xs)  # zeros of the result's type, where jnp puts them
    if isinstance(tie, jax.core.Tracer) or isinstance(tie.sharding, jax.sharding.NamedSharding):
        return tie + np.asarray(value)
    return value


def result_types(ref, xs):
    """``ref``'s result types for ``xs``, with their shardings where jax's types carry them
    (``Explicit`` meshes); without, where ``ref`` refuses the operands' shardings."""
    try:
        return jax.eval_shape(ref, *xs)
    except Exception:  # (jax's sharding rules may refuse a mix that needs no mesh here)
        return jax.eval_shape(ref, *(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs))


def _concrete(x) -> bool:
    return isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)


def _concrete_mesh(xs):
    """The mesh of several devices a concrete operand of ``xs`` lives on (or the array a
    tracer of an eager transformation stands for, `_underlying`), or ``None``."""
    return next(
        (
            x.sharding.mesh
            for x in map(_underlying, xs)
            if _concrete(x)
            and isinstance(x.sharding, jax.sharding.NamedSharding)
            and x.sharding.mesh.size > 1
        ),
        None,
    )


def _underlying(x):
    """The array a tracer of an eager transformation stands for: a derivative's primal
    (``jax.jvp``, ``jacfwd``, ``grad``), a ``jax.vmap``'s batch, through nested ones; the
    innermost tracer under ``jax.jit``; anything else as given."""
    while isinstance(x, jax.core.Tracer):
        if hasattr(x, "primal"):
            x = x.primal
        elif hasattr(x, "batch_dim"):
            x = x.val
        else:
            break
    return x


def _on_one_device(x) -> bool:
    """``x`` (or the array it stands for, `_underlying`) is a jax array on one device."""
    x = _underlying(x)
    return _concrete(x) and len(x.sharding.device_set) == 1


def _explicit(sharding) -> bool:
    return isinstance(sharding, jax.sharding.NamedSharding) and any(
        t == jax.sharding.AxisType.Explicit for t in sharding.mesh.axis_types
    )


def _empty_result(struct, mesh, anchor):
    """A zero-size array of ``struct``'s type, where jnp would put it.

    ``mesh``: the concrete operands' mesh of an eager call (``None`` when traced or
    unsharded); ``anchor``: an operand on an ``Explicit`` mesh, from which a traced
    result takes its devices (a constant would be typed for one device, and jax
    asks for ``jax.set_mesh``).
    """
    sharding = getattr(struct, "sharding", None)
    explicit = _explicit(sharding)
    if mesh is not None:
        spec = sharding.spec if explicit else jax.sharding.PartitionSpec()
        return jax.device_put(
            np.zeros(struct.shape, struct.dtype), jax.sharding.NamedSharding(mesh, spec)
        )
    if anchor is not None and sharding is None:
        # a type without a sharding (jax.eval_shape under jax.vjp): replicated over the
        # anchor's mesh, which a derivative's zeros can name outside jax.set_mesh
        sharding = jax.sharding.NamedSharding(
            jax.typeof(anchor).sharding.mesh, jax.sharding.PartitionSpec()
        )
        explicit = True
    if explicit and anchor is not None:
        zero = (jnp.sum(anchor) * 0).astype(struct.dtype)
        return lax.broadcast_in_dim(zero, struct.shape, (), out_sharding=sharding)
    return jnp.zeros(struct.shape, struct.dtype)


def onto_mesh(*xs):
    """Concrete operands on one device moved (replicated) onto the others' mesh, as jnp does.

    A one-device operand next to a sharded one would otherwise fail jax's
    device-assignment check. Under an eager ``jax.vmap`` or derivative (``jax.jvp``,
    ``jacfwd``, ``grad``) the arrays its tracers stand for decide, and a tracer of a
    one-device array moves with its batch or tangent; under ``jax.jit`` tracers are left
    alone (jit places its arguments).
    """
    mesh = _concrete_mesh(xs)
    if mesh is None:
        return xs
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    return tuple(jax.device_put(x, replicated) if _on_one_device(x) else x for x in xs)


def canonical_precision(precision: Any, what: str = "distla") -> Any:
    """``precision=`` of ``distla.matmul`` made hashable; ``None`` stays ``None``.

    ``None`` means what it means in ``jnp.matmul``: jax's
    ``default_matmul_precision`` (the backend's default, TF32 on recent NVIDIA
    GPUs), read when the call is traced. The factorisations do not come
    through here: they pass ``HIGHEST`` to every product their error bounds
    rest on.

    Strings and ``lax.Precision`` values are normalised so they can be static
    arguments of ``jax.jit``; ``lax.DotAlgorithmPreset`` values (or their names)
    and ``lax.DotAlgorithm`` pass through, as ``jnp.matmul`` takes them.

    Raises:
      ValueError: a value ``jnp.matmul`` would not take, with the accepted ones.
    """
    if precision is None:
        return None
    if isinstance(precision, (lax.Precision, lax.DotAlgorithmPreset, lax.DotAlgorithm)):
        return precision
    if isinstance(precision, str):
        try:
            return lax.Precision(precision.lower())
        except ValueError:
            try:
                return lax.Precision[precision.upper()]
            except KeyError:
                if precision.upper() in lax.DotAlgorithmPreset.__members__:  # as jnp takes it
                    return lax.DotAlgorithmPreset[precision.upper()]
    elif isinstance(precision, (list, tuple)) and len(precision) == 2:
        return tuple(canonical_precision(p, what) for p in precision)
    names = ", ".join(repr(p.name) for p in lax.Precision)
    raise ValueError(
        f"{what}: precision must be None, a jax.lax.Precision, one of the strings {names} "
        f"(any case; also 'bfloat16', 'tensorfloat32', 'float32'), a pair of them, or a "
        f"jax.lax.DotAlgorithmPreset (or its name) or DotAlgorithm; got {precision!r}"
    )


def is_traced(*xs) -> bool:
    """True when any of ``xs`` is a tracer (under jit, vmap or a derivative), or
    while a trace runs over concrete operands (a jitted function closing over them,
    :func:`distla._core.mesh.tracing`).

    The one-matrix drivers call their kernels directly when it is False: their
    ``custom_jvp``/``custom_vmap`` rules act only under a transformation, and
    jax traces a function with such rules anew on every concrete call (0.5-2 ms
    of an eager call at n = 256 on 2x4).
    """
    return any(isinstance(x, jax.core.Tracer) for x in xs) or tracing()
