"""The budget bounds the one-device plan's peak, and ``distla.cost`` reports that peak.

For every family with a one-device plan, ``plan="auto"`` takes it iff the modelled peak
on its device (operands, results, the one-device function's temporaries and its LAPACK
routine's workspace: ``distla._core.workspace``) fits the budget; the plan's program,
compiled, reports through ``distla.cost`` a peak at least that figure, with the LAPACK
workspace XLA does not see added. The choice is read by tracing (``jax.eval_shape``);
one compile per family, of the one-device plan.
"""

import functools

import jax
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as sla
from distla._core import plan as _plan
from distla._core import workspace as _workspace

N = 64


def _calls():
    """``(name, family, fn, operand shapes)``: public calls with a one-device plan."""
    la = distla.linalg
    sq, rhs = (N, N), (N, 4)
    return [
        ("eigh", "eigh", la.eigh, [sq]),
        ("eigvalsh", "eigh", la.eigvalsh, [sq]),
        ("svd", "svd", la.svd, [sq]),
        ("svdvals", "svd", la.svdvals, [sq]),
        ("polar", "polar", la.polar, [sq]),
        ("cholesky", "cholesky", la.cholesky, [sq]),
        ("solve", "solve", la.solve, [sq, rhs]),
        ("lu_factor", "lu", la.lu_factor, [sq]),
        ("lu", "lu", la.lu, [sq]),
        ("det", "det", la.det, [sq]),
        ("inv", "inv", la.inv, [sq]),
        ("expm", "expm", la.expm, [sq]),
        ("eig", "eig", la.eig, [sq]),
        ("eigvals", "eig", la.eigvals, [sq]),
        ("qr_raw", "qr_raw", functools.partial(la.qr, mode="raw"), [sq]),
        ("qr_pivoting", "qr_pivoting", functools.partial(sla.qr, pivoting=True), [sq]),
        ("svd_gesvd", "svd_gesvd", functools.partial(sla.svd, lapack_driver="gesvd"), [sq]),
        ("schur", "schur", sla.schur, [sq]),
        ("pencil", "eigh", lambda a, b: la.eigh(a, b), [sq, sq]),
    ]


def _structs(shapes, mesh, dtype=np.float32):
    spec = {2: P("x", "y"), 1: P("x")}
    return [
        jax.ShapeDtypeStruct(s, dtype, sharding=NamedSharding(mesh, spec[len(s)])) for s in shapes
    ]


def _chosen(fn, operands, budget):
    """The plan ``fn(*operands)`` chooses under ``budget``: traced (nothing compiled) for
    structs, eager for arrays. The first one noted: a distributed plan notes its inner
    calls' (SUMMA's) after it."""
    with _plan.budget(budget), _plan.recording() as notes:
        if isinstance(operands[0], jax.ShapeDtypeStruct):
            jax.eval_shape(lambda *xs: fn(*xs), *operands)  # a new function: traced afresh
        else:
            fn(*operands)
    assert notes, fn
    return notes[0]


def _eager_calls():
    """Families whose one-device plan ``"auto"`` takes for eager calls only
    (``EAGER_CROSSOVER``)."""
    la = distla.linalg
    return [
        ("cho_solve", "cho_solve", lambda c, b: la.cho_solve((c, True), b)),
        ("solve_triangular", "solve_triangular", la.solve_triangular),
    ]


@pytest.mark.parametrize("call", _eager_calls(), ids=lambda c: c[0])
def test_eager_only_families_take_one_device_iff_the_modelled_peak_fits(call):
    name, family, fn = call
    mesh = build_mesh((2, 4), "explicit")
    a = np.triu(np.ones((N, N), np.float32)) + N * np.eye(N, dtype=np.float32)
    operands = [
        jax.device_put(x, NamedSharding(mesh, P("x", "y")))
        for x in (a, np.ones((N, 4), np.float32))
    ]
    chosen = _chosen(fn, operands, 2**40)
    assert (chosen.family, chosen.plan) == (family, "one_device"), chosen
    assert chosen.peak > chosen.bytes or family == "cho_solve", chosen  # trsm's copy of A
    assert _chosen(fn, operands, chosen.peak).plan == "one_device", name
    assert _chosen(fn, operands, chosen.peak - 1).plan == "distributed", name


@pytest.mark.parametrize("call", _calls(), ids=lambda c: c[0])
def test_auto_takes_one_device_iff_the_modelled_peak_fits(call):
    name, family, fn, shapes = call
    mesh = build_mesh((2, 4), "explicit")
    operands = _structs(shapes, mesh)
    chosen = _chosen(fn, operands, 2**40)
    assert (chosen.family, chosen.plan) == (family, "one_device"), chosen
    peak = chosen.peak
    # the peak counts more than the bytes moved wherever the family holds a temporary
    # or a LAPACK workspace
    assert peak >= chosen.bytes + chosen.workspace, chosen
    assert _chosen(fn, operands, peak).plan == "one_device", name
    assert _chosen(fn, operands, peak - 1).plan == "distributed", name
    assert _chosen(fn, operands, chosen.bytes).plan == (
        "one_device" if peak == chosen.bytes else "distributed"
    )
    # compiled: distla.cost's peak (XLA's, plus the LAPACK workspace it does not see) is at
    # least the figure the budget bounded
    with _plan.budget(peak), jax.set_mesh(mesh):
        cost = distla.cost(fn, *operands)
    assert cost.plan == "one_device", cost.plans
    assert cost.lapack_workspace_bytes == chosen.workspace
    assert cost.peak_memory_bytes >= peak, (name, cost.peak_memory_bytes, peak)


def test_lapack_workspaces_are_the_documented_ones():
    """syevd's ``1 + 6n + 2n²`` reals and ``3 + 5n`` ints; gesdd's ``4n² + 6n + n``;
    geev's copy and two real eigenvector matrices; getrf and potrf none."""
    n, f4, f8 = 100, np.dtype(np.float32), np.dtype(np.float64)

    def call(dtype, results, **options):
        return _workspace.Call((((n, n), dtype),), tuple(results), options)

    sq, vec = (n, n), (n,)
    eigh = _workspace.footprint("eigh", call(f8, [(vec, f8), (sq, f8)]))
    assert eigh.lapack == (1 + 6 * n + 2 * n * n) * 8 + (3 + 5 * n) * 4
    values = _workspace.footprint("eigh", call(f4, [(vec, f4)]))
    assert values.lapack == (2 * n + 1) * 4 + 4
    svd = _workspace.footprint("svd", call(f4, [(sq, f4), (vec, f4), (sq, f4)]))
    assert svd.lapack == (4 * n * n + 6 * n + n) * 4 + 8 * n * 4
    eig = _workspace.footprint("eig", call(f4, [(vec, np.complex64), (sq, np.complex64)]))
    assert eig.lapack == (3 * n * n + 4 * n) * 4
    for family in ("lu", "cholesky", "det", "solve_triangular"):
        assert _workspace.footprint(family, call(f4, [(sq, f4)])).lapack == 0, family
    # a complex Hermitian eigenproblem: heevd's complex work and real rwork
    c8 = np.dtype(np.complex64)
    heevd = _workspace.footprint("eigh", call(c8, [(vec, f4), (sq, c8)]))
    assert heevd.lapack == (2 * n + n * n) * 8 + (1 + 5 * n + 2 * n * n) * 4 + (3 + 5 * n) * 4
