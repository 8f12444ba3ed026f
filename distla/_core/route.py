"""The one route of every public function (private): each declares what differs, it does the rest.

A public function of ``distla.linalg`` or ``distla.fft`` declares an :class:`Op`
(as jax declares a primitive once, with its shape, batching and derivative
rules) and its body is one :func:`call`, after the checks of its flags. The
route then runs the same steps for every family:

1. **check and promote**: each operand becomes a jax array (named in errors),
   the op's checks run, and the operands are cast to the dtype the call
   computes in (``jnp.linalg``'s promotion unless the op says otherwise);
2. **resolve the plan once** (``_core.plan.resolve``): the mesh the operands
   share, the dtype, the block size. Nothing below reads the mesh again;
3. **no mesh, or an empty operand**: the op's one-device function (jnp's or
   ``jax.scipy``'s), with empty results where jnp puts them;
4. **a stack** sharded along its batch: the op's stacked body (each device
   its own members, no collective);
5. **the one-device plan**, where ``plan=`` resolves to it (``_core.plan.choose``):
   the one-device function on the mesh's first device, its results sent back
   in the layouts the distributed driver returns (``_core.one_device``);
6. **the distributed driver** with the resolved :class:`~distla._core.plan.Plan`.
   Under a transformation (``jax.jit``, ``vmap``, derivatives) it runs inside
   the op's derivative rule (``jax.custom_jvp``) and vmap rule
   (``jax.custom_batching.custom_vmap``), built once per op, plan and options;
   called eagerly it runs as it is (the rules would only cost a trace);
7. **the results** wrapped as the op declares them (``EighResult``, ...).

:func:`public` is the decorator every public array function wears: one
compiled program per eager call on one device (``_core.eager.one_program``),
and the mark that says the function goes through this route.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.sharding import PartitionSpec as P

from .checks import as_array, empty_or_one_device, is_empty, is_traced, onto_mesh, result_dtype
from .checks import square as _square
from .eager import one_program
from .mesh import held_by_vmap, rule_on_mesh, with_layout
from .one_device import block_layout, choose_plan, on_one_device, result_structs
from .plan import Plan, resolve
from .stacked import stack


def _cast_all(dtype, *operands, **options):
    del options
    return tuple(x.astype(dtype) for x in operands)


def _promote(what, *operands, **options):
    del options
    return result_dtype(what, *operands)


def never(*operands, **options) -> bool:
    """``is_stack`` or ``empty`` of an op that never takes that step."""
    del operands, options
    return False


def first_dtype(what, x, *others, **options):
    """``promote`` of an op that computes in its first operand's dtype (jax's own
    function promotes, or the op has checked and cast already)."""
    del what, others, options
    return x.dtype


def as_given(dtype, *operands, **options) -> tuple:
    """``cast`` of an op whose functions cast the operands themselves (or not at all)."""
    del dtype, options
    return operands


def _default_layouts(plan: Plan, *operands, results, **options):
    """The one-device plan's layouts of the LU family's distributed programs: the
    largest even 2D block layout for matrices (vectors: row blocks), and on the
    way back 2-D results in it, the others replicated (``P(None, ...)``)."""
    del options
    mesh = plan.mesh
    ins = tuple(block_layout(x.shape, mesh) for x in operands)
    outs = tuple(
        block_layout(o.shape, mesh) if o.ndim == 2 else P(*[None] * o.ndim) for o in results
    )
    return ins, outs


def _same_options(**options):
    return options


def _run(run, plan, *operands, **options):
    del plan, options
    return run(*operands)


@dataclasses.dataclass(frozen=True)
class Planned:
    """What an op's one-device plan does besides running its one-device function.

    Attributes:
      options: ``options(**options)`` -> the options the one-device function,
        its budget and its layouts take (a selection by value, whose shape
        depends on values, made after it).
      finish: ``finish(run, plan, *operands, **options)`` -> the results, where
        ``run(*operands)`` runs the one-device function on one device (a rule
        put around it, a selection made after it).
    """

    options: Callable[..., dict] = _same_options
    finish: Callable[..., Any] = _run


@dataclasses.dataclass(frozen=True, eq=False)
class Op:
    """What one public function declares; :func:`call` does the rest the same way for all.

    Compared by identity (a module-level declaration), so that rules built for
    it are kept per op.

    Attributes:
      name: the public name, for error messages (``"distla.linalg.cholesky"``).
      one_device: jnp's (or ``jax.scipy``'s) function of the operands and the
        options, a module-level function: the one-device plan runs it, and
        unless ``unsharded`` says otherwise, the unsharded and empty calls too.
      distributed: ``driver(plan, *operands, **options)``: one problem on the
        plan's mesh (operands checked, promoted and on that mesh).
      operands: the array operands' names, as errors name them; a last name
        ending in ``*`` (``"arrs*"``) names every operand from there on
        (``arrs[0]``, ``arrs[1]``, ...: ``block_diag``'s blocks).
      check: ``check(what, *operands, **options)``: shapes and options of the
        operands (jax arrays, not yet promoted); raises ``ValueError`` or
        ``TypeError``.
      promote: ``promote(what, *operands, **options)`` -> the dtype of the call
        (default: ``jnp.linalg``'s, ``_core.checks.result_dtype``).
      cast: ``cast(dtype, *operands, **options)`` -> the operands the call
        computes on (default: each cast to ``dtype``).
      voters: the operands whose mesh is the call's (default: all).
      empty: ``empty(*operands, **options)``: the call takes the unsharded
        function as an empty one (default: any operand has no elements).
      is_stack: ``is_stack(*operands, **options)``: the call is a stack sharded
        along its batch (default: never).
      stacked: ``stacked(plan, *operands, **options)``: a stack, each device its
        own members (:func:`members` builds the common one).
      family: the key of the one-device plan's crossover (``_core.plan.CROSSOVER``);
        ``None``: the op has no one-device plan.
      layouts: ``layouts(plan, *operands, results=..., **options)`` ->
        ``(in_specs, out_specs)`` of the one-device plan (``results``: the
        one-device function's result structs); default: block layouts in,
        2-D results in block layouts and the others replicated.
      sizes: the function whose operands and results the one-device plan's
        budget counts, when it is not ``one_device`` (a result whose shape
        depends on values).
      planned: what the one-device plan does besides running ``one_device``
        (:class:`Planned`).
      jvp: ``jvp(fn, plan, primals, tangents, **options)`` -> ``(out, tangents)``,
        the derivative rule (``fn`` is the differentiated function itself, for
        higher orders); ``None``: jax differentiates the driver.
      symbolic_zeros: the rule takes ``None`` for a zero tangent.
      on_mesh: the rule runs through ``_core.mesh.rule_on_mesh`` (one program
        on an ``Explicit`` mesh, whose devices the primals carry).
      jitted: the rules run inside a ``jax.jit`` of their own (an eager
        ``custom_jvp`` of the FFT trips XLA:CPU).
      vmap: ``vmap(plan, axis_size, in_batched, *operands, **options)`` ->
        ``(out, out_batched)``, the rule that makes ``jax.vmap`` of one call
        one stacked call (:func:`by_stacks`); ``None``: jax batches the driver.
      refuse: ``refuse(what, *operands, **options)``: raises for what the op
        takes on one device but not on a mesh (checked once the operands are
        known to be sharded and not empty).
      unsharded: the function of unsharded and empty calls, where it is not
        ``one_device`` (a one-device stand-in for a jax function that cannot
        take the operands as they are).
      own_placement: the unsharded function takes the operands as they are, on
        one device or an empty one (``_core.checks.empty_or_one_device`` not
        around it): it places its results itself (the FFTs keep a one-device
        ``Explicit`` layout).
      instead: ``instead(dtype, *operands, **options)`` -> another op that takes
        the call from step 3 on (``None``: this one), once the dtype is known
        (``solve`` with ``factor_dtype``: mixed precision).
      result: ``result(out, **options)``: the results as the function returns them.
      keep_replicated: where every operand is replicated (``P()`` on an ``Explicit``
        mesh), the results come back replicated, as jnp's (:func:`replicated_as_given`);
        the computation itself stays the distributed one.
    """

    name: str
    one_device: Callable[..., Any]
    distributed: Callable[..., Any]
    operands: tuple[str, ...] = ("a",)
    check: Callable[..., None] | None = None
    promote: Callable[..., Any] = _promote
    cast: Callable[..., tuple] = _cast_all
    voters: tuple[int, ...] | None = None
    empty: Callable[..., bool] | None = None
    is_stack: Callable[..., bool] = never
    stacked: Callable[..., Any] | None = None
    family: str | None = None
    layouts: Callable[..., tuple] = _default_layouts
    sizes: Callable[..., Any] | None = None
    planned: Planned | None = None
    jvp: Callable[..., Any] | None = None
    symbolic_zeros: bool = False
    on_mesh: bool = True
    jitted: bool = False
    vmap: Callable[..., Any] | None = None
    refuse: Callable[..., None] | None = None
    unsharded: Callable[..., Any] | None = None
    own_placement: bool = False
    instead: Callable[..., Any] | None = None
    result: Callable[..., Any] | None = None
    keep_replicated: bool = False


def public(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The decorator of every public array function: :func:`call` is its route.

    Eager calls on one device run as one compiled program
    (``_core.eager.one_program``); the mark lets a test list the functions that
    go through the route.
    """
    wrapped = one_program(fn)
    wrapped.__distla_route__ = True
    return wrapped


def call(op: Op, *operands: Any, plan: str = "auto", block_size: int | None = None, **options):
    """``op`` on ``operands``: the route of the module docstring, steps 1 to 7.

    Args:
      op: the public function's declaration.
      *operands: its array operands (anything ``jnp.asarray`` takes).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` (ops with a
        one-device plan).
      block_size: the caller's block size (``None``: the algorithm's).
      **options: the static options, passed to every function the op declares
        (hashable: they key the compiled programs and the rules).
    """
    what = op.name
    names = operand_names(op.operands, len(operands))
    operands = tuple(as_array(x, name, what) for x, name in zip(operands, names))
    if op.check is not None:
        op.check(what, *operands, **options)
    dtype = op.promote(what, *operands, **options)
    operands = op.cast(dtype, *operands, **options)
    names = operand_names(op.operands, len(operands))
    if op.voters is not None:
        names = tuple(names[i] for i in op.voters)
        voters = tuple(operands[i] for i in op.voters)
    else:
        voters = operands
    resolved = resolve(*voters, names=names, dtype=dtype, block_size=block_size)
    if op.instead is not None:
        op = op.instead(dtype, *operands, **options) or op
    empty = is_empty(*operands) if op.empty is None else op.empty(*operands, **options)
    if resolved is None or empty:
        # members that are matrices: the stack reads them as the member did (a vector
        # b would be read as a matrix: jax.vmap's b of (n,) is the stack's (..., n, k))
        matrices = all(x.ndim >= 2 for x in operands)
        fixed = _hashable(tuple(sorted(options.items())))  # None: an array among them
        stacked = op.stacked is not None and matrices and fixed is not None and not empty
        if stacked and held_by_vmap(*voters):
            out = _members(op, fixed, *operands)
        else:
            unsharded = functools.partial(op.unsharded or op.one_device, **options)
            if op.own_placement:
                out = unsharded(*operands)
            else:
                out = empty_or_one_device(unsharded, *operands)
        return out if op.result is None else op.result(out, **options)
    if len(operands) > 1:  # one-device operands beside sharded ones join their mesh
        operands = onto_mesh(*operands)
    return on_plan(op, resolved, *operands, plan=plan, **options)


def operand_names(declared: tuple[str, ...], count: int) -> tuple[str, ...]:
    """The names of ``count`` operands declared as ``declared`` (:class:`Op`'s ``operands``)."""
    if declared and declared[-1].endswith("*"):
        fixed, rest = declared[:-1], declared[-1][:-1]
        return fixed + tuple(f"{rest}[{k}]" for k in range(count - len(fixed)))
    if count > len(declared):
        raise TypeError(f"{count} operands, but the op names {len(declared)}: {declared}")
    return declared[:count]


def on_plan(op: Op, resolved: Plan, *operands: jax.Array, plan: str = "auto", **options):
    """Steps 4 to 7 on a plan already resolved: a stack, the one-device plan (where ``plan``
    resolves to it), or the distributed driver; then the results.

    :func:`call` ends here; so does a public function built on another op whose
    operands it has checked, promoted and put on ``resolved``'s mesh already
    (``lstsq`` on ``svd``'s), so that nothing is checked or read again.
    """
    if op.refuse is not None:
        op.refuse(op.name, *operands, **options)
    if op.is_stack(*operands, **options):
        out = op.stacked(resolved, *operands, **options)
    else:
        out = None if op.family is None else _one_device(op, resolved, operands, plan, options)
        if out is None:
            out = distributed(op, resolved, *operands, **options)
    if op.keep_replicated:
        out = replicated_as_given(resolved, operands, out)
    return out if op.result is None else op.result(out, **options)


def replicated_as_given(resolved: Plan, operands: tuple, out: Any) -> Any:
    """``out``'s arrays replicated where every operand is (``P()`` on an ``Explicit``
    mesh), as jnp returns them; otherwise ``out`` as it is.

    The drivers lay their results out in the mesh's blocks whatever the operands'
    layout; a replicated operand already holds the whole matrix on every device, so
    gathering the result there costs no more memory than the operand does.
    """
    del resolved  # the operands' types say it (no call into the mesh module: test_walk)
    arrays = [x for x in operands if isinstance(x, jax.Array)]
    if not arrays or not all(map(_replicated_on_explicit, arrays)):
        return out

    def whole(x):
        return with_layout(x, ((),) * x.ndim) if isinstance(x, jax.Array) else x

    return jax.tree.map(whole, out)


def _replicated_on_explicit(x: jax.Array) -> bool:
    sharding = jax.typeof(x).sharding
    explicit = any(t == jax.sharding.AxisType.Explicit for t in sharding.mesh.axis_types)
    return explicit and all(entry is None for entry in sharding.spec)


def _one_device(op: Op, resolved: Plan, operands: tuple, plan: str, options: dict):
    """Step 5: the one-device plan's results, or ``None`` where ``plan`` keeps the call
    distributed (``_core.plan.choose``)."""
    chosen = options if op.planned is None else op.planned.options(**options)
    fixed = tuple(chosen.items())
    sizes = op.sizes or op.one_device
    if choose_plan(op.family, plan, sizes, *operands, what=op.name, options=fixed) != "one_device":
        return None
    results = result_structs(sizes, operands, fixed)
    ins, outs = op.layouts(resolved, *operands, results=results, **chosen)

    def run(*xs):
        return on_one_device(
            op.one_device, *xs, mesh=resolved.mesh, in_specs=ins, out_specs=outs, options=fixed
        )

    if op.planned is None:
        return run(*operands)
    return op.planned.finish(run, resolved, *operands, **options)


def distributed(op: Op, plan: Plan, *operands: jax.Array, **options: Any):
    """Step 6: ``op``'s driver on ``plan``, inside its rules when a transformation traces it.

    For calls made inside a family (an op whose operands are already checked,
    promoted and on ``plan``'s mesh).
    """
    if not is_traced(*operands) or (op.vmap is None and op.jvp is None):
        # the rules act only under a transformation (options may then be arrays)
        return op.distributed(plan, *operands, **options)
    return _ruled(op, plan, tuple(sorted(options.items())))(*operands)


@functools.lru_cache(maxsize=512)
def _ruled(op: Op, plan: Plan, options: tuple) -> Callable[..., Any]:
    """``op``'s driver with its vmap and derivative rules, built once per op, plan and options."""
    kw = dict(options)
    fn = functools.partial(op.distributed, plan, **kw)
    if op.vmap is not None:
        fn = jax.custom_batching.custom_vmap(fn)
        fn.def_vmap(lambda size, batched, *xs: op.vmap(plan, size, batched, *xs, **kw))
    if op.jvp is not None:
        fn = jax.custom_jvp(fn)
        differentiated = fn

        def rule(primals, tangents):
            return op.jvp(differentiated, plan, primals, tangents, **kw)

        rule = rule_on_mesh(rule) if op.on_mesh else rule
        if op.symbolic_zeros:  # zeros stay None: jax would instantiate them eagerly, with
            # the operand's sharding, which outside jax.set_mesh names no devices
            fn.defjvp(lambda p, t: rule(p, tuple(_live(x) for x in t)), symbolic_zeros=True)
        else:
            fn.defjvp(rule)
    return jax.jit(fn) if op.jitted else fn


def _live(tangent):
    return None if isinstance(tangent, SymbolicZero) else tangent


def jvp_in_live(fn: Callable[..., Any], primals: tuple, tangents: tuple):
    """``jax.jvp(fn, primals, tangents)`` taken only in the operands whose tangent is not
    ``None`` (a rule of an op with ``symbolic_zeros``), the others held fixed.

    Filling a ``None`` with zeros would be built from the operand's type alone, which on an
    ``Explicit`` mesh outside ``jax.set_mesh`` names no devices.
    """
    live = [i for i, t in enumerate(tangents) if t is not None]

    def of_live(*xs):
        args = list(primals)
        for i, x in zip(live, xs):
            args[i] = x
        return fn(*args)

    if not live:
        out = fn(*primals)
        return out, jax.tree.map(jnp.zeros_like, out)
    return jax.jvp(of_live, tuple(primals[i] for i in live), tuple(tangents[i] for i in live))


# ------------------------------------------------------------------ stacks and vmap


def _hashable(options: tuple) -> tuple | None:
    try:
        hash(options)
    except TypeError:
        return None
    return options


def _members(op: Op, options: tuple, *operands: jax.Array) -> Any:
    """:func:`_vmapped_members` on ``operands``, its results in the structure of jnp's."""
    unsharded, fn = _vmapped_members(op, options)
    tree = jax.tree.structure(jax.eval_shape(unsharded, *operands))
    return jax.tree.unflatten(tree, fn(*operands))


@functools.lru_cache(maxsize=512)
def _vmapped_members(op: Op, options: tuple) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """A call inside ``jax.vmap`` over a batch sharded on ``Explicit`` axes (which the
    vmap holds: no program of the call may use them), for an op with a stacked body.

    Batched, the mapped axis becomes a stack's batch and the call takes the route
    again with the stack, outside the vmap: the op's stacked body (each device its own
    members, every mesh axis on the batch where it fits), as :func:`by_stacks` does
    for the distributed drivers. Not batched, and under derivatives (``custom_vmap``
    has none), jnp's function on whole members (``_core.mesh.drop_trivial_sharding``).
    """
    kw = dict(options)
    unsharded = functools.partial(
        empty_or_one_device, functools.partial(op.unsharded or op.one_device, **kw)
    )

    bare = dataclasses.replace(op, result=None)  # the results as the vmapped function's

    def stacked(plan, *xs, **kw):
        del plan  # the stack's: the route resolves it again, outside the vmap
        return call(bare, *xs, **kw)

    def leaves(f):  # both sides return the results' leaves (jnp's and the stacked
        # body's structures differ: EighResult, a tuple)
        return lambda *xs, **o: tuple(jax.tree.leaves(f(*xs, **o)))

    rule = by_stacks(leaves(stacked))
    fn = jax.custom_batching.custom_vmap(leaves(unsharded))
    fn.def_vmap(lambda size, batched, *xs: rule(None, size, batched, *xs, **kw))
    fn = jax.custom_jvp(fn)
    fn.defjvp(lambda primals, tangents: jax.jvp(leaves(unsharded), primals, tangents))
    return unsharded, fn


def members(fn: Callable[..., Any], cores: tuple[int, ...], out_core: int) -> Callable[..., Any]:
    """``stacked`` for an op whose members run ``fn`` (its one-device function): each
    device its own members (``_core.stacked.stack``), operands of ``cores`` core
    dimensions, results of ``out_core``."""

    def stacked(plan: Plan, *operands, **options):
        return stack(functools.partial(fn, **options), operands, cores, out_core, mesh=plan.mesh)

    return stacked


def square(what: str, a, *others, **options) -> None:
    """``check`` of an op whose first operand is a square matrix or a stack of them."""
    del others, options
    _square(a, what)


def beyond(*cores: int) -> Callable[..., bool]:
    """``is_stack`` of an op whose operands have ``cores`` core dimensions: a stack when
    any operand has more."""

    def is_stack(*operands, **options):
        del options
        return any(x.ndim > c for x, c in zip(operands, cores))

    return is_stack


def by_stacks(stacked: Callable[..., Any]) -> Callable[..., Any]:
    """A vmap rule: the mapped axis becomes a stack's batch, which ``stacked(plan, *xs,
    **options)`` computes (each device its own members); unmapped operands are
    broadcast along it, as ``jax.vmap`` broadcasts them."""

    def rule(plan: Plan, axis_size: int, in_batched, *xs, **options):
        xs = [
            x if mapped or x is None else jnp.broadcast_to(x, (axis_size, *x.shape))
            for x, mapped in zip(xs, in_batched)  # None: an absent operand (eigh's b)
        ]
        with jax.numpy_rank_promotion("allow"):
            out = stacked(plan, *xs, **options)
        return out, jax.tree.map(lambda _: True, out)

    return rule
