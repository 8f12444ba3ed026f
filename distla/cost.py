"""What a call costs per device, read from its compiled program: ``distla.cost``."""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import jax

from ._core import hlo as _hlo
from ._core import plan as _plan

COLLECTIVE_KINDS = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
)


@dataclasses.dataclass(frozen=True)
class CollectiveOp:
    """One collective instruction of the compiled program.

    Attributes:
      kind: one of ``COLLECTIVE_KINDS``.
      shape: its per-device result shape, as HLO prints it.
      group_size: devices in each of its replica groups.
      bytes: bytes one device receives each time it runs (see ``Cost``).
      count: how many times it runs (while-loop trip counts multiplied out).
    """

    kind: str
    shape: str
    group_size: int
    bytes: int
    count: int


@dataclasses.dataclass(frozen=True)
class Cost:
    """Per-device cost of one compiled call.

    ``collective_bytes[kind]`` is what one device receives over the whole call
    from collectives of that kind, under the textbook ring/pairwise algorithms
    for a group of ``g`` devices: all-gather ``(g-1)/g`` of its result;
    reduce-scatter ``g-1`` times its result; all-reduce ``2(g-1)/g`` of its
    operand; all-to-all ``(g-1)/g`` of its operand; collective-permute and
    collective-broadcast their whole operand.

    Attributes:
      num_devices: devices the program is partitioned over.
      collective_bytes: bytes received per device, by kind (every kind present).
      collective_counts: collective instructions executed, by kind.
      collectives: every collective instruction, with its size and count.
      argument_bytes, output_bytes, temp_bytes, alias_bytes: XLA's memory
        analysis of the per-device program.
      lapack_workspace_bytes: the LAPACK workspace of the one-device plan's
        call (``syevd``'s, ``gesdd``'s, ``geev``'s, ...), which LAPACK allocates
        inside its custom call, unseen by XLA: the largest among the program's
        one-device plans (modelled per family, docs/memory.md), 0 when it has
        none.
      peak_memory_bytes: ``argument + output + temp - alias`` plus
        ``lapack_workspace_bytes``: what one device holds at the high-water
        mark.
      flops: per-device floating-point operations of the dense work — dots,
        triangular solves, LAPACK calls and FFTs, with loops multiplied out
        (complex work counted as 4 real flops per multiply-add pair, LAPACK's
        convention; FFTs as 5·N·log2(N); LAPACK's iterative eigenvalue and SVD
        routines by Golub & Van Loan's counts: ``heevd`` 9n³ with vectors,
        ``gesdd`` 21n³ square with every vector, ``geev`` 25n³).
      conditional_flops: the part of ``flops`` inside ``lax.cond`` branches
        (the costliest branch, as ``flops`` counts it). Such work may run on
        some devices only: distla's LU factors each panel on its owner mesh
        column alone, so the flops all devices execute together are
        ``num_devices·(flops - conditional_flops) + owners·conditional_flops``.
      xla_flops: XLA's own cost analysis, which counts a loop body once.
      exact: False when a loop had no known trip count (counted once).
      plan: the plan distla chose while tracing the call: ``"distributed"``,
        ``"one_device"`` (the operands moved to one device and back, below
        the budget of ``distla.linalg.set_plan_budget``), for
        ``distla.matmul`` its algorithm (``"summa"``, ``"cannon"`` or
        ``"xla"``), ``"mixed"`` when its calls chose differently, ``None``
        when no call chose one.
      plans: every choice (``family``, ``plan``, ``bytes`` the one-device
        plan moves), in the order the calls were traced.

    Examples:
      ``str(cost)`` is a summary per device:

      >>> import jax.numpy as jnp
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((512, 512)), mesh)
      >>> print(distla.cost(distla.matmul, a, a, algorithm="summa"))
      per device, 8 devices
        all-gather                 0.50 MiB in 32 ops
        peak memory                ... MiB
        flops                ...
        plan matmul          summa
    """

    num_devices: int
    collective_bytes: dict[str, int]
    collective_counts: dict[str, int]
    collectives: tuple[CollectiveOp, ...]
    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    flops: float
    xla_flops: float
    exact: bool
    conditional_flops: float = 0.0
    plan: str | None = None
    plans: tuple[_plan.Chosen, ...] = ()
    lapack_workspace_bytes: int = 0

    @property
    def peak_memory_bytes(self) -> int:
        xla = self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes
        return xla + self.lapack_workspace_bytes

    @property
    def total_collective_bytes(self) -> int:
        return sum(self.collective_bytes.values())

    def largest(self, kind: str | None = None) -> int:
        """Bytes of the largest single result of a collective (of ``kind``)."""
        sizes = [
            _hlo.shape_bytes(op.shape) for op in self.collectives if kind is None or op.kind == kind
        ]
        return max(sizes, default=0)

    def __str__(self) -> str:
        mib = 2.0**20
        lines = [f"per device, {self.num_devices} devices"]
        for kind in COLLECTIVE_KINDS:
            if self.collective_counts[kind]:
                lines.append(
                    f"  {kind:<20} {self.collective_bytes[kind] / mib:10.2f} MiB "
                    f"in {self.collective_counts[kind]} ops"
                )
        lines.append(f"  {'peak memory':<20} {self.peak_memory_bytes / mib:10.2f} MiB")
        lines.append(f"  {'flops':<20} {self.flops:10.4g}")
        if self.conditional_flops:
            lines.append(f"  {'  in lax.cond':<20} {self.conditional_flops:10.4g}")
        for c in self.plans:
            moved = f", {c.bytes / mib:.2f} MiB to one device and back" if c.bytes else ""
            lines.append(f"  plan {c.family:<15} {c.plan}{moved}")
        return "\n".join(lines)


