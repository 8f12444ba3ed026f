"""Cholesky, cho_factor/cho_solve, solve_triangular and solve(assume_a="pos") against scipy.

Ratios are DESIGN.md's (LAPACK's, pass at <= 30): Cholesky
||A - L Lᴴ||_1 / (n ||A||_1 eps); solves ||A x - b||_inf / (||A||_inf ||x||_inf n eps).
Sizes are ones the meshes and the blocks do not divide; small block sizes give
several segments and panels per segment.
"""

from functools import partial

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import THRESHOLD, eps, place, random_matrix
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import distla
from distla._core.mesh import fitting_spec
from distla.linalg import _cholesky


def spd(rng, n, dtype, cond=None):
    """A random Hermitian positive definite matrix (with condition number ``cond``)."""
    q, _ = np.linalg.qr(
        random_matrix(rng, (n, n), np.complex128 if np.dtype(dtype).kind == "c" else np.float64)
    )
    lam = np.geomspace(1.0, 1.0 / cond, n) if cond else rng.uniform(1.0, 2.0, n)
    a = (q * lam) @ q.conj().T
    return ((a + a.conj().T) / 2).astype(dtype)


def chol_ratio(a, l):
    a64 = np.asarray(a).astype(np.complex128)
    l64 = np.asarray(l).astype(np.complex128)
    n = a64.shape[0]
    err = np.abs(a64 - l64 @ l64.conj().T).sum(0).max()
    return err / (n * np.abs(a64).sum(0).max() * eps(np.asarray(l).dtype))


def solve_ratio(a, x, b):
    a64 = np.asarray(a).astype(np.complex128)
    x64 = np.asarray(x).astype(np.complex128).reshape(a64.shape[0], -1)
    b64 = np.asarray(b).astype(np.complex128).reshape(a64.shape[0], -1)
    n = a64.shape[0]
    r = np.abs(a64 @ x64 - b64).max()
    return r / (np.abs(a64).sum(1).max() * np.abs(x64).max() * n * eps(np.asarray(x).dtype))


def test_cholesky_every_mesh(mesh):
    rng = np.random.default_rng(1)
    n = 44  # the 8-wide block does not divide it, nor 8 devices
    a = spd(rng, n, np.float32)
    x = place(a, mesh)
    l = distla.linalg.cholesky(x, block_size=8)  # several segments and panels
    assert chol_ratio(a, l) <= THRESHOLD
    assert np.all(np.triu(np.asarray(l), 1) == 0)
    np.testing.assert_allclose(np.asarray(l), np.linalg.cholesky(a), atol=1e-4)
    assert l.sharding.mesh.shape == mesh.shape
    want = fitting_spec((n, n), mesh.abstract_mesh, P("x", "y"))  # the largest even layout
    assert l.sharding.is_equivalent_to(NamedSharding(mesh, want), 2)


@pytest.mark.parametrize(
    "dtype,cond",
    [
        pytest.param(np.float32, "ill", id="float32-cond-1/sqrt(eps)"),
        pytest.param(np.float64, "ill", id="float64-cond-1/sqrt(eps)"),
        pytest.param(np.complex64, None, id="complex64-hermitian"),
        pytest.param(np.complex128, "ill", id="complex128-cond-1/sqrt(eps)"),
    ],
)
def test_cholesky_dtypes(x64, dtype, cond):
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(2)
    n = 61
    kappa = 1 / np.sqrt(eps(dtype)) if cond else 1.0
    a = spd(rng, n, dtype, cond=kappa if cond else None)
    l = distla.linalg.cholesky(place(a, mesh))
    assert l.dtype == dtype
    assert chol_ratio(a, l) <= THRESHOLD
    ref = scipy.linalg.cholesky(a, lower=True)
    # forward error: up to cond(A)·eps (the backward ratio above is the criterion)
    atol = THRESHOLD * n * kappa * eps(dtype) * np.abs(ref).max()
    np.testing.assert_allclose(np.asarray(l), ref, rtol=0, atol=atol)
    # the log-determinant from the factor
    logdet = 2 * jnp.sum(jnp.log(jnp.abs(jnp.diagonal(jax.device_get(l)))))
    np.testing.assert_allclose(logdet, np.linalg.slogdet(a.astype(np.complex128))[1], rtol=1e-4)


