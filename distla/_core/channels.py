"""One channel id per collective in CPU programs (private).

XLA:CPU meets the participants of a collective in a process-wide rendezvous
keyed by ``(run id, device group, op id)``, and the op id is the HLO channel
id. jax lowers every ``shard_map`` collective with the same channel id (1:
``jax._src.interpreters.mlir.COLLECTIVE_CHANNEL_ID``), so within one run all
the all-reduces of one program over one device group share one rendezvous,
and they are told apart only by running one after the other on every device.
XLA:CPU's thunk executor does not guarantee that: collectives are ordered by
*scheduling* edges (the next may start once the previous has started), and a
while loop or conditional holding collectives can return before its body has
finished (its body offloads a GEMM and completes asynchronously). A later
collective that does not read the loop's results then starts while the loop's
are still running, a device joins one rendezvous twice, and the process aborts
(``rendezvous.h: Check failed: id < num_threads``), dies of a segmentation
fault, or reduces another collective's data. A float64 ``solve`` with
``factor_dtype=float32`` at n = 2048 on 2x4 died so in 11 runs of 16 on a
loaded machine: an all-reduce of its refinement over devices 0-3 did not
depend on the LU's loop of all-reduces over the same devices.

The cure here removes the shared key instead of ordering every pair: each
collective instruction gets a channel id of its own (the module's channel
counter, as XLA's partitioner does for the collectives it makes), so two
different collectives never meet in one rendezvous, whatever order the runtime
runs them in. The same instruction run again (a loop's next iteration) keeps
its id, as it must: every device runs it in program order. :func:`install`
wraps jax's CPU lowering rules of its collective primitives once per process;
the wrapped rule lowers as jax does and then renumbers the channel of the
collective operations it emitted. jax lowers some things once per program and
uses the result at every site: an equation of a cacheable primitive (one
function, inlined at each use) and the function of a ``jit`` or ``closed_call``
(one function, called from each site, inlined by XLA). Copies of a collective
made so would share its id again (``svd`` runs one distributed product for
``u`` and for ``vh``: two loops of all-gathers with the same ids), so the
collectives and the primitives whose parameters hold functions are lowered at
each use, and a call's function that holds collectives at each call. What
XLA compiles is the same program as before (it inlined those copies anyway),
with other ids: the same values, no extra dependency for derivatives to see,
and no compile cost to measure (the lowered text of ``eigh`` and ``svd`` is
1-2% longer).

Only CPU lowerings are wrapped: GPUs run a device's collectives in the order
of its stream (NCCL communicators are keyed by the device group, not by the
operation), TPUs order them in the compiled program. The wrapping applies to
every CPU program the process lowers afterwards, users' own ``shard_map``s
and several distla calls in one ``jax.jit`` included.
``distla/_core/collective_order.py`` finds collectives that share a key and may
overlap in compiled HLO; ``tests/test_collective_order.py`` runs it on every
family.
"""

from __future__ import annotations

import jax.extend.core as jex
from jax._src import core as jax_core
from jax._src import pjit
from jax._src.interpreters import mlir  # the lowering registry: no public API to wrap a rule
from jax._src.lax import parallel
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

# The collective primitives whose lowering carries jax's shared channel id.
_PRIMITIVES = tuple(
    p
    for p in (
        getattr(parallel, name, None)
        for name in (
            "psum_p",
            "pmax_p",
            "pmin_p",
            "psum_invariant_p",
            "ppermute_p",
            "all_gather_p",
            "all_gather_invariant_p",
            "all_to_all_p",
            "reduce_scatter_p",
            "pbroadcast_p",
        )
    )
    if p is not None
)
# Calls whose function jax lowers once per program and calls from every site.
_CALLS = tuple(
    p
    for p in (
        getattr(pjit, "jit_p", None),
        getattr(jax_core, "closed_call_p", None),
        getattr(jax_core, "call_p", None),
    )
    if p is not None
)
# Primitives whose parameters hold functions, by name (the lowering registry's keys):
# loops, conditionals, custom derivatives and linear solves, checkpoints, shard_map.
_HOLDER_NAMES = frozenset(
    {
        "while",
        "cond",
        "scan",
        "shard_map",
        "custom_jvp_call",
        "custom_vjp_call",
        "custom_lin",
        "custom_linear_solve",
        "custom_vmap_call",
        "linear_call",
        "remat2",
        "remat_opt",
        "run_state",
        "call",
    }
)
_HOLDERS = tuple(p for p in getattr(mlir, "_lowerings", ()) if p.name in _HOLDER_NAMES)
# StableHLO operations that meet in a rendezvous and carry a channel handle.
_COLLECTIVE_OPS = frozenset(
    {
        "stablehlo.all_reduce",
        "stablehlo.all_gather",
        "stablehlo.all_to_all",
        "stablehlo.reduce_scatter",
        "stablehlo.collective_permute",
        "stablehlo.collective_broadcast",
    }
)
# How far back from a rule's results its collective can be: jax's rules put at most a
# reshape, convert or async wrapper between the collective and what they return.
_DEPTH = 4
_PLATFORM = "cpu"
# primitive -> (its CPU-specific rule entry before install, or None; was it uncacheable)
_original: dict = {}
_made_uncacheable: set = set()  # what install() made uncacheable (uninstall() undoes it)