def cost(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Cost:
    """Compile ``fn(*args, **kwargs)`` and report its cost per device.

    Nothing is executed: the program is lowered and compiled for these
    arguments (arrays, or ``jax.ShapeDtypeStruct`` with a ``sharding``), then
    read. Keyword arguments are bound as static values.

    Args:
      fn: any function jax can jit, for example ``distla.matmul``.
      *args: its array arguments.
      **kwargs: static keyword arguments (``algorithm="cannon"``).

    Returns:
      A [`Cost`][distla.Cost]: bytes each collective kind moves into each device,
      peak memory per device, and flops per device.

    Examples:
      SUMMA on a 2 x 4 mesh receives A's block row and B's block column, less
      the device's own share, and never a whole operand:

      >>> import jax.numpy as jnp
      >>> import distla
      >>> from distla.matmul import model_bytes
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((512, 512)), mesh)
      >>> c = distla.cost(distla.matmul, a, a, algorithm="summa")
      >>> c.total_collective_bytes / 2**20, model_bytes((512, 512, 512), (2, 4), a.dtype) / 2**20
      (0.5, 0.5)
      >>> c.peak_memory_bytes < a.nbytes, c.plan
      (True, 'summa')
    """

    def target(*args):  # a new function each time: traced afresh, so its plans are seen
        return fn(*args, **kwargs)

    with _plan.recording() as notes:
        compiled = jax.jit(target).lower(*args).compile()
    found = cost_of_compiled(compiled)
    kinds = {c.plan for c in notes}
    plan = None if not kinds else kinds.pop() if len(kinds) == 1 else "mixed"
    # one LAPACK call's workspace at a time: the largest one-device plan's
    workspace = max((c.workspace for c in notes if c.plan == "one_device"), default=0)
    return dataclasses.replace(
        found, plan=plan, plans=tuple(notes), lapack_workspace_bytes=workspace
    )


def cost_of_compiled(compiled: Any) -> Cost:
    """The [`Cost`][distla.Cost] of an already compiled ``jax.stages.Compiled``."""
    module = _hlo.parse(compiled.as_text())
    summary = _Walker(module).summary(module.entry)
    mem = compiled.memory_analysis()
    xla = compiled.cost_analysis()
    if isinstance(xla, list):  # older jax returned one dict per module
        xla = xla[0] if xla else {}
    ops = tuple(
        CollectiveOp(kind, shape, g, b, n) for (kind, shape, g, b), n in summary.ops.items()
    )
    bytes_by_kind = {k: 0 for k in COLLECTIVE_KINDS}
    counts = {k: 0 for k in COLLECTIVE_KINDS}
    for op in ops:
        bytes_by_kind[op.kind] += op.bytes * op.count
        counts[op.kind] += op.count
    return Cost(
        num_devices=module.num_partitions,
        collective_bytes=bytes_by_kind,
        collective_counts=counts,
        collectives=ops,
        argument_bytes=int(getattr(mem, "argument_size_in_bytes", 0)),
        output_bytes=int(getattr(mem, "output_size_in_bytes", 0)),
        temp_bytes=int(getattr(mem, "temp_size_in_bytes", 0)),
        alias_bytes=int(getattr(mem, "alias_size_in_bytes", 0)),
        flops=summary.flops,
        xla_flops=float((xla or {}).get("flops", 0.0)),
        exact=summary.exact,
        conditional_flops=summary.conditional_flops,
    )


@dataclasses.dataclass
class _Summary:
    ops: collections.Counter  # (kind, shape, group, bytes) -> executions
    flops: float = 0.0
    conditional_flops: float = 0.0
    exact: bool = True

    def add(self, other: _Summary, times: int = 1) -> None:
        for key, n in other.ops.items():
            self.ops[key] += n * times
        self.flops += other.flops * times
        self.conditional_flops += other.conditional_flops * times
        self.exact &= other.exact


class _Walker:
    def __init__(self, module: _hlo.Module):
        self.m = module
        self.memo: dict[str, _Summary] = {}

    def summary(self, comp: str) -> _Summary:
        if comp in self.memo:
            return self.memo[comp]
        s = _Summary(collections.Counter())
        self.memo[comp] = s  # guards against (impossible) recursion
        table = self.m.computations.get(comp, {})
        for name in self.m.order.get(comp, []):
            ins = table[name]
            self._instruction(ins, table, s)
        return s

    def _instruction(self, ins: _hlo.Instruction, table: dict, s: _Summary) -> None:
        op = ins.opcode
        kind = _collective_kind(op)
        if kind is not None:
            shape = ins.shape
            if op.endswith("-start"):
                shape = _done_shape(ins, table) or shape
            g = _group_size(ins, self.m.num_partitions)
            b = _received_bytes(kind, shape, g, ins)
            s.ops[(kind, _strip_layout(shape), g, b)] += 1
        s.flops += _flops(ins, table)
        calls = _hlo.called(ins)
        if op == "while":
            n = _hlo.trip_count(ins)
            if n is None:
                s.exact = False
                n = 1
            for role, comp in calls:
                s.add(self.summary(comp), n if role == "body" else n + 1)
            return
        branches = [c for role, c in calls if role == "branch"]
        if branches:
            best = max((self.summary(c) for c in branches), key=lambda x: x.flops)
            worst = _Summary(collections.Counter())
            for c in branches:  # collectives: the union, counted once per branch
                for key, n in self.summary(c).ops.items():
                    worst.ops[key] = max(worst.ops[key], n)
            worst.flops = worst.conditional_flops = best.flops
            s.add(worst)
        for role, comp in calls:
            if role == "calls":
                s.add(self.summary(comp))


def _collective_kind(opcode: str) -> str | None:
    base = opcode.removesuffix("-start")
    if opcode.endswith("-done"):
        return None
    return base if base in COLLECTIVE_KINDS else None


def _done_shape(start: _hlo.Instruction, table: dict) -> str | None:
    for ins in table.values():
        if ins.opcode.endswith("-done") and start.name in ins.operands:
            return ins.shape
    return None


def _strip_layout(shape: str) -> str:
    return re.sub(r"\{[^{}]*\}", "", shape)


def _group_size(ins: _hlo.Instruction, num_partitions: int) -> int:
    if ins.opcode.startswith(("collective-permute", "collective-broadcast")):
        return 2
    by_axes = _hlo.mesh_axes_groups(ins.attrs)  # Shardy's form (jax 0.11)
    if by_axes is not None:
        return len(by_axes[0])
    if re.search(r"(?:^|[\s,])replica_groups=maximal_mesh\[", ins.attrs):
        return 1
    groups = ins.attr("replica_groups")
    if groups is None or groups in ("{}", ""):
        return num_partitions
    iota = re.match(r"\[(\d+),(\d+)\]<=", groups)
    if iota:
        return int(iota.group(2))
    first = re.search(r"\{([0-9,\s]*)\}", groups[1:] if groups.startswith("{{") else groups)
    if first:
        return len([x for x in first.group(1).split(",") if x.strip()])
    return num_partitions


def _received_bytes(kind: str, shape: str, g: int, ins: _hlo.Instruction) -> int:
    nbytes = _hlo.shape_bytes(shape)
    if kind in ("collective-permute", "collective-broadcast"):
        pairs = ins.attr("source_target_pairs") or ""
        moves = [p for p in re.findall(r"\{(\d+),(\d+)\}", pairs) if p[0] != p[1]]
        if kind == "collective-permute" and not moves:
            return 0
        if ins.opcode.endswith("-start"):  # (operand, result, ...) tuple
            parts = _hlo.arrays_in(shape)
            nbytes = parts[1].nbytes if len(parts) > 1 else nbytes
        return nbytes
    if g <= 1:
        return 0
    if kind == "all-gather":
        return nbytes * (g - 1) // g
    if kind == "reduce-scatter":
        return nbytes * (g - 1)
    if kind == "all-reduce":
        return 2 * nbytes * (g - 1) // g
    return nbytes * (g - 1) // g  # all-to-all


def _operand_arrays(ins: _hlo.Instruction, table: dict) -> list[_hlo.Array]:
    out = []
    for name in ins.operands:
        src = table.get(name)
        arrays = _hlo.arrays_in(src.shape) if src is not None else []
        out.append(arrays[0] if arrays else None)
    return out


def _complex_factor(dtype: str) -> int:
    return 4 if dtype.startswith("c") else 1


def _lapack_mode(ins: _hlo.Instruction, name: str = "mode") -> str:
    """A LAPACK job character of a CPU custom call (``mode = 86`` is ``'V'``), or ``""``."""
    found = re.search(rf"{name} = (\d+)\b", ins.attr("backend_config") or "")
    return chr(int(found.group(1))) if found else ""


def _lapack_flops(target: str, ins: _hlo.Instruction, table: dict) -> float:
    """Flops of the other LAPACK calls of XLA:CPU, by the textbook counts (real
    arithmetic; LAPACK Working Note 41 for the factorisations, Golub & Van Loan's
    table of SVD and eigenvalue algorithms for the iterative ones)."""
    operands = _operand_arrays(ins, table)
    a = operands[0] if operands else None
    if a is None or len(a.dims) < 2:
        return 0.0
    m, n = a.dims[-2], a.dims[-1]
    big, small = max(m, n), min(m, n)
    batch = math.prod(a.dims[:-2]) * _complex_factor(a.dtype)
    if "potrf" in target:
        flops = n**3 / 3
    elif "geqrf" in target:
        flops = 2 * big * small**2 - 2 * small**3 / 3
    elif "orgqr" in target or "ungqr" in target:  # Q's m x n columns from k reflectors
        taus = operands[1] if len(operands) > 1 else None
        k = taus.dims[-1] if taus is not None else n
        flops = 4 * m * n * k - 2 * (m + n) * k**2 + 4 * k**3 / 3
    elif "heevd" in target or "syevd" in target:
        flops = 9 * n**3 if _lapack_mode(ins) == "V" else 4 * n**3 / 3
    elif "gesdd" in target or "gesvd" in target:  # divide and conquer, or the QR algorithm
        mode = _lapack_mode(ins)
        if mode == "A":
            flops = 4 * big**2 * small + 8 * big * small**2 + 9 * small**3
        elif mode == "S":
            flops = 14 * big * small**2 + 8 * small**3
        else:
            flops = 4 * big * small**2 - 4 * small**3 / 3
    elif "geev" in target:
        vectors = "V" in (_lapack_mode(ins, "compute_left") + _lapack_mode(ins, "compute_right"))
        flops = (25 if vectors else 10) * n**3
    else:
        return 0.0
    return float(flops * batch)


def _flops(ins: _hlo.Instruction, table: dict) -> float:
    op = ins.opcode
    outs = _hlo.arrays_in(ins.shape)
    if not outs:
        return 0.0
    out = outs[0]
    if op == "dot":
        lhs = _operand_arrays(ins, table)[0]
        dims = ins.attr("lhs_contracting_dims") or "{}"
        contract = [int(d) for d in re.findall(r"\d+", dims)]
        if lhs is None:
            return 0.0
        k = math.prod(lhs.dims[d] for d in contract)
        return 2.0 * out.size * k * _complex_factor(out.dtype)
    if op == "triangular-solve":
        a, _ = _operand_arrays(ins, table)[:2]
        if a is None:
            return 0.0
        n = a.dims[-1]
        rows, cols = out.dims[-2], out.dims[-1]
        batch = math.prod(out.dims[:-2])
        left = (ins.attr("left_side") or "false") == "true"
        flops = n * n * (cols if left else rows)
        return float(flops * batch * _complex_factor(out.dtype))
    if op == "custom-call":
        target = (ins.attr("custom_call_target") or "").strip('"')
        if "getrf" in target:
            m, n = out.dims[-2], out.dims[-1]
            batch = math.prod(out.dims[:-2])
            big, small = max(m, n), min(m, n)
            return float((big * small * small - small**3 / 3) * batch * _complex_factor(out.dtype))
        if "trsm" in target:  # lax.linalg.triangular_solve on CPU: LAPACK's trsm
            a = _operand_arrays(ins, table)[0]
            if a is None:
                return 0.0
            n = a.dims[-1]
            rows, cols = out.dims[-2], out.dims[-1]
            batch = math.prod(out.dims[:-2])
            left = re.search(r"side = 76\b", ins.attr("backend_config") or "") is not None  # 'L'
            return float(n * n * (cols if left else rows) * batch * _complex_factor(out.dtype))
        return _lapack_flops(target, ins, table)
    if op == "fft":
        lengths = [int(d) for d in re.findall(r"\d+", ins.attr("fft_length") or "")]
        n = math.prod(lengths)
        if n <= 1:
            return 0.0
        fft_type = ins.attr("fft_type") or "FFT"
        batch = math.prod(out.dims[: len(out.dims) - len(lengths)])
        real = fft_type in ("RFFT", "IRFFT")
        return (2.5 if real else 5.0) * n * math.log2(n) * batch
    return 0.0