def test_cholesky_upper_symmetrize_and_not_positive_definite():
    mesh24 = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(3)
    n = 37
    a = spd(rng, n, np.float32)
    skew = a + np.triu(rng.standard_normal((n, n)).astype(np.float32), 1)  # upper not symmetric
    x = place(skew, mesh24)
    for kw in (dict(upper=True), dict(symmetrize_input=False)):
        got = distla.linalg.cholesky(x, **kw)
        np.testing.assert_allclose(
            np.asarray(got), np.asarray(jnp.linalg.cholesky(skew, **kw)), atol=2e-5
        )
    bad = a.copy()
    bad[20, 20] = -1.0  # not positive definite
    got = np.asarray(distla.linalg.cholesky(place(bad, mesh24)))
    ref = np.asarray(jnp.linalg.cholesky(bad))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isnan(got[np.tril_indices(n)]).all() and (np.triu(got, 1) == 0).all()


@pytest.mark.parametrize(
    "lower,kind", [(True, "auto"), (False, "explicit")], ids=["lower-auto", "upper-explicit"]
)
def test_cho_factor_cho_solve_and_solve_pos(lower, kind):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(4)
    n = 53
    a = spd(rng, n, np.complex64)
    other = ~np.tri(n, dtype=bool) if lower else np.tri(n, k=-1, dtype=bool)  # strictly
    x_in = place(np.where(other, 7.0, a).astype(np.complex64), mesh)  # other triangle unread
    c, low = distla.linalg.cho_factor(x_in, lower=lower, check_finite=False)
    assert low is lower
    c_ref, _ = jsl.cho_factor(a, lower=lower)
    np.testing.assert_allclose(np.asarray(c), np.asarray(c_ref), atol=1e-4)
    b = random_matrix(rng, (n, 3), np.complex64)
    rhs = b if lower else b[:, 0]
    x = distla.linalg.cho_solve((c, low), place(rhs, mesh))
    assert x.shape == rhs.shape
    assert solve_ratio(a, x, rhs) <= THRESHOLD
    # solve(assume_a="pos") reads the same triangle, through the same programs
    x = distla.linalg.solve(x_in, place(rhs, mesh), assume_a="pos", lower=lower)
    assert solve_ratio(a, x, rhs) <= THRESHOLD


@pytest.mark.parametrize(
    "trans,lower,k,kind",
    [
        (0, True, 3, "auto"),
        (1, False, 1, "explicit"),
        ("C", False, 3, "auto"),
        (0, False, 130, "explicit"),
        (1, True, 130, "auto"),
        ("C", True, 130, "explicit"),
    ],
    ids=[
        "N-lower",
        "T-upper-vector",
        "C-upper",
        "N-upper-many-rhs",
        "T-lower-many-rhs",
        "C-lower-many-rhs",
    ],
)
def test_solve_triangular(trans, lower, k, kind):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(5)
    n = 50
    t = random_matrix(rng, (n, n), np.complex64) + 8 * np.eye(n, dtype=np.complex64)
    b = random_matrix(rng, (n, k), np.complex64)
    b = b[:, 0] if k == 1 else b
    x = distla.linalg.solve_triangular(place(t, mesh), place(b, mesh), trans=trans, lower=lower)
    ref = jsl.solve_triangular(t, b, trans=trans, lower=lower)
    tri = np.tril(t) if lower else np.triu(t)
    op = {0: tri, "C": tri.conj().T, 1: tri.T}[trans]
    assert x.shape == b.shape
    assert solve_ratio(op, x, b) <= THRESHOLD
    np.testing.assert_allclose(np.asarray(x), np.asarray(ref), atol=1e-4)
    if trans == 0 and lower:  # a unit diagonal is implied, not read
        x = distla.linalg.solve_triangular(
            place(t, mesh), place(b, mesh), lower=True, unit_diagonal=True
        )
        ref = scipy.linalg.solve_triangular(t, b, lower=True, unit_diagonal=True)
        assert solve_ratio(np.tril(t, -1) + np.eye(n), x, b) <= THRESHOLD


