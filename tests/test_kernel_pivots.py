"""Pivoting of the LU kernels: the pivot search and ``distla.kernels.pivots``' row swaps.

The pivot search runs inside the LU kernel's panel step (LAPACK's ``getrf``
on the gathered panel): :func:`lu_block_cyclic` is run directly on a small
grid and its pivots compared with scipy's, on matrices built so that the
choice is decided by LAPACK's rules (complex ``|re| + |im|``, first row on
ties). The row-interchange helpers are compared with numpy row swaps.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from conftest import build_mesh
from distla.kernels.lu import lu_block_cyclic
from distla.kernels.pivots import (
    apply_panel_swaps,
    exchange_rows,
    pivots_to_permutation,
    swap_sources,
)
from helpers import THRESHOLD, lu_factor_ratio
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from kernel_helpers import cyclic_order, from_cyclic_2d, run_local, to_cyclic_2d

NB = 8


@functools.cache
def _lu_program(mesh):
    """``lu_block_cyclic`` on a matrix in ``P('x', 'y')``: (L\\U in natural order, pivots).

    One jitted program per mesh, so that tests of the same shape and dtype share a compile.
    """
    names = dict(row_axis="x", col_axis="y", nb=NB)

    def body(a_blk):
        lu_cyc, piv = lu_block_cyclic(
            to_cyclic_2d(a_blk, **names), precision=jax.lax.Precision.HIGHEST, **names
        )
        return from_cyclic_2d(lu_cyc, **names), piv

    f = jax.shard_map(
        body, mesh=mesh, in_specs=P("x", "y"), out_specs=(P("x", "y"), P()), check_vma=False
    )
    return jax.jit(f)


def _lu_kernel(a, mesh):
    lu, piv = _lu_program(mesh)(jax.device_put(a, NamedSharding(mesh, P("x", "y"))))
    return np.asarray(lu), np.asarray(piv)


@pytest.fixture(scope="module")
def grid():
    return build_mesh((2, 4), "explicit")


# --------------------------------------------------------------------------- pivot search


def test_complex_pivot_is_largest_abs_re_plus_abs_im(grid):
    """LAPACK's icamax: 2+1.9j (|re|+|im| 3.9) beats 3.5 (larger modulus, sum 3.5)."""
    n = 32
    rng = np.random.default_rng(0)
    a = 0.1 * (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)))
    a[3, 0] = 3.5  # largest |z|; on mesh row 0
    a[21, 0] = 2 + 1.9j  # largest |re| + |im|; block 2, on mesh row 0 of the other half
    a[12, 0] = 3.0 + 0.1j
    a = a.astype(np.complex64)
    lu, piv = _lu_kernel(a, grid)
    assert piv[0] == 21
    np.testing.assert_array_equal(piv, sl.lu_factor(a)[1])
    assert lu_factor_ratio(a, lu, piv) <= THRESHOLD


def test_ties_pick_the_first_row(grid):
    """Equal candidates on different devices: the lowest global row wins, as in LAPACK."""
    n = 32
    rng = np.random.default_rng(1)
    a = rng.uniform(-0.5, 0.5, (n, n))
    a[[9, 17, 30], 0] = [-4.0, 4.0, 4.0]  # |.| ties in column 0, three blocks, two mesh rows
    a = a.astype(np.float32)
    lu, piv = _lu_kernel(a, grid)
    assert piv[0] == 9
    np.testing.assert_array_equal(piv, sl.lu_factor(a)[1])
    assert lu_factor_ratio(a, lu, piv) <= THRESHOLD


def test_every_pivot_a_tie(grid):
    """Wilkinson's growth matrix: every column's candidates tie; LAPACK keeps every row."""
    n = 32
    a = np.eye(n) - np.tril(np.ones((n, n)), -1)
    a[:, -1] = 1
    a = a.astype(np.float32)
    lu, piv = _lu_kernel(a, grid)
    np.testing.assert_array_equal(piv, np.arange(n))
    np.testing.assert_array_equal(np.triu(lu)[:, -1], 2.0 ** np.arange(n))
    # growth 2^(n-1) is exact in float32 here: L and U are the ones LAPACK builds
    np.testing.assert_array_equal(lu, sl.lu_factor(a)[0])


def test_pivot_every_step_across_panels(grid):
    """A cyclic row shift of L U: every step pivots on the last row, which moves each time."""
    n = 32
    rng = np.random.default_rng(2)
    lower = np.tril(rng.uniform(-0.5, 0.5, (n, n)), -1) + np.eye(n)
    upper = np.triu(rng.uniform(-1, 1, (n, n)), 1) + np.diag(rng.uniform(1, 2, n))
    a = np.roll(lower @ upper, -1, axis=0).astype(np.float32)
    lu, piv = _lu_kernel(a, grid)
    want_lu, want_piv = sl.lu_factor(a)
    np.testing.assert_array_equal(piv, want_piv)
    assert np.all(piv == n - 1)
    assert np.abs(np.tril(lu, -1)).max() <= 1
    assert lu_factor_ratio(a, lu, piv) <= THRESHOLD


