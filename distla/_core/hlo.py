"""A small reader for compiled (post-partitioning) HLO text (private).

Enough of the grammar to walk computations from ENTRY through fusions, calls,
conditionals and while loops (with XLA's ``known_trip_count``), and to read
each instruction's result shape, operands and attributes. Shapes in a
partitioned module are per device.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np

_ITEMSIZE = {
    "pred": 1,
    "s4": 1,
    "u4": 1,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3": 1,
    "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1,
    "f8e3m4": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")


@dataclasses.dataclass(frozen=True)
class Array:
    dtype: str
    dims: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.size * _ITEMSIZE.get(self.dtype, 0)


def arrays_in(shape: str) -> list[Array]:
    """The array shapes in a (possibly tuple) HLO shape string."""
    out = []
    for dtype, dims in _ARRAY.findall(shape):
        if dtype in _ITEMSIZE:
            out.append(Array(dtype, tuple(int(d) for d in dims.split(",") if d)))
    return out


def shape_bytes(shape: str) -> int:
    return sum(a.nbytes for a in arrays_in(shape))


@dataclasses.dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str

    def attr(self, key: str) -> str | None:
        """The raw text of attribute ``key=...`` (balanced braces), or None."""
        m = re.search(r"(?:^|[\s,])" + re.escape(key) + r"=", self.attrs)
        if not m:
            return None
        i = m.end()
        if i < len(self.attrs) and self.attrs[i] == "{":
            return _balanced(self.attrs, i, "{", "}")
        j = i
        while j < len(self.attrs) and self.attrs[j] not in ", ":
            j += 1
        return self.attrs[i:j]


@dataclasses.dataclass
class Module:
    computations: dict[str, dict[str, Instruction]]
    order: dict[str, list[str]]
    entry: str
    num_partitions: int


def _balanced(text: str, start: int, open_: str, close: str) -> str:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:]


_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_LHS = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def _parse_instruction(line: str) -> Instruction | None:
    m = _LHS.match(line)
    if not m:
        return None
    rest = line[m.end() :]
    if rest.startswith("("):
        shape = _balanced(rest, 0, "(", ")")
    else:
        shape = rest.split(" ", 1)[0]
    rest = rest[len(shape) :].lstrip()
    k = rest.find("(")
    if k < 0:
        return None
    opcode = rest[:k].strip()
    operands_text = _balanced(rest, k, "(", ")")
    attrs = rest[k + len(operands_text) :]
    operands = re.findall(r"%([\w.\-]+)", operands_text)
    return Instruction(m.group(1), shape, opcode, operands, attrs)


def parse(text: str) -> Module:
    comps: dict[str, dict[str, Instruction]] = {}
    order: dict[str, list[str]] = {}
    entry = ""
    current: str | None = None
    m = re.search(r"num_partitions=(\d+)", text)
    num_partitions = int(m.group(1)) if m else 1
    for line in text.splitlines():
        if current is None:
            h = _HEADER.match(line)
            if h and "=" not in line.split("(")[0]:
                current = h.group(2)
                comps[current], order[current] = {}, []
                if h.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        ins = _parse_instruction(line)
        if ins is not None:
            comps[current][ins.name] = ins
            order[current].append(ins.name)
    return Module(comps, order, entry, num_partitions)


def trip_count(ins: Instruction) -> int | None:
    m = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', ins.attrs)
    return int(m.group(1)) if m else None


def called(ins: Instruction) -> list[tuple[str, str]]:
    """(role, computation) pairs an instruction runs: body, condition, calls, branch."""
    out = []
    for key in ("body", "condition", "calls"):
        v = ins.attr(key)
        if v:
            out.append((key, v.lstrip("%")))
    for key in ("true_computation", "false_computation"):
        v = ins.attr(key)
        if v:
            out.append(("branch", v.lstrip("%")))
    v = ins.attr("branch_computations")
    if v:
        for name in re.findall(r"%?([\w.\-]+)", v.strip("{}")):
            out.append(("branch", name))
    return out


# Replica groups named by mesh axes, as XLA prints them for programs Shardy partitioned
# (jax 0.11.2: ``replica_groups=mesh['x'=2,'y'=4] {'y'}``): a sub-axis as ``'x':(1)2``
# (Shardy's ``(pre-size)size``: the part of x of size 2 below the major factor 1, so of
# stride ``|x| / 2``), a device order other than iota as ``, device_ids=(...)`` before
# the braces; each group holds the devices that differ only along the axes in braces.
_MESH_AXES_GROUPS = re.compile(
    r"(?:^|[\s,])replica_groups=mesh\[([^\]]*)\](?:, device_ids=\((.*?)\))? \{([^{}]*)\}"
)


def iota_device_ids(dims: list[int], perm: list[int] | None = None) -> list[int]:
    """XLA's iota device list ``[dims]T(perm)``: iota(prod dims) reshaped to ``dims``,
    transposed by ``perm``, flattened."""
    order = range(len(dims)) if perm is None else perm  # (numpy's None reverses the axes)
    return np.arange(math.prod(dims)).reshape(dims).transpose(order).ravel().tolist()


def _device_ids(text: str) -> list[int] | None:
    """``device_ids``' devices: a list or XLA's iota (`iota_device_ids`); None when absent."""
    iota = re.fullmatch(r"\[([\d,]+)\](?:T\(([\d,]+)\))?", text.strip())
    if not iota:
        return [int(i) for i in re.findall(r"\d+", text)] or None
    perm = iota.group(2) and [int(p) for p in iota.group(2).split(",")]
    return iota_device_ids([int(d) for d in iota.group(1).split(",")], perm or None)


def mesh_axes_groups(attrs: str) -> list[tuple[int, ...]] | None:
    """The device groups of mesh-axes replica groups in ``attrs``, or None if absent.

    Devices are numbered row-major over the mesh's axes (or by ``device_ids``); a group
    is the devices whose coordinates differ only in the digits of the named (sub-)axes.
    """
    m = _MESH_AXES_GROUPS.search(attrs)
    if not m:
        return None
    names, sizes = [], []
    for part in m.group(1).split(","):
        name, _, size = part.rpartition("=")
        names.append(name.strip().strip("'\""))
        sizes.append(int(size))
    # per axis: the (stride, size) digits of its coordinate that the groups range over
    digits: dict[str, list[tuple[int, int]]] = {name: [] for name in names}
    for ref in filter(None, (r.strip() for r in m.group(3).split(","))):
        name, _, sub = ref.partition(":")
        name = name.strip("'\"")
        whole = sizes[names.index(name)]
        if sub:  # "(pre)size": size `size` below the major factor `pre`
            pre, size = (int(v) for v in re.fullmatch(r"\((\d+)\)(\d+)", sub).groups())
            digits[name].append((whole // (pre * size), size))
        else:
            digits[name].append((1, whole))
    ids = _device_ids(m.group(2) or "")
    groups: dict[tuple[int, ...], list[int]] = {}
    for flat, coords in enumerate(np.ndindex(*sizes)):  # row-major over the axes
        key = tuple(
            c - sum((c // stride) % size * stride for stride, size in digits[name])
            for name, c in zip(names, coords)
        )
        groups.setdefault(key, []).append(ids[flat] if ids else flat)
    return [tuple(g) for g in groups.values()]
