"""distla.scipy.linalg has every public name of jax.scipy.linalg, with jax's parameters.

Name for name against the installed jax (``inspect.signature``: every parameter of
jax's in jax's order, of jax's kind, with jax's default; distla's additions
keyword-only with defaults); and the names whose semantics differ from
``distla.linalg``'s (``cholesky`` upper by default and reading one triangle, ``qr``'s
modes and pivoting, ``svd``'s drivers, ``eigh``'s positional order) against
``jax.scipy.linalg`` on a 2x4 mesh, Auto and Explicit, at a size it does not divide.
"""

import inspect

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import build_mesh
from helpers import place

import distla
import distla.linalg
import distla.scipy.linalg as sla
from distla._core.plan import budget


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def _signature_problems(name):
    ours, theirs = getattr(sla, name), getattr(jsl, name)
    try:
        sig_j = inspect.signature(theirs)
    except (TypeError, ValueError):
        return []
    sig_d = inspect.signature(ours)
    pj = list(sig_j.parameters.values())
    pd = list(sig_d.parameters.values())
    problems = []
    if [p.name for p in pd[: len(pj)]] != [p.name for p in pj]:
        problems.append(f"parameters {[p.name for p in pd]} do not start with jax's {pj}")
        return problems
    for d, j in zip(pd, pj):
        if d.kind != j.kind:
            problems.append(f"{d.name}: kind {d.kind} != jax's {j.kind}")
        if d.default != j.default and not (d.default is None and j.default is None):
            problems.append(f"{d.name}: default {d.default!r} != jax's {j.default!r}")
    for d in pd[len(pj) :]:
        if d.kind != inspect.Parameter.KEYWORD_ONLY or d.default is inspect.Parameter.empty:
            problems.append(f"added parameter {d.name} must be keyword-only with a default")
    return problems


def test_signatures_are_jaxs():
    problems = {
        name: p
        for name in sorted(_public(jsl) & _public(sla))
        if callable(getattr(jsl, name)) and (p := _signature_problems(name))
    }
    assert not problems, problems


def test_every_name_is_there():
    missing = _public(jsl) - _public(sla)
    assert not missing, f"distla.scipy.linalg lacks {sorted(missing)}"


def test_shared_families_are_distla_linalgs_own():
    for name in ("lu_factor", "lu_solve", "cho_factor", "cho_solve", "solve", "det", "inv"):
        assert getattr(sla, name) is getattr(distla.linalg, name), name
    assert sla.__all__ == sorted(sla.__all__)
    assert set(sla.__all__) == _public(sla) - {"annotations"}


@pytest.fixture(scope="module", params=["auto", "explicit"])
def mesh(request):
    return build_mesh((2, 4), request.param)


def _spd(n, dtype=np.float32, seed=0):
    g = np.random.default_rng(seed).standard_normal((n, n)).astype(dtype)
    return g @ g.T + n * np.eye(n, dtype=dtype)


def test_cholesky_is_upper_by_default_and_reads_one_triangle(mesh):
    n = 13
    spd = _spd(n)
    junk = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    upper_only = np.triu(spd) + np.tril(junk, -1)  # the lower triangle is never read
    lower_only = np.tril(spd) + np.triu(junk, 1)
    u = sla.cholesky(place(upper_only, mesh))
    low = sla.cholesky(place(lower_only, mesh), lower=True)
    np.testing.assert_allclose(u, jsl.cholesky(spd), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(low, jsl.cholesky(spd, lower=True), rtol=1e-5, atol=1e-5)
    assert np.all(np.tril(np.asarray(u), -1) == 0)
    # distla.linalg's stays jnp's: lower by default
    np.testing.assert_allclose(
        distla.linalg.cholesky(place(spd, mesh)), np.linalg.cholesky(spd), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("mode", ["full", "economic", "r"])
def test_qr_modes_as_jax(mesh, mode):
    a = np.random.default_rng(2).standard_normal((21, 10)).astype(np.float32)
    out = sla.qr(place(a, mesh), mode=mode)
    ref = jsl.qr(a, mode=mode)
    assert isinstance(out, tuple) and len(out) == len(ref)
    assert [x.shape for x in out] == [x.shape for x in ref]
    r = np.asarray(out[-1])
    np.testing.assert_allclose(np.abs(r), np.abs(np.asarray(ref[-1])), rtol=1e-4, atol=1e-4)
    assert np.all(np.tril(r, -1) == 0)
    if mode != "r":
        np.testing.assert_allclose(np.asarray(out[0]) @ r, a, rtol=1e-4, atol=1e-4)


def test_qr_pivoting_on_one_device(mesh):
    a = np.random.default_rng(3).standard_normal((13, 13)).astype(np.float32)
    a[:, 5] *= 100.0  # the first pivot
    x = place(a, mesh)
    with budget(2**30):
        c = distla.cost(lambda x: sla.qr(x, pivoting=True), x)
        q, r, p = sla.qr(x, pivoting=True)
    assert c.plan == "one_device"
    qj, rj, pj = jsl.qr(a, pivoting=True)
    np.testing.assert_array_equal(p, pj)
    assert p[0] == 5
    np.testing.assert_allclose(np.asarray(q) @ np.asarray(r), a[:, np.asarray(p)], atol=1e-3)
    np.testing.assert_allclose(np.abs(np.asarray(r)), np.abs(np.asarray(rj)), atol=1e-3)
    (r_only, p_only) = sla.qr(x, mode="r", pivoting=True, plan="one_device")
    np.testing.assert_array_equal(p_only, pj)


def test_svd_drivers(mesh):
    a = np.random.default_rng(4).standard_normal((13, 9)).astype(np.float32)
    x = place(a, mesh)
    want = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    for driver in ("gesdd", "gesvd"):
        u, s, vh = sla.svd(x, full_matrices=False, lapack_driver=driver, plan="one_device")
        np.testing.assert_allclose(s, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a, atol=1e-4)
    s = sla.svd(x, compute_uv=False, lapack_driver="gesvd", plan="one_device")
    np.testing.assert_allclose(s, want, rtol=1e-4)
    with pytest.raises(ValueError, match="lapack_driver"):
        sla.svd(x, lapack_driver="gejsv")


def test_eigh_takes_jaxs_positional_order(mesh):
    a = _spd(13, seed=5)
    x = place(a, mesh)
    # (a, b, lower, eigvals_only) positionally, as jax's signature has them
    w = sla.eigh(x, None, False, True, plan="one_device")
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-4)
    w2, v = sla.eigh(x, plan="one_device")
    np.testing.assert_allclose(w2, np.linalg.eigvalsh(a), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(v) @ np.diag(w2) @ np.asarray(v).T, a, atol=1e-3)


def test_unsharded_inputs_are_jaxs():
    a = jnp.asarray(_spd(6))
    np.testing.assert_allclose(sla.cholesky(a), jsl.cholesky(a), rtol=1e-6)
    for got, want in zip(sla.qr(a), jsl.qr(a)):
        np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=1e-5, atol=1e-6)
    assert jax.numpy.asarray(sla.svd(a, compute_uv=False)).shape == (6,)
