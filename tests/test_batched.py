"""Batched solves (stacks sharded along the batch) against scipy/numpy, member by member.

Every device solves its own members with the one-device LAPACK path, so the
compiled program of a batch-sharded call has no collective (checked with
distla.cost), results stay sharded along the batch, and each member meets
LAPACK's scaled ratios on its own.
"""

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import jax.test_util
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import THRESHOLD, assert_lapack_pivots, eps, has_layout, random_matrix
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import route
from distla._core.plan import Plan
from distla.linalg._lu import stacks as _batched

# --------------------------------------------------------------------------- references


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _op(a, trans):
    return {0: a, 1: np.swapaxes(a, -1, -2), 2: np.conj(np.swapaxes(a, -1, -2))}[trans]


def solve_ratios(a, x, b, dtype, trans=0):
    """Per member: ||op(A) x - b||_inf / (||A||_inf ||x||_inf n eps) (matrix inf-norms)."""
    a, x, b = _wide(a), _wide(x), _wide(b)
    if x.ndim == a.ndim - 1:  # one vector per member
        x, b = x[..., None], b[..., None]
    a = _op(np.broadcast_to(a, x.shape[:-2] + a.shape[-2:]), trans)
    b = np.broadcast_to(b, x.shape)
    n = a.shape[-1]
    resid = np.abs(a @ x - b).sum(-1).max(-1)
    scale = np.abs(a).sum(-1).max(-1) * np.abs(x).sum(-1).max(-1) * n * eps(dtype)
    return resid / scale


def lu_ratios(a, lu, piv, dtype):
    """Per member: ||P A - L U||_1 / (n ||A||_1 eps), P from scipy-convention pivots."""
    a, lu = _wide(a), _wide(lu)
    n = a.shape[-1]
    out = []
    for am, lm, pm in zip(
        a.reshape(-1, n, n), lu.reshape(-1, n, n), np.asarray(piv).reshape(-1, n)
    ):
        pa = am.copy()
        for i, p in enumerate(pm):
            pa[[i, p]] = pa[[p, i]]
        l_, u_ = np.tril(lm, -1) + np.eye(n), np.triu(lm)
        err = np.abs(pa - l_ @ u_).sum(0).max()
        out.append(err / (n * np.abs(am).sum(0).max() * eps(dtype)))
    return np.array(out)


def stack(rng, shape, dtype, shift=0.0):
    a = random_matrix(rng, shape, dtype)
    if shift:
        a = a + shift * np.eye(shape[-1], dtype=a.dtype)
    return a


def put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def all_axes(mesh):
    names = tuple(mesh.axis_names)
    return names if len(names) > 1 else names[0]


def batch_spec(mesh):
    """Every mesh axis on the batch dimension: P(('x', 'y'), None, None)."""
    return P(all_axes(mesh), None, None)


def no_collectives(cost):
    return cost.total_collective_bytes == 0 and not any(cost.collective_counts.values())


# --------------------------------------------------------------------------- every mesh

N = 8


@pytest.mark.parametrize(
    "batch,spec",
    [pytest.param(16, "batch", id="B16-batch-sharded")],
)
def test_solve_every_mesh(mesh, batch, spec):
    rng = np.random.default_rng(batch)
    a = stack(rng, (batch, N, N), np.float32)
    b = random_matrix(rng, (batch, N, 3), np.float32)
    s = batch_spec(mesh) if spec == "batch" else P()
    x = distla.linalg.solve(put(a, mesh, s), put(b, mesh, s))
    assert x.shape == (batch, N, 3) and x.dtype == np.float32
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert x.sharding.mesh == mesh
    expected = distla._core.mesh.fitting_spec(x.shape, mesh.abstract_mesh, batch_spec(mesh))
    assert has_layout(x, mesh, expected)


def test_lu_factor_every_mesh(mesh):
    rng = np.random.default_rng(1)
    a = stack(rng, (13, N, N), np.float32)
    lu, piv = distla.linalg.lu_factor(put(a, mesh, P()))
    assert lu.shape == a.shape and piv.shape == (13, N) and piv.dtype == np.int32
    for i in range(13):
        assert_lapack_pivots(a[i], np.asarray(piv)[i], err_msg=f"member {i}")
    assert lu_ratios(a, lu, piv, np.float32).max() <= THRESHOLD