@pytest.mark.parametrize("trans", [1, "C"])
def test_transposed_solve_keeps_b_on_the_grid(mesh, trans):
    """op(T) x = b with many right-hand sides on every mesh: b is solved where it lies.

    The solve moves one block row of T per step instead of b and x to the transposed
    grid and back; the result comes back where the untransposed solve returns it, within
    the scaled residual. n = 45 is divided by no mesh.
    """
    rng = np.random.default_rng(11)
    n, k = 45, 140
    t = random_matrix(rng, (n, n), np.complex128) + 8 * np.eye(n)
    b = random_matrix(rng, (n, k), np.complex128)
    with jax.enable_x64(True):
        layout = distla.linalg.solve_triangular(place(t, mesh), place(b, mesh)).sharding.spec
        for lower in (True, False):
            x = distla.linalg.solve_triangular(
                place(t, mesh), place(b, mesh), trans=trans, lower=lower
            )
            tri = np.tril(t) if lower else np.triu(t)
            op = tri.T if trans == 1 else tri.conj().T
            assert x.shape == b.shape and x.dtype == np.complex128
            assert solve_ratio(op, x, b) <= THRESHOLD
            ref = scipy.linalg.solve_triangular(t, b, trans=trans, lower=lower)
            np.testing.assert_allclose(np.asarray(x), ref, atol=1e-12)
            assert x.sharding.spec == layout  # where the untransposed solve returns it


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "upper"])
def test_cho_solve_with_many_right_hand_sides_in_one_program(mesh, lower):
    """More than 128 right-hand sides on every mesh: both sweeps in one program, b solved
    where it lies (``_triangular.triangular_sweeps``), and derivatives of every order
    from the sweeps made one by one. n = 45 and k = 131 are divided by no mesh."""
    rng = np.random.default_rng(12)
    n, k = 45, 131
    a = spd(rng, n, np.complex128)
    b = random_matrix(rng, (n, k), np.complex128)
    with jax.enable_x64(True):
        c, low = distla.linalg.cho_factor(place(a, mesh), lower=lower)
        x = distla.linalg.cho_solve((c, low), place(b, mesh))
        assert x.shape == b.shape and x.dtype == np.complex128
        assert solve_ratio(a, x, b) <= THRESHOLD
        ref = scipy.linalg.cho_solve((np.asarray(c), lower), b)
        np.testing.assert_allclose(np.asarray(x), ref, atol=1e-12)
        # where a triangular solve returns the same right-hand sides
        tri = distla.linalg.solve_triangular(c, place(b, mesh), lower=lower)
        assert x.sharding.spec == tri.sharding.spec
        with jax.set_mesh(mesh):
            sc, sb = place(np.asarray(c).real, mesh), place(b.real, mesh)
            ref_c, ref_b = np.asarray(c).real, b.real
            g = jax.grad(lambda c, b: jnp.sum(distla.linalg.cho_solve((c, lower), b) ** 2), (0, 1))
            g_ref = jax.grad(lambda c, b: jnp.sum(jsl.cho_solve((c, lower), b) ** 2), (0, 1))
            for got, want in zip(g(sc, sb), g_ref(ref_c, ref_b)):
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-7, atol=1e-9)
            # jax.vmap over stacks of right-hand sides: one stacked call
            bs = np.stack([ref_b, 2 * ref_b])
            xs = jax.vmap(lambda b: distla.linalg.cho_solve((sc, lower), b))(bs)
            want = np.stack([jsl.cho_solve((ref_c, lower), y) for y in bs])
            np.testing.assert_allclose(np.asarray(xs), want, rtol=1e-9, atol=1e-11)


def test_stacks_run_locally(mesh24):
    rng = np.random.default_rng(7)
    a = np.stack([spd(rng, 12, np.float32) for _ in range(8)])
    b = random_matrix(rng, (8, 12, 2), np.float32)
    batch = P(("x", "y"), None, None)
    sa = jax.device_put(a, NamedSharding(mesh24, batch))
    sb = jax.device_put(b, NamedSharding(mesh24, batch))
    l = distla.linalg.cholesky(sa)
    np.testing.assert_allclose(np.asarray(l), np.linalg.cholesky(a), atol=1e-5)
    assert l.sharding.spec[0] == ("x", "y")
    x = distla.linalg.cho_solve((l, True), sb)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), rtol=1e-3, atol=1e-4)
    for fn, args in [
        (distla.linalg.cholesky, (sa,)),
        (lambda c, b: distla.linalg.cho_solve((c, True), b), (l, sb)),
        (partial(distla.linalg.solve_triangular, lower=True), (l, sb)),
    ]:
        assert distla.cost(fn, *args).total_collective_bytes == 0
    # jax.vmap of the one-matrix call is one batched call
    np.testing.assert_allclose(
        np.asarray(jax.vmap(distla.linalg.cholesky)(sa)), np.asarray(l), atol=1e-6
    )


