"""Which collectives of a compiled program may meet in one rendezvous on CPU (private).

XLA:CPU meets the participants of a collective in a process-wide rendezvous
keyed by ``(run id, device group, op id)``, and the op id is the HLO channel
id. XLA:CPU's thunk executor orders collectives by a *scheduling* edge: the
next collective may start as soon as the previous one has *started*. A
collective thunk runs to completion before its edges are followed, but a while
loop or a conditional that contains collectives can complete asynchronously
(its body offloads a GEMM to the thread pool and returns); a collective after
it that does not read its results then starts while the loop's own
collectives still run. If the two share a rendezvous key (jax lowers every
``shard_map`` collective with channel id 1), one device joins the same
rendezvous twice and the process dies (``rendezvous.h: Check failed: id <
num_threads``, or a segmentation fault from mismatched buffers) or computes
with another collective's data. It is a race: it shows when the devices'
threads are delayed unevenly (a loaded machine).

A later collective that reads (through any chain of instructions) a result
of the loop waits for the loop to finish (a buffer dependency, an *execution*
edge). :func:`hazards` finds, in compiled HLO text
(``jax.jit(f).lower(...).compile().as_text()``), each collective that shares
a rendezvous key (kind, device group, channel id) with a loop or conditional
holding collectives and is not ordered with it by a data dependency.
``_core/channels.py`` is distla's cure (a channel per collective);
``tests/test_collective_order.py`` runs this check on every family.
"""

from __future__ import annotations

import dataclasses
import re

from . import hlo

_KINDS = ("all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective-permute")


def _kind(opcode: str) -> str | None:
    for kind in _KINDS:
        if opcode == kind or opcode == kind + "-start":
            return kind
    return None


