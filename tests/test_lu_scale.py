"""The LU at scale: a program whose size does not grow with n.

- ``kernels/lu.py`` runs its block columns in at most ``MAX_PHASES`` loops:
  the lowered program of ``lu_factor`` has the same size at n = 4096 and
  n = 16384 (24 and 88 block columns), and the loops with several steps
  factor exactly (LAPACK's pivots) on every mesh shape.

The mixed-precision solves are tested in ``test_refine.py``.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import THRESHOLD, lu_factor_ratio, place
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla.kernels import lu as lu_kernel
from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic


def _abstract(mesh, shape, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


class TestProgramSize:
    """Compile cost independent of n, read from the program (not timed)."""

    @staticmethod
    def _lowered(n):
        mesh = build_mesh((2, 4), "explicit")
        a = _abstract(mesh, (n, n), P("x", "y"))
        return jax.jit(distla.linalg.lu_factor).lower(a).as_text()

    def test_lu_program_does_not_grow_with_n(self):
        small, large = self._lowered(4096), self._lowered(16384)  # 24 and 88 block columns
        getrf = re.compile(r"custom_call @\w*getrf")
        # one panel factorisation (getrf call site) per loop, not per block column
        assert len(getrf.findall(small)) == len(getrf.findall(large)) <= lu_kernel.MAX_PHASES
        assert len(large) < 1.1 * len(small)
        assert large.count("stablehlo.while") <= small.count("stablehlo.while") + 2

    def test_phases_cover_every_step_once(self):
        for nbr, pr, pc in [(16, 2, 4), (24, 2, 4), (88, 2, 4), (88, 4, 2), (64, 8, 1), (7, 1, 1)]:
            ph = lu_kernel.phases(nbr, pr, pc)
            assert ph[0][0] == 0 and ph[-1][1] == nbr
            assert all(a[1] == b[0] for a, b in zip(ph, ph[1:], strict=False))
            assert all(k0 < k1 for k0, k1 in ph)
            assert len(ph) == min(nbr, lu_kernel.MAX_PHASES)
        # with few block columns every step has its own phase: the unrolled algorithm
        assert lu_kernel.phases(12, 2, 2) == tuple((k, k + 1) for k in range(12))


def _lu_in_phases(a, *, mesh, nb, max_phases):
    """``lu_block_cyclic`` under shard_map with a chosen number of loops."""
    row, col = mesh.axis_names
    spec = P(row, col)

    def kernel(a_blk):
        x = to_block_cyclic(a_blk, axis=0, axis_name=row, nb=nb)
        x = to_block_cyclic(x, axis=1, axis_name=col, nb=nb)
        lu, piv = lu_kernel.lu_block_cyclic(
            x, row_axis=row, col_axis=col, nb=nb, precision=jax.lax.Precision.HIGHEST,
            max_phases=max_phases,
        )
        lu = from_block_cyclic(lu, axis=1, axis_name=col, nb=nb)
        return from_block_cyclic(lu, axis=0, axis_name=row, nb=nb), piv

    fn = jax.shard_map(kernel, mesh=mesh, in_specs=spec, out_specs=(spec, P()), check_vma=False)
    return jax.jit(fn)(a)


@pytest.mark.parametrize(
    "shape",
    [pytest.param(s, id=f"{s[0]}x{s[1]}") for s in [(2, 4), (4, 2), (2, 2), (1, 8), (8, 1)]],
)
def test_loops_of_several_steps_factor_as_lapack(shape):
    # 16 block columns in 3 loops: every loop masks the rows and columns that left
    mesh = build_mesh(shape, "explicit")
    n, nb = 48, 3
    rng = np.random.default_rng(sum(shape))
    a_np = rng.standard_normal((n, n)).astype(np.float32)
    a_np[:, 5] *= 1e-3  # a column whose pivot is found far below the diagonal
    lu, piv = _lu_in_phases(place(a_np, mesh), mesh=mesh, nb=nb, max_phases=3)
    lu_ref, piv_ref = scipy.linalg.lu_factor(a_np)
    np.testing.assert_array_equal(np.asarray(piv), piv_ref)
    assert lu_factor_ratio(a_np, lu, piv) <= THRESHOLD
    np.testing.assert_allclose(np.asarray(lu), lu_ref, rtol=0, atol=1e-4 * np.abs(lu_ref).max())


def test_loops_keep_the_singular_column_of_lapack(x64):
    # a zero column: the loop's zero rows below the panel must not become its pivot
    mesh = build_mesh((2, 4), "explicit")
    n, nb = 64, 4
    rng = np.random.default_rng(7)
    a_np = rng.standard_normal((n, n))
    a_np[:, 9] = 0.0
    lu, piv = _lu_in_phases(place(a_np, mesh), mesh=mesh, nb=nb, max_phases=2)
    lu_ref, piv_ref = scipy.linalg.lu_factor(a_np)
    np.testing.assert_array_equal(np.asarray(piv), piv_ref)
    assert np.asarray(lu)[9, 9] == 0.0
    assert np.isfinite(np.asarray(lu)).all()
