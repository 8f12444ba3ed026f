"""distla.linalg's spectral family takes every argument jnp / jax.scipy.linalg takes.

eigh's UPLO and symmetrize_input, svd's full_matrices, compute_uv and
hermitian, pinv's and matrix_rank's rtol / rcond / tol / hermitian, lstsq's
rcond and numpy_resid, cond for every p, norm for every ord, axis and keepdims,
polar's method, eps and max_iterations; and the special matrices of numpy's
``test_linalg``, scipy's ``test_decomp`` and jax's ``linalg_test`` (identity,
zero and tiny-norm matrices, rank one). All on one matrix, n = 37 on 2x4
Explicit, float32: the size and mesh tests/test_spectral_dropin.py's sweep
compiles (its programs come from the run's compilation cache).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import (
    THRESHOLD,
    check_eigh,
    check_polar,
    check_svd,
    eps,
    place,
    random_matrix,
    same_kind,
)

from distla import linalg

N = 37  # no mesh divides it


# ------------------------------------------------------------ every argument jnp takes


@pytest.fixture(scope="module")
def square():
    """n = 37 on 2x4 Explicit: a general matrix, its Hermitian part, rank-9 product."""
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(50)
    a = random_matrix(rng, (N, N), np.float32)
    low = random_matrix(rng, (N, 9), np.float32) @ random_matrix(rng, (9, N), np.float32)
    return mesh, a, (a + a.T) / 2, low


def test_eigh_uplo_and_symmetrize(square):
    # jnp reads one triangle when symmetrize_input=False: junk in the other changes nothing
    mesh, _, h, _ = square
    junk = 100 * np.triu(random_matrix(np.random.default_rng(51), (N, N), np.float32), 1)
    tol = THRESHOLD * N * eps(np.float32) * np.linalg.norm(h, 2)
    ref = scipy.linalg.eigvalsh(h.astype(np.float64))
    for uplo, bad in ((None, junk), ("L", junk), ("U", junk.T)):
        lower = np.tril(h) if uplo != "U" else np.triu(h)
        x = place(lower + bad, mesh)
        w, v = linalg.eigh(x, UPLO=uplo, symmetrize_input=False)
        check_eigh(h, w, v)
        w2 = linalg.eigvalsh(x, uplo or "L", symmetrize_input=False)
        np.testing.assert_allclose(np.asarray(w2), ref, atol=tol, rtol=0)
    # symmetrize_input=True (the default) uses (a + aᴴ)/2, whatever UPLO says
    g = square[1]
    for uplo in (None, "L", "U"):
        w = linalg.eigvalsh(place(g, mesh), uplo or "L")
        np.testing.assert_allclose(np.asarray(w), ref, atol=tol, rtol=0)


def test_svd_arguments(square):
    mesh, a, h, _ = square
    x, xh = place(a, mesh), place(h, mesh)
    s_ref = scipy.linalg.svdvals(a.astype(np.float64))
    tol = THRESHOLD * N * eps(np.float32) * s_ref[0]
    s = linalg.svd(x, compute_uv=False)
    same_kind(s, jnp.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(np.asarray(s), s_ref, atol=tol, rtol=0)
    s = linalg.svd(x, False, False)  # positional full_matrices, compute_uv
    np.testing.assert_allclose(np.asarray(s), s_ref, atol=tol, rtol=0)
    # subset_by_index: jnp refuses it with full_matrices (ValueError), and implements it
    # on TPUs only (NotImplementedError); distla raises the same, in the same order
    for kw in ({}, {"compute_uv": False}, {"full_matrices": False}):
        with pytest.raises((ValueError, NotImplementedError)) as want:
            jnp.linalg.svd(a, subset_by_index=(1, 4), **kw)
        with pytest.raises(want.type):
            linalg.svd(x, subset_by_index=(1, 4), **kw)
    # hermitian=True: jnp's values (|eigenvalues|, descending) and a valid factorisation
    u, s, vh = linalg.svd(xh, full_matrices=False, hermitian=True)
    same_kind((u, s, vh), jnp.linalg.svd(h, full_matrices=False, hermitian=True))
    check_svd(h, u, s, vh)
    np.testing.assert_allclose(
        np.asarray(linalg.svd(xh, compute_uv=False, hermitian=True)),
        np.asarray(jnp.linalg.svd(h, compute_uv=False, hermitian=True)),
        atol=tol,
        rtol=0,
    )


def test_hermitian_flag_reads_the_hermitian_part_as_jnp(square):
    # jnp's hermitian=True takes a to be Hermitian: its svd is eigh's of (a + aᴴ)/2
    # (|eigenvalues| descending, U the eigenvectors in that order, Vh = (U sign)ᴴ), and
    # pinv and matrix_rank follow; on a matrix that is not Hermitian that differs from
    # the SVD of a itself, so distla must take the same route, not ignore the flag
    mesh, a, h, low = square
    x = place(a, mesh)
    s_ref = np.sort(np.abs(np.linalg.eigvalsh(h.astype(np.float64))))[::-1]
    tol = THRESHOLD * N * eps(np.float32) * s_ref[0]
    u, s, vh = linalg.svd(x, hermitian=True)
    ur, sr, vhr = (np.asarray(t) for t in jnp.linalg.svd(a, hermitian=True))
    same_kind((u, s, vh), jnp.linalg.svd(a, hermitian=True))
    np.testing.assert_allclose(np.asarray(s), s_ref, atol=tol, rtol=0)
    check_svd(h, u, s, vh)  # a factorisation of the Hermitian part
    u, vh = np.asarray(u), np.asarray(vh)
    signs = np.sign(np.sum(u * ur, axis=0))  # eigenvectors are defined up to sign
    gaps = np.minimum(np.abs(np.diff(sr, prepend=np.inf)), np.abs(np.diff(sr, append=-np.inf)))
    clear = gaps > 1e-2 * sr[0]  # columns whose |eigenvalue| is well separated
    np.testing.assert_allclose((u * signs)[:, clear], ur[:, clear], atol=1e-3)
    np.testing.assert_allclose((vh * signs[:, None])[clear], vhr[clear], atol=1e-3)
    np.testing.assert_allclose(
        np.asarray(linalg.svd(x, compute_uv=False, hermitian=True)), s_ref, atol=tol, rtol=0
    )
    got = np.asarray(linalg.pinv(x, hermitian=True), np.float64)
    ref = np.linalg.pinv(h.astype(np.float64), hermitian=True)
    assert np.linalg.norm(got - ref, 1) <= 1e-3 * np.linalg.norm(ref, 1)
    cut = float(np.sqrt(s_ref[20] * s_ref[21]))  # jnp's rtol is absolute; between two values
    assert (
        int(linalg.matrix_rank(x, cut, hermitian=True))
        == int(jnp.linalg.matrix_rank(a, cut, hermitian=True))
        == 21
    )
    with pytest.raises(TypeError, match="square"):
        linalg.svd(place(low[:, :30], mesh), hermitian=True)


def test_pinv_lstsq_rank_cond_norm_arguments(square):
    mesh, a, h, low = square
    e = eps(np.float32)
    x, xh, xl = place(a, mesh), place(h, mesh), place(low, mesh)
    s_low = scipy.linalg.svdvals(low.astype(np.float64))
    # rtol / rcond / tol / hermitian: the cut-off jnp applies, at a value that is not borderline
    cut = float(np.sqrt(s_low[8] * s_low[9]))  # between the 9 real values and the noise
    for kw in ({}, {"rtol": cut / s_low[0]}, {"rcond": cut / s_low[0]}):
        got = np.asarray(linalg.pinv(xl, **kw), np.float64)
        ref = np.asarray(jnp.linalg.pinv(jnp.asarray(low, jnp.float32), **kw), np.float64)
        assert np.linalg.norm(got - ref, 1) <= 1e-3 * np.linalg.norm(ref, 1), kw
    got = np.asarray(linalg.pinv(xh, hermitian=True), np.float64)
    ref = np.linalg.pinv(h.astype(np.float64), hermitian=True)
    assert np.linalg.norm(got - ref, 1) <= THRESHOLD * N * e * np.linalg.cond(h) * np.linalg.norm(
        ref, 1
    )
    assert int(linalg.matrix_rank(xl)) == 9 == int(jnp.linalg.matrix_rank(low))
    for kw in ({"rtol": cut}, {"tol": cut}, {"rtol": cut, "hermitian": False}):
        assert int(linalg.matrix_rank(xl, **kw)) == int(jnp.linalg.matrix_rank(low, **kw)), kw
    assert int(linalg.matrix_rank(xh, hermitian=True)) == N
    with pytest.raises(ValueError, match="only one of"):
        linalg.matrix_rank(xl, rtol=1.0, tol=1.0)
    with pytest.raises(ValueError, match="only one of"):
        linalg.pinv(xl, rtol=1.0, rcond=1.0)
    # lstsq: rcond (None, explicit, negative = eps), numpy_resid; b a vector or a matrix
    rng = np.random.default_rng(52)
    b = random_matrix(rng, (N, 3), np.float32)
    for rcond in (None, cut / s_low[0], -1.0):
        for numpy_resid in (False, True):
            got = linalg.lstsq(xl, place(b, mesh), rcond, numpy_resid=numpy_resid)
            ref = jnp.linalg.lstsq(low, b, rcond, numpy_resid=numpy_resid)
            same_kind(got, ref, (rcond, numpy_resid))
            assert int(got[2]) == int(ref[2]), (rcond, numpy_resid)
    got = linalg.lstsq(x, place(b[:, 0], mesh))
    ref = jnp.linalg.lstsq(a, b[:, 0])
    same_kind(got, ref)
    np.testing.assert_allclose(
        np.asarray(got[0]), np.asarray(ref[0]), atol=1e-3 * np.abs(np.asarray(ref[0])).max()
    )
    # cond for every p jnp takes; norm for every ord / axis / keepdims. jnp's
    # references come from one jitted program (one compile, not one per case), and
    # so do distla's norms that are jnp's own reductions; the singular-value ones
    # (2, -2, "nuc") run eagerly, through the distributed svdvals
    a64 = a.astype(np.float64)
    ps = (None, 2, -2, 1, -1, np.inf, -np.inf, "fro")
    conds = jax.jit(lambda a: [jnp.linalg.cond(a, p) for p in ps])(a)
    for p, ref in zip(ps, conds):
        got = linalg.cond(x, p)
        same_kind(got, ref, p)
        np.testing.assert_allclose(float(got), np.linalg.cond(a64, p), rtol=2e-3, err_msg=str(p))
    cases = [
        (ord_, axis, keepdims)
        for ord_ in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)
        for axis in (None, (0, 1), (1, 0), (-1, -2))
        for keepdims in (False, True)
        if not (axis is None and ord_ is not None and keepdims)
    ]
    refs = jax.jit(lambda a: [jnp.linalg.norm(a, *case) for case in cases])(a)
    plain = [case for case in cases if case[0] not in (2, -2, "nuc")]
    in_jit = dict(zip(plain, jax.jit(lambda x: [linalg.norm(x, *case) for case in plain])(x)))
    for case, ref in zip(cases, refs):
        got = in_jit[case] if case in in_jit else linalg.norm(x, *case)
        same_kind(got, ref, case)
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, err_msg=str(case))
    for ord_ in (None, 0, 1, 2, -1, np.inf, 3.5):  # vector norms along one axis
        got = linalg.norm(x, ord_, axis=1)
        np.testing.assert_allclose(
            np.asarray(got),
            np.asarray(jnp.linalg.norm(a, ord_, axis=1)),
            rtol=1e-5,
            err_msg=str(ord_),
        )


def test_polar_arguments(square):
    # every argument jax.scipy.linalg.polar takes; jax's own qdwh raises on eps (a static
    # argument it then traces) and on side="left" for square input, so the reference
    # is its method="svd"
    mesh, a, _, _ = square
    x = place(a, mesh)
    for kw in (
        {"method": "qdwh", "eps": 1e-6, "max_iterations": 20},
        {"method": "svd"},
        {"max_iterations": 12},
        {},
    ):
        for side in ("right", "left"):
            u, p = linalg.polar(x, side, **kw)
            ru, rp = jax.scipy.linalg.polar(a, side, method="svd")
            same_kind((u, p), (ru, rp), (kw, side))
            check_polar(a, u, p, side)
            np.testing.assert_allclose(
                np.asarray(u), np.asarray(ru), atol=1e-4, err_msg=str((kw, side))
            )
    with pytest.raises(ValueError, match="side"):
        linalg.polar(x, "up")
    with pytest.raises(ValueError, match="method"):
        linalg.polar(x, method="newton")


# ------------------------------------------ cases from numpy, scipy and jax's own tests


def _special(a, h):
    eye = np.eye(N, dtype=np.float32)
    return {
        "identity": eye,
        "zeros": 0 * eye,
        "zero-diagonal": h - np.diag(np.diag(h)),
        "rank-one": np.outer(a[:, 0], a[0]),
        "tiny": 1e-30 * a,
        "huge": 1e30 * a,
    }


@pytest.mark.parametrize("name", ["identity", "zeros", "zero-diagonal", "rank-one", "tiny", "huge"])
def test_eigh_special_matrices(square, name):
    # jax's linalg_test / scipy's test_decomp: identity (one eigenvalue n times), zero
    # matrix, zero diagonal, rank one; a scaled matrix meets the same (scale-free) ratios
    mesh, a, h, _ = square
    m = _special(a, h)[name]
    m = (m + m.T) / 2
    w, v = linalg.eigh(place(m, mesh))
    assert np.all(np.isfinite(np.asarray(v)))
    check_eigh(m, w, v)


@pytest.mark.parametrize("name", ["identity", "zero-diagonal", "zeros", "rank-one", "tiny"])
def test_svd_special_matrices(square, name):
    # numpy's test_linalg / scipy's test_decomp: zero, identity, rank one, tiny norm;
    # matrix_rank as jnp's
    mesh, a, h, _ = square
    m = _special(a, h)[name]
    x = place(m, mesh)
    u, s, vh = linalg.svd(x, full_matrices=False)
    assert np.all(np.isfinite(np.asarray(u))) and np.all(np.isfinite(np.asarray(vh)))
    check_svd(m, u, s, vh)
    assert int(linalg.matrix_rank(x)) == int(jnp.linalg.matrix_rank(m))


def test_pinv_of_zero_is_zero(square):
    mesh = square[0]
    zeros = place(np.zeros((N, N), np.float32), mesh)
    np.testing.assert_array_equal(np.asarray(linalg.pinv(zeros)), np.zeros((N, N)))
    assert int(linalg.matrix_rank(zeros)) == 0 == int(jnp.linalg.matrix_rank(np.zeros((N, N))))
