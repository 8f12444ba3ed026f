"""Peak memory per device in shares of the operand (docs/memory.md): compile only.

A share is one device's part of an ``n x n`` matrix, ``n²·itemsize/p`` bytes
(a whole matrix is ``p`` shares). ``distla.cost(...).peak_memory_bytes`` is
XLA's own figure for the compiled program (arguments + outputs + temporaries −
aliases), exact on any machine and under any load. Each family is compiled at
two sizes on the 2x4 mesh: its ratio at the larger must be within its limit and
no larger than at the smaller (a program that holds more than ``O(n²/p)`` grows
with ``n``). The limits are the figures measured at ``n = 4096`` (float32),
rounded up; before the in-place work of docs/memory.md every one of these families exceeded
its limit (matmul 6.5, lu_factor 7.5, cholesky 7.5, qr 12.1, eigh 14.6, polar
19.3, svd 21.1 shares).
"""

import jax
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg

pytestmark = pytest.mark.slow

#: The two sizes: a program that holds ``O(n²/p)`` has about the same ratio at both.
SIZES = (2048, 4096)
#: How far the ratio at the larger size may exceed the smaller's (rounding of the
#: panel-sized workspaces, a few per cent of a share).
GROWTH = 0.05

DISTRIBUTED = {"plan": "distributed"}


def no_budget(fn):
    """``fn`` traced with the one-device budget at 0: every svd inside it distributed.

    lstsq and pinv take no ``plan``; under ``"auto"`` their svd runs on one device at
    these sizes (32 shares: the matrix, U, Vh and the result gathered there).
    """

    def traced(*args):
        previous = linalg.set_plan_budget(0)
        try:
            return fn(*args)
        finally:
            linalg.set_plan_budget(previous)

    return traced


#: name -> (function, operands, limit in shares at the larger size). Operands:
#: "a" an ``n x n`` matrix in ``P(x, y)``, "b" ``n x 4`` right-hand sides in
#: ``P(x, None)``, "p" ``n`` pivots (int32, replicated).
FAMILIES = {
    "matmul": (distla.matmul, "aa", 4.0),
    "lu_factor": (lambda a: linalg.lu_factor(a, **DISTRIBUTED), "a", 4.0),
    # cholesky 3.52 (3.79 at n = 2048): on 2x4 the trailing update's transpose in pieces,
    # each chunk multiplying by those made so far (3.89 when one psum made it whole, its
    # select beside it, and each chunk copied the prefix it read)
    "cholesky": (lambda a: linalg.cholesky(a, **DISTRIBUTED), "a", 3.6),
    "qr": (linalg.qr, "a", 4.0),
    # eigh within the 6 (docs/memory.md): 4.89, its peak the reduction's phase
    # boundary since inverse iteration's window beside Q is 1.125 shares from n = 4096 on
    # (guard block/16, at least 32: block/8 at n = 2048, 5.06; 4.89 on 4x2 as well: 5.02
    # there with block/8, the window 1.25;
    # 5.08 with the guard at block/4, the window 1.5 shares, the peak; 5.51 when the
    # reduction's trailing matrix moved between phases by XLA's halo exchange of the
    # whole cut; 5.62 when the window's Cholesky QR added
    # δ·eye, a constant hoisted to the program's start; 6.26 when the repair's sweep
    # moved Z to columns by one all-to-all; 6.9 when Q's columns moved between the
    # reduction's phases in one piece, 8.5 when the orthogonality repair was Cholesky QR
    # under lax.cond); polar's the QR's
    # panel work beside A, U, P (the iterate and Q₁Q₂ᴴ in their buffers) and the stack
    # [√c X; I] factored in place (5.79, 5.69 at n = 8192: each panel's geqrf on the
    # m + nb rows that can be nonzero, each T made again from V in Q's formation; 6.27
    # and 5.7 with the whole 2n x nb column factored and every T kept; 9.5 with distla's
    # QR of the stack and SUMMA of Q₁ and Q₂ᴴ); svd's inverse iteration's window of
    # Golub-Kahan vectors (2.25, guard block/16) in its Cholesky QR beside the reduction's
    # reflectors (1) and A (5.82, 5.87 on 4x2, 5.80 and 5.85 at n = 8192; 5.91 with the
    # guard at block/8, the window 2.5, 4x2, float64 and 5.90 at n = 8192 as well: the
    # reflectors applied to U_B and V_B where the window's rows hold them, the halves
    # copied out once the reflectors are gone; 6.52 when the halves were made beside the
    # window and the reflectors, 4x2 as well, the reflectors applied in
    # the vectors' column layout, gone before the move to the 2D blocks; 7.51 and 8.01 on
    # 4x2 when they were applied after it and held beside it; 8.12 with the guard at
    # block/4, 9.51 when Q and P were formed and multiplied, 10.83 when the columns were
    # gathered beside the window and the vectors went through the 2D blocks and back,
    # 15.0 before that)
    "eigh": (lambda a: linalg.eigh(a, **DISTRIBUTED), "a", 4.9),
    "polar": (lambda a: linalg.polar(a, **DISTRIBUTED), "a", 5.8),
    "svd": (lambda a: linalg.svd(a, **DISTRIBUTED), "a", 5.85),
}

