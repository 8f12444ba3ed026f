"""schur, rsf2csf, solve_sylvester, qr_multiply and eigh_tridiagonal (distla.scipy.linalg).

Values against jax.scipy.linalg and scipy on a 2x4 mesh (Auto and Explicit, sizes it
does not divide); the Schur form's residual and orthogonality; rsf2csf's commuting
rotations against jax's sequential ones (and the fallback where blocks touch);
qr_multiply's compact-WY application without forming ``Q``; and the communication
of the distributed parts read from the compiled programs.
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from helpers import THRESHOLD, eps, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as sla
from distla._core.plan import budget
from distla.scipy.linalg import _schur


@pytest.fixture(scope="module", params=["auto", "explicit"])
def mesh(request):
    return build_mesh((2, 4), request.param)


def schur_ratios(a, t, z):
    a64, t64, z64 = (np.asarray(x).astype(np.complex128) for x in (a, t, z))
    n, e = a64.shape[0], eps(np.asarray(t).dtype)
    resid = np.linalg.norm(a64 - z64 @ t64 @ z64.conj().T, 1) / (n * np.linalg.norm(a64, 1) * e)
    orth = np.linalg.norm(np.eye(n) - z64.conj().T @ z64, 1) / (n * e)
    return resid, orth


@pytest.mark.parametrize("plan", ["one_device", "distributed"])
def test_schur(mesh, plan):
    a = np.random.default_rng(0).standard_normal((21, 21)).astype(np.float32)
    with budget(2**30):
        for output in ("real", "complex"):
            t, z = sla.schur(place(a, mesh), output, plan=plan)
            assert t.dtype == jsl.schur(a, output)[0].dtype
            assert max(schur_ratios(a, t, z)) <= THRESHOLD
            assert np.all(np.tril(np.asarray(t), -2 if output == "real" else -1) == 0)
    with pytest.raises(ValueError, match="output"):
        sla.schur(place(a, mesh), "quasi")


def test_rsf2csf(mesh):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((24, 24))
    tr, zr = (np.asarray(x) for x in jsl.schur(a))
    got = sla.rsf2csf(place(tr, mesh), place(zr, mesh))
    want = jsl.rsf2csf(tr, zr)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, atol=1e-5)
    traced = jax.jit(sla.rsf2csf)(place(tr, mesh), place(zr, mesh))
    np.testing.assert_allclose(traced[0], want[0], atol=1e-5)
    # an upper Hessenberg matrix, 2x2 blocks touching: jax's sequential order, one device
    h = np.triu(rng.standard_normal((16, 16)), -1).astype(np.float32)
    with budget(2**30):
        got = sla.rsf2csf(place(h, mesh), place(np.eye(16, dtype=np.float32), mesh))
    np.testing.assert_allclose(got[0], jsl.rsf2csf(h, np.eye(16))[0], atol=1e-5)


def test_rsf2csf_moves_one_halo():
    """Compile only: the rotations' collectives are one row or column from each
    neighbour (and the band's reductions); the fallback for touching blocks aside."""
    n = 256
    mesh = build_mesh((2, 4), "explicit")
    spec = NamedSharding(mesh, P("x", "y"))
    t = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=spec)
    c = distla.cost(
        lambda t, z: _schur._rsf2csf_2d(
            t, z, mesh=mesh.abstract_mesh, dtype=np.dtype(np.complex64)
        ),
        t,
        t,
    )
    line = (n // 2) * 8  # a complex64 row or column of a device's block
    assert c.collective_counts["collective-permute"] >= 6, c  # T's rows, T's and Z's columns
    permutes = [op for op in c.collectives if op.kind == "collective-permute"]
    assert all(op.bytes <= line for op in permutes), c
    assert c.largest() <= n * 8, c  # the band's n-vectors at most


def test_solve_sylvester(mesh, x64):
    rng = np.random.default_rng(2)
    for m, n in ((24, 16), (13, 9)):
        a, b = rng.standard_normal((m, m)), rng.standard_normal((n, n))
        c = rng.standard_normal((m, n))
        with budget(2**30):
            for method in ("schur", "eigen"):
                x = sla.solve_sylvester(
                    place(a, mesh), place(b, mesh), place(c, mesh), method=method
                )
                assert x.dtype == np.float64 and x.shape == (m, n)
                ref = sl.solve_sylvester(a, b, c)
                assert np.linalg.norm(np.asarray(x) - ref) <= 1e-11 * np.linalg.norm(ref), method
    # a singular equation (B = -A: every eigenvalue of A has its negative in B): NaN
    a = rng.standard_normal((12, 12))
    with budget(2**30):
        x = sla.solve_sylvester(place(a, mesh), place(-a, mesh), place(a, mesh))
    assert np.all(np.isnan(np.asarray(x)))
    with pytest.raises(ValueError, match="Incompatible"):
        sla.solve_sylvester(a, b, c.T)


@pytest.mark.parametrize("shape", [(40, 24), (24, 40), (37, 37)], ids=str)
def test_qr_multiply(mesh, shape):
    rng = np.random.default_rng(3)
    m, n = shape
    k = min(m, n)
    a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    for mode in ("left", "right"):
        for conjugate in (False, True):
            c = rng.standard_normal((k, 5) if mode == "left" else (6, m)).astype(np.float32)
            got = sla.qr_multiply(place(a, mesh), place(c, mesh), mode, conjugate=conjugate)
            want = jsl.qr_multiply(a, c, mode, conjugate=conjugate)
            for g, w in zip(got, want):  # LAPACK's reflectors: the same Q and R
                assert g.shape == w.shape and g.dtype == w.dtype
                np.testing.assert_allclose(g, w, atol=2e-5)
    v = rng.standard_normal(m).astype(np.float32)
    got, r = sla.qr_multiply(place(a, mesh), v)
    np.testing.assert_allclose(got, jsl.qr_multiply(a, v)[0], atol=2e-5)
    with budget(2**30):
        got = sla.qr_multiply(place(a, mesh), v, pivoting=True)
    for g, w in zip(got, jsl.qr_multiply(a, v, pivoting=True)):
        np.testing.assert_allclose(g, w, atol=2e-5)


def test_qr_multiply_forms_no_q():
    """Compile only: applying Q moves panels, never a whole matrix."""
    n = 512
    mesh = build_mesh((2, 4), "explicit")
    spec = NamedSharding(mesh, P("x", "y"))
    a = jax.ShapeDtypeStruct((n, n), jnp.float32, sharding=spec)
    c = jax.ShapeDtypeStruct((64, n), jnp.float32, sharding=spec)
    cost = distla.cost(sla.qr_multiply, a, c)
    assert cost.largest() < n * n * 4 / 2, cost


def test_eigh_tridiagonal(mesh):
    rng = np.random.default_rng(4)
    for n in (40, 37):
        d = rng.standard_normal(n).astype(np.float32)
        e = rng.standard_normal(n - 1).astype(np.float32)
        x, y = (place(v, mesh, P(("x", "y"))) for v in (d, e))
        ws = sl.eigh_tridiagonal(d.astype(np.float64), e.astype(np.float64), eigvals_only=True)
        scale = n * eps(np.float32) * np.max(np.abs(ws))
        w = sla.eigh_tridiagonal(x, y, eigvals_only=True)
        assert w.dtype == jnp.float32 and np.max(np.abs(np.asarray(w) - ws)) <= THRESHOLD * scale
        w, v = sla.eigh_tridiagonal(x, y, select="i", select_range=(3, 10))
        t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
        v = np.asarray(v, np.float64)
        assert v.shape == (n, 8)
        np.testing.assert_allclose(w, ws[3:11], atol=THRESHOLD * scale)
        assert np.abs(t @ v - v * np.asarray(w)).max() <= THRESHOLD * scale
        assert np.abs(v.T @ v - np.eye(8)).max() <= THRESHOLD * n * eps(np.float32)
    z = (d + 1j * d).astype(np.complex64)
    got = sla.eigh_tridiagonal(place(z, mesh), place((e + 0j).astype(np.complex64), mesh))
    want = jsl.eigh_tridiagonal(z, (e + 0j).astype(np.complex64))
    assert [g.dtype for g in got] == [w.dtype for w in want]
    with pytest.raises(NotImplementedError):
        sla.eigh_tridiagonal(x, y, select="v", select_range=(0.0, 1.0))
