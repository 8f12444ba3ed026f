"""distla.linalg.eigh's scipy forms: generalized (types 1-3) and partial Hermitian problems.

Criteria (LAPACK's generalized ratios): ``‖A X − B X Λ‖₁ / (‖A‖₁ ‖X‖₁ n eps)`` (types 2
and 3: ``A B X`` and ``B A X``, scaled by ``‖B‖₁`` too) and ``‖Xᴴ B X − I‖₁ / (n eps)``
(type 3: ``B⁻¹``), at most 30 after dividing by ``sqrt(cond(B))``: the Cholesky
reduction's error grows with it, and scipy (LAPACK's sygv) itself scores about
3000 on the orthogonality ratio at ``cond(B) = 1e6`` (see ``test_scipy_scores_the_same``).
Eigenvalues within ``30 n eps ‖A‖ ‖B⁻¹‖ sqrt(cond(B))`` of scipy's.

Compiles dominate: each (mesh, dtype, n) compiles the Cholesky, the triangular solves
and the eigh steps once; the cases share them through module-scoped operands.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import place

import distla.linalg as L
from distla.linalg import _qdwh as _polar
from distla.linalg._eigh import pencil as _geneig

THRESHOLD = 30


def _pencil(n, cond, dtype, seed=0):
    """Hermitian ``a`` and positive definite ``b`` with ``cond(b) = cond``."""
    rng = np.random.default_rng(seed)
    cplx = np.issubdtype(dtype, np.complexfloating)

    def rand(shape):
        x = rng.standard_normal(shape)
        return x + 1j * rng.standard_normal(shape) if cplx else x

    a = rand((n, n))
    a = (a + a.conj().T) / 2
    q, _ = np.linalg.qr(rand((n, n)))
    b = (q * np.logspace(0, -np.log10(cond), n)) @ q.conj().T
    b = (b + b.conj().T) / 2
    return a.astype(dtype), b.astype(dtype)


def check(a, b, w, x, kind=1, *, dtype, cond, k=None):
    """Assert both ratios (scaled by ``sqrt(cond(b))``) and the shapes."""
    n = a.shape[0]
    eps = np.finfo(dtype).eps
    k = n if k is None else k
    assert w.shape == (k,) and x.shape == (n, k), (w.shape, x.shape)
    assert w.dtype == np.finfo(dtype).dtype and x.dtype == dtype, (w.dtype, x.dtype)
    a64, b64 = a.astype(np.complex128), b.astype(np.complex128)
    w64, x64 = np.asarray(w, np.float64), np.asarray(x).astype(np.complex128)
    assert np.all(np.diff(w64) >= 0), "eigenvalues not ascending"
    if kind == 1:
        r, scale = a64 @ x64 - b64 @ x64 * w64, 1.0
    elif kind == 2:
        r, scale = a64 @ (b64 @ x64) - x64 * w64, np.linalg.norm(b64, 1)
    else:
        r, scale = b64 @ (a64 @ x64) - x64 * w64, np.linalg.norm(b64, 1)
    res = np.linalg.norm(r, 1) / (np.linalg.norm(a64, 1) * scale * np.linalg.norm(x64, 1) * n * eps)
    m = b64 if kind in (1, 2) else np.linalg.inv(b64)
    orth = np.linalg.norm(x64.conj().T @ m @ x64 - np.eye(k), 1) / (n * eps)
    slack = max(1.0, np.sqrt(cond))
    assert res / slack <= THRESHOLD and orth / slack <= THRESHOLD, (res, orth, slack)
    return res, orth


def check_values(w, ref, a, b, dtype):
    """Within ``30 n eps ‖A‖ ‖B⁻¹‖ sqrt(cond(B))`` of scipy's (the same slack as above)."""
    n = a.shape[0]
    eps = np.finfo(dtype).eps
    inv_b = np.linalg.norm(np.linalg.inv(b), 2)
    slack = max(1.0, np.sqrt(np.linalg.norm(b, 2) * inv_b))
    bound = THRESHOLD * n * eps * np.linalg.norm(a, 2) * inv_b * slack
    np.testing.assert_allclose(np.asarray(w, np.float64), ref, rtol=0, atol=bound)


