"""Shape buckets: eager square factorisations of nearby orders share one compiled kernel.

``distla.linalg.set_shape_buckets(steps)`` runs the eager distributed
``lu_factor``, ``solve`` and ``cholesky`` (and ``cho_factor``) on ``steps``
orders per doubling (``distla/linalg/_buckets.py``). These tests hold the
rounding rule, that the orders of one bucket compile the kernel once, and that
the padded calls return what the unpadded ones do: LAPACK's pivots, the same
layouts, values within LAPACK's ratios, singular matrices as LAPACK has them.
"""

import jax
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from test_linalg import lu_ratios, solve_ratio

import distla
from distla._core import buckets as _buckets
from distla.linalg import _cholesky
from distla.linalg._lu import programs as _lu

# Orders 129 to 132 share the bucket 132 at 32 steps (step 4 for 128 < n <= 256).
ORDERS = (129, 131, 132)


@pytest.fixture
def buckets():
    previous = distla.linalg.set_shape_buckets(32)
    yield
    distla.linalg.set_shape_buckets(previous)


def test_bucket_rounding():
    assert _buckets.bucket(1000, 32) == 1008 and _buckets.bucket(1025, 32) == 1056
    assert _buckets.bucket(993, 32) == _buckets.bucket(1008, 32) == 1008
    assert _buckets.bucket(992, 32) == 992 and _buckets.bucket(64, 32) == 64
    assert [_buckets.bucket(n, 32) for n in ORDERS] == [132] * 3
    for steps in (8, 32):
        for n in range(1, 5000):
            b = _buckets.bucket(n, steps)
            assert n <= b and (n <= 2 * steps or b - n < n / steps) and (n > b - n)
            assert _buckets.bucket(b, steps) == b  # a bucket is its own
        # at most `steps` orders per doubling
        assert len({_buckets.bucket(n, steps) for n in range(1025, 2049)}) == steps
    assert all(_buckets.bucket(n, 0) == n for n in range(1, 300))
    assert distla.linalg.shape_buckets() == 0  # off by default


@pytest.mark.parametrize("steps", [3, -1, True, 1.5, "32"])
def test_bad_setting(steps):
    with pytest.raises(ValueError, match="power of two"):
        distla.linalg.set_shape_buckets(steps)
    assert distla.linalg.shape_buckets() == 0


@pytest.mark.parametrize("text,ok", [("16", True), ("0", True), ("12", False), ("on", False)])
def test_the_environment_variable(monkeypatch, text, ok):
    monkeypatch.setenv("DISTLA_SHAPE_BUCKETS", text)
    if ok:
        assert _buckets._from_environment() == int(text)
    else:
        with pytest.raises(ValueError, match="DISTLA_SHAPE_BUCKETS must be 0 .*power of two"):
            _buckets._from_environment()


def _factors(a):
    lu, piv = distla.linalg.lu_factor(a)
    return lu.block_until_ready(), piv


def _operands(n, mesh, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, 3)).astype(np.float32)
    spd = (a @ a.T + n * np.eye(n)).astype(np.float32)
    return (a, b, spd), tuple(distla.shard(x, mesh) for x in (a, b, spd))


def test_orders_of_a_bucket_share_the_kernel(buckets):
    mesh = build_mesh((2, 4), "explicit")
    kernels = (_lu.lu_factor, _lu.solve, _cholesky.factor)
    before = [f._cache_size() for f in kernels]
    for n in ORDERS:
        _, (a, b, spd) = _operands(n, mesh)
        _factors(a)
        distla.linalg.solve(a, b).block_until_ready()
        distla.linalg.cholesky(spd).block_until_ready()
    # one program each for the three orders (at most: another test may have compiled it)
    assert all(f._cache_size() - c <= 1 for f, c in zip(kernels, before))


# Each order pads to the bucket 132 (129 by three, 131 by one) and each mesh kind
# compiles its own padded and unpadded programs (about 20-45 s a case here): one order
# per kind covers both paddings and both kinds (the kernel sharing of all three orders
# is test_orders_of_a_bucket_share_the_kernel's, on Explicit).
@pytest.mark.parametrize("n,kind", [(129, "explicit"), (131, "auto")])
def test_padded_calls_match_the_unpadded(buckets, kind, n):
    mesh = build_mesh((2, 4), kind)
    (a_np, b_np, spd_np), (a, b, spd) = _operands(n, mesh, seed=n)

    def calls():
        return {
            "lu_factor": _factors(a),
            "solve": distla.linalg.solve(a, b),
            "solve vector": distla.linalg.solve(a, b[:, 0]),
            "solve pos": distla.linalg.solve(spd, b, assume_a="pos"),
            "cholesky": distla.linalg.cholesky(spd),
            "cho_factor": distla.linalg.cho_factor(spd)[0],
        }

    got = calls()
    lu, piv = got["lu_factor"]
    assert np.array_equal(np.asarray(piv), sl.lu_factor(a_np)[1])  # LAPACK's pivots
    assert max(lu_ratios(a_np, np.asarray(lu), np.asarray(piv))[:2]) <= 30
    for name, m, rhs in (
        ("solve", a_np, b_np),
        ("solve vector", a_np, b_np[:, 0]),
        ("solve pos", spd_np, b_np),
    ):
        assert got[name].shape == rhs.shape
        assert solve_ratio(m, np.asarray(got[name]), rhs) <= 30, name
    low = np.linalg.cholesky(spd_np.astype(np.float64))
    tol = 1e-5 * np.abs(low).max() * n
    np.testing.assert_allclose(np.asarray(got["cholesky"]), low, atol=tol)
    np.testing.assert_allclose(np.triu(np.asarray(got["cho_factor"])), low.T, atol=tol)

    previous = distla.linalg.set_shape_buckets(0)
    try:
        own = calls()
    finally:
        distla.linalg.set_shape_buckets(previous)
    for name in got:  # the layouts (and shapes) of the unpadded calls; on Explicit
        # meshes spelled the same (jax compares the spelling there), on Auto meshes
        # jit's spelling of a replicated result varies (P() or P(None, None))
        for g, o in zip(jax.tree.leaves(got[name]), jax.tree.leaves(own[name])):
            assert g.shape == o.shape, name
            if kind == "explicit":
                assert g.sharding == o.sharding, (name, g.sharding.spec, o.sharding.spec)
            else:
                assert g.sharding.is_equivalent_to(o.sharding, g.ndim), name


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # scipy names the zero pivot
def test_singular_as_lapack(buckets):
    mesh = build_mesh((2, 4), "explicit")
    n = 131
    a_np = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    a_np[:, 7] = 0
    lu, piv = _factors(distla.shard(a_np, mesh))
    assert np.array_equal(np.asarray(piv), sl.lu_factor(a_np, check_finite=False)[1])
    assert np.asarray(lu)[7, 7] == 0
    x = distla.linalg.solve(
        distla.shard(a_np, mesh), distla.shard(np.ones((n, 2), np.float32), mesh)
    )
    assert not np.isfinite(np.asarray(x)).all()


def test_traced_calls_keep_their_shape(buckets):
    mesh = build_mesh((2, 4), "auto")
    _, (a, b, _) = _operands(129, mesh)
    grown = _buckets._grow._cache_size()
    jax.jit(distla.linalg.lu_factor).lower(a)
    jax.jit(distla.linalg.solve).lower(a, b)
    assert _buckets._grow._cache_size() == grown  # no padding inside a caller's program
