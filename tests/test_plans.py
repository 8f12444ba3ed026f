"""Plans: the one-device plan is chosen under the budget, moves the operand to one
device and back (never to every device), and returns what the distributed plan
returns, in the same layouts, on Auto and Explicit meshes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import plan as _plan

N = 64
P_DEVICES = 8


def _sym(n, seed=0):
    x = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    return (x + x.T) / 2


def _spd(n, seed=1):
    x = np.random.default_rng(seed).standard_normal((n, n)).astype(np.float32)
    return x @ x.T / n + np.eye(n, dtype=np.float32)


def _put(x, mesh, spec=P("x", "y")):
    return jax.device_put(x, NamedSharding(mesh, spec))


@pytest.fixture(autouse=True)
def default_budget():
    """The library's default budget (the harness sets 0 for the other suites)."""
    with _plan.budget(512 * 2**20):
        yield


def _chosen(fn, *args, **kwargs):
    """The plans ``fn`` chooses while traced (no compile)."""
    with _plan.recording() as notes:
        jax.eval_shape(lambda *v: fn(*v, **kwargs), *args)
    return [c.plan for c in notes]


def test_auto_picks_one_device_under_the_budget_and_distributed_at_zero(mesh24):
    x = _put(_spd(N), mesh24)
    assert distla.cost(distla.linalg.cholesky, x).plan == "one_device"
    assert _chosen(distla.linalg.eigh, x) == ["one_device"]
    with _plan.budget(0):
        assert _chosen(distla.linalg.cholesky, x) == ["distributed"]
    small = N * N * 4  # the operand alone: operand plus result does not fit
    with _plan.budget(small):
        assert _chosen(distla.linalg.cholesky, x) == ["distributed"]
    with _plan.budget(2 * small):  # operand and result fit, potrf's copy of A does not
        assert _chosen(distla.linalg.cholesky, x) == ["distributed"]
    with _plan.budget(2 * small + 3 * small // 4):  # the modelled peak (_core.workspace)
        assert _chosen(distla.linalg.cholesky, x) == ["one_device"]
    # explicit choices win over the budget
    with _plan.budget(0):
        assert _chosen(distla.linalg.cholesky, x, plan="one_device") == ["one_device"]
    assert _chosen(distla.linalg.cholesky, x, plan="distributed") == ["distributed"]


def test_auto_keeps_large_problems_distributed():
    for family, n in _plan.CROSSOVER.items():
        assert _plan.choose(family, "auto", n=n, nbytes=1, what="t") == "one_device"
        assert _plan.choose(family, "auto", n=n + 1, nbytes=1, what="t") == "distributed"
    assert _plan.choose("qr", "auto", n=8, nbytes=1, what="t") == "distributed"  # no crossover
    for family, n in _plan.EAGER_CROSSOVER.items():  # eager calls only
        assert _plan.choose(family, "auto", n=n, nbytes=1, what="t", eager=True) == "one_device"
        assert (
            _plan.choose(family, "auto", n=n + 1, nbytes=1, what="t", eager=True) == "distributed"
        )
        traced = "one_device" if 8 <= _plan.CROSSOVER.get(family, 0) else "distributed"
        assert _plan.choose(family, "auto", n=8, nbytes=1, what="t") == traced


def test_one_device_moves_the_operand_once_each_way(mesh24):
    x = _put(_spd(N), mesh24)
    c = distla.cost(distla.linalg.cholesky, x, plan="one_device")
    block = x.nbytes // P_DEVICES
    # p - 1 blocks to device 0 and p - 1 back: one ppermute of one block each
    assert c.collective_counts["collective-permute"] == 2 * (P_DEVICES - 1)
    assert c.collective_bytes["collective-permute"] == 2 * (P_DEVICES - 1) * block
    assert c.total_collective_bytes == c.collective_bytes["collective-permute"]
    assert c.plans == (_plan.Chosen("cholesky", "one_device", 2 * x.nbytes),)
    # jnp on the same sharded input gathers the whole matrix onto every device
    w = distla.cost(distla.linalg.eigh, x)
    assert w.collective_counts["all-gather"] == 0
    assert w.collective_bytes["collective-permute"] < 2.1 * x.nbytes


def _same(a, b, rtol=0):
    assert a.sharding.spec == b.sharding.spec, (a.sharding.spec, b.sharding.spec)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=rtol)


