"""Eager calls on one device as one compiled program (private).

On a mesh of one device (or with unsharded operands) every public function
runs jnp's own program, but called eagerly it would also run its checks,
dtype promotion and the few small jax operations around jnp's call in Python,
each of them dispatched on its own: about 0.05-0.1 ms per call, and several
times that where a function dispatches many small operations (``slogdet``,
``inv``, ``svd``). :func:`one_program` makes such a call one ``jax.jit``
dispatch instead, as ``jnp``'s own functions are:

- the arguments are split into arrays (the program's operands) and the rest
  (shapes, flags, ``norm=``, ``precision=``: static, part of the cache key,
  compared by type and value; lists and tuples are walked, so a list of
  arrays is operands);
- one ``jax.jit`` of the function per distinct static part, kept in a
  bounded LRU table (:data:`CACHE_SIZE` entries); ``jax.jit`` itself keys
  each on the operands' shapes, dtypes, shardings and jax's trace-time
  configuration (x64, ``jax_numpy_dtype_promotion``,
  ``default_matmul_precision``, the mesh in context), so the checks and the
  promotion run once, when the program is traced, and bad input raises the
  same ``ValueError``/``TypeError`` there;
- anything else goes the way it always went, with the function called as
  written: tracers (inside a user's ``jax.jit``, ``grad``, ``vmap``), an
  operand on more than one device, a mesh of more than one device in
  context, zero-size operands (their results are built with no mesh),
  non-jax arrays (numpy, lists) and unhashable options. A call whose trace
  needs concrete values (a selection by value) is remembered and runs
  eagerly from then on.

Array values never enter a key.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jax

from .mesh import tracing

CACHE_SIZE = 512
"""Compiled callables kept, over all public functions (least recently used go first)."""

_TRACE_NEEDS_VALUES = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
    jax.errors.NonConcreteBooleanIndexError,
)


class _Slot:
    """Where an operand sits in the arguments (one instance, hashable)."""

    def __repr__(self) -> str:
        return "<operand>"


_SLOT = _Slot()
_EAGER = object()  # cache value: this call's trace needs concrete values


class _NotOneDevice(Exception):
    """Raised while splitting the arguments: this call keeps the eager path."""


_CONCRETE: set[type] = set()  # types of operands that took the one-program path
_CONCRETE_ON_MESHES: set[type] = set()  # types of concrete operands seen on several devices


# Option values the fast look-up keys by exact type and value (flags, names, numbers):
# containers are walked by the full key instead, so that (0, 1) and (0.0, 1.0) differ.
_SCALAR_TYPES = frozenset({bool, int, float, str, type(None)})


FAST_KEYS = 32
"""Calls each public function keeps for the fast look-up (the first ones seen; others
take the full key, as every call did before)."""


def _fast_key(count: int, kwargs: dict) -> Any:
    """The fast look-up's key of a call with ``count`` arrays and ``kwargs``, or ``None``."""
    if not kwargs:
        return count
    items = [count]
    for name, value in kwargs.items():
        kind = type(value)
        if kind not in _SCALAR_TYPES:
            return None
        items.append((name, kind, value))
    return tuple(items)


_ONE_DEVICE: set[Any] = set()  # shardings seen on one device (a program has few of them)
_ONE_DEVICE_SIZE = 256


def _on_one_device(x: jax.Array) -> bool:
    """A concrete operand the one-program path takes: on one device, not empty.

    Its one-device sharding is remembered, so that the fast look-up in
    :func:`one_program` asks only whether the set holds it.
    """
    sharding = x.sharding
    if sharding not in _ONE_DEVICE:
        if sharding.num_devices != 1:
            return False
        if len(_ONE_DEVICE) >= _ONE_DEVICE_SIZE:
            _ONE_DEVICE.clear()
        _ONE_DEVICE.add(sharding)
    return 0 not in x.shape


def _freeze(value: Any, operands: list) -> Any:
    """``value`` as a hashable key, its jax arrays moved to ``operands``."""
    if isinstance(value, jax.Array):
        if isinstance(value, jax.core.Tracer) or not _on_one_device(value):
            raise _NotOneDevice
        operands.append(value)
        return _SLOT
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind, tuple(_freeze(v, operands) for v in value))
    try:
        hash(value)
    except TypeError:
        raise _NotOneDevice from None
    return (kind, value)  # 1, 1.0 and True are different keys