@pytest.fixture(scope="module", params=["auto", "explicit"])
def mesh(request):
    return build_mesh((2, 4), request.param)


@pytest.fixture(scope="module")
def f64(mesh):
    """float64, cond(b) = 1e6, an odd n = 37 (the 2x4 mesh does not divide it)."""
    with jax.enable_x64(True):
        a, b = _pencil(37, 1e6, np.float64)
        return mesh, a, b, place(a, mesh), place(b, mesh)


@pytest.mark.parametrize("kind", [1, 2, 3])
def test_types_float64(f64, kind):
    mesh, a, b, da, db = f64
    with jax.enable_x64(True), jax.set_mesh(mesh):
        w, x = L.eigh(da, db, type=kind, plan="distributed")
    check(a, b, w, x, kind, dtype=np.float64, cond=1e6)
    check_values(w, scipy.linalg.eigh(a, b, type=kind, eigvals_only=True), a, b, np.float64)


def test_subsets_and_values_only(f64):
    mesh, a, b, da, db = f64
    ref = scipy.linalg.eigh(a, b, eigvals_only=True)
    with jax.enable_x64(True), jax.set_mesh(mesh):
        w, x = L.eigh(da, db, subset_by_index=(2, 6), plan="distributed")
        check(a, b, w, x, dtype=np.float64, cond=1e6, k=5)
        check_values(w, ref[2:7], a, b, np.float64)
        vl, vu = (ref[9] + ref[10]) / 2, (ref[20] + ref[21]) / 2
        w, x = L.eigh(da, db, subset_by_value=(vl, vu), plan="distributed")
        check(a, b, w, x, dtype=np.float64, cond=1e6, k=11)
        w = L.eigh(da, db, eigvals_only=True, plan="distributed")
        check_values(w, ref, a, b, np.float64)
        w = L.eigh(
            da,
            db,
            eigvals_only=True,
            subset_by_value=(ref[-1] + 1, ref[-1] + 2),
            plan="distributed",
        )
        assert w.shape == (0,)


def test_scipy_scores_the_same():
    """The slack for cond(b) is scipy's own: LAPACK needs it on the same pencil."""
    a, b = _pencil(37, 1e6, np.float64)
    w, x = scipy.linalg.eigh(a, b)
    res, orth = check(a, b, w, x, dtype=np.float64, cond=1e6)
    assert orth > THRESHOLD  # the plain ratio: LAPACK misses 30 here too


def test_float32_and_one_device_plan():
    """float32 on 2x4 Explicit at n = 37 (the eigh steps tests/test_spectral.py compiles)."""
    mesh = build_mesh((2, 4), "explicit")
    a, b = _pencil(37, 1e4, np.float32, seed=1)
    da, db = place(a, mesh), place(b, mesh)
    with jax.set_mesh(mesh):
        w, x = L.eigh(da, db, plan="distributed")
        check(a, b, w, x, dtype=np.float32, cond=1e4)
        w1, x1 = L.eigh(da, db, subset_by_index=(0, 3))  # auto: one device at this size
        check(a, b, w1, x1, dtype=np.float32, cond=1e4, k=4)
        assert x1.sharding.mesh.shape == mesh.shape
        w2 = L.eigh(da, db, eigvals_only=True)
        check_values(w2, scipy.linalg.eigh(a, b, eigvals_only=True), a, b, np.float32)
        w3, x3 = L.eigh(da, db, subset_by_value=(w2[-1] + 1, w2[-1] + 2))
        assert w3.shape == (0,) and x3.shape == (37, 0)
    # an empty window outside a mesh context (an eager empty slice of an Explicit
    # array fails in jax), on both plans, with and without b
    above = float(np.asarray(w2)[-1]) + 1
    for plan in ("auto", "distributed"):
        for pencil in ((da, db), (da,)):
            w4, x4 = L.eigh(*pencil, subset_by_value=(above, above + 1), plan=plan)
            assert w4.shape == (0,) and x4.shape == (37, 0)
    # scipy's turbo (ignored) and eigvals (subset_by_index's older name)
    w5 = L.eigh(a, turbo=False, eigvals=(1, 3), eigvals_only=True)
    np.testing.assert_allclose(
        np.asarray(w5), scipy.linalg.eigh(a, subset_by_index=(1, 3), eigvals_only=True), rtol=1e-4
    )