@pytest.mark.parametrize(
    "shape,spec",
    [((1, 8), P("x")), ((1, 8), P(("x", "y"))), ((8, 1), P(("x", "y"))), ((8, 1), P("y"))],
)
def test_size_one_mesh_axes_keep_the_callers_spelling(shape, spec):
    # a stack split over (or with) a mesh axis of size 1 comes back spelled as it came
    # and as jnp returns it: an Explicit mesh compares the spelling, so `a @ x - b`
    # raises when the size-1 axis is dropped from x's type
    mesh = build_mesh(shape, "explicit")
    rng = np.random.default_rng(7)
    a_np = stack(rng, (8, 6, 6), np.float32)
    a, b = (
        jax.device_put(x, NamedSharding(mesh, spec))
        for x in (a_np, random_matrix(rng, (8, 6, 3), np.float32))
    )
    h = jax.device_put(a_np + np.swapaxes(a_np, -1, -2), NamedSharding(mesh, spec))
    calls = {
        "solve": (distla.linalg.solve, jnp.linalg.solve, (a, b)),
        "lu_factor": (distla.linalg.lu_factor, jsl.lu_factor, (a,)),
        "det": (distla.linalg.det, jnp.linalg.det, (a,)),
        "eigh": (distla.linalg.eigh, jnp.linalg.eigh, (h,)),
        "qr": (distla.linalg.qr, jnp.linalg.qr, (a,)),
        "svd": (distla.linalg.svd, jnp.linalg.svd, (a,)),
    }
    for name, (fn, ref, args) in calls.items():
        for got, want in zip(jax.tree.leaves(fn(*args)), jax.tree.leaves(ref(*args))):
            assert jax.typeof(got).sharding.spec == jax.typeof(want).sharding.spec, name
    (a @ distla.linalg.solve(a, b) - b).block_until_ready()


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_one_axis_mesh(kind):
    mesh = build_mesh((8,), kind, names=("x",))
    rng = np.random.default_rng(2)
    a = stack(rng, (24, N, N), np.float32)
    b = random_matrix(rng, (24, N, 2), np.float32)
    da, db = put(a, mesh, P("x")), put(b, mesh, P("x"))
    x = distla.linalg.solve(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh, P("x"))
    assert no_collectives(distla.cost(distla.linalg.solve, da, db))


# --------------------------------------------------------------------------- every op, dtypes

DTYPES = [
    pytest.param(np.float32, id="float32"),
    pytest.param(np.float64, id="float64"),
    pytest.param(np.complex64, id="complex64"),
]


def _all_ops(a, b, bv):
    lu, piv = distla.linalg.lu_factor(a)
    with jax.numpy_rank_promotion("allow"):  # a stack against one vector
        solve_vec = distla.linalg.solve(a, bv)
    return dict(
        solve=distla.linalg.solve(a, b),
        solve_vec=solve_vec,
        lu=lu,
        piv=piv,
        lu_solve=[distla.linalg.lu_solve((lu, piv), b, trans=t) for t in (0, 1, 2)],
        det=distla.linalg.det(a),
        slogdet=tuple(distla.linalg.slogdet(a)),
        inv=distla.linalg.inv(a),
    )


def _check_all_ops(out, a, b, bv, dtype):
    """Every result of _all_ops against scipy/numpy, member by member."""
    n = a.shape[-1]
    real = np.finfo(dtype).dtype
    assert solve_ratios(a, out["solve"], b, dtype).max() <= THRESHOLD
    assert out["solve_vec"].shape == a.shape[:-1]
    assert solve_ratios(a, out["solve_vec"], bv, dtype).max() <= THRESHOLD
    for t, x in enumerate(out["lu_solve"]):
        assert x.dtype == dtype
        assert solve_ratios(a, x, b, dtype, trans=t).max() <= THRESHOLD, f"trans={t}"
    for i in range(a.shape[0]):
        assert_lapack_pivots(a[i], np.asarray(out["piv"])[i], err_msg=f"member {i}")
    assert lu_ratios(a, out["lu"], out["piv"], dtype).max() <= THRESHOLD
    # det/slogdet: a backward-stable LU moves log|det| by at most ~ n eps cond(A)
    ref_sign, ref_log = np.linalg.slogdet(_wide(a))
    tol = THRESHOLD * n * eps(dtype) * np.linalg.cond(_wide(a))
    sign, logdet = out["slogdet"]
    assert sign.dtype == dtype and logdet.dtype == real
    assert np.all(np.abs(np.asarray(logdet) - ref_log) <= tol)
    assert np.all(np.abs(np.asarray(sign) - ref_sign) <= tol)
    ref_det = np.linalg.det(_wide(a))
    assert out["det"].dtype == dtype
    assert np.all(np.abs(np.asarray(out["det"]) - ref_det) <= tol * np.abs(ref_det))
    eye = np.broadcast_to(np.eye(n), a.shape)
    assert solve_ratios(a, out["inv"], eye, dtype).max() <= THRESHOLD


def _expected(x, mesh, spec):
    return distla._core.mesh.fitting_spec(x.shape, mesh.abstract_mesh, spec)


