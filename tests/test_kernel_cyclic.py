"""``distla.kernels.cyclic``: contiguous <-> block-cyclic relayouts, run directly.

Each relayout is checked against the index map it promises (local block ``u``
of device ``d`` is global block ``u·P + d``), for block counts that the mesh
axis divides (one all-to-all, no bookkeeping) and counts it does not (the
padded slots of the uneven exchange), and its communication against
:func:`relayout_fraction`.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from distla.kernels.cyclic import (
    from_block_cyclic,
    global_blocks,
    local_row,
    relayout_fraction,
    to_block_cyclic,
)
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from kernel_helpers import cyclic_order, from_cyclic_2d, run_local, to_cyclic_2d

import distla

NB = 8

# (devices on the axis, blocks per device): even splits, uneven ones, one block
LINE_CASES = [
    pytest.param(4, 8, id="p4-b8"),
    pytest.param(8, 3, id="p8-b3-uneven"),
    pytest.param(2, 5, id="p2-b5-uneven"),
    pytest.param(4, 1, id="p4-b1"),
]


def _line(p):
    return build_mesh((p,), "explicit", names=("i",))


@pytest.mark.parametrize("p, b", LINE_CASES)
def test_rows_to_cyclic_and_back(p, b):
    n = p * b * NB
    x = np.random.default_rng(p * 10 + b).standard_normal((n, 3)).astype(np.float32)
    to = functools.partial(to_block_cyclic, axis=0, axis_name="i", nb=NB)
    back = functools.partial(from_block_cyclic, axis=0, axis_name="i", nb=NB)
    mesh = _line(p)
    cyc, round_trip = run_local(
        lambda v: (to(v), back(to(v))), mesh, (P("i"),), (P("i"), P("i")), x
    )
    np.testing.assert_array_equal(cyc, x[cyclic_order(n, p, NB)])
    np.testing.assert_array_equal(round_trip, x)
    # from_block_cyclic alone inverts the stored order
    back_only = run_local(back, mesh, (P("i"),), P("i"), x[cyclic_order(n, p, NB)])
    np.testing.assert_array_equal(back_only, x)


@pytest.mark.parametrize(
    "shape, blocks",
    [pytest.param((2, 4), (4, 8), id="2x4-even"), pytest.param((4, 2), (3, 5), id="4x2-uneven")],
)
def test_both_axes_of_a_grid(shape, blocks):
    """Rows over 'x' and columns over 'y', with a complex dtype (no real-only shortcuts)."""
    pr, pc = shape
    m, n = pr * blocks[0] * NB, pc * blocks[1] * NB
    rng = np.random.default_rng(m + n)
    a = (rng.standard_normal((m, n)) + 1j * rng.standard_normal((m, n))).astype(np.complex64)
    mesh = build_mesh(shape, "auto")
    cyc_names = dict(row_axis="x", col_axis="y", nb=NB)

    def body(v):
        cyc = to_cyclic_2d(v, **cyc_names)
        return cyc, from_cyclic_2d(cyc, **cyc_names)

    cyc, round_trip = run_local(
        body,
        mesh,
        (P("x", "y"),),
        (P("x", "y"), P("x", "y")),
        a,
    )
    want = a[cyclic_order(m, pr, NB)][:, cyclic_order(n, pc, NB)]
    np.testing.assert_array_equal(cyc, want)
    np.testing.assert_array_equal(round_trip, a)


def test_no_axis_is_the_identity():
    x = jnp.arange(48.0).reshape(16, 3)
    for f in (to_block_cyclic, from_block_cyclic):
        np.testing.assert_array_equal(f(x, axis=0, axis_name=None, nb=NB), x)


def test_global_blocks_and_local_row():
    p, b = 4, 3
    mesh = _line(p)
    got = run_local(
        lambda v: global_blocks(b, "i")[None], mesh, (P("i"),), P("i"), np.zeros((p, 1))
    )
    np.testing.assert_array_equal(got, [[u * p + d for u in range(b)] for d in range(p)])
    # local_row: the owner and local index of a global row, inverse of cyclic_order
    n = p * b * NB
    order = cyclic_order(n, p, NB)
    owner, local = (np.asarray(v) for v in local_row(jnp.arange(n), p=p, nb=NB))
    rows = n // p
    np.testing.assert_array_equal(order[owner * rows + local], np.arange(n))


@pytest.mark.parametrize("p, b", LINE_CASES)
def test_relayout_fraction_is_what_the_all_to_all_moves(p, b):
    """The model against the compiled program: bytes one device receives / its block's bytes."""
    mesh = _line(p)
    n = p * b * NB
    f = jax.shard_map(
        functools.partial(to_block_cyclic, axis=0, axis_name="i", nb=NB),
        mesh=mesh,
        in_specs=P("i"),
        out_specs=P("i"),
        check_vma=False,
    )
    x = jax.ShapeDtypeStruct((n, 4), jnp.float32, sharding=NamedSharding(mesh, P("i")))
    c = distla.cost(f, x)
    local_bytes = b * NB * 4 * 4
    assert c.total_collective_bytes == c.collective_bytes["all-to-all"]
    measured = c.total_collective_bytes / local_bytes
    model = relayout_fraction(b, p)
    if b == 1:
        assert model == 0 and measured == 0
    elif b % p == 0:
        assert measured == pytest.approx(model) == pytest.approx((p - 1) / p)
    else:
        # ceil(b/p) slots to each device, its own slots not counted by the all-to-all
        slots = -(-b // p)
        assert measured == pytest.approx((p - 1) * slots / b) == pytest.approx(model)


def test_relayout_fraction_values():
    assert relayout_fraction(4, 1) == 0.0
    assert relayout_fraction(1, 8) == 0.0
    assert relayout_fraction(8, 4) == pytest.approx(3 / 4)
    assert relayout_fraction(16, 8) == pytest.approx(7 / 8)
    # 3 blocks over 2 devices: 2 slots to each device, 1 kept: (2·2 - 1)/3
    assert relayout_fraction(3, 2) == pytest.approx(2 / 3)  # 2 slots to the other device
    assert relayout_fraction(5, 4) == pytest.approx(3 * 2 / 5)


def test_relayout_moves_no_more_than_an_all_to_all():
    """Nothing but one all-to-all per axis: no gathers of the matrix."""
    mesh = build_mesh((2, 4), "explicit")
    f = jax.shard_map(
        functools.partial(to_cyclic_2d, row_axis="x", col_axis="y", nb=NB),
        mesh=mesh,
        in_specs=P("x", "y"),
        out_specs=P("x", "y"),
        check_vma=False,
    )
    a = jax.ShapeDtypeStruct((64, 64), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    c = distla.cost(f, a)
    assert c.collective_counts["all-to-all"] == 2
    assert c.total_collective_bytes == c.collective_bytes["all-to-all"]
    local = 32 * 16 * 4  # bytes of one device's block
    # rows: 4 blocks over 2 devices; columns: 2 blocks over 4 devices (uneven)
    assert c.total_collective_bytes == pytest.approx(
        local * ((2 - 1) / 2 + (4 - 1) * 1 / 2), rel=1e-6
    )