def test_derivatives():
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(8)
    n = 20
    a = spd(rng, n, np.float64)
    b = random_matrix(rng, (n, 2), np.float64)
    v = spd(rng, n, np.float64)
    with jax.enable_x64(True), jax.set_mesh(mesh):
        sa, sb = place(a, mesh), place(b, mesh)
        check_grads(distla.linalg.cholesky, (sa,), order=1, modes=("rev",))
        c, _ = distla.linalg.cho_factor(sa, lower=True)
        g = jax.grad(lambda c, b: jnp.sum(distla.linalg.cho_solve((c, True), b) ** 2), (0, 1))
        g_ref = jax.grad(lambda c, b: jnp.sum(jsl.cho_solve((c, True), b) ** 2), (0, 1))
        for got, ref in zip(g(c, sb), g_ref(np.asarray(c), b)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-7, atol=1e-9)
        check_grads(
            lambda t, b: distla.linalg.solve_triangular(t, b, trans=1, lower=True),
            (c, sb),
            order=1,
            modes=("rev",),
        )

        # second order, against jax's own derivative: the jvp of the gradient
        def f(fn):
            return lambda a: jnp.sum(jnp.sin(fn(a)))

        got = jax.jvp(jax.grad(f(distla.linalg.cholesky)), (sa,), (place(v, mesh),))[1]
        ref = jax.jvp(jax.grad(f(jnp.linalg.cholesky)), (jnp.asarray(a),), (jnp.asarray(v),))[1]
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), atol=1e-9)


def test_promotion_empty_and_errors():
    mesh24 = build_mesh((2, 4), "explicit")
    ints = place((np.eye(40) * 4 + 1).astype(np.int32), mesh24)
    l = distla.linalg.cholesky(ints)
    assert l.dtype == jnp.linalg.cholesky(np.eye(3, dtype=np.int32)).dtype
    np.testing.assert_allclose(np.asarray(l), np.linalg.cholesky(np.eye(40) * 4 + 1), rtol=1e-5)
    empty = jax.device_put(np.zeros((0, 0), np.float32), NamedSharding(mesh24, P()))
    assert distla.linalg.cholesky(empty).shape == (0, 0)
    with jax.numpy_dtype_promotion("strict"):
        with pytest.raises(jax.dtypes.TypePromotionError):
            distla.linalg.solve_triangular(
                place(np.eye(8, dtype=np.float32), mesh24), place(np.ones(8, np.int32), mesh24)
            )
    with pytest.raises(ValueError, match="shape"):
        distla.linalg.cholesky(place(np.ones((8, 16), np.float32), mesh24))
    with pytest.raises(ValueError, match="trans"):
        distla.linalg.solve_triangular(np.eye(4), np.ones(4), trans=3)
    with pytest.raises(ValueError, match="b must have shape"):
        distla.linalg.cho_solve((place(np.eye(8, dtype=np.float32), mesh24), True), np.ones(5))
    with pytest.raises(TypeError, match="float16"):
        distla.linalg.cholesky(place(np.eye(8, dtype=np.float16), mesh24))


def test_communication_and_memory():
    """No collective carries the matrix; bytes within 1.2x of the model; O(n²/p + n·nb) memory."""
    mesh = build_mesh((2, 4), "explicit")
    n = 1024
    a = jax.ShapeDtypeStruct((n, n), np.float32, sharding=NamedSharding(mesh, P("x", "y")))
    c = distla.cost(distla.linalg.cholesky, a)
    whole = n * n * 4
    assert c.largest() <= whole / 4  # the relayout's all-to-all: a few local blocks
    assert c.collective_counts["all-gather"] == 0
    model = distla.linalg.cholesky_model_bytes(n, (2, 4), np.float32)
    assert 1 / 1.2 <= c.total_collective_bytes / model <= 1.2
    nb, w, n_pad = _cholesky.blocking(distla._core.mesh.grid_of(mesh, what=""), n)
    # a few copies of the local block (input, symmetrised, block-cyclic, output)
    # plus the segment's panel rows and their transposes: O(n²/p + n·w·nb/pr)
    local, segment = n_pad * n_pad / 8 * 4, n_pad / 2 * nb * w * 4
    assert c.peak_memory_bytes <= 10 * local + 3 * segment
