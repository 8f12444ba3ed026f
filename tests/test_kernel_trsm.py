"""``distla.kernels.trsm``: triangular solves on a block-cyclic matrix, run directly.

The kernels are called under ``jax.shard_map`` on a 2x4 grid with ``T`` and
``B`` in the block-cyclic layouts their docstrings state, and compared with
``scipy.linalg.solve_triangular`` / ``scipy.linalg.lu_solve``: lower and
upper, unit and non-unit diagonal, and the transposed solves the kernels
support by being handed the local transpose of ``T`` on the transposed grid.
The triangle the solve does not use is NaN, and so is a unit diagonal: what
must not be read is not read.
"""

import functools

import jax
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic
from distla.kernels.trsm import lu_solve_block_cyclic, trsm_few, trsm_many
from helpers import THRESHOLD, solve_ratio
from jax.sharding import PartitionSpec as P
from kernel_helpers import run_local, to_cyclic_2d

NB = 8
N = 32  # 4 block rows: 2 local block rows per mesh row, 1 local block column per mesh column
HIGHEST = jax.lax.Precision.HIGHEST
OP = {0: lambda t: t, 1: lambda t: t.T, 2: lambda t: t.conj().T}


@pytest.fixture(scope="module")
def grid():
    return build_mesh((2, 4), "explicit")


def _triangular(rng, dtype, *, lower, unit):
    """Well-conditioned T with NaN in the unused triangle (and on a unit diagonal)."""
    t = rng.uniform(-1, 1, (N, N)) / N + np.diag(rng.uniform(1, 2, N))
    if np.dtype(dtype).kind == "c":
        t = t + 1j * rng.uniform(-1, 1, (N, N)) / N
    t = t.astype(dtype)
    keep = np.tril(np.ones((N, N), bool), -1 if unit else 0)
    keep = keep if lower else keep.T
    return np.where(keep, t, np.nan).astype(dtype)


def _rhs(rng, dtype, k):
    b = rng.standard_normal((N, k))
    if np.dtype(dtype).kind == "c":
        b = b + 1j * rng.standard_normal((N, k))
    return b.astype(dtype)


def _layout(trans, few):
    """(grid row axis, grid column axis, B's spec) of a solve with ``T`` or its transpose."""
    rows, cols = ("x", "y") if trans == 0 else ("y", "x")
    return rows, cols, P(rows, None) if few else P(rows, cols)


# (kernel, lower, unit_diagonal, trans, dtype): trans solves hand the kernel the local
# (conjugate) transpose of T on the transposed grid, as lu_solve_block_cyclic does
TRSM_CASES = [
    pytest.param(trsm_few, True, True, 0, np.float32, id="few-lower-unit"),
    pytest.param(trsm_few, False, False, 0, np.float32, id="few-upper"),
    pytest.param(trsm_many, True, False, 0, np.float32, id="many-lower"),
    pytest.param(trsm_many, False, True, 0, np.float32, id="many-upper-unit"),
    pytest.param(trsm_few, True, False, 1, np.float32, id="few-lower-trans1"),
    pytest.param(trsm_many, False, False, 2, np.complex64, id="many-upper-trans2-c64"),
    pytest.param(trsm_few, False, True, 2, np.complex64, id="few-upper-unit-trans2-c64"),
    pytest.param(trsm_many, True, True, 1, np.complex64, id="many-lower-unit-trans1-c64"),
]


def _assert_solves(x, t, b, *, trans, lower, unit, dtype):
    """``x`` solves ``op(T) x = b`` as scipy's solve_triangular does: shape, dtype,
    LAPACK's scaled residual ratio, and scipy's values."""
    assert x.shape == b.shape and x.dtype == dtype
    want = sl.solve_triangular(
        t, b, trans=trans, lower=lower, unit_diagonal=unit, check_finite=False
    )
    op = OP[trans](np.where(np.isnan(t), 0, t) + (np.eye(N) if unit else 0))
    assert np.all(np.isfinite(x))
    assert solve_ratio(op, x, b) <= THRESHOLD
    np.testing.assert_allclose(x, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kernel, lower, unit, trans, dtype", TRSM_CASES)
def test_trsm_matches_solve_triangular(grid, kernel, lower, unit, trans, dtype):
    rng = np.random.default_rng(hash((lower, unit, trans)) % 2**32)
    few = kernel is trsm_few
    t = _triangular(rng, dtype, lower=lower, unit=unit)
    b = _rhs(rng, dtype, 3 if few else 8)  # many: 8 columns, 2 per device of a mesh row
    rows, cols, b_spec = _layout(trans, few)

    def body(t_blk, b_blk):
        t_cyc = to_cyclic_2d(t_blk, row_axis="x", col_axis="y", nb=NB)
        t_cyc = OP[trans](t_cyc)  # the local transpose is T^T's block on the transposed grid
        b_cyc = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=NB)
        x = kernel(
            t_cyc, b_cyc,
            lower=lower if trans == 0 else not lower, unit_diagonal=unit,
            row_axis=rows, col_axis=cols, nb=NB, precision=HIGHEST,
        )  # fmt: skip
        return from_block_cyclic(x, axis=0, axis_name=rows, nb=NB)

    x = run_local(body, grid, (P("x", "y"), b_spec), b_spec, t, b)
    _assert_solves(x, t, b, trans=trans, lower=lower, unit=unit, dtype=dtype)


