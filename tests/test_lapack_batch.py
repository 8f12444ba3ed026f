"""A stack's LAPACK calls on a mesh of CPU devices take few enough members not to hang.

jaxlib 0.10.0 to 0.11.0 split a CPU LAPACK call whose work reaches 2e5 flops
over XLA's intra-op pool and block until the pieces ran; every device of a CPU
mesh doing that at once from the pool's own threads hung docs/batched.md's
batched solve (distla._core.lapack_batch). These tests read every LAPACK call
of the compiled per-device programs and compare the chunked results with
numpy's, member by member.
"""

import math
import re

import jax
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import PartitionSpec as P

import distla
from distla._core import hlo
from distla._core.lapack_batch import (
    FLOPS_PER_MEMBER_PER_D3,
    SPLIT_FLOPS,
    SPLITS_BATCHES,
    members_per_call,
)

SPEC = P(("x", "y"), None, None)
# jaxlib's own estimate of one member's work (cpu/lapack_kernels.cc), by routine,
# for an m x n operand and k right-hand sides; x3 on complex input.
ESTIMATES = {
    "getrf": lambda m, n, k: m * n * min(m, n),
    "trsm": lambda m, n, k: m * n * k,
    "potrf": lambda m, n, k: n**3 // 3,
    "geqrf": lambda m, n, k: 4 * m * n * min(m, n),
    "orgqr": lambda m, n, k: 4 * m * n * min(m, n),
    "syevd": lambda m, n, k: n**3,
    "heevd": lambda m, n, k: n**3,
    "gesdd": lambda m, n, k: 10 * m * n * min(m, n),
}


def lapack_calls(fn, *args):
    """(routine, members, matrix dims) of every LAPACK custom call in fn's compiled program."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    out = []
    for comp in hlo.parse(text).computations.values():
        for ins in comp.values():
            m = re.search(r'custom_call_target="lapack_[sdcz](\w+?)(?:_ffi)?"', ins.attrs)
            if ins.opcode != "custom-call" or not m:
                continue
            first = hlo.arrays_in(ins.shape)[0]  # the factored / solved operand
            out.append((m.group(1), math.prod(first.dims[:-2]), first.dims[-2:]))
    return out


def test_the_bound_stays_under_jaxlibs_split_threshold():
    # the members a call may take times the largest of jaxlib's estimates (complex) < 2e5
    mesh = build_mesh((2, 4), "explicit")
    for d in (1, 2, 5, 8, 13, 18, 64, 1000):
        per_call = members_per_call(mesh, d)
        if not SPLITS_BATCHES:
            assert per_call is None
            continue
        worst = 3 * max(f(d, d, d) for f in ESTIMATES.values())
        assert worst <= FLOPS_PER_MEMBER_PER_D3 * d**3
        assert per_call >= 1 and (per_call == 1 or per_call * worst < SPLIT_FLOPS)
    # one device: a call is never split across several devices' pool threads at once
    assert members_per_call(build_mesh((1, 1), "explicit"), 64) is None


@pytest.mark.parametrize(
    "name, make",
    [
        ("solve", lambda a, b: distla.linalg.solve(a, b)),
        ("inv", lambda a, b: distla.linalg.inv(a)),
        (
            "cholesky",
            lambda a, b: distla.linalg.cholesky(a @ a.mT + 32 * np.eye(32, dtype=a.dtype)[None]),
        ),
        ("eigh", lambda a, b: distla.linalg.eigh(a + a.mT)),
        ("svd", lambda a, b: distla.linalg.svd(a)),
    ],
)
def test_every_lapack_call_stays_whole(name, make):
    """512 members of 32 x 32 on 2x4: 64 a device, one call each would be split."""
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(0)
    a = distla.shard(rng.standard_normal((512, 32, 32), dtype=np.float32), mesh, SPEC)
    b = distla.shard(rng.standard_normal((512, 32, 2), dtype=np.float32), mesh, SPEC)
    calls = lapack_calls(make, a, b)
    assert calls, f"{name}: no LAPACK call found in the compiled program"
    per_call = members_per_call(mesh, 32)
    for routine, members, dims in calls:
        if SPLITS_BATCHES:
            assert members <= per_call, (name, routine, members, dims)
        else:  # nothing to avoid: every device's 64 members in one call
            assert members == 64, (name, routine, members, dims)


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_chunked_results_are_numpys(kind):
    """30 members of 8 x 8 a device: chunks of 13, 13 and 4 (one b for all, two batch dims)."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal((8, 30, 8, 8)) + 4 * np.eye(8)
    b_np = rng.standard_normal((8,))
    spec = P(("x", "y"), None, None, None)
    a = distla.shard(a_np.astype(np.float32), mesh, spec)
    b = distla.shard(b_np.astype(np.float32), mesh, P())
    if SPLITS_BATCHES:
        assert members_per_call(mesh, 8) == 13
    tol = 1e-4
    with jax.numpy_rank_promotion("allow"):  # one b for every member, as jnp allows it
        x = distla.linalg.solve(a, b)
    np.testing.assert_allclose(x, np.linalg.solve(a_np, b_np), rtol=tol, atol=tol)
    np.testing.assert_allclose(distla.linalg.inv(a), np.linalg.inv(a_np), rtol=tol, atol=tol)
    np.testing.assert_allclose(distla.linalg.det(a), np.linalg.det(a_np), rtol=tol)
    sign, logdet = distla.linalg.slogdet(a)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(a_np)[1], rtol=tol, atol=tol)
    s = a_np + np.swapaxes(a_np, -1, -2)
    w = distla.linalg.eigvalsh(distla.shard(s.astype(np.float32), mesh, spec))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(s), rtol=tol, atol=tol * 10)


def test_refinement_calls_lapack_one_matrix_at_a_time(x64):
    """GMRES-IR's least squares, one small Hessenberg matrix a right-hand side, was one
    batched SVD on every device (``f64[131,13,12]`` for 131 right-hand sides): it hung
    ``cho_solve`` with ``a=`` on 2x4 (every intra-op thread inside ``gesdd``, 5 runs of
    6). It is Givens rotations now; the block solves are one matrix each."""
    mesh = build_mesh((2, 4), "auto")
    n, k = 48, 131
    rng = np.random.default_rng(9)
    g = rng.standard_normal((n, n))
    a = distla.shard(g @ g.T + n * np.eye(n), mesh)
    b = distla.shard(rng.standard_normal((n, k)), mesh)
    c, _ = distla.linalg.cho_factor(a.astype(np.float32), lower=True)
    with jax.set_mesh(mesh):
        calls = lapack_calls(lambda c, b, a: distla.linalg.cho_solve((c, True), b, a=a), c, b, a)
    assert calls and all(members == 1 for _, members, _ in calls), calls