@pytest.mark.parametrize(
    "kind,dtype",
    [pytest.param("explicit", p.values[0], id=f"explicit-{p.id}") for p in DTYPES]
    + [pytest.param("auto", np.complex64, id="auto-complex64")],
)
def test_every_op_against_scipy(kind, dtype):
    mesh24 = build_mesh((2, 4), kind)
    with jax.enable_x64(dtype == np.float64):
        rng = np.random.default_rng(3)
        a = stack(rng, (16, N, N), dtype)
        b = random_matrix(rng, (16, N, 3), dtype)
        bv = random_matrix(rng, (N,), dtype)
        spec = P(("x", "y"))
        out = jax.jit(_all_ops)(put(a, mesh24, spec), put(b, mesh24, spec), put(bv, mesh24, P()))
        _check_all_ops(out, a, b, bv, dtype)
        for key in ("solve", "solve_vec", "lu", "piv", "det", "inv"):
            assert out[key].sharding.mesh == mesh24
            assert has_layout(out[key], mesh24, spec), key


@pytest.mark.parametrize("kind", ["explicit"])
def test_every_op_jit_odd_batch(kind):
    # 13 members, replicated input, the whole family in one jitted program;
    # results in the largest even layout that fits (13 members do not split)
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(4)
    a = stack(rng, (13, N, N), np.complex64)
    b = random_matrix(rng, (13, N, 2), np.complex64)
    bv = random_matrix(rng, (N,), np.complex64)
    out = jax.jit(_all_ops)(put(a, mesh, P()), put(b, mesh, P()), put(bv, mesh, P()))
    _check_all_ops(out, a, b, bv, np.complex64)
    if kind == "explicit":
        # the replicated layout is part of the type: results come back replicated,
        # as jnp returns them (the work is still spread over every device)
        for key in ("solve", "solve_vec", "lu", "piv", "det", "inv"):
            assert has_layout(out[key], mesh, P()), key
        return
    spec = P(("x", "y"), None, None)
    for key in ("solve", "solve_vec", "lu", "piv", "det", "inv"):
        assert has_layout(out[key], mesh, _expected(out[key], mesh, spec)), key
    assert has_layout(out["solve"], mesh, P(None, ("x", "y"), None))
    assert has_layout(out["det"], mesh, P())


# --------------------------------------------------------------------------- shapes


SHAPES = [
    pytest.param((16, N, N), (N,), id="b-vector"),
    pytest.param((16, N, N), (16, N, 1), id="b-B-n-1"),
    pytest.param((16, N, N), (16, N, 5), id="b-B-n-k"),
    pytest.param((16, N, N), (N, 4), id="b-n-k-shared"),
    pytest.param((N, N), (16, N, 3), id="a-shared"),
    pytest.param((4, 1, N, N), (1, 8, N, 2), id="broadcast-4x1-1x8"),
    pytest.param((8, N, N), (2, 8, N, 2), id="a-fewer-batch-dims"),
]