# --------------------------------------------------------------------------- row swaps


def _laswp(x, pivots, start, inverse=False):
    """LAPACK's laswp on rows start.. of x (numpy): swap start + r with pivots[r], in order."""
    x = x.copy()
    steps = list(enumerate(pivots))
    for r, p in reversed(steps) if inverse else steps:
        x[[start + r, p]] = x[[p, start + r]]
    return x


@pytest.fixture(scope="module")
def line():
    return build_mesh((4,), "explicit", names=("i",))


def test_exchange_rows_moves_rows_between_devices(line):
    p, n = 4, 64  # two blocks of 8 rows per device
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, 5)).astype(np.float32)
    order = cyclic_order(n, p, NB)
    # a 3-cycle over three devices, a swap inside one block and a row copied twice
    targets = np.array([1, 30, 47, 5, 6, 60, 61], np.int32)
    sources = np.array([30, 47, 1, 6, 5, 2, 2], np.int32)
    want = x.copy()
    want[targets] = x[sources]

    def body(x_cyc):
        moved, rows = exchange_rows(
            x_cyc, jnp.asarray(targets), jnp.asarray(sources), axis_name="i", nb=NB
        )
        return moved, rows[None]

    moved, rows = run_local(body, line, (P("i"),), (P("i"), P("i")), x[order])
    np.testing.assert_array_equal(moved, want[order])
    for d in range(p):  # the moved rows, on every device
        np.testing.assert_array_equal(rows[d], x[sources])


@pytest.mark.parametrize("start", [0, 24], ids=["first-panel", "later-panel"])
def test_apply_panel_swaps_is_laswp(line, start):
    p, n = 4, 64
    rng = np.random.default_rng(start)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    order = cyclic_order(n, p, NB)
    pivots = np.array([rng.integers(start + r, n) for r in range(NB)], np.int32)
    pivots[2] = start + 2  # a row that keeps its place
    swaps = functools.partial(apply_panel_swaps, start=start, axis_name="i", nb=NB, n=n)

    def body(x_cyc):
        forward = swaps(x_cyc, jnp.asarray(pivots))
        return forward, swaps(forward, jnp.asarray(pivots), inverse=True)

    forward, back = run_local(body, line, (P("i"),), (P("i"), P("i")), x[order])
    np.testing.assert_array_equal(forward, _laswp(x, pivots, start)[order])
    np.testing.assert_array_equal(back, x[order])
    # the inverse alone is laswp with the interchanges in reverse order
    undo = run_local(
        lambda v: swaps(v, jnp.asarray(pivots), inverse=True), line, (P("i"),), P("i"), x[order]
    )
    np.testing.assert_array_equal(undo, _laswp(x, pivots, start, inverse=True)[order])


def test_swap_sources_is_the_window_permutation():
    pivots = jnp.asarray([3, 1, 5], jnp.int32)  # relative to the panel's first row
    perm = jax.lax.linalg.lu_pivots_to_permutation(pivots, 6)
    targets, sources = (np.asarray(v) for v in swap_sources(pivots, perm))
    np.testing.assert_array_equal(targets, [0, 1, 2, 3, 1, 5])
    window = np.arange(6)
    moved = window.copy()
    moved[targets] = window[np.asarray(perm)[targets]]
    np.testing.assert_array_equal(moved, _laswp(window[:, None], [3, 1, 5], 0)[:, 0])
    np.testing.assert_array_equal(sources, np.asarray(perm)[targets])


def test_pivots_to_permutation_matches_lax():
    ours = jax.jit(pivots_to_permutation, static_argnums=1)
    theirs = jax.jit(jax.lax.linalg.lu_pivots_to_permutation, static_argnums=1)
    rng = np.random.default_rng(3)
    for n, nb in [(16, 4), (64, 8), (40, 5), (8, 8)]:
        for trial in range(10):
            # pivots of a blocked LU: piv[g] >= g; some rows chosen twice, some kept
            piv = np.array([g if rng.random() < 0.3 else rng.integers(g, n) for g in range(n)])
            if trial % 2:
                piv = np.maximum(np.minimum(piv, (np.arange(n) // nb + 1) * nb + 1), np.arange(n))
                piv = np.minimum(piv, n - 1)
            piv = jnp.asarray(piv, jnp.int32)
            np.testing.assert_array_equal(ours(piv, nb), theirs(piv, n))