@pytest.mark.parametrize("kind", [1, 3])
def test_complex64(kind):
    mesh = build_mesh((2, 4), "auto")
    a, b = _pencil(24, 1e4, np.complex64, seed=2)
    da, db = place(a, mesh), place(b, mesh)
    with jax.set_mesh(mesh):
        w, x = L.eigh(da, db, type=kind, plan="distributed")
    check(a, b, w, x, kind, dtype=np.complex64, cond=1e4)


def test_pruned_recursion(monkeypatch):
    """Subsets descend only into the halves that hold them (forced at n = 48, where the
    blocked recursion runs two levels down to 12-row leaves): fewer divide levels and
    leaves than the whole spectrum through the same steps. The pencil's reduction is
    tested above; this is the standard problem the subsets are taken of."""
    monkeypatch.setattr(_geneig, "PARTIAL_MIN", 0)
    mesh = build_mesh((2, 4), "auto")
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        n = 48
        a = rng.standard_normal((n, n))
        a = (a + a.T) / 2
        ref = np.linalg.eigvalsh(a)
        da = place(a, mesh)
        eye = np.eye(n)
        steps = {}
        for sel in [(0, n - 1), (0, 4), (45, 47)]:
            _polar.STEPS.clear()
            w, x = L.eigh(da, subset_by_index=sel, plan="distributed")
            steps[sel] = dict(_polar.STEPS)
            lo, hi = sel
            check(a, eye, w, x, dtype=np.float64, cond=1.0, k=hi - lo + 1)
            check_values(w, ref[lo : hi + 1], a, eye, np.float64)
        _polar.STEPS.clear()
        vl, vu = (ref[30] + ref[31]) / 2, (ref[33] + ref[34]) / 2
        w = L.eigh(da, subset_by_value=(vl, vu), eigvals_only=True, plan="distributed")
        check_values(w, ref[31:34], a, eye, np.float64)
        steps["value"] = dict(_polar.STEPS)
    full = steps[(0, n - 1)]
    for sel in [(0, 4), (45, 47), "value"]:
        assert steps[sel]["level"] < full["level"], steps
        assert steps[sel]["leaf"] < full["leaf"], steps


def test_derivatives_against_scipy_pencil():
    """The gradient (reverse mode, so the JVP rules too) of an index subset's eigenvalues
    and of a sign-free function of its vectors, in a and b, against float64 central
    differences of scipy's solution. Traced, the whole problem is solved (so the whole
    spectrum's derivative is the one checked) and the subset selected."""
    mesh = build_mesh((2, 4), "auto")
    with jax.enable_x64(True):
        a, b = _pencil(16, 1e2, np.float64, seed=4)
        rng = np.random.default_rng(5)
        da_dir = rng.standard_normal(a.shape)
        da_dir = (da_dir + da_dir.T) / 2
        db_dir = rng.standard_normal(a.shape) * 0.1
        db_dir = (db_dir + db_dir.T) / 2
        A, B = place(a, mesh), place(b, mesh)

        def f(a, b):  # eigenvalues and a sign-free function of the vectors (index subset)
            w, x = L.eigh(a, b, subset_by_index=(0, 2), plan="distributed")
            return jnp.sum(w * jnp.arange(1.0, 4.0)) + jnp.sum(jnp.abs(x[:, 0]) ** 2)

        def f_ref(a, b):
            w, x = scipy.linalg.eigh(a, b, subset_by_index=(0, 2))
            return np.sum(w * np.arange(1.0, 4.0)) + np.sum(np.abs(x[:, 0]) ** 2)

        h = 1e-6
        fd = (f_ref(a + h * da_dir, b + h * db_dir) - f_ref(a - h * da_dir, b - h * db_dir)) / (
            2 * h
        )
        with jax.set_mesh(mesh):
            ga, gb = jax.grad(f, argnums=(0, 1))(A, B)
        rev = np.sum(np.asarray(ga) * da_dir) + np.sum(np.asarray(gb) * db_dir)
        np.testing.assert_allclose(rev, fd, rtol=1e-6)