@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_solve_shapes(a_shape, b_shape):
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(5)
    a = stack(rng, a_shape, np.float32)
    b = random_matrix(rng, b_shape, np.float32)
    with jax.numpy_rank_promotion("allow"):
        x = distla.linalg.solve(put(a, mesh, P()), put(b, mesh, P()))
    ref = np.linalg.solve(_wide(a), _wide(b))
    assert x.shape == ref.shape
    full_a = np.broadcast_to(a, ref.shape[: ref.ndim - (1 if b.ndim == 1 else 2)] + a.shape[-2:])
    if b.ndim == 1:
        full_b = np.broadcast_to(b, ref.shape)
    else:
        full_b = np.broadcast_to(b, ref.shape[:-2] + b.shape[-2:])
    assert solve_ratios(full_a, x, full_b, np.float32).max() <= THRESHOLD


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("a_shape,b_shape", SHAPES)
def test_triangular_and_cholesky_solve_shapes(kind, a_shape, b_shape):
    """The stacked solves broadcast a part of the batch (a stack against fewer batch
    dimensions, or size-1 ones) as jax.scipy does."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(6)
    low = np.tril(stack(rng, a_shape, np.float32))
    b = random_matrix(rng, b_shape, np.float32)
    put_a, put_b = put(low, mesh, P()), put(b, mesh, P())
    with jax.numpy_rank_promotion("allow"):
        x = distla.linalg.solve_triangular(put_a, put_b, lower=True)
        y = distla.linalg.cho_solve((put_a, True), put_b)
        want_x = jsl.solve_triangular(low, b, lower=True)
        want_y = jsl.cho_solve((low, True), b)
    assert x.shape == want_x.shape and y.shape == want_y.shape
    np.testing.assert_allclose(np.asarray(x), np.asarray(want_x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(y), np.asarray(want_y), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_1000_members(kind):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(6)
    a = stack(rng, (1000, 4, 4), np.float32)
    b = random_matrix(rng, (1000, 4, 1), np.float32)
    spec = P(("x", "y"))
    x = distla.linalg.solve(put(a, mesh, spec), put(b, mesh, spec))
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh, spec)


def test_1001_members_padded():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(7)
    a = stack(rng, (1001, 3, 3), np.float32)
    b = random_matrix(rng, (1001, 3, 1), np.float32)
    x = distla.linalg.solve(put(a, mesh, P()), put(b, mesh, P()))
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD


def test_two_batch_dims_sharded():
    # (4, 8) members sharded P('x', 'y'): each device has a 2x2 block of members
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(8)
    a = stack(rng, (4, 8, N, N), np.float32)
    b = random_matrix(rng, (4, 8, N, 2), np.float32)
    da, db = put(a, mesh, P("x", "y")), put(b, mesh, P("x", "y"))
    x = distla.linalg.solve(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh, P("x", "y"))
    assert no_collectives(distla.cost(distla.linalg.solve, da, db))


# --------------------------------------------------------------------------- layouts, cost


@pytest.mark.parametrize(
    "kind,spec,expected",
    [
        pytest.param("auto", P(("x", "y")), P(("x", "y")), id="auto-xy-on-batch"),
        pytest.param("auto", P("x"), P("x"), id="auto-x-on-batch-y-replicated"),
        pytest.param("auto", P("y"), P("y"), id="auto-y-on-batch-x-replicated"),
        pytest.param("explicit", P(("x", "y")), P(("x", "y")), id="explicit-xy-on-batch"),
        pytest.param("explicit", P(("y", "x")), P(("y", "x")), id="explicit-yx-on-batch"),
        pytest.param("explicit", P("y"), P("y"), id="explicit-y-on-batch-x-replicated"),
    ],
)
def test_batch_sharded_input_has_no_collectives(kind, spec, expected, partitioner):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(9)
    a = stack(rng, (32, N, N), np.float32)
    b = random_matrix(rng, (32, N, 2), np.float32)
    da, db = put(a, mesh, spec), put(b, mesh, spec)
    x = distla.linalg.solve(da, db)
    assert has_layout(x, mesh, expected)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    cost = distla.cost(distla.linalg.solve, da, db)
    if kind == "auto" and expected != P(("x", "y")):
        # inside jax.jit an Auto tracer does not carry its layout: distla assumes
        # P(('x', 'y')) and XLA moves each member once, never gathering the stack
        assert cost.collective_counts["all-gather"] == 0, cost
        assert cost.total_collective_bytes <= (a.nbytes + b.nbytes) / 8, cost
        return
    # P('y') on an Explicit mesh: each device solves the members it holds, the devices
    # along x alike, and nothing moves (DESIGN: no collective at all)
    assert no_collectives(cost), cost


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_every_op_has_no_collectives(kind, partitioner):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(10)
    a = put(stack(rng, (16, N, N), np.float32), mesh, P(("x", "y")))
    b = put(random_matrix(rng, (16, N, 2), np.float32), mesh, P(("x", "y")))
    bv = put(random_matrix(rng, (N,), np.float32), mesh, P())
    cost = distla.cost(_all_ops, a, b, bv)
    assert no_collectives(cost), cost
    # each device factors its own 2 members (twice: lu_factor and solve's LU,
    # plus inv's and det's), never more
    getrf = 2.0 / 3.0 * N**3
    assert 0 < cost.flops < 2 * 16 / 8 * 10 * getrf


@pytest.mark.parametrize("spec", [P("x"), P("y")], ids=["x-on-batch", "y-on-batch"])
def test_one_axis_batch_layouts_have_no_collectives(spec, partitioner):
    # a stack split along its batch over one mesh axis, whole members on every device:
    # each device computes the members it holds (those along the other axis alike, as
    # jnp does) and nothing moves, for every stacked function (DESIGN: no collective)
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(11)
    a_np = stack(rng, (8, N, N), np.float32)
    spd_np = a_np @ a_np.transpose(0, 2, 1) + N * np.eye(N, dtype=np.float32)
    b_np = random_matrix(rng, (8, N, 2), np.float32)
    a, spd, b = (put(x, mesh, spec) for x in (a_np, spd_np, b_np))

    def every(a, spd, b):
        out = _all_ops(a, b, put(np.ones(N, np.float32), mesh, P()))
        out.update(
            cholesky=distla.linalg.cholesky(spd),
            cho_solve=distla.linalg.cho_solve(distla.linalg.cho_factor(spd), b),
            triangular=distla.linalg.solve_triangular(spd, b, lower=True),
            qr=tuple(distla.linalg.qr(a)),
            eigh=tuple(distla.linalg.eigh(spd)),
            svd=tuple(distla.linalg.svd(a, full_matrices=False)),
        )
        return out

    assert no_collectives(distla.cost(every, a, spd, b))
    out = every(a, spd, b)
    for x in jax.tree.leaves(out):
        assert has_layout(x, mesh, P(spec[0])), x.sharding
    assert solve_ratios(a_np, out["solve"], b_np, np.float32).max() <= THRESHOLD
    np.testing.assert_allclose(out["cholesky"], np.linalg.cholesky(spd_np), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["eigh"][0], np.linalg.eigvalsh(spd_np), rtol=1e-4)
    np.testing.assert_allclose(
        out["svd"][1], np.linalg.svd(a_np, compute_uv=False), rtol=1e-4, atol=1e-4
    )
    q, r = (np.asarray(x) for x in out["qr"])
    np.testing.assert_allclose(q @ r, a_np, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param(P(None, "x", "y"), id="matrix-dims"),
        pytest.param(P("x", "y"), id="x-on-batch-y-on-rows"),
    ],
)
def test_other_layouts_are_moved_not_gathered(spec):
    # Explicit mesh: the layout is visible under jit; the members move one
    # mesh axis at a time (all-to-all), and no device ever holds the stack
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(11)
    a = stack(rng, (64, N, N), np.float32)
    b = random_matrix(rng, (64, N, 4), np.float32)
    da, db = put(a, mesh, spec), put(b, mesh, spec)
    x = distla.linalg.solve(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    # the caller's batch layout when the batch was sharded, else the kernel's
    assert has_layout(x, mesh, P("x") if spec == P("x", "y") else P(("x", "y")))
    cost = distla.cost(distla.linalg.solve, da, db)
    # no all-gather of the stack; at most the result's own (the caller's layout)
    assert cost.largest("all-gather") <= x.nbytes / 2, cost
    assert cost.largest() < a.nbytes / 4 or cost.largest() <= x.nbytes / 2
    assert cost.peak_memory_bytes < 2 * (a.nbytes + b.nbytes) / 8 + 4 * x.nbytes / 8 + 2**16


def test_kernel_layout_rules():
    mesh = build_mesh((2, 4), "auto").abstract_mesh
    kl = _batched.kernel_layout
    assert kl((16,), None, mesh) == ((("x", "y"),), (16,))
    assert kl((13,), None, mesh) == ((("x", "y"),), (16,))
    assert kl((16,), (("y",),), mesh) == ((("y", "x"),), (16,))
    assert kl((4, 8), None, mesh) == ((("x",), ("y",)), (4, 8))
    assert kl((4, 8), ((), ("x", "y")), mesh) == (((), ("x", "y")), (4, 8))
    assert kl((3, 4), None, mesh) == ((("x",), ("y",)), (4, 4))
    one = build_mesh((1, 8), "auto").abstract_mesh
    assert kl((16,), (("x", "y"),), one) == ((("y",),), (16,))
    assert kl((16,), (("x",),), one) == ((("y",),), (16,))  # a size-1 axis splits nothing


# --------------------------------------------------------------------------- singular, grad, vmap


def test_singular_member_is_nan_only_there():
    mesh24 = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(12)
    a = stack(rng, (16, N, N), np.float32)
    a[5][:, 2] = 0.0  # exactly singular: a zero column
    b = random_matrix(rng, (16, N, 2), np.float32)
    spec = P(("x", "y"))
    da, db = put(a, mesh24, spec), put(b, mesh24, spec)
    x = np.asarray(distla.linalg.solve(da, db))
    assert not np.all(np.isfinite(x[5]))
    others = [i for i in range(16) if i != 5]
    assert np.all(np.isfinite(x[others]))
    assert solve_ratios(a[others], x[others], b[others], np.float32).max() <= THRESHOLD
    assert np.asarray(distla.linalg.det(da))[5] == 0
    sign, logdet = distla.linalg.slogdet(da)
    assert np.asarray(sign)[5] == 0 and np.asarray(logdet)[5] == -np.inf
    assert np.all(np.isfinite(np.asarray(logdet)[others]))


@pytest.mark.parametrize(
    "kind,batch,spec",
    [
        pytest.param("auto", 16, P(("x", "y")), id="auto-B16-batch-sharded"),
        pytest.param("explicit", 16, P(("x", "y")), id="explicit-B16-batch-sharded"),
        pytest.param("explicit", 13, P(), id="explicit-B13-padded"),
    ],
)
def test_grad_matches_jnp(kind, batch, spec):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(13)
    a = stack(rng, (batch, 6, 6), np.float32, shift=6.0)
    b = random_matrix(rng, (batch, 6, 2), np.float32)

    def loss(solve):
        return lambda a, b: jnp.sum(jnp.sin(solve(a, b)))

    with jax.set_mesh(mesh):
        ga, gb = jax.grad(loss(distla.linalg.solve), argnums=(0, 1))(
            put(a, mesh, spec), put(b, mesh, spec)
        )
    ra, rb = jax.grad(loss(jnp.linalg.solve), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(np.asarray(ga), ra, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gb), rb, rtol=1e-5, atol=1e-6)
    if batch == 16:
        assert has_layout(ga, mesh, spec)


def test_check_grads_solve_and_lu_solve(x64):
    # numerical derivatives in float64 (jax.test_util), forward and reverse
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(20)
    spec = P(("x", "y"))
    a = put(stack(rng, (8, 4, 4), np.float64, shift=4.0), mesh, spec)
    b = put(random_matrix(rng, (8, 4, 2), np.float64), mesh, spec)
    jax.test_util.check_grads(distla.linalg.solve, (a, b), order=1, modes=("fwd", "rev"))
    lu, piv = distla.linalg.lu_factor(a)
    jax.test_util.check_grads(
        lambda lu, b: distla.linalg.lu_solve((lu, piv), b, trans=1),
        (lu, b),
        order=1,
        modes=("fwd", "rev"),
    )


def test_inside_a_shard_map_is_local():
    # inside the caller's own shard_map the operands are local blocks: one device's path
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(19)
    a = stack(rng, (16, N, N), np.float32)
    b = random_matrix(rng, (16, N, 2), np.float32)
    spec = P(("x", "y"))
    f = jax.shard_map(distla.linalg.solve, mesh=mesh, in_specs=spec, out_specs=spec)
    x = jax.jit(f)(put(a, mesh, spec), put(b, mesh, spec))
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD


def test_jvp_matches_jnp():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(14)
    a = stack(rng, (16, 5, 5), np.float32, shift=5.0)
    b = random_matrix(rng, (16, 5, 1), np.float32)
    ta, tb = random_matrix(rng, a.shape, np.float32), random_matrix(rng, b.shape, np.float32)
    spec = P(("x", "y"))
    args = [put(v, mesh, spec) for v in (a, b, ta, tb)]
    _, t = jax.jvp(distla.linalg.solve, args[:2], args[2:])
    _, ref = jax.jvp(jnp.linalg.solve, (a, b), (ta, tb))
    np.testing.assert_allclose(np.asarray(t), ref, rtol=1e-4, atol=1e-5)


def test_vmap_over_stacks(mesh24):
    # vmap over a leading axis of a 4-D stack: each call sees a 3-D stack
    rng = np.random.default_rng(15)
    a = stack(rng, (3, 16, N, N), np.float32)
    b = random_matrix(rng, (3, 16, N, 2), np.float32)
    spec = P(None, ("x", "y"))
    da, db = put(a, mesh24, spec), put(b, mesh24, spec)
    x = jax.vmap(distla.linalg.solve)(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh24, spec)
    assert no_collectives(distla.cost(jax.vmap(distla.linalg.solve), da, db))


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_vmap_over_matrices(kind):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(16)
    a = stack(rng, (8, 4, 4), np.float32)
    b = random_matrix(rng, (8, 4), np.float32)
    spec = P(("x", "y"))
    da, db = put(a, mesh, spec), put(b, mesh, spec)
    x = jax.vmap(distla.linalg.solve)(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh, spec)
    # each device solves its own matrices: the vmap never reaches the distributed LU
    assert no_collectives(distla.cost(jax.vmap(distla.linalg.solve), da, db))
    dets = jax.vmap(distla.linalg.det)(da)
    np.testing.assert_allclose(dets, np.linalg.det(a.astype(np.float64)), rtol=1e-4)


def _spd(rng, shape):
    a = random_matrix(rng, shape, np.float32)
    eye = np.eye(shape[-1], dtype=np.float32)
    return (a @ np.swapaxes(a, -1, -2) / shape[-1] + eye).astype(np.float32)


L = distla.linalg
# name: (distla's one-matrix call, jax's (None: jax has no generalized eigh), operands)
ONE_MATRIX_CALLS = {
    "solve_triangular": (
        lambda t, b: L.solve_triangular(t, b, lower=True),
        lambda t, b: jsl.solve_triangular(t, b, lower=True),
        ("tri", "rhs"),
    ),
    "cho_solve": (
        lambda a, b: L.cho_solve(L.cho_factor(a), b),
        lambda a, b: jsl.cho_solve(jsl.cho_factor(a), b),
        ("spd", "rhs"),
    ),
    "solve_pos": (
        lambda a, b: L.solve(a, b, assume_a="pos"),
        lambda a, b: jsl.solve(a, b, assume_a="pos"),
        ("spd", "rhs"),
    ),
    "eigh_pencil": (lambda a, b: L.eigh(a, b), None, ("sym", "spd")),
}


def _one_matrix_operands(rng, batch, n):
    a = random_matrix(rng, (batch, n, n), np.float32)
    return {
        "tri": np.tril(a) + n * np.eye(n, dtype=np.float32),
        "spd": _spd(rng, (batch, n, n)),
        "sym": (a + np.swapaxes(a, -1, -2)) / 2,
        "rhs": random_matrix(rng, (batch, n, 3), np.float32),
    }


def _check_members(name, got, x, y):
    """Every member against numpy/scipy: solves by their ratio, pencils by scipy's
    eigenvalues, the residual of ``a v = b v w`` and ``vᴴ b v = I``."""
    if name != "eigh_pencil":
        assert solve_ratios(x, got, y, np.float32).max() <= THRESHOLD, name
        return
    w, v = got
    x64, y64, v64, w64 = _wide(x), _wide(y), _wide(v), _wide(w)
    w_ref = np.stack([scipy.linalg.eigh(xm, ym, eigvals_only=True) for xm, ym in zip(x64, y64)])
    np.testing.assert_allclose(w64, w_ref, rtol=1e-4, atol=1e-5)
    resid = np.abs(x64 @ v64 - y64 @ v64 * w64[:, None, :]).sum(-2).max(-1)
    scale = np.abs(x64).sum(-2).max(-1) + np.abs(w64).max(-1) * np.abs(y64).sum(-2).max(-1)
    n = x.shape[-1]
    assert (resid / (scale * n * eps(np.float32))).max() <= THRESHOLD, name
    gram = np.swapaxes(v64, -1, -2) @ y64 @ v64
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(n), gram.shape), atol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_vmap_of_triangular_solves_and_pencils(kind):
    """jax.vmap of the solves built on triangular solves, and of eigh(a, b), over a stack
    sharded along its batch: each device solves its own members (no collective), with
    jax's values in jax's layout; also for a batch and an order the mesh does not divide
    (B = 6 on 'x' only, n = 7). On an Explicit mesh, also a stack of 2D-sharded members
    (jax's own functions refuse it), and jax.vmap of jax.grad of solves there."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(19)
    for batch, n, spec in ((8, 6, P(("x", "y"))), (6, 7, P("x"))):
        host = _one_matrix_operands(rng, batch, n)
        for name, (fn, ref_fn, names) in ONE_MATRIX_CALLS.items():
            x, y = (host[k] for k in names)
            dx, dy = put(x, mesh, spec), put(y, mesh, spec)
            got = jax.vmap(fn)(dx, dy)
            _check_members(name, got, np.tril(x) if name == "solve_triangular" else x, y)
            assert no_collectives(distla.cost(jax.vmap(fn), dx, dy)), (name, n)
            # the layout vmap of jax's function gives (for eigh(a, b): of jnp.linalg.eigh)
            for out in jax.tree.leaves(got):
                assert has_layout(out, mesh, spec), (name, out.sharding)
            if ref_fn is not None:
                ref = jax.vmap(ref_fn)(dx, dy)
                np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5, atol=1e-5)
                assert got.sharding.is_equivalent_to(ref.sharding, got.ndim), name
    if kind == "explicit":
        host = _one_matrix_operands(rng, 2, 8)
        with jax.set_mesh(mesh):
            for name, (fn, _, names) in ONE_MATRIX_CALLS.items():
                x, y = (host[k] for k in names)
                # each member in distla's layout (2D blocks), the batch unsharded
                got = jax.vmap(fn)(*(jnp.stack([distla.shard(m, mesh) for m in v]) for v in (x, y)))
                _check_members(name, got, np.tril(x) if name == "solve_triangular" else x, y)
            # vmap of grad there: the derivatives' linear solves, batched, as jax's per member
            x, y = host["tri"], host["rhs"]
            sx, sy = (jnp.stack([distla.shard(m, mesh) for m in v]) for v in (x, y))
            for fn, ref_fn in (
                ONE_MATRIX_CALLS["solve_triangular"][:2],
                (L.solve, jnp.linalg.solve),
            ):

                def grads(f):
                    return jax.vmap(jax.grad(lambda t, b: jnp.sum(jnp.sin(f(t, b))), (0, 1)))

                for g, r in zip(grads(fn)(sx, sy), grads(ref_fn)(x, y)):
                    np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-5)


