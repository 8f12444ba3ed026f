"""Matrix functions distributed (distla.scipy.linalg.sqrtm and funm).

Hermitian matrices (ill-conditioned and clustered spectra, float32/float64/complex64)
take the eigen route: ``‖X² − A‖₁/(n‖X‖₁²eps) ≤ 30`` for the square root, values
against scipy in float64; general matrices the Denman–Beavers iteration (sqrtm) or
the Schur–Parlett algorithm on one device (funm); the iteration's fallback where it
cannot converge; ``jax.jit`` (the routes as branches); and, read from the compiled
program, no collective that carries a whole matrix.
"""

import re

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from helpers import THRESHOLD, eps, hermitian, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as sla
from distla._core.plan import budget


def root_ratio(a, x):
    """``‖X² − A‖₁/(n‖X‖₁²eps)``: the square root's backward error (Higham's ``α``-scaled)."""
    a64, x64 = (np.asarray(y).astype(np.complex128) for y in (a, x))
    n = a64.shape[0]
    return np.linalg.norm(x64 @ x64 - a64, 1) / (
        n * np.linalg.norm(x64, 1) ** 2 * eps(np.asarray(a).dtype)
    )


def semidefinite(kind, n, dtype, seed=0):
    """A Hermitian matrix of the eigh tests' spectra, its eigenvalues made non-negative."""
    h = hermitian(np.random.default_rng(seed), n, dtype, kind).astype(np.complex128)
    w, v = np.linalg.eigh(h)
    a = (v * np.abs(w)) @ v.conj().T
    a = (a + a.conj().T) / 2
    return (a if np.iscomplexobj(np.zeros(1, dtype)) else a.real).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_hermitian_eigen_route(dtype, request):
    if dtype == np.float64:
        request.getfixturevalue("x64")
    mesh = build_mesh((2, 4), "explicit")
    for kind in ("ill", "clustered"):
        a = semidefinite(kind, 45, dtype)  # 45: the mesh does not divide it
        x = sla.sqrtm(place(a, mesh), plan="distributed")
        assert x.dtype == jsl.sqrtm(a).dtype  # complex, as jax's
        assert root_ratio(a, x) <= THRESHOLD, kind
        f = sla.funm(place(a, mesh), jnp.exp, plan="distributed")
        want = sl.expm(a.astype(np.complex128))
        err = np.linalg.norm(np.asarray(f) - want, 1) / np.linalg.norm(want, 1)
        assert err <= 45 * eps(dtype) * 30, (kind, err)
        if dtype == np.float64:  # to scipy's accuracy
            ref = sl.sqrtm(a)
            assert np.linalg.norm(np.asarray(x) - ref) <= 1e-10 * np.linalg.norm(ref)
    # an indefinite Hermitian matrix: the principal root, complex
    h = hermitian(np.random.default_rng(1), 16, dtype, "random")
    x = sla.sqrtm(place(h, mesh), plan="distributed")
    assert root_ratio(h, x) <= THRESHOLD


def test_denman_beavers_on_general_matrices(x64):
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(2)
    n = 40
    g = rng.standard_normal((n, n)) + 2 * np.sqrt(n) * np.eye(n)  # spectrum in Re > 0
    graded = (g * np.logspace(0, -4, n)[:, None]).astype(np.float32)
    for a in (g, graded):
        x = sla.sqrtm(place(a, mesh))
        assert root_ratio(a, x) <= THRESHOLD
        ref = sl.sqrtm(a.astype(np.float64))
        rel = np.linalg.norm(np.asarray(x) - ref) / np.linalg.norm(ref)
        assert rel <= 1e3 * eps(a.dtype), rel
    # no route but the iteration, traced (the other routes out of the program)
    x = jax.jit(lambda a: sla.sqrtm(a, hermitian=False))(place(g, mesh))
    assert root_ratio(g, x) <= THRESHOLD


