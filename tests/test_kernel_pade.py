"""``distla.kernels.pade`` and SUMMA's accumulating form, run directly on a 2x4 grid.

``pade13_local`` (Higham's (2.5): the low sums written over ``x²`` and ``x⁴``, the two
products added into them) against the same sums in numpy, and ``summa_local`` with
``c`` (the product added into ``c``) against ``c + a @ b``.
"""

import functools

import jax
import numpy as np
import pytest
from conftest import build_mesh
from distla.kernels.pade import pade13_local
from distla.kernels.summa import summa_local
from jax.sharding import PartitionSpec as P
from kernel_helpers import run_local

from distla.linalg._expm import pade_coefficients

N = 32
HIGHEST = jax.lax.Precision.HIGHEST
BLOCKS = P("x", "y")


@pytest.fixture(scope="module")
def grid():
    return build_mesh((2, 4), "explicit")


def test_summa_adds_the_product_into_c(grid):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal((N, N)).astype(np.float32) for _ in range(3))
    kernel = functools.partial(summa_local, row_axis="x", col_axis="y", panels=2, precision=HIGHEST)
    out = run_local(lambda a, b, c: kernel(a, b, c=c), grid, (BLOCKS,) * 3, BLOCKS, a, b, c)
    np.testing.assert_allclose(out, c + a @ b, rtol=1e-5, atol=1e-5)


def test_pade13_matches_higham_2_5(grid, x64):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, N)) / np.sqrt(N)
    x2 = x @ x
    x4, eye = x2 @ x2, np.eye(N)
    x6 = x4 @ x2
    b = pade_coefficients(13)
    want_u = x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + (
        b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye
    )
    want_v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + (
        b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    )
    kernel = functools.partial(
        pade13_local, b, row_axis="x", col_axis="y", panels=2, precision=HIGHEST
    )
    u, v = run_local(kernel, grid, (BLOCKS,) * 3, (BLOCKS, BLOCKS), x2, x4, x6)
    np.testing.assert_allclose(u, want_u, rtol=1e-13)
    np.testing.assert_allclose(v, want_v, rtol=1e-13)