def _vmappable(name, fn):
    """``fn`` (one matrix) whose jax.vmap is one batched call: an op with the LU family's
    vmap rule (distla._core.route), as the one-matrix calls of distla.linalg declare it."""
    return route.Op(
        f"test {name}",
        one_device=fn,
        distributed=lambda plan, *xs, **kw: fn(*xs, **kw),
        vmap=functools.partial(_batched.vmap_rule, name),
    )


_LU_FACTOR = _vmappable("lu_factor", lambda a: tuple(jsl.lu_factor(a)))
_LU_SOLVE = _vmappable(
    "lu_solve", lambda lu, piv, b, trans: jsl.lu_solve((lu, piv), b, trans=trans)
)
_DET = _vmappable("det", jnp.linalg.det)


def _one_matrix_solve(plan, a, b):
    """A stand-in for distla.linalg's one-matrix solve, built as the lead would need it.

    jax's own structure for jnp.linalg.solve (custom_linear_solve over an LU),
    with the LU and the triangular solves declared with the LU family's vmap
    rule: vmap of it is one batched call, and grad/jvp never differentiate
    through custom_vmap (which has no transpose rule). jsl stands in for the
    LU family's distributed programs.
    """
    lu, piv = route.distributed(_LU_FACTOR, plan, jax.lax.stop_gradient(a))

    def lu_solve(trans):
        return lambda _, x: route.distributed(_LU_SOLVE, plan, lu, piv, x, trans=trans)

    def matvec(x):
        return jnp.matmul(a, x, precision=jax.lax.Precision.HIGHEST)

    return jax.lax.custom_linear_solve(matvec, b, lu_solve(0), lu_solve(1))


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_vmap_of_polar_at_an_odd_order(kind):
    """Each device runs jax's QDWH on its members; its convergence flag starts unvarying,
    which a checked shard_map refused at n = 13."""
    mesh = build_mesh((2, 4), kind)
    a = np.random.default_rng(12).random((4, 13, 13)).astype(np.float32)
    u, p = jax.vmap(distla.linalg.polar)(put(a, mesh, P("x", None, None)))
    ru, rp = jax.vmap(jsl.polar)(a)
    np.testing.assert_allclose(np.asarray(u), np.asarray(ru), atol=2e-4)
    np.testing.assert_allclose(np.asarray(p), np.asarray(rp), atol=2e-4)