# the other families: limits measured at n = 4096 on 2x4, float32, rounded up
FAMILIES |= {
    "lu_solve": (lambda lu, p, b: linalg.lu_solve((lu, p), b, **DISTRIBUTED), "apb", 3.0),
    "solve": (lambda a, b: linalg.solve(a, b, **DISTRIBUTED), "ab", 3.0),
    "det": (lambda a: linalg.det(a, **DISTRIBUTED), "a", 3.0),
    "inv": (lambda a: linalg.inv(a, **DISTRIBUTED), "a", 4.0),
    "cho_solve": (lambda c, b: linalg.cho_solve((c, True), b, **DISTRIBUTED), "ab", 3.5),
    # both sweeps in one program, b on c's grid from the first to the last (3.69 at
    # n = 4096, 3.50 at 8192, both meshes, float32 and float64; 4.69 and 4.50 as two
    # programs, which held the first's solution beside the second's block-cyclic copy)
    "cho_solve_n_x_n": (
        lambda c, b: linalg.cho_solve((c, True), b, **DISTRIBUTED),
        "aa",
        3.75,
    ),
    "solve_triangular": (
        lambda a, b: linalg.solve_triangular(a, b, lower=True, **DISTRIBUTED),
        "ab",
        3.0,
    ),
    # T, B and X (3 shares) and one block column of T: T is read in its own layout (3.5;
    # 4.75 with a block-cyclic copy of T)
    "solve_triangular_n_x_n": (
        lambda a, b: linalg.solve_triangular(a, b, lower=True, **DISTRIBUTED),
        "aa",
        3.6,
    ),
    # op(T) x = b, b on T's grid: each step gathers one block row of T into op(T)'s block
    # column (3.69 at n = 4096, 3.50 at 8192; 5.0 when b went to the transposed grid and
    # the solution back, trans 1 and 2 alike)
    "solve_triangular_transposed": (
        lambda a, b: linalg.solve_triangular(a, b, trans=1, lower=True, **DISTRIBUTED),
        "aa",
        3.75,
    ),
    "solve_triangular_transposed_few": (
        lambda a, b: linalg.solve_triangular(a, b, trans=2, lower=False, **DISTRIBUTED),
        "ab",
        3.3,
    ),
    # the reduction's rank-2nb update one product (3.57; 4.03 with two)
    "eigvalsh": (lambda a: linalg.eigvalsh(a, **DISTRIBUTED), "a", 3.75),
    # eigvalsh's reduction, four phases, no vectors (3.26)
    "svdvals": (lambda a: linalg.svdvals(a, **DISTRIBUTED), "a", 3.5),
    # the sums' U made once the last power exists (5.27; 5.71 when made first, held
    # through the last power's product)
    "expm": (lambda a: linalg.expm(a, **DISTRIBUTED), "a", 5.35),
    # within the 6: svd's phases, without svd's outputs (lstsq 5.83, 5.87 on 4x2,
    # 5.80 and 5.85 at n = 8192: the reduction's phase boundary; pinv 5.82, 5.86 on 4x2,
    # 5.80 and 5.85 at 8192: the window's Cholesky QR, as svd's, guard block/16; 5.91 and
    # 5.90 with block/8; 6.52 and 6.51, lstsq 6.01 until V_B moved to
    # the 2D blocks once U_B had; 6.52
    # on 4x2: svd's peak, U_B and V_B made from the window beside the reflectors; 7.02
    # and 7.01, 7.53 on 4x2, when the reflectors were applied after the move to the 2D
    # blocks; lstsq 7.01 at n = 8192 and in float64, where it was 7.51 while the
    # orthonormality probe transposed U_B and V_B (6.77 at 4096 in float32, XLA's
    # packing); 7.38 and 7.51 when the window's guard was block/4 and the completion's
    # loop chose its half by the index, 9.26 when Q and P were formed, 10.76 before
    # to_columns wrote in place)
    "lstsq": (no_budget(linalg.lstsq), "ab", 5.9),
    "pinv": (no_budget(linalg.pinv), "a", 5.85),
    # within the 6: 5.89 on 2x4 and 4x2, 5.88 at n = 8192 and in float64, since
    # the window's guard is block/16 (its 1.125 shares beside Z's move to the 2D blocks
    # and L⁻ᴴQ); with block/8 6.018 on 2x4 (the second Cholesky's trailing update, its
    # segment's transpose in pieces since r50: 6.018 XLA's packing of the temporaries)
    # and on 4x2 Z's move from inverse iteration's window to the 2D
    # blocks beside L⁻ᴴQ (6.013 since r50, 6.006 at n = 8192: B's second Hermitian
    # matrix with its transpose a chunk at a time, _core.matrix.ct_moved; 6.02 on both
    # since r49: the window's guard at block/8 and, on 4x2, the Cholesky's trailing
    # update by column chunks; 6.08, 6.26 on 4x2, with the guard at block/4: the window (1.5) and
    # its Gram matrix beside L⁻ᴴQ, the peak on 2x4; 6.51 when eigh's
    # repair formed R beside Q, A's Hermitian matrix was made before the Cholesky and
    # the reduction's trailing matrix moved by XLA's halo exchange; 7.51 when B's
    # Cholesky factor L was held from the start to x = L⁻ᴴ y, now made again once the
    # reduction's Q exists and gone once L⁻ᴴQ is; 9.37 when
    # eigh's sweep moved Z by one all-to-all and Q's identity was made at the program's
    # start, 9.8 when Q's columns moved in one piece, 10.5 before eigh's repair became a
    # loop of Householder QR)
    "eigh_generalized": (lambda a, b: linalg.eigh(a, b, **DISTRIBUTED), "aa", 5.95),
}