def test_cholesky_and_solve_match_the_distributed_plan(mesh24):
    a = _spd(N)
    b = np.random.default_rng(2).standard_normal((N, 3)).astype(np.float32)
    x, y = _put(a, mesh24), _put(b, mesh24, P("x", None))
    for fn, args in ((distla.linalg.cholesky, (x,)), (distla.linalg.solve, (x, y))):
        one = jax.jit(lambda *v, fn=fn: fn(*v, plan="one_device"))(*args)
        dist = fn(*args, plan="distributed")
        _same(one, dist, rtol=2e-4)
        _same(fn(*args, plan="one_device"), one)  # eager and jitted agree
    pos = distla.linalg.solve(x, y, assume_a="pos", plan="one_device")
    _same(pos, distla.linalg.solve(x, y, assume_a="pos", plan="distributed"), rtol=2e-4)


@pytest.mark.parametrize("n", [N, 13], ids=["even", "uneven"])
def test_the_lu_family_matches_the_distributed_plan_layouts_on_explicit_meshes(n):
    """lu_factor's pivots, det and slogdet: the one-device plan returns the distributed
    plan's shardings, spelled alike (P(None,) for the pivots, as jnp's), eager and jitted."""
    mesh = build_mesh((2, 4), "explicit")
    x = distla.shard(_spd(n), mesh)
    for fn in (distla.linalg.lu_factor, distla.linalg.det, distla.linalg.slogdet):
        dist = jax.tree.leaves(fn(x, plan="distributed"))
        for one in (
            fn(x, plan="one_device"),
            jax.jit(lambda v, fn=fn: fn(v, plan="one_device"))(x),
        ):
            for o, d in zip(jax.tree.leaves(one), dist, strict=True):
                _same(o, d, rtol=1e-3)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("rhs", [(N, 3), (N,)], ids=["matrix", "vector"])