def test_fallback_where_the_iteration_cannot_converge(x64):
    """A real matrix with eigenvalues on the negative real axis: its principal root is
    complex, the real iteration does not reach it; the Schur method on one device does."""
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((24, 24)) - 3 * np.eye(24)
    assert np.any((np.abs(np.linalg.eigvals(a).imag) < 1e-9) & (np.linalg.eigvals(a).real < 0))
    x = place(a, mesh)
    with budget(2**30):
        eager = sla.sqrtm(x)
        traced = jax.jit(lambda x: sla.sqrtm(x, hermitian=False))(x)
        c = distla.cost(lambda x: sla.sqrtm(x, hermitian=False), x)
    for got in (eager, traced):
        assert np.linalg.norm(np.asarray(got) - sl.sqrtm(a)) <= 1e-8 * np.linalg.norm(a)
    assert ("sqrtm_schur", "one_device") in {(p.family, p.plan) for p in c.plans}
    assert np.all(np.isnan(np.asarray(sla.sqrtm(x))))  # no budget, no fallback: NaN


def test_funm_routes(x64):
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(4)
    n = 24
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))  # normal, not Hermitian
    g = rng.standard_normal((n, n))  # neither
    with budget(2**30):
        for a in (q, g):
            for f in (sla.funm, jax.jit(sla.funm, static_argnums=1)):
                got = f(place(a, mesh), jnp.sin)
                want = sl.funm(a, np.sin)
                assert np.linalg.norm(np.asarray(got) - want) <= 1e-12 * np.linalg.norm(want)
        f, err = sla.funm(place(g, mesh), jnp.sin, disp=False)
        np.testing.assert_allclose(err, jsl.funm(g, jnp.sin, disp=False)[1], rtol=1e-6)
        f, err = sla.funm(place(q + q.T, mesh), jnp.sin, disp=False)
        assert float(err) == np.finfo(np.float64).eps  # a diagonal Schur form: jax's tol
        one = sla.funm(place(g, mesh), jnp.sin, plan="one_device")
    np.testing.assert_allclose(one, jsl.funm(g, jnp.sin), atol=1e-12)


def test_unsharded_and_errors():
    a = np.diag(np.arange(1.0, 5.0, dtype=np.float32))
    np.testing.assert_allclose(sla.sqrtm(a), jsl.sqrtm(a), rtol=1e-6)
    np.testing.assert_allclose(sla.funm(a, jnp.exp), jsl.funm(a, jnp.exp), rtol=1e-6)
    mesh = build_mesh((2, 4), "explicit")
    with pytest.raises(ValueError, match="square"):
        sla.sqrtm(place(np.ones((8, 16), np.float32), mesh))
    with pytest.raises(ValueError, match="plan"):
        sla.funm(place(a, mesh), jnp.exp, plan="nowhere")


def largest_array(cost):
    """Bytes of the largest array any collective carries (XLA's combiner fuses several
    all-reduces into one tuple: each array of it counts on its own)."""
    sizes = {"f32": 4, "f64": 8, "c64": 8, "c128": 16, "s32": 4, "pred": 1}
    found = 0
    for op in cost.collectives:
        for kind, dims in re.findall(r"(\w+)\[([\d,]*)\]", op.shape):
            count = int(np.prod([int(d) for d in dims.split(",") if d])) if dims else 1
            found = max(found, count * sizes.get(kind, 8))
    return found


def test_no_whole_matrix_moves():
    """Compile only: the eigen route and the iteration move panels and blocks, never a
    whole matrix (n = 256 here; docs/scipy-linalg.md gives n = 1024)."""
    n = 256
    mesh = build_mesh((2, 4), "explicit")
    a = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=NamedSharding(mesh, P("x", "y")))
    whole = n * n * 4
    for route in (True, False):
        c = distla.cost(lambda a: sla.sqrtm(a, hermitian=route, plan="distributed"), a)  # noqa: B023
        assert largest_array(c) <= whole / 4, (route, c)
        assert "one_device" not in {p.plan for p in c.plans}, c