def test_vmap_rule_routes_to_the_batched_solve():
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(18)
    a = stack(rng, (16, 6, 6), np.float32, shift=6.0)
    b = random_matrix(rng, (16, 6), np.float32)
    spec = P(("x", "y"))
    da, db = put(a, mesh, spec), put(b, mesh, spec)
    plan = Plan(mesh.abstract_mesh, np.dtype(np.float32))
    solve = jax.vmap(functools.partial(_one_matrix_solve, plan))
    x = solve(da, db)
    assert solve_ratios(a, x, b, np.float32).max() <= THRESHOLD
    assert has_layout(x, mesh, spec)
    assert no_collectives(distla.cost(solve, da, db))
    # gradients of every member at once, batched too
    with jax.set_mesh(mesh):
        g = jax.vmap(jax.grad(lambda a, b: jnp.sum(jnp.sin(_one_matrix_solve(plan, a, b)))))(da, db)
    ref = jax.vmap(jax.grad(lambda a, b: jnp.sum(jnp.sin(jnp.linalg.solve(a, b)))))(a, b)
    np.testing.assert_allclose(np.asarray(g), ref, rtol=1e-5, atol=1e-6)
    assert has_layout(g, mesh, spec)
    det = jax.vmap(lambda a: route.distributed(_DET, plan, a))(da)
    np.testing.assert_allclose(np.asarray(det), np.linalg.det(_wide(a)), rtol=1e-4)
    assert has_layout(det, mesh, spec)