@pytest.mark.parametrize(
    "trans, few, dtype",
    [
        # the few-rhs solve gathers B once and permutes it; the many-rhs solve replays
        # each panel's interchanges (forward for trans 0, undone for trans 1 and 2)
        pytest.param(0, False, np.float32, id="trans0-many"),
        pytest.param(1, True, np.float32, id="trans1-few"),
        pytest.param(2, False, np.complex64, id="trans2-many-c64"),
    ],
)
def test_lu_solve_matches_scipy(grid, trans, few, dtype):
    """From scipy's own (lu, piv): the permutation and both solves, as ``scipy.linalg.lu_solve``."""
    rng = np.random.default_rng(trans + 10 * few)
    a = _rhs(rng, dtype, N)  # a random square matrix: pivots at most steps
    lu, piv = sl.lu_factor(a)
    b = _rhs(rng, dtype, 3 if few else 8)
    rows, _, b_spec = _layout(trans, few)
    solve = functools.partial(
        lu_solve_block_cyclic, trans=trans, few=few, row_axis="x", col_axis="y", nb=NB,
        precision=HIGHEST,
    )  # fmt: skip

    def body(lu_blk, piv, b_blk):
        b_cyc = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=NB)
        x = solve(to_cyclic_2d(lu_blk, row_axis="x", col_axis="y", nb=NB), piv, b_cyc)
        return from_block_cyclic(x, axis=0, axis_name=rows, nb=NB)

    x = run_local(
        body, grid, (P("x", "y"), P(), b_spec), b_spec, lu.astype(dtype), piv.astype(np.int32), b
    )
    assert x.shape == b.shape and x.dtype == dtype
    assert solve_ratio(OP[trans](a), x, b) <= THRESHOLD
    np.testing.assert_allclose(x, sl.lu_solve((lu, piv), b, trans=trans), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize(
    "lower, unit, trans, dtype",
    [
        pytest.param(True, False, 0, np.float32, id="lower"),
        pytest.param(False, True, 0, np.float32, id="upper-unit"),
        pytest.param(True, True, 1, np.complex64, id="lower-unit-trans1-c64"),
        pytest.param(False, False, 2, np.complex64, id="upper-trans2-c64"),
    ],
)
def test_trsm_many_reads_a_contiguous_triangle(grid, lower, unit, trans, dtype):
    """``contiguous``: ``T`` in the 2D block order as given, ``op`` applied to its panels."""
    rng = np.random.default_rng(hash((lower, unit, trans, "contiguous")) % 2**32)
    t = _triangular(rng, dtype, lower=lower, unit=unit)
    b = _rhs(rng, dtype, 8)
    rows, cols, b_spec = _layout(trans, False)

    def body(t_blk, b_blk):
        b_cyc = to_block_cyclic(b_blk, axis=0, axis_name=rows, nb=NB)
        x = trsm_many(
            t_blk, b_cyc,
            lower=lower if trans == 0 else not lower, unit_diagonal=unit,
            row_axis=rows, col_axis=cols, nb=NB, precision=HIGHEST,
            contiguous=True, op=trans,
        )  # fmt: skip
        return from_block_cyclic(x, axis=0, axis_name=rows, nb=NB)

    x = run_local(body, grid, (P("x", "y"), b_spec), b_spec, t, b)
    _assert_solves(x, t, b, trans=trans, lower=lower, unit=unit, dtype=dtype)


@pytest.mark.parametrize(
    "lower, unit, trans, dtype",
    [
        pytest.param(True, False, 1, np.float32, id="lower-trans1"),
        pytest.param(False, True, 1, np.float32, id="upper-unit-trans1"),
        pytest.param(True, True, 2, np.complex64, id="lower-unit-trans2-c64"),
        pytest.param(False, False, 2, np.complex64, id="upper-trans2-c64"),
    ],
)
def test_trsm_many_solves_the_transpose_on_the_same_grid(grid, lower, unit, trans, dtype):
    """``same_grid``: ``op(T) X = B`` with ``B`` on ``T``'s own grid (rows over ``x``)."""
    rng = np.random.default_rng(hash((lower, unit, trans, "same grid")) % 2**32)
    t = _triangular(rng, dtype, lower=lower, unit=unit)
    b = _rhs(rng, dtype, 8)
    b_spec = P("x", "y")

    def body(t_blk, b_blk):
        b_cyc = to_block_cyclic(b_blk, axis=0, axis_name="x", nb=NB)
        x = trsm_many(
            t_blk, b_cyc,
            lower=not lower, unit_diagonal=unit,
            row_axis="x", col_axis="y", nb=NB, precision=HIGHEST,
            contiguous=True, op=trans, same_grid=True,
        )  # fmt: skip
        return from_block_cyclic(x, axis=0, axis_name="x", nb=NB)

    x = run_local(body, grid, (P("x", "y"), b_spec), b_spec, t, b)
    _assert_solves(x, t, b, trans=trans, lower=lower, unit=unit, dtype=dtype)
