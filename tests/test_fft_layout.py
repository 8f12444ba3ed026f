"""Every FFT in the compiled program gets a row-major operand and result.

XLA's CPU FFT accepts only an operand whose layout is the default descending one
(``{n-1,...,0}``: the transformed axes contiguous and innermost); a newer XLA
stops with ``RET_CHECK ... IsMonotonicWithDim0Major`` at run time where a
transpose is folded into the operand's layout instead. This reads the optimised
HLO of each FFT plan, under both partitioners, and checks the layout of every
``fft`` instruction and of its operand.
"""

import jax
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import PartitionSpec as P

import distla
from distla._core import hlo as _hlo

F = distla.fft


def fft_operand_layouts(compiled_text: str) -> list[tuple[str, str, str, str]]:
    """``(fft name, "operand"/"result", shape with layout, default layout)`` of every fft."""
    module = _hlo.parse(compiled_text)
    found = []
    for instructions in module.computations.values():
        for ins in instructions.values():
            if ins.opcode != "fft":
                continue
            operand = instructions[ins.operands[0]]
            for role, shape in (("operand", operand.shape), ("result", ins.shape)):
                rank = len(_hlo.arrays_in(shape)[0].dims)
                default = ",".join(str(d) for d in reversed(range(rank)))
                found.append((ins.name, role, shape, default))
    return found


def not_row_major(compiled_text: str) -> list[str]:
    """The fft instructions whose operand or result is not in the default layout."""
    bad = []
    for name, role, shape, default in fft_operand_layouts(compiled_text):
        layout = shape[shape.index("{") + 1 : shape.index("}")] if "{" in shape else default
        if layout.split(":")[0] != default:
            bad.append(f"{name}: {role} {shape}, want {{{default}}}")
    return bad


def test_checker_sees_a_transposed_operand():
    """The check fails on an fft whose operand layout is not the default."""
    text = """HloModule m, entry_computation_layout={(c64[4,8]{0,1})->c64[4,8]{1,0}}

ENTRY %main (p: c64[4,8]) -> c64[4,8] {
  %p = c64[4,8]{0,1} parameter(0)
  ROOT %fft.1 = c64[4,8]{1,0} fft(%p), fft_type=FFT, fft_length={8}
}
"""
    assert not_row_major(text) == ["fft.1: operand c64[4,8]{0,1}, want {1,0}"]
    assert not not_row_major(text.replace("{0,1}", "{1,0}"))
    result = text.replace("%p = c64[4,8]{0,1}", "%p = c64[4,8]{1,0}").replace(
        "%fft.1 = c64[4,8]{1,0}", "%fft.1 = c64[4,8]{0,1}"
    )
    assert not_row_major(result) == ["fft.1: result c64[4,8]{0,1}, want {1,0}"]


def _c(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


# (id, mesh shape, kind, global shape, spec, function): every 3-D algorithm, N-D crops and axes
PLANS = [
    ("pencil-uneven", (2, 4), "auto", (30, 42, 50), None, lambda v: F.fftn(v, algorithm="pencil")),
    (
        "pencil-rfftn",
        (2, 4),
        "auto",
        (30, 42, 50),
        None,
        lambda v: F.irfftn(F.rfftn(v.real, algorithm="pencil"), s=(30, 42, 50), algorithm="pencil"),
    ),
    ("slab-pencil", (4, 2), "explicit", (16, 32, 64), None, lambda v: F.ifftn(F.fftn(v))),
    ("slab-1d", (8,), "explicit", (16, 8, 12), None, lambda v: F.ifftn(F.fftn(v))),
    ("rank3-s", (4, 2), "explicit", (9, 16, 10), P(None, "x", "y"), lambda v: F.fftn(v, s=(7, 12))),
    (
        "rank3-axes-20",
        (2, 4),
        "explicit",
        (12, 16, 10),
        P("y", None, "x"),
        lambda v: F.fftn(v, axes=(2, 0)),
    ),
    ("pfft3d", (4, 2), "auto", (16, 8, 12), None, lambda v: F.pifft3d(F.pfft3d(v))),
    # the inverses of an N-D crop, and 3-D algorithms on prime sizes: under GSPMD their last
    # FFT was laid out {2,0,1} (the axis the output is gathered along outermost)
    (
        "rank3-s-ifftn",
        (4, 2),
        "explicit",
        (9, 16, 10),
        P(None, "x", "y"),
        lambda v: F.ifftn(v, s=(7, 12)),
    ),
    (
        "rank3-s-irfftn",
        (4, 2),
        "explicit",
        (9, 16, 10),
        P(None, "x", "y"),
        lambda v: F.irfftn(v, s=(7, 12)),
    ),
    ("prime-pifft3d", (2, 4), "auto", (7, 7, 7), None, F.pifft3d),
    (
        "prime-pfft3d-grad",
        (4, 2),
        "auto",
        (29, 19, 17),
        P(),
        jax.grad(lambda v: (abs(F.pfft3d(v)) ** 2).sum()),
    ),
]


@pytest.mark.parametrize("case", PLANS, ids=[c[0] for c in PLANS])
def test_every_fft_operand_is_row_major(case, partitioner):
    name, mesh_shape, kind, shape, spec, fn = case
    mesh = build_mesh(mesh_shape, kind)
    x = _c(np.random.default_rng(0), shape)
    xs = distla.shard(x, mesh) if spec is None else distla.shard(x, mesh, spec)
    text = jax.jit(fn).lower(xs).compile().as_text()
    assert fft_operand_layouts(text), "no fft in the compiled program"
    bad = not_row_major(text)
    assert not bad, bad