# --------------------------------------------------------------------------- errors


def test_rank_promotion_follows_jnp(mesh24):
    # the harness runs with jax_numpy_rank_promotion="raise": jnp refuses a stack
    # against one vector, and so does distla, with jnp's message
    a = np.ones((16, N, N), np.float32)
    with pytest.raises(ValueError, match="require rank promotion"):
        jnp.linalg.solve(a, np.ones(N, np.float32))
    with pytest.raises(ValueError, match=r"\(16, 8, 8\), \(8,\)\] require rank promotion"):
        distla.linalg.solve(put(a, mesh24, P(("x", "y"))), put(np.ones(N, np.float32), mesh24, P()))


def test_errors(mesh24):
    rng = np.random.default_rng(17)
    spec = P(("x", "y"))
    a = put(stack(rng, (16, N, N), np.float32), mesh24, spec)
    with pytest.raises(ValueError, match=r"\(16, 8, 8\).*\(3, 8, 2\).*do not broadcast"):
        distla.linalg.solve(a, put(np.ones((3, N, 2), np.float32), mesh24, P()))
    with pytest.raises(ValueError, match=r"numpy 2 rules.*\(16, 8\)"):
        distla.linalg.solve(a, put(np.ones((16, N), np.float32), mesh24, spec))
    with pytest.raises(ValueError, match=r"square.*\(16, 8, 4\)"):
        distla.linalg.solve(put(np.ones((16, N, 4), np.float32), mesh24, spec), a)
    lu, piv = distla.linalg.lu_factor(a)
    with pytest.raises(ValueError, match=r"batch dimensions of lu \(16, 8, 8\).*do not broadcast"):
        distla.linalg.lu_solve((lu, piv), put(np.ones((8, N, 1), np.float32), mesh24, spec))
    piv8 = put(np.zeros((8, N), np.int32), mesh24, spec)
    with pytest.raises(ValueError, match=r"lu \(16, 8, 8\), piv \(8, 8\) .*do not broadcast"):
        distla.linalg.lu_solve((lu, piv8), put(np.ones((16, N), np.float32), mesh24, spec))
    with pytest.raises(TypeError, match="piv must be an integer array.*float32"):
        distla.linalg.lu_solve((lu, piv.astype(np.float32)), a)
    with pytest.raises(ValueError, match=r"trans must be 0, 1 or 2; got 3"):
        distla.linalg.lu_solve((lu, piv), a, trans=3)
    with pytest.raises(ValueError, match=r"square.*\(16, 8, 4\)"):
        distla.linalg.det(put(np.ones((16, N, 4), np.float32), mesh24, spec))