def test_solve_triangular_takes_one_device_only_when_called_eagerly(kind, rhs):
    """Eagerly, the one-device plan (three dispatches) beat the distributed solve; as a
    compiled program it lost at every size, so jitted calls and distla.cost stay
    distributed. Both give the distributed plan's layout and values."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(3)
    low = np.tril(rng.standard_normal((N, N))).astype(np.float32) + N * np.eye(N, dtype=np.float32)
    a = distla.shard(low, mesh)
    b = distla.shard(rng.standard_normal(rhs).astype(np.float32), mesh)
    solve = distla.linalg.solve_triangular
    with _plan.recording() as notes:
        one = solve(a, b, lower=True, trans=1)
    assert [c.plan for c in notes] == ["one_device"]
    assert distla.cost(lambda a, b: solve(a, b, lower=True, trans=1), a, b).plan == "distributed"
    _same(one, solve(a, b, lower=True, trans=1, plan="distributed"), rtol=1e-5)
    np.testing.assert_allclose(low.T @ np.asarray(one), np.asarray(b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("rhs", [(N, 3), (N,)], ids=["matrix", "vector"])
def test_lu_solve_one_device_matches_the_distributed_plan(kind, rhs):
    """lu_solve's one-device plan, eager and jitted (n <= 1024: both win), returns the
    distributed plan's layout and values, for every trans."""
    mesh = build_mesh((2, 4), kind)
    a = _spd(N) + np.triu(np.ones((N, N), np.float32), 1)  # not symmetric
    b = distla.shard(np.random.default_rng(5).standard_normal(rhs).astype(np.float32), mesh)
    lu, piv = distla.linalg.lu_factor(distla.shard(a, mesh), plan="distributed")
    for trans, op in ((0, a), (1, a.T)):
        dist = distla.linalg.lu_solve((lu, piv), b, trans=trans, plan="distributed")
        with _plan.recording() as notes:
            one = distla.linalg.lu_solve((lu, piv), b, trans=trans)
        assert [c.plan for c in notes] == ["one_device"]
        jitted = jax.jit(lambda lu, piv, b, t=trans: distla.linalg.lu_solve((lu, piv), b, trans=t))
        assert distla.cost(jitted, lu, piv, b).plan == "one_device"
        for x in (one, jitted(lu, piv, b)):
            _same(x, dist, rtol=1e-4)
            np.testing.assert_allclose(op @ np.asarray(x), np.asarray(b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
@pytest.mark.parametrize("rhs", [(N, 3), (N,)], ids=["matrix", "vector"])
def test_cho_solve_takes_one_device_only_when_called_eagerly(kind, rhs):
    """As solve_triangular: the eager call takes the one-device plan, a compiled one
    stays distributed, with the distributed plan's layout and values."""
    mesh = build_mesh((2, 4), kind)
    a = _spd(N)
    b = distla.shard(np.random.default_rng(4).standard_normal(rhs).astype(np.float32), mesh)
    c = distla.linalg.cho_factor(distla.shard(a, mesh), lower=True)
    with _plan.recording() as notes:
        one = distla.linalg.cho_solve(c, b)
    assert [n.family for n in notes if n.plan == "one_device"] == ["cho_solve"]
    assert distla.cost(lambda c, b: distla.linalg.cho_solve((c, True), b), c[0], b).plans == (
        _plan.Chosen("cho_solve", "distributed", 0),
    )
    _same(one, distla.linalg.cho_solve(c, b, plan="distributed"), rtol=1e-4)
    np.testing.assert_allclose(a @ np.asarray(one), np.asarray(b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "b_spec,rhs",
    [(P("x"), (N,)), (P(), (N,)), (P("x", None), (N, 3)), (P(None, "y"), (N, 8))],
    ids=["x", "replicated", "rows", "columns"],
)
def test_factor_solves_keep_b_layout_on_both_plans(b_spec, rhs):
    """On an Explicit mesh the distributed solve_triangular and cho_solve return x in
    b's layout (lax.custom_linear_solve keeps b's type); the one-device plan, which an
    eager call takes, returns the same, so a call's layout does not depend on the plan."""
    mesh = build_mesh((2, 4), "explicit")
    a = _spd(N)
    b = jax.device_put(
        np.random.default_rng(6).standard_normal(rhs).astype(np.float32),
        NamedSharding(mesh, b_spec),
    )
    c = distla.linalg.cho_factor(distla.shard(a, mesh), lower=True)
    low = distla.shard(np.tril(a), mesh)
    for solve in (
        lambda plan: distla.linalg.cho_solve(c, b, plan=plan),
        lambda plan: distla.linalg.solve_triangular(low, b, lower=True, plan=plan),
    ):
        one, dist = solve("one_device"), solve("distributed")
        assert one.sharding == dist.sharding, (one.sharding, dist.sharding)
        assert one.sharding.is_equivalent_to(b.sharding, b.ndim), (one.sharding, b.sharding)
        np.testing.assert_allclose(np.asarray(one), np.asarray(dist), rtol=1e-4, atol=1e-4)


def _eigh_ratios(a, w, v):
    n = a.shape[0]
    eps = np.finfo(np.float32).eps
    resid = np.abs(a @ v - v * w).sum(0).max() / (n * np.abs(a).sum(0).max() * eps)
    orth = np.abs(np.eye(n) - v.T @ v).sum(0).max() / (n * eps)
    return resid, orth


@pytest.mark.parametrize("n", [N, 60], ids=["even", "uneven"])
def test_spectral_one_device_in_the_distributed_layouts(mesh24, n):
    a = _sym(n)
    spec = distla._core.mesh.fitting_spec((n, n), mesh24, P("x", "y"))
    x = _put(a, mesh24, spec)
    for w, v in (distla.linalg.eigh(x), jax.jit(distla.linalg.eigh)(x)):
        assert tuple(w.sharding.spec) in ((), (None,)) and v.sharding.spec == spec
        assert max(_eigh_ratios(a, np.asarray(w, np.float64), np.asarray(v, np.float64))) < 30
    np.testing.assert_allclose(distla.linalg.eigvalsh(x), np.linalg.eigvalsh(a), atol=1e-4)
    u, s, vh = distla.linalg.svd(x, full_matrices=False)
    assert u.sharding.spec == spec and vh.sharding.spec == spec
    np.testing.assert_allclose(np.asarray(u) * np.asarray(s) @ np.asarray(vh), a, atol=1e-4)
    np.testing.assert_allclose(
        distla.linalg.svdvals(x), np.linalg.svd(a, compute_uv=False), atol=1e-4
    )
    up, hp = distla.linalg.polar(x)
    assert up.sharding.spec == spec
    np.testing.assert_allclose(np.asarray(up) @ np.asarray(hp), a, atol=1e-4)


def test_one_device_is_differentiable(mesh24):
    a = _spd(N)
    x = _put(a, mesh24)

    def loss(fn):
        return lambda v: jnp.sum(jnp.sin(fn(v)))

    with jax.set_mesh(mesh24):
        g = jax.grad(loss(lambda v: distla.linalg.cholesky(v, plan="one_device")))(x)
    g_ref = jax.grad(loss(jnp.linalg.cholesky))(jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape,side", [((6, 6), "right"), ((9, 6), "right"), ((6, 9), "left")])
def test_polar_one_device_differentiates_in_reverse(mesh24, shape, side):
    # jax's QDWH is a while loop, which reverse mode refuses; the one-device plan takes
    # the distributed plan's rule (from the SVD), so jax.grad works on both plans, and
    # equals jax's on its SVD route
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    w = np.arange(a.size, dtype=np.float32).reshape(shape) / a.size

    def loss(fn):
        return lambda v: sum(jnp.sum(jnp.sin(f)) for f in fn(v)) + jnp.sum(fn(v)[0] * w)

    g_ref = jax.grad(loss(lambda v: jax.scipy.linalg.polar(v, side, method="svd")))(a)
    for plan in ("one_device", "distributed"):
        with jax.set_mesh(mesh24):
            g = jax.grad(loss(lambda v: distla.linalg.polar(v, side, plan=plan)))(
                distla.shard(a, mesh24)
            )
        np.testing.assert_allclose(
            np.asarray(g), np.asarray(g_ref), rtol=1e-3, atol=1e-4, err_msg=plan
        )


@pytest.mark.parametrize("shape,side", [((6, 9), "right"), ((9, 6), "left")])
def test_polar_one_device_keeps_jax_forward_mode_elsewhere(mesh24, shape, side):
    # where the polar factor is not unitary (a wide matrix's right factor, a tall one's
    # left) the rule does not apply: the one-device plan keeps jax's forward mode
    a = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
    da = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    _, t_ref = jax.jvp(lambda v: jax.scipy.linalg.polar(v, side, method="svd"), (a,), (da,))
    with jax.set_mesh(mesh24):
        _, t = jax.jvp(
            lambda v: distla.linalg.polar(v, side, plan="one_device"),
            (distla.shard(a, mesh24),),
            (distla.shard(da, mesh24),),
        )
    for got, want in zip(t, t_ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-4)


def test_vmap_of_the_one_device_plan_keeps_each_member_where_it_is():
    """jax.vmap of a call whose one matrix takes the one-device plan: batched, the plan
    would move every member to the first device; each device computes its own members
    instead (no collective), with jnp's values in jnp's layout. (On an Explicit mesh the
    vmap holds the batch's axes and each member is a one-device call: jnp's function.)"""
    mesh24 = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 6, 6)).astype(np.float32)
    spd = (a @ np.swapaxes(a, -1, -2) / 6 + np.eye(6, dtype=np.float32)).astype(np.float32)
    b = rng.standard_normal((8, 6, 3)).astype(np.float32)
    da, db = _put(spd, mesh24, P(("x", "y"))), _put(b, mesh24, P(("x", "y")))
    L = distla.linalg
    calls = [  # (distla's call, jnp's, operands)
        (L.solve, jnp.linalg.solve, (da, db)),
        (lambda x, y: L.solve(x, y, assume_a="pos"), jnp.linalg.solve, (da, db)),
        (L.cholesky, jnp.linalg.cholesky, (da,)),
        (lambda x: tuple(L.eigh(x)), lambda x: tuple(jnp.linalg.eigh(x)), (da,)),
        (L.det, jnp.linalg.det, (da,)),
    ]
    for fn, ref_fn, args in calls:
        assert _chosen(fn, *(x[0] for x in args)) == ["one_device"]  # one member's plan
        got, ref = jax.vmap(fn)(*args), jax.vmap(ref_fn)(*args)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-5)
            assert g.sharding.is_equivalent_to(r.sharding, g.ndim), (fn, g.sharding)
        assert distla.cost(jax.vmap(fn), *args).total_collective_bytes == 0, fn


def test_bad_plan_and_budget_raise():
    x = distla.shard(_spd(16), distla.make_mesh((2, 4)))
    with pytest.raises(ValueError, match="plan must be one of"):
        distla.linalg.eigh(x, plan="fast")
    with pytest.raises(ValueError, match="non-negative int"):
        distla.linalg.set_plan_budget(-1)
    previous = distla.linalg.set_plan_budget(123)
    assert distla.linalg.plan_budget() == 123
    distla.linalg.set_plan_budget(previous)


@pytest.mark.parametrize(
    "text,ok", [("0", True), ("1048576", True), ("abc", False), ("512MiB", False), ("-5", False)]
)
def test_the_budget_environment_variable(monkeypatch, text, ok):
    monkeypatch.setenv("DISTLA_PLAN_BUDGET", text)
    if ok:
        assert _plan._budget_from_environment(7) == int(text)
    else:
        with pytest.raises(ValueError, match="DISTLA_PLAN_BUDGET must be a non-negative int"):
            _plan._budget_from_environment(7)
    monkeypatch.delenv("DISTLA_PLAN_BUDGET")
    assert _plan._budget_from_environment(7) == 7


def test_matmul_xla_partitioning_moves_panels_not_operands(mesh24):
    small = _put(np.ones((64, 64), np.float32), mesh24)
    assert _chosen(distla.matmul, small, small) == ["summa"]
    assert _chosen(distla.matmul, small, small, algorithm="xla") == ["xla"]
    c = distla.cost(distla.matmul, small, small, algorithm="xla")
    assert c.plan == "xla" and c.largest() < small.nbytes  # panels, never a whole operand
    np.testing.assert_allclose(
        distla.matmul(small, small, algorithm="xla"), np.full((64, 64), 64.0)
    )


def test_lu_family_one_device_matches_the_distributed_plan(mesh24):
    a = _spd(N) + np.triu(np.ones((N, N), np.float32), 1)  # not symmetric
    x = _put(a, mesh24)
    for fn in (distla.linalg.inv, distla.linalg.slogdet):
        one, dist = fn(x, plan="one_device"), fn(x, plan="distributed")
        for o, d in zip(jax.tree.leaves(one), jax.tree.leaves(dist)):
            assert tuple(o.sharding.spec) == tuple(d.sharding.spec)
            np.testing.assert_allclose(np.asarray(o), np.asarray(d), rtol=2e-4, atol=2e-5)
    lu, piv = distla.linalg.lu_factor(x, plan="one_device")
    ref_lu, ref_piv = jax.scipy.linalg.lu_factor(jnp.asarray(a))
    np.testing.assert_array_equal(piv, ref_piv)
    np.testing.assert_allclose(lu, ref_lu, rtol=1e-5, atol=1e-5)
    assert _chosen(distla.linalg.det, x) == ["one_device"]


@pytest.mark.parametrize("shape", [(40, 24), (24, 40)], ids=["tall", "wide"])
def test_polar_one_device_takes_every_side_and_eps(mesh24, shape):
    # jax.scipy's QDWH refuses one side for each of these shapes and a static eps; the
    # one-device plan must take what the distributed plan takes
    a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x = _put(a, mesh24)
    for side in ("right", "left"):
        ru, rp = jax.scipy.linalg.polar(a, side, method="svd")
        for kw in ({}, {"eps": 1e-6, "max_iterations": 20}):
            u, p = distla.linalg.polar(x, side, plan="one_device", **kw)
            assert u.sharding.spec == x.sharding.spec, (side, kw)
            np.testing.assert_allclose(np.asarray(u), ru, atol=1e-5, err_msg=str((side, kw)))
            np.testing.assert_allclose(np.asarray(p), rp, atol=2e-5, err_msg=str((side, kw)))
    with pytest.raises(ValueError, match="method"):
        distla.linalg.polar(x, method="newton", plan="one_device")


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_eig_takes_one_device_not_every_device(kind):
    """eig/eigvals have no distributed algorithm: under the budget one sharded matrix
    goes to one device and the results come back replicated, jnp's values bit for bit;
    with no budget it is jnp's own call, which gathers onto every device."""
    mesh = build_mesh((2, 4), kind)
    a = np.random.default_rng(5).standard_normal((N, N)).astype(np.float32)
    x = _put(a, mesh)
    c = distla.cost(distla.linalg.eig, x)
    assert c.plan == "one_device" and c.collective_counts.get("all-gather", 0) == 0
    # the operand's blocks to one device, the complex results to every other one
    results = (N + N * N) * np.dtype(np.complex64).itemsize
    assert (
        c.total_collective_bytes
        == a.nbytes * (P_DEVICES - 1) // P_DEVICES + (P_DEVICES - 1) * results
    )
    with _plan.budget(0):
        gather = distla.cost(distla.linalg.eig, x)
    assert gather.plan == "distributed" and gather.collective_counts["all-gather"] > 0
    one = jax.device_put(a, jax.devices()[0])
    w_ref, v_ref = jnp.linalg.eig(one)
    for w, v in (distla.linalg.eig(x), jax.jit(distla.linalg.eig)(x)):
        assert w.sharding.is_fully_replicated and v.sharding.is_fully_replicated
        np.testing.assert_array_equal(np.asarray(w), np.asarray(w_ref))
        np.testing.assert_array_equal(np.asarray(v), np.asarray(v_ref))
    w = distla.linalg.eigvals(x)
    assert w.sharding.is_fully_replicated
    np.testing.assert_array_equal(np.asarray(w), np.asarray(jnp.linalg.eigvals(one)))
    np.testing.assert_array_equal(
        np.asarray(distla.linalg.eigvals(x, plan="distributed")), np.asarray(w)
    )
    with pytest.raises(ValueError, match="plan must be one of"):
        distla.linalg.eigvals(x, plan="gather")
    # a stack sharded along its batch: each device its own members, as jnp's; no gather
    stack = jax.device_put(np.stack([a] * 4), NamedSharding(mesh, P("x", None, "y")))
    ws, vs = distla.linalg.eig(stack)
    assert ws.sharding.spec[0] == "x" and vs.sharding.spec[0] == "x"
    assert distla.linalg.qr(stack, mode="raw")[0].sharding.spec[0] == "x"
    np.testing.assert_allclose(
        np.asarray(distla.linalg.eigvals(stack))[2], np.asarray(w), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_lu_takes_the_lu_family_plan(kind):
    """``lu`` (p, l, u) chooses as lu_factor does: one device below the crossover, in the
    distributed plan's layouts, and ``permute_l`` both ways."""
    mesh = build_mesh((2, 4), kind)
    a = np.random.default_rng(6).standard_normal((N, N)).astype(np.float32)
    x = _put(a, mesh)
    assert distla.cost(distla.linalg.lu, x).plan == "one_device"
    assert distla.cost(distla.linalg.lu, x, plan="distributed").plan == "distributed"
    dist = distla.linalg.lu(x, plan="distributed")
    for one in (distla.linalg.lu(x), jax.jit(distla.linalg.lu)(x)):
        _same(one.p, dist.p)  # the same pivots: partial pivoting's choices are unambiguous
        _same(one.l, dist.l, rtol=2e-4)
        _same(one.u, dist.u, rtol=2e-4)
    pl, u = distla.linalg.lu(x, permute_l=True)
    pl_d, u_d = distla.linalg.lu(x, permute_l=True, plan="distributed")
    _same(pl, pl_d, rtol=2e-4)
    _same(u, u_d, rtol=2e-4)
    np.testing.assert_allclose(np.asarray(pl) @ np.asarray(u), a, atol=1e-4)


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_qr_raw_takes_one_device_not_every_device(kind):
    """qr(mode="raw") is jax's one-device geqrf: one sharded matrix goes to one device
    under the budget (jnp's values bit for bit, replicated), to every device above it."""
    mesh = build_mesh((2, 4), kind)
    a = np.random.default_rng(7).standard_normal((N, N // 2)).astype(np.float32)
    x = _put(a, mesh)
    raw = lambda m: distla.linalg.qr(m, mode="raw")  # noqa: E731
    c = distla.cost(raw, x)
    assert c.plans == (_plan.Chosen("qr_raw", "one_device", 2 * a.nbytes + 4 * (N // 2)),)
    assert c.collective_counts.get("all-gather", 0) == 0
    with _plan.budget(0):
        assert distla.cost(raw, x).collective_counts["all-gather"] > 0
    h_ref, tau_ref = jnp.linalg.qr(jax.device_put(a, jax.devices()[0]), mode="raw")
    for h, tau in (raw(x), jax.jit(raw)(x)):
        assert h.sharding.is_fully_replicated and tau.sharding.is_fully_replicated
        np.testing.assert_array_equal(np.asarray(h), np.asarray(h_ref))
        np.testing.assert_array_equal(np.asarray(tau), np.asarray(tau_ref))
