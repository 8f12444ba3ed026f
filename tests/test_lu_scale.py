"""The LU at scale: a program whose size does not grow with n.

- ``kernels/lu.py`` runs its block columns in at most ``MAX_PHASES`` loops:
  the lowered program of ``lu_factor`` has the same size at n = 4096 and
  n = 16384 (24 and 88 block columns), and the loops with several steps
  factor exactly (LAPACK's pivots) on every mesh shape.
- ``kernels/trsm.py`` runs each substitution in at most ``MAX_PHASES`` loops
  too: ``solve``'s program does not grow either, and loops of several steps
  solve as scipy's ``lu_solve`` (trans 0, 1, 2; few and many right-hand sides).

The mixed-precision solves are tested in ``test_refine.py``.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from distla.kernels import lu as lu_kernel
from distla.kernels import trsm as trsm_kernel
from distla.kernels.cyclic import from_block_cyclic, global_blocks, to_block_cyclic
from helpers import THRESHOLD, assert_lapack_pivots, lu_factor_ratio, place, solve_ratio
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla


def _abstract(mesh, shape, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


class TestProgramSize:
    """Compile cost independent of n, read from the program (not timed)."""

    @staticmethod
    def _lowered(n, op="lu_factor"):
        mesh = build_mesh((2, 4), "explicit")
        args = [_abstract(mesh, (n, n), P("x", "y"))]
        if op == "solve":
            args.append(_abstract(mesh, (n,), P("x")))
        return jax.jit(getattr(distla.linalg, op)).lower(*args).as_text()

    def test_lu_program_does_not_grow_with_n(self):
        small, large = self._lowered(4096), self._lowered(16384)  # 24 and 88 block columns
        getrf = re.compile(r"custom_call @\w*getrf")
        # one panel factorisation (getrf call site) per loop, not per block column
        assert len(getrf.findall(small)) == len(getrf.findall(large)) <= lu_kernel.MAX_PHASES
        assert len(large) < 1.1 * len(small)
        assert large.count("stablehlo.while") <= small.count("stablehlo.while") + 2

    def test_solve_program_does_not_grow_with_n(self):
        # the factorisation and both triangular solves in loops: 24 and 88 block rows
        small, large = self._lowered(4096, "solve"), self._lowered(16384, "solve")
        trsm = re.compile(r"custom_call @\w*trsm|triangular_solve")
        # one diagonal-block solve per loop of each substitution (and its first step, taken
        # out of the first loop), one U12 solve per LU loop: not one per block row
        sites = len(trsm.findall(large))
        assert sites <= len(trsm.findall(small)) + 2
        assert sites <= 2 * (trsm_kernel.MAX_PHASES + 1) + lu_kernel.MAX_PHASES
        assert len(large) < 1.1 * len(small)
        assert large.count("stablehlo.while") <= small.count("stablehlo.while") + 4

    def test_trsm_phases_cover_every_step_once(self):
        for nbr, pr in [(16, 2), (24, 2), (88, 2), (88, 8), (7, 1)]:
            for lower in (True, False):
                ph = trsm_kernel.phases(nbr, pr, lower=lower)
                assert ph[0][0] == 0 and ph[-1][1] == nbr
                assert all(a[1] == b[0] for a, b in zip(ph, ph[1:], strict=False))
                assert all(s0 < s1 for s0, s1 in ph)
                assert len(ph) == min(nbr, trsm_kernel.MAX_PHASES)

    def test_phases_cover_every_step_once(self):
        for nbr, pr, pc in [(16, 2, 4), (24, 2, 4), (88, 2, 4), (88, 4, 2), (64, 8, 1), (7, 1, 1)]:
            ph = lu_kernel.phases(nbr, pr, pc)
            assert ph[0][0] == 0 and ph[-1][1] == nbr
            assert all(a[1] == b[0] for a, b in zip(ph, ph[1:], strict=False))
            assert all(k0 < k1 for k0, k1 in ph)
            assert len(ph) == min(nbr, lu_kernel.MAX_PHASES)
        # with as few block columns as loops every step has its own: the unrolled algorithm
        nbr = lu_kernel.MAX_PHASES
        assert lu_kernel.phases(nbr, 2, 2) == tuple((k, k + 1) for k in range(nbr))


def _lu_in_phases(a, *, mesh, nb, max_phases):
    """``lu_block_cyclic`` under shard_map with a chosen number of loops."""
    row, col = mesh.axis_names
    spec = P(row, col)

    def kernel(a_blk):
        x = to_block_cyclic(a_blk, axis=0, axis_name=row, nb=nb)
        x = to_block_cyclic(x, axis=1, axis_name=col, nb=nb)
        lu, piv = lu_kernel.lu_block_cyclic(
            x,
            row_axis=row,
            col_axis=col,
            nb=nb,
            precision=jax.lax.Precision.HIGHEST,
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
    lu_ref, _ = scipy.linalg.lu_factor(a_np)
    assert_lapack_pivots(a_np, piv)
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
    assert_lapack_pivots(a_np, piv)
    assert np.asarray(lu)[9, 9] == 0.0
    assert np.isfinite(np.asarray(lu)).all()


def _solves_in_phases(a, b, *, mesh, nb, max_phases, cases):
    """``lu_solve_block_cyclic`` for each ``(trans, few)`` of ``cases``, in loops.

    ``b`` (n, k) arrives replicated; each solve gets its rows block-cyclic
    (and, for many, its columns split) as ``distla/linalg/_lu.py`` lays them out,
    and the solutions come back replicated in global row order.
    """
    row, col = mesh.axis_names
    n, k = b.shape

    def kernel(a_blk, b_all):
        x = to_block_cyclic(a_blk, axis=0, axis_name=row, nb=nb)
        x = to_block_cyclic(x, axis=1, axis_name=col, nb=nb)
        prec = jax.lax.Precision.HIGHEST
        lu, piv = lu_kernel.lu_block_cyclic(
            x, row_axis=row, col_axis=col, nb=nb, precision=prec, max_phases=max_phases
        )
        out = []
        for trans, few in cases:
            rows, other = (row, col) if trans == 0 else (col, row)
            p, q = mesh.shape[rows], mesh.shape[other]
            mine = jnp.repeat(global_blocks(n // p // nb, rows), nb) * nb + jnp.tile(
                jnp.arange(nb), n // p // nb
            )
            rhs = b_all[mine]
            if not few:  # columns split over the other axis
                rhs = jax.lax.dynamic_slice_in_dim(
                    rhs, jax.lax.axis_index(other) * (k // q), k // q, axis=1
                )
            y = trsm_kernel.lu_solve_block_cyclic(
                lu,
                piv,
                rhs,
                trans=trans,
                few=few,
                row_axis=row,
                col_axis=col,
                nb=nb,
                precision=prec,
            )
            if not few:
                y = jax.lax.all_gather(y, other, axis=1, tiled=True)
            # all_gather over rows -> (p, n/p, k) block-cyclic -> global row order
            y = jax.lax.all_gather(y, rows, axis=0)
            out.append(y.reshape(p, n // p // nb, nb, k).swapaxes(0, 1).reshape(n, k))
        return tuple(out)

    outs = (P(),) * len(cases)
    fn = jax.shard_map(
        kernel, mesh=mesh, in_specs=(P(row, col), P()), out_specs=outs, check_vma=False
    )
    return jax.jit(fn)(a, b)


def test_trsm_loops_of_several_steps_solve(monkeypatch):
    # 16 block rows in 3 loops per substitution: rows already solved are masked
    monkeypatch.setattr(trsm_kernel, "MAX_PHASES", 3)
    assert len(trsm_kernel.phases(16, 2, lower=True, max_phases=3)) == 3
    mesh = build_mesh((2, 4), "explicit")
    # (trans, few): both data movements and both substitutions, the transposes on the
    # transposed grid (4 mesh rows), the conjugate once; one program
    cases = [(0, False), (2, True), (1, False)]
    n, nb, k = 48, 3, 4
    rng = np.random.default_rng(12)
    a_np = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))).astype(np.complex64)
    b_np = (rng.standard_normal((n, k)) + 1j * rng.standard_normal((n, k))).astype(np.complex64)
    xs = _solves_in_phases(place(a_np, mesh), b_np, mesh=mesh, nb=nb, max_phases=3, cases=cases)
    lu_ref = scipy.linalg.lu_factor(a_np)
    ops = [a_np, a_np.T, a_np.conj().T]
    for (trans, few), x in zip(cases, xs, strict=True):
        assert solve_ratio(ops[trans], x, b_np) <= THRESHOLD, (trans, few)
        want = scipy.linalg.lu_solve(lu_ref, b_np, trans=trans)
        np.testing.assert_allclose(
            np.asarray(x), want, rtol=0, atol=1e-3 * np.abs(want).max(), err_msg=str((trans, few))
        )
