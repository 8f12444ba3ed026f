"""``distla.cost`` and the compiled-program reader beneath it.

Most checks read saved compiled programs (``tests/fixtures/*.hlo.txt``, written
by ``tests/fixtures/make_hlo_fixtures.py``) so that they pin the reader
itself, independently of what the installed XLA prints today. The expected
byte counts are worked out here by hand from the per-device shapes and the
ring/pairwise model of :class:`distla.Cost`; a few live checks compile the
same programs again and confirm the fixtures still describe what jax emits.
"""

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import hlo as _hlo
from distla.cost import COLLECTIVE_KINDS, cost_of_compiled

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
F32 = 4


def _fixture(name):
    return (FIXTURES / f"{name}.hlo.txt").read_text()


class _Saved:
    """A compiled program read back from its text: no memory or XLA cost analysis."""

    def __init__(self, text):
        self._text = text

    def as_text(self):
        return self._text

    def memory_analysis(self):
        return None

    def cost_analysis(self):
        return {}


def _saved_cost(name):
    return cost_of_compiled(_Saved(_fixture(name)))


# name -> (kind, group size, bytes one device receives per execution, executions):
# all on 8 devices, f32 (4 bytes), per-device shapes.
EXPECTED = {
    # result f32[16,4] = 256 B; a device receives the 7/8 it does not hold
    "all_gather": ("all-gather", 8, 16 * 4 * F32 * 7 // 8, 1),
    # operand f32[2,4] = 32 B; ring all-reduce: 2·(g-1)/g of it
    "all_reduce": ("all-reduce", 8, 2 * 2 * 4 * F32 * 7 // 8, 1),
    # the same over the 4 devices of a 2x4 mesh's 'y' axis: replica groups of 4
    "all_reduce_groups": ("all-reduce", 4, 2 * 2 * 4 * F32 * 3 // 4, 1),
    # operand f32[8,4] (eight f32[1,4] pieces) = 128 B; keeps 1/8 of it
    "all_to_all": ("all-to-all", 8, 8 * 4 * F32 * 7 // 8, 1),
    # the whole f32[2,4] from one neighbour
    "collective_permute": ("collective-permute", 2, 2 * 4 * F32, 1),
    # result f32[2,4] = 32 B, summed from 7 other devices' slices
    "reduce_scatter": ("reduce-scatter", 8, 2 * 4 * F32 * 7, 1),
    # all_reduce's psum, inside a fori_loop of 5 iterations
    "while_all_reduce": ("all-reduce", 8, 2 * 2 * 4 * F32 * 7 // 8, 5),
}


# --------------------------------------------------------------------------- saved programs


@pytest.mark.parametrize("name", list(EXPECTED))
def test_saved_program_collective_bytes(name):
    kind, group, nbytes, count = EXPECTED[name]
    c = _saved_cost(name)
    assert c.num_devices == 8
    assert c.exact
    assert len(c.collectives) == 1, c.collectives
    op = c.collectives[0]
    assert (op.kind, op.group_size, op.bytes, op.count) == (kind, group, nbytes, count)
    assert c.collective_bytes == {k: nbytes * count if k == kind else 0 for k in COLLECTIVE_KINDS}
    assert c.collective_counts == {k: count if k == kind else 0 for k in COLLECTIVE_KINDS}
    assert c.total_collective_bytes == nbytes * count
    assert c.flops == 0 and c.conditional_flops == 0
    # nothing but the program text was read
    assert c.peak_memory_bytes == 0 and c.xla_flops == 0.0


def test_saved_program_largest_collective_result():
    assert _saved_cost("all_gather").largest() == 16 * 4 * F32
    assert _saved_cost("all_gather").largest("all-gather") == 16 * 4 * F32
    assert _saved_cost("all_gather").largest("all-reduce") == 0
    assert _saved_cost("reduce_scatter").largest() == 2 * 4 * F32
    assert _saved_cost("all_to_all").largest("all-to-all") == 8 * 4 * F32


def test_saved_program_flops_of_a_dot_under_cond():
    # f32[8,8] @ f32[8,8]^T: 2·m·n·k, inside one branch of lax.cond
    c = _saved_cost("cond_dot")
    assert c.flops == 2 * 8 * 8 * 8
    assert c.conditional_flops == 2 * 8 * 8 * 8
    assert c.total_collective_bytes == 0 and c.exact


def test_saved_program_fft_flops():
    # two complex FFTs of length 8: 5·N·log2(N) each
    c = _saved_cost("fft")
    assert c.flops == 2 * 5 * 8 * 3
    assert c.conditional_flops == 0


def test_cost_str_names_what_moved():
    text = str(_saved_cost("while_all_reduce"))
    assert "per device, 8 devices" in text
    assert "all-reduce" in text and "in 5 ops" in text
    assert "all-gather" not in text


# --------------------------------------------------------------------------- the HLO reader


def test_reader_walks_the_module_structure():
    m = _hlo.parse(_fixture("while_all_reduce"))
    assert m.num_partitions == 8
    assert m.entry == "main.5_spmd"
    entry = m.computations[m.entry]
    assert m.order[m.entry][0] == "param.3" and m.order[m.entry][-1] == "get-tuple-element.15"
    loop = entry["while.9"]
    assert loop.opcode == "while"
    assert loop.operands == ["tuple.8"]
    assert _hlo.trip_count(loop) == 5
    assert sorted(_hlo.called(loop)) == [
        ("body", "region_0.2_spmd"),
        ("condition", "region_2.3_spmd"),
    ]
    body = m.computations["region_0.2_spmd"]
    psum = body["psum.7"]
    assert psum.opcode == "all-reduce" and psum.shape == "f32[2,4]{1,0}"
    assert psum.attr("replica_groups") == "{{0,1,2,3,4,5,6,7}}"
    assert psum.attr("to_apply") == "%region_1.0"
    assert psum.attr("dimensions") is None
    assert _hlo.trip_count(psum) is None
    assert body["param"].shape == "(s32[], f32[2,4]{1,0})"


def test_reader_sees_conditional_branches_and_fusions():
    m = _hlo.parse(_fixture("cond_dot"))
    entry = m.computations[m.entry]
    cond = entry["conditional.1.clone"]
    assert _hlo.called(cond) == [("branch", "region_0.1_spmd"), ("branch", "region_1.2_spmd")]
    fusion = m.computations["region_1.2_spmd"]["ynn_fusion"]
    assert ("calls", "fused_computation") in _hlo.called(fusion)
    dot = m.computations["fused_computation"]["dot_general.3"]
    assert dot.opcode == "dot" and dot.operands == ["param_0", "param_0"]
    assert dot.attr("lhs_contracting_dims") == "{1}"


def test_reader_shapes():
    shape = "(f32[1,4]{1,0}, /*index=1*/c64[2,3]{1,0}, s32[], pred[7])"
    arrays = _hlo.arrays_in(shape)
    assert [(a.dtype, a.dims) for a in arrays] == [
        ("f32", (1, 4)),
        ("c64", (2, 3)),
        ("s32", ()),
        ("pred", (7,)),
    ]
    assert [a.nbytes for a in arrays] == [16, 48, 4, 7]
    assert _hlo.shape_bytes(shape) == 16 + 48 + 4 + 7
    assert _hlo.shape_bytes("c128[2,2]{1,0}") == 64
    assert _hlo.shape_bytes("bf16[3]") == 6
    assert _hlo.shape_bytes("token[]") == 0
    m = _hlo.parse(_fixture("all_to_all"))
    a2a = m.computations[m.entry]["all-to-all"]
    assert _hlo.shape_bytes(a2a.shape) == 8 * 4 * F32
    assert len(a2a.operands) == 8


def test_reader_async_pair_counts_the_done_shape():
    # GPU programs split collectives into -start/-done; the bytes are the done's result
    text = "\n".join(
        [
            "HloModule m, num_partitions=4",
            "",
            "ENTRY %main (p: f32[2,4]) -> f32[8,4] {",
            "  %p = f32[2,4]{1,0} parameter(0)",
            "  %ags = (f32[2,4]{1,0}, f32[8,4]{1,0}) all-gather-start(%p), channel_id=1, "
            "replica_groups=[1,4]<=[4], dimensions={0}, use_global_device_ids=true",
            "  ROOT %agd = f32[8,4]{1,0} all-gather-done(%ags)",
            "}",
            "",
        ]
    )
    c = cost_of_compiled(_Saved(text))
    assert c.num_devices == 4
    (op,) = c.collectives
    assert (op.kind, op.shape, op.group_size, op.count) == ("all-gather", "f32[8,4]", 4, 1)
    assert op.bytes == 8 * 4 * F32 * 3 // 4


@pytest.mark.parametrize(
    "groups, size",
    [
        ("mesh['x'=2,'y'=4] {'y'}", 4),  # a psum over y on 2x4, as jax 0.11.2 printed it
        ("mesh['x'=2,'y'=4] {'x'}", 2),
        ("mesh['x'=2,'y'=4] {'x','y'}", 8),
        ("mesh['x'=2,'y'=4] {}", 1),
        ("mesh['x'=8] {'x':(1)2}", 2),
        ("mesh['x'=8] {'x':(2)4}", 4),
        ("mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y'}", 4),
        ("mesh[x=2,y=4] {y}", 4),
        ("maximal_mesh[device_id=0] {}", 1),
    ],
)
def test_reader_mesh_axes_replica_groups(groups, size):
    # Shardy's programs on jax 0.11.2 name their groups by mesh axes (XLA's
    # MeshAxesReplicaGroupList); each group is the devices along the axes in braces.
    # Read as a number of partitions, every group here was 8 there: 22 tests of collective
    # bytes and 3 docs pages failed
    text = "\n".join(
        [
            "HloModule m, num_partitions=8",
            "",
            "ENTRY %main (p: f32[2,4]) -> f32[2,4] {",
            "  %p = f32[2,4]{1,0} parameter(0)",
            f"  ROOT %ar = f32[2,4]{{1,0}} all-reduce(%p), channel_id=1, replica_groups={groups}, "
            "use_global_device_ids=true, to_apply=%add",
            "}",
            "",
        ]
    )
    (op,) = cost_of_compiled(_Saved(text)).collectives
    assert (op.kind, op.group_size) == ("all-reduce", size)
    assert op.bytes == 2 * 2 * 4 * F32 * (size - 1) // size


@pytest.mark.parametrize(
    "groups, expected",
    [
        ("mesh['x'=2,'y'=4] {'y'}", [(0, 1, 2, 3), (4, 5, 6, 7)]),
        ("mesh['x'=2,'y'=4] {'x'}", [(0, 4), (1, 5), (2, 6), (3, 7)]),
        ("mesh['x'=2,'y'=4] {'x','y'}", [tuple(range(8))]),
        ("mesh['x'=2,'y'=4] {}", [(i,) for i in range(8)]),
        ("mesh['x'=8] {'x':(1)2}", [(0, 4), (1, 5), (2, 6), (3, 7)]),  # the major factor
        ("mesh['x'=8] {'x':(2)4}", [(0, 1, 2, 3), (4, 5, 6, 7)]),
        ("mesh['x'=2,'y'=4], device_ids=([4,2]T(1,0)) {'y'}", [(0, 2, 4, 6), (1, 3, 5, 7)]),
        ("mesh['x'=2,'y'=4], device_ids=(7,6,5,4,3,2,1,0) {'x'}", [(7, 3), (6, 2), (5, 1), (4, 0)]),
    ],
)
def test_reader_mesh_axes_groups_are_the_devices(groups, expected):
    # the groups themselves, which the collective-order check compares (a group read as
    # every device, or as nothing, made that check blind on jax 0.11.2: it found no
    # hazard in jax's own lowering of inv, which has four)
    assert _hlo.mesh_axes_groups(f"channel_id=1, replica_groups={groups}, dims={{0}}") == expected


# --------------------------------------------------------------------------- live programs


def _generator():
    spec = importlib.util.spec_from_file_location(
        "make_hlo_fixtures", FIXTURES / "make_hlo_fixtures.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fixtures_still_describe_what_jax_compiles():
    """The same programs compiled now give the numbers the saved texts give."""
    for name, text in _generator().programs().items():
        live = cost_of_compiled(_Saved(text))
        saved = _saved_cost(name)
        assert live.collectives == saved.collectives, name
        assert (live.flops, live.conditional_flops) == (saved.flops, saved.conditional_flops), name


def _on_line(body, shape, dtype=jnp.float32, out=P("i")):
    mesh = build_mesh((8,), "explicit", names=("i",))
    f = jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=out, check_vma=False)
    x = jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P("i")))
    return f, x


def test_live_cost_reads_memory_and_xla_analysis():
    f, x = _on_line(lambda v: lax.all_gather(v, "i", tiled=True), (16, 4), out=P())
    c = distla.cost(f, x)
    assert c.collective_bytes["all-gather"] == 16 * 4 * F32 * 7 // 8
    assert c.argument_bytes == 2 * 4 * F32
    assert c.output_bytes == 16 * 4 * F32
    assert c.peak_memory_bytes >= c.argument_bytes + c.output_bytes - c.alias_bytes


def test_live_loop_without_trip_count_is_not_exact():
    def body(v):
        # the trip count depends on the data: XLA cannot know it
        return lax.while_loop(lambda s: s[0, 0] < 10.0, lambda s: lax.psum(s, "i") + 1.0, v)

    f, x = _on_line(body, (16, 4))
    c = distla.cost(f, x)
    assert not c.exact
    assert c.collective_counts["all-reduce"] == 1  # the body, counted once


def test_live_cost_binds_keyword_arguments_as_static():
    mesh = build_mesh((2, 2), "explicit")
    a = jax.ShapeDtypeStruct((32, 32), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    summa = distla.cost(distla.matmul, a, a, algorithm="summa")
    cannon = distla.cost(distla.matmul, a, a, algorithm="cannon")
    assert summa.collective_bytes["all-gather"] > 0
    assert summa.collective_bytes["collective-permute"] == 0
    assert cannon.collective_bytes["collective-permute"] > 0
    # the dense work is the same product: 2·n³ over 4 devices
    for c in (summa, cannon):
        assert c.flops == pytest.approx(2 * 32**3 / 4, rel=0.01)


def test_cost_counts_lapack_triangular_solves():
    # on CPU, lax.linalg.triangular_solve lowers to LAPACK's trsm (a custom call)
    n, k = 64, 24
    t = jnp.tril(jnp.ones((n, n), jnp.float32)) + n * jnp.eye(n, dtype=jnp.float32)
    b = jnp.ones((n, k), jnp.float32)

    def left(t, b):
        return jax.lax.linalg.triangular_solve(t, b, left_side=True, lower=True)

    def right(t, b):
        return jax.lax.linalg.triangular_solve(t, b.T, left_side=False, lower=True)

    assert distla.cost(left, t, b).flops == n * n * k
    assert distla.cost(right, t, b).flops == n * n * k


def test_cost_counts_complex_work_four_times():
    n = 16
    x = np.ones((n, n), np.complex64)
    real = distla.cost(jnp.matmul, x.real, x.real)
    cplx = distla.cost(jnp.matmul, x, x)
    assert real.flops == 2 * n**3
    assert cplx.flops == 4 * real.flops


@pytest.mark.parametrize(
    "name,fn,shape,per_n3",
    [
        ("potrf", jnp.linalg.cholesky, (48, 48), 1 / 3),
        ("geqrf+orgqr", jnp.linalg.qr, (48, 48), 4 / 3 + 4 / 3),
        ("geqrf", lambda a: jnp.linalg.qr(a, mode="r"), (48, 48), 4 / 3),
        ("heevd", jnp.linalg.eigh, (48, 48), 9.0),
        ("gesdd A", jnp.linalg.svd, (48, 48), 21.0),
        ("gesdd S", lambda a: jnp.linalg.svd(a, full_matrices=False), (48, 48), 22.0),
        ("gesdd N", jnp.linalg.svdvals, (48, 48), 8 / 3),
        ("geev", jnp.linalg.eig, (48, 48), 25.0),
    ],
)
def test_cost_counts_the_other_lapack_calls(name, fn, shape, per_n3):
    # the one-device plans of cholesky, qr, eigh, svd and eig run these LAPACK calls:
    # the textbook counts, not 0 (complex: 4 times)
    a = np.eye(shape[0], dtype=np.float32) + 1
    n = shape[0]
    assert distla.cost(fn, a).flops == pytest.approx(per_n3 * n**3, rel=0.02), name
    assert distla.cost(fn, a.astype(np.complex64)).flops == pytest.approx(
        4 * per_n3 * n**3, rel=0.02
    ), name


def test_cost_reports_the_one_device_plans_flops():
    mesh = build_mesh((2, 4), "explicit")
    n = 64
    a = jax.device_put(np.eye(n, dtype=np.float32) * n + 1, NamedSharding(mesh, P("x", "y")))
    for fn, per_n3 in [
        (distla.linalg.cholesky, 1 / 3),
        (distla.linalg.eigh, 9.0),
        (distla.linalg.svd, 21.0),
    ]:
        c = distla.cost(lambda a, fn=fn: fn(a, plan="one_device"), a)
        assert [p.plan for p in c.plans] == ["one_device"], c.plans
        assert c.flops >= per_n3 * n**3, (fn, c.flops)