#: Families compiled at the larger size only (each compile takes minutes on a
#: loaded machine): their programs are svd's or eigh's, whose growth is pinned
#: above, plus a few products.
ONE_SIZE = {"lstsq", "pinv", "eigh_generalized"}


def shares(fn, operands, mesh, n, dtype=np.float32):
    """Peak memory per device of ``fn`` on ``n x n`` operands, in shares."""
    kinds = {
        "a": ((n, n), dtype, P("x", "y")),
        "b": ((n, 4), dtype, P("x", None)),
        "p": ((n,), np.int32, P()),
    }
    args = [
        jax.ShapeDtypeStruct(shape, kind, sharding=NamedSharding(mesh, spec))
        for shape, kind, spec in (kinds[k] for k in operands)
    ]
    with jax.set_mesh(mesh):
        cost = distla.cost(fn, *args)
    return cost.peak_memory_bytes / (n * n * np.dtype(dtype).itemsize / mesh.size)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_peak_memory_is_a_few_shares_and_does_not_grow(name):
    fn, operands, limit = FAMILIES[name]
    mesh = build_mesh((2, 4), "explicit")
    large = shares(fn, operands, mesh, SIZES[1])
    assert large <= limit, f"{name}: {large:.2f} shares at n = {SIZES[1]} (limit {limit})"
    if name not in ONE_SIZE:
        small = shares(fn, operands, mesh, SIZES[0])
        assert large <= small + GROWTH, f"{name} grows with n: {small:.2f} -> {large:.2f} shares"


def test_cholesky_peak_on_4x2():
    """cholesky where the local blocks are wider than tall (4x2): 3.50 shares at n = 4096
    (and at 8192, float32 and float64), the trailing update by column chunks, each making
    the segment's transpose for its own columns (4.07 when the transpose for all the
    trailing columns was made at once, the select each device fills beside the psum's
    result, and the local rows were cut)."""
    fn, operands, _ = FAMILIES["cholesky"]
    mesh = build_mesh((4, 2), "explicit")
    small, large = (shares(fn, operands, mesh, n) for n in SIZES)
    assert large <= 3.6, f"cholesky on 4x2: {large:.2f} shares at n = {SIZES[1]} (limit 3.6)"
    assert large <= small + GROWTH, f"cholesky on 4x2 grows with n: {small:.2f} -> {large:.2f}"


def test_generalized_eigh_peak_on_4x2():
    """The generalized eigh on 4x2 within the issue's 6: 5.89 shares at n = 4096 (5.88 at
    8192 and in float64), inverse iteration's window (guard block/16) beside Z's move to
    the 2D blocks and L⁻ᴴQ (6.013 with the guard at block/8, 6.26 before r49)."""
    fn, operands, _ = FAMILIES["eigh_generalized"]
    large = shares(fn, operands, build_mesh((4, 2), "explicit"), SIZES[1])
    assert large <= 5.95, f"eigh(a, b) on 4x2: {large:.2f} shares at n = {SIZES[1]} (limit 5.95)"


def test_expm_float64_peak_does_not_grow(x64):
    """expm in double precision runs degrees 9 and 13 (float32's stop at 7), in Higham's
    form (2.5): within the issue's 6, 5.83 shares, the peak x⁶B_u's product beside x⁶,
    B_u (written over x², which is read back from it) and x⁴, and SUMMA's panels (6.70
    when degree 9 summed x², x⁴, x⁶ and x⁸ beside U's sum; 6.83 when the degrees' branch
    took a zero matrix as an operand, held through it; 9.14 when degree 13 held x², x⁴
    and both B operands at once and XLA copied x² and x⁴ for the loop that wrote the low
    sums over them; 10.7 before the degree-13 branch made its powers and wrote its sums
    and products in place)."""
    fn, operands, _ = FAMILIES["expm"]
    mesh = build_mesh((2, 4), "explicit")
    small, large = (shares(fn, operands, mesh, n, np.float64) for n in SIZES)
    assert large <= 5.9, f"expm float64: {large:.2f} shares at n = {SIZES[1]} (limit 5.9)"
    assert large <= small + GROWTH, f"expm float64 grows with n: {small:.2f} -> {large:.2f}"