def _renumber(op, ctx, depth: int, seen: set) -> None:
    """Give the collective operations at or above ``op`` (within ``depth``) fresh channels."""
    if depth < 0 or op is None:
        return
    operation = op.operation if hasattr(op, "operation") else op
    key = id(operation)
    if key in seen:
        return
    seen.add(key)
    name = operation.name
    if name in _COLLECTIVE_OPS and "channel_handle" in operation.attributes:
        operation.attributes["channel_handle"] = hlo.ChannelHandle.get(
            ctx.module_context.new_channel(), mlir.DEVICE_TO_DEVICE_TYPE
        )
    if name == "stablehlo.async_start":  # the collective sits in the wrapper's region
        for region in operation.regions:
            for block in region.blocks:
                for inner in block.operations:
                    _renumber(inner, ctx, 0, seen)
    for operand in operation.operands:
        owner = operand.owner
        if isinstance(owner, ir.Block):
            continue
        _renumber(owner, ctx, depth - 1, seen)


def _values(out) -> list:
    if isinstance(out, ir.Value):
        return [out]
    if isinstance(out, (list, tuple)):
        return [v for o in out for v in _values(o)]
    if isinstance(out, ir.OpResultList):
        return list(out)
    return []


def _wrapped(rule):
    def lower(ctx, *args, **params):
        out = rule(ctx, *args, **params)
        seen: set = set()
        for value in _values(out):
            owner = value.owner
            if not isinstance(owner, ir.Block):
                _renumber(owner, ctx, _DEPTH, seen)
        return out

    lower.__wrapped__ = rule  # type: ignore[attr-defined]
    return lower


def _holds_collective(jaxpr) -> bool:
    """Whether ``jaxpr`` (open or closed) binds one of :data:`_PRIMITIVES`, at any depth."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    hit = _holds_memo.get(id(jaxpr))
    if hit is not None and hit[0] is jaxpr:
        return hit[1]
    answer = any(
        eqn.primitive in _PRIMITIVES
        or any(_holds_collective(sub) for sub in jex.jaxprs_in_params(eqn.params))
        for eqn in jaxpr.eqns
    )
    if len(_holds_memo) > 4096:
        _holds_memo.clear()
    _holds_memo[id(jaxpr)] = (jaxpr, answer)  # the jaxpr kept alive: its id stays its own
    return answer


_holds_memo: dict[int, tuple] = {}


def _wrapped_call(rule):
    """``rule`` of a call (``jit``, ``closed_call``) whose function is lowered anew at each site.

    jax lowers the function of a call once per program and calls it from every site;
    XLA inlines each call, so every copy of a collective in it would carry one channel
    (``svd`` calls one product for ``u`` and for ``vh``: two loops of all-gathers with
    the same channels). Forgetting the function after each call makes the next
    site lower its own, with channels of its own.
    """

    def lower(ctx, *args, **params):
        out = rule(ctx, *args, **params)
        jaxpr = params.get("jaxpr", params.get("call_jaxpr"))
        if jaxpr is not None and _holds_collective(jaxpr):
            inner = getattr(jaxpr, "jaxpr", jaxpr)
            cache = getattr(ctx.module_context, "cached_primitive_lowerings", {})
            for key in [
                k
                for k in cache
                if isinstance(k, tuple) and any(e is jaxpr or e is inner for e in k)
            ]:
                del cache[key]
        return out

    lower.__wrapped__ = rule  # type: ignore[attr-defined]
    return lower


def _wrap(prim, make) -> None:
    entry = mlir._platform_specific_lowerings[_PLATFORM].get(prim) or mlir._lowerings.get(prim)
    if entry is None or prim in _original:
        return
    _original[prim] = (
        mlir._platform_specific_lowerings[_PLATFORM].get(prim),
        prim in mlir._uncacheable_primitives,
    )
    mlir.register_lowering(prim, make(entry.rule), platform=_PLATFORM, inline=entry.inline)


def _registry_as_expected() -> bool:
    """Whether this jax has the lowering registry the wrappers rely on (0.10.2 does)."""
    return all(
        hasattr(mlir, name)
        for name in ("_lowerings", "_platform_specific_lowerings", "_uncacheable_primitives")
    ) and hasattr(mlir.ModuleContext, "new_channel")


def install() -> None:
    """Wrap jax's CPU lowering rules of its collectives (once per process; module doc).

    On a jax whose lowering registry differs, nothing is wrapped (:func:`installed`
    says so, and ``tests/test_collective_order.py`` fails there).
    """
    if not _registry_as_expected():
        return
    for prim in _PRIMITIVES:
        _wrap(prim, _wrapped)
    for prim in _CALLS:
        _wrap(prim, _wrapped_call)
    # jax lowers an equation of a cacheable primitive once per program (per primitive,
    # operand types and parameters) and inlines that function at every use: every copy
    # of a collective in it would carry one channel. Collectives, and the primitives
    # whose parameters hold functions (two loops of one body, traced once), are
    # lowered at each use instead; what XLA compiles is the same (it inlines the copies).
    for prim in (*_PRIMITIVES, *_HOLDERS):
        if prim not in mlir._uncacheable_primitives:
            _made_uncacheable.add(prim)
            mlir._uncacheable_primitives.add(prim)


def uninstall() -> None:
    """Undo :func:`install` (the tests compare with jax's own lowering)."""
    for prim, (entry, _) in _original.items():
        if entry is None:
            mlir._platform_specific_lowerings[_PLATFORM].pop(prim, None)
        else:
            mlir._platform_specific_lowerings[_PLATFORM][prim] = entry
    _original.clear()
    mlir._uncacheable_primitives.difference_update(_made_uncacheable)
    _made_uncacheable.clear()


def installed() -> bool:
    """Whether CPU lowerings of collectives get channels of their own now."""
    return bool(_original)