def _thaw(key: Any, operands) -> Any:
    if key is _SLOT:
        return next(operands)
    kind, value = key
    if kind is tuple or kind is list:
        return kind(_thaw(v, operands) for v in value)
    return value


class _Table:
    """A bounded LRU table of compiled callables."""

    def __init__(self, size: int):
        self.size = size
        self.entries: OrderedDict = OrderedDict()
        self.traces = 0  # functions traced by the fast path (a test counts them)

    def get(self, key: Any) -> Any:
        entry = self.entries.get(key)
        if entry is not None:
            try:
                self.entries.move_to_end(key)
            except KeyError:  # dropped by another thread meanwhile
                pass
        return entry

    def put(self, key: Any, entry: Any) -> None:
        self.entries[key] = entry
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            try:
                self.entries.popitem(last=False)
            except KeyError:
                break


_TABLE = _Table(CACHE_SIZE)


class _Unstable(Exception):
    """Two traces of one key left different non-array results: this key runs eagerly."""


class _Program:
    """One key's compiled callable.

    Results that are not arrays (``cho_factor``'s ``lower`` flag) are kept
    from the trace and put back around the program's array results, as the
    function returned them eagerly.
    """

    def __init__(self, fn: Callable[..., Any], args_key: Any, kwargs_key: Any):
        self.fn, self.args_key, self.kwargs_key = fn, args_key, kwargs_key
        self.traced = False
        self.statics: Any = None  # (treedef, leaves) of a result holding non-arrays
        self.jitted = jax.jit(self._trace)

    def _trace(self, *operands: jax.Array) -> Any:
        _TABLE.traces += 1
        it = iter(operands)
        args = _thaw(self.args_key, it)
        kwargs = {name: _thaw(v, it) for name, v in self.kwargs_key}
        out = self.fn(*args, **kwargs)
        leaves, treedef = jax.tree.flatten(out)
        statics = None
        if not all(isinstance(x, jax.Array) for x in leaves):
            statics = (
                treedef,
                tuple(None if isinstance(x, jax.Array) else (type(x), x) for x in leaves),
            )
        if self.traced and statics != self.statics:
            raise _Unstable
        self.traced, self.statics = True, statics
        return out if statics is None else [x for x in leaves if isinstance(x, jax.Array)]

    def __call__(self, *operands: jax.Array) -> Any:
        out = self.jitted(*operands)
        if self.statics is None:
            return out
        arrays = iter(out)
        treedef, leaves = self.statics
        return jax.tree.unflatten(treedef, [next(arrays) if s is None else s[1] for s in leaves])


