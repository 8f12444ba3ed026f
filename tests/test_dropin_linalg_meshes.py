"""distla.linalg's LU family as a drop-in for jnp.linalg / jax.scipy.linalg, on every mesh.

The core cases of numpy's ``test_linalg.py`` (TestDet, TestSolve), scipy's
``test_decomp_lu.py`` (TestLU, lu_solve) and jax's ``tests/linalg_test.py``
(testLu*) for det, slogdet, solve, lu, lu_factor and lu_solve: on 2x4, 4x2 and
1-axis meshes, Explicit and Auto, x64 on and off, with
``jax_numpy_dtype_promotion="strict"``; the rest of the drop-in cases are in
tests/test_dropin_linalg.py. The reference is always the one-device jax
function (or numpy/scipy where jax agrees with them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from helpers import assert_lapack_pivots, close, put

from distla import linalg

pytestmark = pytest.mark.usefixtures("strict_promotion")

MESHES = [
    pytest.param(((2, 4), "explicit"), id="2x4-explicit"),
    pytest.param(((2, 4), "auto"), id="2x4-auto"),
    pytest.param(((4, 2), "explicit"), id="4x2-explicit"),
    pytest.param(((4, 2), "auto"), id="4x2-auto"),
    pytest.param(((8,), "explicit"), id="8-explicit"),
    pytest.param(((8,), "auto"), id="8-auto"),
]


@pytest.fixture(params=MESHES)
def any_mesh(request):
    shape, kind = request.param
    return build_mesh(shape, kind, names=("x", "y")[: len(shape)])


# ----------------------------------------------------------------- the ported core cases


def test_family_matches_jax(any_mesh, request):
    """numpy TestDet/TestSolve, scipy TestLU/lu_solve, jax testLu*: values, pivots, dtypes.

    Every mesh of the harness; x64 on for the Explicit meshes (float64), off for
    the Auto ones (complex64); one ``trans`` per mesh (compiles cost time).
    """
    idx = [p.id for p in MESHES].index(request.node.callspec.id)
    x64 = "explicit" in request.node.callspec.id
    rng = np.random.default_rng(7)
    n = 37
    with jax.enable_x64(x64):
        a = rng.standard_normal((n, n))
        if not x64:
            a = (a + 1j * rng.standard_normal((n, n))).astype(np.complex64)
        b = rng.standard_normal((n, 3)).astype(a.dtype)
        tol = 1e-9 if x64 else 2e-3
        A, B = put(a, any_mesh), put(b, any_mesh)
        with jax.set_mesh(any_mesh):
            got, want = linalg.det(A), jnp.linalg.det(a)
            assert got.dtype == want.dtype
            np.testing.assert_allclose(complex(got), complex(want), rtol=tol * 10)
            got, want = linalg.solve(A, B), jnp.linalg.solve(a, b)
            assert got.dtype == want.dtype and got.shape == want.shape
            close(got, want, tol * max(1.0, float(np.abs(want).max())))
            sign, logabs = linalg.slogdet(A)
            sign_r, logabs_r = jnp.linalg.slogdet(a)
            close(sign, sign_r, tol)
            close(logabs, logabs_r, tol)
            lu_piv = linalg.lu_factor(A)
            lu_r, piv_r = sl.lu_factor(a)
            assert_lapack_pivots(a, lu_piv[1])
            close(lu_piv[0], lu_r, tol * 10)
            trans = idx % 3
            close(
                linalg.lu_solve(lu_piv, B, trans=trans),
                sl.lu_solve((lu_r, piv_r), b, trans=trans),
                tol * 100,
            )


@pytest.mark.parametrize("shape", [(37, 21), (21, 37)], ids=["tall", "wide"])
def test_lu_rectangular_and_permute_l(shape):
    """scipy TestLU.test_simple_known / rectangular cases, jax testLuRectangular."""
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(3)
    a = rng.standard_normal(shape).astype(np.float32)
    p, l, u = linalg.lu(put(a, mesh))
    p_r, l_r, u_r = sl.lu(a)
    for got, want in ((p, p_r), (l, l_r), (u, u_r)):
        assert got.shape == want.shape
        close(got, want, 1e-4)
    pl, u2 = linalg.lu(put(a, mesh), permute_l=True)
    close(pl, p_r @ l_r, 1e-4)
    close(u2, u_r, 1e-4)
    lu_, piv = linalg.lu_factor(put(a, mesh), overwrite_a=True, check_finite=False)
    lu_j, piv_j = jsl.lu_factor(a)
    assert_lapack_pivots(a, piv)  # jax's pivots are LAPACK's
    np.testing.assert_array_equal(np.asarray(piv_j), np.asarray(piv))
    close(lu_, lu_j, 1e-4)


# ----------------------------------------------------------------- items 1, 2, 11: derivatives