def test_one_device_plan_under_grad_and_jit():
    """The default plan at this size runs the pencil on one device: differentiable, and
    traceable under jax.jit, on an Explicit mesh."""
    mesh = build_mesh((2, 4), "explicit")
    with jax.enable_x64(True):
        a, b = _pencil(16, 1e2, np.float64, seed=7)
        A, B = place(a, mesh), place(b, mesh)
        d = np.random.default_rng(8).standard_normal(a.shape)
        d = (d + d.T) / 2
        with jax.set_mesh(mesh):
            g = jax.grad(lambda a: L.eigh(a, B, subset_by_index=(0, 2))[0].sum())(A)
            w, x = jax.jit(lambda a, b: L.eigh(a, b, type=2))(A, B)
        h = 1e-6

        def f_ref(a):
            return scipy.linalg.eigh(a, b, subset_by_index=(0, 2), eigvals_only=True).sum()

        fd = (f_ref(a + h * d) - f_ref(a - h * d)) / (2 * h)
        np.testing.assert_allclose(np.sum(np.asarray(g) * d), fd, rtol=1e-6)
        check(a, b, w, x, 2, dtype=np.float64, cond=1e2)


def test_one_device_operands_and_promotion():
    a, b = _pencil(12, 1e3, np.float64, seed=6)
    ai = np.round(a * 4).astype(np.int32)
    w, x = L.eigh(ai, b.astype(np.float32), type=2)
    ref = scipy.linalg.eigh(ai.astype(np.float64), b, type=2, eigvals_only=True)
    assert w.dtype == np.float32 and x.dtype == np.float32
    np.testing.assert_allclose(w, ref, rtol=1e-3, atol=1e-3 * np.abs(ref).max())
    w = L.eigh(np.eye(3, dtype=bool), eigvals_only=True)
    assert w.dtype == jnp.linalg.eigvalsh(np.eye(3, dtype=bool)).dtype and np.allclose(w, 1)
    # jnp's forms are unchanged: positional UPLO and symmetrize_input, keywords
    low = np.tril(a)
    w1 = L.eigh(low, "L", False)[0]
    w2 = L.eigh(low, UPLO="L", symmetrize_input=False).eigenvalues
    w3 = L.eigh(low, eigvals_only=True, symmetrize_input=False)
    ref = np.linalg.eigvalsh(a)
    for w in (w1, w2, w3):
        np.testing.assert_allclose(w, ref, atol=1e-5 * np.abs(ref).max())
    w = L.eigh(np.triu(a), lower=False, eigvals_only=True, symmetrize_input=False)
    np.testing.assert_allclose(w, ref, atol=1e-5 * np.abs(ref).max())
    w, x = L.eigh(np.zeros((0, 0)), np.zeros((0, 0)))
    assert w.shape == (0,) and x.shape == (0, 0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(b=np.eye(4)), r"b must have a's shape \(3, 3\); got b of shape \(4, 4\)"),
        (dict(type=4), "type must be 1"),
        (dict(subset_by_index=(2, 3)), r"not within \[0, 2\]"),
        (dict(subset_by_index=(1, 0)), r"0 <= lo <= hi <= 2"),
        (dict(subset_by_value=(1.0, 0.0)), "needs vl < vu"),
        (dict(subset_by_index=(0, 1), subset_by_value=(0, 1)), "either subset_by_index or"),
        (dict(UPLO="X"), "UPLO must be one of"),
    ],
)
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        L.eigh(np.eye(3), **kwargs)


def test_bad_shapes():
    with pytest.raises(ValueError, match=r"one square matrix \(n, n\).*\(2, 3, 3\)"):
        L.eigh(np.ones((2, 3, 3)), type=2)
    with pytest.raises(ValueError, match=r"shape \(3, 4\)"):
        L.eigh(np.ones((3, 4)), np.eye(3))
    with pytest.raises(ValueError, match="subset_by_value .* outside jax.jit"):
        jax.jit(lambda a: L.eigh(a, subset_by_value=(0, 1), eigvals_only=True))(np.eye(3))