def one_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose eager calls on one device are one compiled ``jax.jit`` program.

    Decorates a public function; see the module's docstring for when the
    call is compiled and when it runs as written.
    """

    # the full key of a call whose arguments are arrays alone and whose options are
    # scalars, by _fast_key
    plain_keys: dict[Any, Any] = {}

    @functools.wraps(fn)
    def public(*args: Any, **kwargs: Any) -> Any:
        # The common call, jax arrays and scalar options, is looked up with as little Python as
        # possible: it runs right after the caller last waited on a result, where each
        # Python step costs several times what it costs in a loop of calls.
        if jax.sharding.get_abstract_mesh().size > 1:
            return fn(*args, **kwargs)
        # an eager call on a mesh of several devices: the function as written, with none
        # of the look-ups below (on_their_meshes leaves concrete operands alone when no
        # trace runs); distla.matmul's eager call is then one jax.jit dispatch
        first = args[0] if args else None
        if type(first) in _CONCRETE_ON_MESHES and first.sharding.num_devices > 1 and not tracing():
            return fn(*args, **kwargs)
        # (after a wait every Python step costs several times what it costs in a loop of
        # calls, so this is written out: no calls but the look-ups, a loop with no generator)
        key = plain_keys.get(_fast_key(len(args), kwargs) if kwargs else len(args))
        if key is not None:
            for x in args:  # concrete, on a sharding seen on one device (_on_one_device), not empty
                if type(x) not in _CONCRETE or x.sharding not in _ONE_DEVICE or 0 in x.shape:
                    break
            else:
                program = _TABLE.get(key)
                if isinstance(program, _Program):
                    try:
                        if program.statics is None:  # a trace that changes it raises
                            return program.jitted(*args)
                        return program(*args)
                    except (_Unstable, *_TRACE_NEEDS_VALUES):
                        pass  # the path below marks the key eager
        operands: list = []
        try:
            key = (
                _freeze(args, operands),
                tuple((name, _freeze(v, operands)) for name, v in kwargs.items()),
            )
        except _NotOneDevice:
            concrete = isinstance(first, jax.Array) and not isinstance(first, jax.core.Tracer)
            if concrete and first.sharding.num_devices > 1:
                _CONCRETE_ON_MESHES.add(type(first))
            return fn(
                *on_their_meshes(args), **dict(zip(kwargs, on_their_meshes(tuple(kwargs.values()))))
            )
        if not operands:
            return fn(*args, **kwargs)
        key = (fn, *key)
        program = _TABLE.get(key)
        if program is _EAGER:
            return fn(*args, **kwargs)
        if program is None:
            program = _Program(fn, *key[1:])
            _TABLE.put(key, program)
        fast = _fast_key(len(args), kwargs)
        arrays_alone = len(operands) == len(args) and all(k is _SLOT for k in key[1][1])
        if fast is not None and arrays_alone and len(plain_keys) < FAST_KEYS:
            plain_keys.setdefault(fast, key)  # options that are scalars, if any
            _CONCRETE.update(type(x) for x in args)
        try:
            return program(*operands)
        except (_Unstable, *_TRACE_NEEDS_VALUES):
            _TABLE.put(key, _EAGER)
            return fn(*args, **kwargs)

    return public


def on_their_meshes(values: tuple) -> tuple:
    """``values``, with each concrete array on a multi-device ``Auto`` mesh pinned there
    when a trace runs.

    A jitted function that closes over sharded arrays hands them to distla as
    concrete constants. With no argument on the mesh and no mesh in context, jax
    would compile the call for one default device, which distla's programs over
    the operands' mesh cannot run on (jnp's own functions then run on that one
    device). A sharding constraint naming the array's own sharding puts the
    program on the mesh. Arrays on ``Explicit`` meshes are left as given: jax
    asks for the mesh in context there (``jax.set_mesh``), for jnp's functions
    as for distla's. Tuples and lists (``lu_solve``'s factors, ``multi_dot``'s
    matrices) are walked one level. Eager calls come back unchanged.
    """

    def on_a_mesh(x):
        if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer):
            return False
        sharding = x.sharding
        return (
            type(sharding) is jax.sharding.NamedSharding
            and sharding.mesh.size > 1
            and isinstance(sharding.mesh, jax.sharding.Mesh)
            and all(t == jax.sharding.AxisType.Auto for t in sharding.mesh.axis_types)
        )

    def pin(x):
        return jax.lax.with_sharding_constraint(x, x.sharding) if on_a_mesh(x) else x

    if (
        not any(on_a_mesh(w) for v in values for w in (v if isinstance(v, (tuple, list)) else (v,)))
        or not tracing()
    ):
        return values
    return tuple(
        type(v)(pin(w) for w in v) if isinstance(v, (tuple, list)) else pin(v) for v in values
    )


def on_one_mesh(*arrays: Any) -> bool:
    """Concrete jax arrays on the same mesh, none empty: an eager call on a mesh that a
    public function may run as one ``jax.jit`` of the whole call (``distla.matmul``,
    ``matrix_power``, ``multi_dot``), so that its checks run once, when traced, and its
    products are one dispatch. Tracers and anything else take the function as written."""
    mesh = None
    for x in arrays:
        if not isinstance(x, jax.Array) or isinstance(x, jax.core.Tracer) or 0 in x.shape:
            return False
        sharding = x.sharding
        if type(sharding) is not jax.sharding.NamedSharding:
            return False
        if mesh is None:
            mesh = sharding.mesh
        elif sharding.mesh != mesh:
            return False
    return mesh is not None


def hashable(option: Any) -> bool:
    """Whether ``option`` can be a static argument of ``jax.jit`` (a list of precisions
    cannot)."""
    try:
        hash(option)
    except TypeError:
        return False
    return True