def _iota_groups(spec: str) -> list[tuple[int, ...]] | None:
    """``[g,s]<=[dims]T(perm)`` (XLA's iota replica groups) as explicit groups."""
    m = re.fullmatch(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", spec.strip())
    if not m:
        return None
    s = int(m.group(2))
    perm = m.group(4) and [int(p) for p in m.group(4).split(",")]
    ids = hlo.iota_device_ids([int(d) for d in m.group(3).split(",")], perm or None)
    return [tuple(ids[i : i + s]) for i in range(0, len(ids), s)]


def groups(ins: hlo.Instruction) -> list[frozenset[int]]:
    """The device groups a collective instruction meets in (logical device ids)."""
    pairs = ins.attr("source_target_pairs")
    if pairs is not None:  # a permute: every device that sends or receives
        ids = {int(i) for i in re.findall(r"\d+", pairs)}
        return [frozenset(ids)]
    by_axes = hlo.mesh_axes_groups(ins.attrs)  # Shardy's form (jax 0.11)
    if by_axes is not None:
        return [frozenset(g) for g in by_axes]
    iota = re.search(r"replica_groups=(\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?)", ins.attrs)
    if iota:  # XLA's compact form: [groups,size]<=[dims]T(perm)
        return [frozenset(g) for g in _iota_groups(iota.group(1)) or []]
    spec = ins.attr("replica_groups")
    if spec is None or spec in ("{}", ""):
        return [frozenset({-1})]  # every device of the program
    return [
        frozenset(int(i) for i in re.findall(r"\d+", g)) for g in re.findall(r"\{([\d,]*)\}", spec)
    ]


@dataclasses.dataclass(frozen=True)
class Hazard:
    """Collective ``later`` may start while ``loop`` (which holds collectives) still runs.

    ``computation``: where both are; ``meets``: the collective kind and
    device group they share.
    """

    computation: str
    loop: str
    later: str
    meets: tuple[str, tuple[int, ...]]

    def __str__(self) -> str:
        kind, group = self.meets
        return (
            f"in {self.computation}: {self.later} ({kind} over devices {list(group)}) does not "
            f"depend on {self.loop}, which holds {kind}s over the same devices"
        )


def _keys(ins: hlo.Instruction) -> set[tuple[str, frozenset[int], str]]:
    """The rendezvous a collective instruction joins: ``(kind, device group, channel id)``.

    XLA:CPU's key holds the channel id (the op id), so only collectives with the same
    channel id can meet the wrong partner: jax's (all 1) among themselves, not those
    XLA's partitioner makes (each its own id). One without a channel id is keyed by
    its unique instruction id: it meets no other.
    """
    kind = _kind(ins.opcode)
    channel = ins.attr("channel_id")
    if kind is None or channel is None:
        return set()
    return {(kind, g, channel) for g in groups(ins)}


def _collectives_of(module: hlo.Module) -> dict[str, set[tuple[str, frozenset[int], str]]]:
    """For each computation: the rendezvous keys it joins, nested computations included."""
    memo: dict[str, set[tuple[str, frozenset[int], str]]] = {}

    def visit(name: str, stack: tuple[str, ...] = ()) -> set[tuple[str, frozenset[int], str]]:
        if name in memo:
            return memo[name]
        if name in stack or name not in module.computations:
            return set()
        out: set[tuple[str, frozenset[int], str]] = set()
        for ins in module.computations[name].values():
            out |= _keys(ins)
            for role, sub in hlo.called(ins):
                if role != "calls" or ins.opcode in ("call", "async-start"):
                    out |= visit(sub, stack + (name,))
        memo[name] = out
        return out

    for name in module.computations:
        visit(name)
    return memo


def _meets(ins: hlo.Instruction, nested: dict) -> set[tuple[str, frozenset[int], str]]:
    if _kind(ins.opcode) is not None:
        return _keys(ins)
    out: set[tuple[str, frozenset[int], str]] = set()
    for role, sub in hlo.called(ins):
        if role != "calls" or ins.opcode in ("call", "async-start"):
            out |= nested.get(sub, set())
    return out


# Instructions that make no thunk of their own: their result is (part of) the buffer of
# an operand, so what reads them reads that operand's buffer (an optimization barrier
# orders the HLO schedule, not the thunks).
_ALIASES = ("bitcast", "get-tuple-element", "tuple", "opt-barrier", "add-dependency", "domain")


def _waits_for(comp: dict[str, hlo.Instruction], order: list[str]) -> dict[str, set[str]]:
    """For each instruction, the instructions whose completion it waits for.

    A thunk waits for the thunks that wrote the buffers it reads (XLA:CPU's
    execution edges). Through the instructions of ``_ALIASES`` only the
    buffers really passed on count: ``get-tuple-element(i)`` of a tuple or an
    optimization barrier reads element ``i`` alone, so a value tied to a loop
    by ``lax.optimization_barrier`` is scheduled after the loop but does not
    wait for it.
    """
    # provenance: the thunk instructions whose output buffers a value is made of,
    # per tuple element where the value is a tuple (None: the whole value)
    prov: dict[str, list[set[str]] | set[str]] = {}

    def whole(name: str) -> set[str]:
        p = prov.get(name, set())
        return set().union(*p) if isinstance(p, list) else set(p)

    waits: dict[str, set[str]] = {}
    for name in order:
        ins = comp[name]
        ops = [o for o in ins.operands if o in comp]
        if ins.opcode in ("tuple", "opt-barrier"):
            if ins.opcode == "tuple":
                prov[name] = [whole(o) for o in ops]
            else:  # opt-barrier(tuple): the same elements
                prov[name] = prov.get(ops[0], set()) if ops else set()
            waits[name] = set().union(*(waits.get(o, set()) for o in ops)) if ops else set()
            continue
        if ins.opcode == "get-tuple-element" and ops:
            src = prov.get(ops[0], set())
            index = int(ins.attr("index") or 0)
            if isinstance(src, list) and index < len(src):
                prov[name] = set(src[index])
            else:
                prov[name] = whole(ops[0])
            waits[name] = (
                set().union(*(waits.get(p, set()) | {p} for p in prov[name]))
                if prov[name]
                else set()
            )
            continue
        if ins.opcode in _ALIASES:
            prov[name] = set().union(*(whole(o) for o in ops)) if ops else set()
            waits[name] = (
                set().union(*(waits.get(p, set()) | {p} for p in prov[name]))
                if prov[name]
                else set()
            )
            continue
        if ins.opcode == "parameter" or ins.opcode == "constant":
            prov[name], waits[name] = set(), set()
            continue
        read = set().union(*(whole(o) for o in ops)) if ops else set()
        waits[name] = set().union(*(waits.get(r, set()) | {r} for r in read)) if read else set()
        prov[name] = {name}
    return waits


def hazards(text: str, *, any_order: bool = True) -> list[Hazard]:
    """Collectives of compiled HLO ``text`` that may overlap a loop's (see module doc).

    ``any_order``: also report a collective scheduled *before* the loop that
    the loop does not depend on (the default): the order XLA schedules two
    independent instructions in changes with the program around them (the
    same kernel compiled alone or inside a larger ``jit``, another jax or
    other flags), so a program is declared safe only when every such pair is
    ordered by a data dependency. ``False``: only the pairs this schedule can
    overlap.
    """
    module = hlo.parse(text)
    nested = _collectives_of(module)
    found: list[Hazard] = []
    for cname, order in module.order.items():
        comp = module.computations[cname]
        meets = {name: _meets(comp[name], nested) for name in order}
        ancestors = _waits_for(comp, order)
        loops = [n for n in order if comp[n].opcode in ("while", "conditional") and meets[n]]
        for loop in loops:
            i = order.index(loop)
            others = order[i + 1 :] + (order[:i] if any_order else [])
            for later in others:
                shared = meets[loop] & meets[later]
                if shared and loop not in ancestors[later] and later not in ancestors[loop]:
                    kind, group, _ = min(shared, key=lambda k: (k[0], sorted(k[1]), k[2]))
                    found.append(Hazard(cname, loop, later, (kind, tuple(sorted(group)))))
    return found
