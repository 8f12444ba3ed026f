"""Worker of tests/test_multiprocess.py: every distla operation on arrays spanning processes.

Run under the launcher, 2 processes x 4 simulated CPU devices, one global 2x4 mesh:

    python -m distla launch -n 2 --devices-per-process 4 -- tests/mp_worker.py

Every process builds the same host matrices from the same seeds, makes global
arrays from them with ``jax.make_array_from_callback`` (each process fills
only its own devices' shards), runs distla, gathers the result with
``process_allgather`` and checks LAPACK's scaled residual ratios against numpy in
float64. Every check runs (and asserts) on every process; each prints
``mp_worker: N checks passed`` at the end. ``--fail-on I`` makes process I
raise (``--fail-how exit``: call ``sys.exit(3)``) after the first collective
instead, while the others go on into the next one (the launcher must stop them).
"""

from __future__ import annotations

import argparse
import sys
import time

import distla

# before any other jax call; a failing process ends at once (the launcher sees it)
INFO = distla.init_distributed(exit_on_uncaught_exception=True)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import threadpoolctl  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from distla.tools.ratios import (  # noqa: E402
    THRESHOLD,
    eps,
    fft_ratio,
    lu_ratio,
    matmul_ratio,
    perm_of,
    solve_ratio,
)
from distla.tools.run import to_host as gather  # noqa: E402

RESULTS: list[tuple[str, float]] = []
_CLOCK = [time.perf_counter()]


def say(*args) -> None:
    if jax.process_index() == 0:
        print(*args, flush=True)


def global_array(x: np.ndarray, mesh, spec) -> jax.Array:
    """``x`` as a global array: each process fills only its own devices' shards."""
    arr = jax.make_array_from_callback(x.shape, NamedSharding(mesh, spec), lambda idx: x[idx])
    assert not arr.is_fully_addressable, "the test array must span both processes"
    return arr


def check(name: str, ratio: float, threshold: float = THRESHOLD) -> None:
    RESULTS.append((name, ratio))
    now = time.perf_counter()
    say(f"  {name:<36s} ratio {ratio:9.3g}  ({now - _CLOCK[0]:.1f} s)")
    _CLOCK[0] = now
    assert np.isfinite(ratio) and ratio <= threshold, f"{name}: ratio {ratio} > {threshold}"


def logdet_ratio(got_log, ref_log, a) -> float:
    """|d log|det|| / (cond(A) n eps): a backward error n eps ||A|| moves it by cond(A) n eps."""
    a64 = np.asarray(a, np.float64)
    cond = np.linalg.cond(a64)
    return float(np.max(np.abs(got_log - ref_log) / (cond * a.shape[-1] * eps(np.float32))))


def check_setup(mesh) -> None:
    assert INFO.num_processes == 2 and INFO.source == "environment", INFO
    assert jax.process_count() == 2, jax.process_count()
    assert jax.device_count() == 8 and jax.local_device_count() == 4
    assert distla.init_distributed() == INFO  # idempotent
    owners = {d.process_index for d in mesh.devices.flat}
    assert owners == {0, 1}, owners
    # The launcher's gloo setting, and one BLAS thread per LAPACK call (distla/_core/blas.py)
    assert jax.config.jax_cpu_collectives_implementation == "gloo"


def check_matmul(mesh, rng) -> None:
    a = rng.standard_normal((96, 64)).astype(np.float32)
    b = rng.standard_normal((64, 80)).astype(np.float32)
    da, db = global_array(a, mesh, P("x", "y")), global_array(b, mesh, P("x", "y"))
    c = distla.matmul(da, db)
    assert not c.is_fully_addressable and c.sharding.spec == P("x", "y"), c.sharding
    check("matmul summa 96x64x80", matmul_ratio(gather(c), a, b))
    # other input layouts: row blocks times replicated
    dr, dbr = global_array(a, mesh, P(("x", "y"), None)), global_array(b, mesh, P())
    check("matmul rows x replicated", matmul_ratio(gather(jax.jit(distla.matmul)(dr, dbr)), a, b))


def check_shard(mesh, rng) -> None:
    # host data that every process holds alike, sizes the mesh does not divide
    a = rng.standard_normal((30, 20)).astype(np.float32)
    b = rng.standard_normal((20, 50)).astype(np.float32)
    da, db = distla.shard(a, mesh), distla.shard(b, mesh)
    assert not da.is_fully_addressable
    np.testing.assert_array_equal(gather(da), a)
    check("shard + matmul 30x20x50 (padded)", matmul_ratio(gather(distla.matmul(da, db)), a, b))
    sharding = distla.layout.natural_sharding(a.shape, mesh)
    dc = jax.make_array_from_callback(a.shape, sharding, lambda idx: a[idx])
    assert dc.sharding == da.sharding, (dc.sharding, da.sharding)
    # a global array passes through (re-laid out on the same mesh)
    again = distla.shard(da, mesh, P(None, None))
    np.testing.assert_array_equal(gather(again), a)
    # host data that differs between processes is refused
    mine = a + jax.process_index()
    try:
        distla.shard(mine, mesh)
    except ValueError as err:
        assert "differs between processes" in str(err), err
    else:
        raise AssertionError("distla.shard accepted host data that differs between processes")
    say("  shard: same host data placed; differing host data refused (ValueError)")


def _lu_operands(mesh, rng, n=64):
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, 3)).astype(np.float32)
    return a, b, global_array(a, mesh, P("x", "y")), global_array(b, mesh, P("x", None))


def check_lu(mesh, rng) -> None:
    """lu_factor and solve: n = 64 in 4 blocks of 16 (distla's default nb here).

    The rows of the mesh are the two processes, so every pivot search, row
    swap and panel broadcast down a column crosses the process boundary.
    """
    a, b, da, db = _lu_operands(mesh, rng)
    n = a.shape[0]
    lu, piv = distla.linalg.lu_factor(da)
    assert not lu.is_fully_addressable
    # 4 CPU devices in this process: distla/_core/blas.py set OpenBLAS to one thread per call
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas), blas
    lu_h, piv_h = gather(lu), gather(piv)
    _, piv_ref = scipy.linalg.lu_factor(a.astype(np.float64))
    np.testing.assert_array_equal(piv_h, piv_ref)
    l_ = np.tril(lu_h, -1) + np.eye(n, dtype=lu_h.dtype)
    check("lu_factor 64 (pivots = scipy's)", lu_ratio(a[perm_of(piv_h)], l_, np.triu(lu_h), a))
    x = distla.linalg.solve(da, db, plan="distributed")
    check("solve 64x3", solve_ratio(a, gather(x), b))
    # the one-device plan across processes: the blocks travel to the first device's
    # process and back (the program: not every device is this process's)
    x1 = distla.linalg.solve(da, db, plan="one_device")
    assert not x1.is_fully_addressable and x1.sharding.spec == x.sharding.spec, x1.sharding
    check("solve 64x3, the one-device plan", solve_ratio(a, gather(x1), b))


def check_lu_rest(mesh, rng) -> None:
    """The rest of the LU family (a compile each: run with --full)."""
    a, b, da, db = _lu_operands(mesh, rng)
    n = a.shape[0]
    lu, piv = distla.linalg.lu_factor(da)
    check("lu_solve 64x3", solve_ratio(a, gather(distla.linalg.lu_solve((lu, piv), db)), b))
    xt = distla.linalg.lu_solve((lu, piv), db, trans=1)
    check("lu_solve trans=1", solve_ratio(a.T, gather(xt), b))
    bv = b[:, 0].copy()
    dbv = global_array(bv, mesh, P(("x", "y")))
    check("solve vector", solve_ratio(a, gather(distla.linalg.solve(da, dbv)), bv))
    # one operand a plain numpy array that every process holds alike
    check("solve (global a, numpy b)", solve_ratio(a, gather(distla.linalg.solve(da, b)), b))

    p, l_, u = (gather(t) for t in distla.linalg.lu(da))
    check("lu (p, l, u)", lu_ratio(p.T @ a, l_, u, a))

    # |det| of a 64x64 Gaussian matrix is about e^100, beyond float32: scale it by 1/4
    a4 = a / 4
    da4 = global_array(a4, mesh, P("x", "y"))
    sign_ref, logdet_ref = np.linalg.slogdet(a4.astype(np.float64))
    sign, logdet = (gather(t) for t in distla.linalg.slogdet(da4))
    assert sign == sign_ref, (sign, sign_ref)
    check("slogdet", logdet_ratio(logdet, logdet_ref, a4))
    det = gather(distla.linalg.det(da4))
    assert np.sign(det) == sign_ref, (det, sign_ref)
    check("det", logdet_ratio(np.log(np.abs(det)), logdet_ref, a4))

    inv = gather(distla.linalg.inv(da))
    check("inv", solve_ratio(a, inv, np.eye(n)))

    @jax.jit
    def factor_and_solve(a, b):
        return distla.linalg.lu_solve(distla.linalg.lu_factor(a), b)

    check("jit(lu_factor + lu_solve)", solve_ratio(a, gather(factor_and_solve(da, db)), b))


def check_batched(mesh, rng) -> None:
    batch, n, k = 16, 8, 2
    a = rng.standard_normal((batch, n, n)).astype(np.float32)
    b = rng.standard_normal((batch, n, k)).astype(np.float32)
    spec = P(("x", "y"), None, None)
    da, db = global_array(a, mesh, spec), global_array(b, mesh, spec)
    x = distla.linalg.solve(da, db)
    assert not x.is_fully_addressable
    xh = gather(x)
    check("batched solve 16x8x8", max(solve_ratio(a[i], xh[i], b[i]) for i in range(batch)))


def check_batched_rest(mesh, rng) -> None:
    batch, n = 16, 8
    a = rng.standard_normal((batch, n, n)).astype(np.float32)
    da = global_array(a, mesh, P(("x", "y"), None, None))
    sign_ref, logdet_ref = np.linalg.slogdet(a.astype(np.float64))
    det = gather(distla.linalg.det(da))
    np.testing.assert_array_equal(np.sign(det), sign_ref)
    check("batched det", logdet_ratio(np.log(np.abs(det)), logdet_ref, a))
    sign, logdet = (gather(t) for t in distla.linalg.slogdet(da))
    np.testing.assert_array_equal(sign, sign_ref)
    check("batched slogdet", logdet_ratio(logdet, logdet_ref, a))
    inv = gather(distla.linalg.inv(da))
    check("batched inv", max(solve_ratio(a[i], inv[i], np.eye(n)) for i in range(batch)))


def check_cannon(mesh, rng) -> None:
    """Cannon's shifts on a 2x2 mesh made of two devices of each process."""
    devices = np.array(jax.devices()[2:6]).reshape(2, 2)  # p0's last two, p1's first two
    square = jax.sharding.Mesh(devices, ("x", "y"), axis_types=mesh.axis_types)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    da, db = global_array(a, square, P("x", "y")), global_array(b, square, P("x", "y"))
    c = distla.matmul(da, db, algorithm="cannon")
    check("matmul cannon 2x2 (spans processes)", matmul_ratio(gather(c), a, b))


def check_grad(mesh, rng) -> None:
    """Reverse-mode derivatives of matmul and solve on global arrays."""
    a = rng.standard_normal((32, 32)).astype(np.float32) + 8 * np.eye(32, dtype=np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)
    da, db = global_array(a, mesh, P("x", "y")), global_array(b, mesh, P("x", "y"))
    with jax.set_mesh(mesh):
        ga = jax.grad(lambda a: distla.matmul(a, db).sum())(da)
        # d/da sum(a @ b) = ones @ b.T
        check("grad matmul", matmul_ratio(gather(ga), np.ones((32, 32), np.float32), b.T))
        gb = jax.grad(lambda b: distla.linalg.solve(da, b).sum())(db)
    # d/db sum(a^-1 b) = a^-T ones: the solve of a.T against ones
    check("grad solve", solve_ratio(a.T, gather(gb), np.ones((32, 32))))


def check_fft(mesh, rng) -> None:
    shape = (16, 16, 8)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    dx = global_array(x, mesh, P("x", "y", None))
    y = distla.fft.fftn(dx)
    assert not y.is_fully_addressable
    check("fftn 16x16x8 complex64", fft_ratio(gather(y), np.fft.fftn(x.astype(np.complex128))))


def check_fft_rest(mesh, rng) -> None:
    shape = (16, 16, 8)
    x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    dx = global_array(x, mesh, P("x", "y", None))
    back = distla.fft.ifftn(distla.fft.fftn(dx))
    check("ifftn(fftn(x))", fft_ratio(gather(back), x.astype(np.complex128)))
    r = rng.standard_normal(shape).astype(np.float32)
    dr = global_array(r, mesh, P("x", "y", None))
    yr = distla.fft.rfftn(dr)
    check("rfftn 16x16x8 float32", fft_ratio(gather(yr), np.fft.rfftn(r.astype(np.float64))))
    check(
        "irfftn(rfftn(r))", fft_ratio(gather(distla.fft.irfftn(yr, s=shape)), r.astype(np.float64))
    )
    yt = distla.fft.pfft3d(dx)
    ref = np.fft.fftn(x.astype(np.complex128)).transpose(1, 2, 0)
    check("pfft3d (Y, Z, X order)", fft_ratio(gather(yt), ref))


def check_cost(mesh, rng) -> None:
    a = rng.standard_normal((64, 64)).astype(np.float32)
    da = global_array(a, mesh, P("x", "y"))
    c = distla.cost(distla.matmul, da, da)
    assert c.total_collective_bytes > 0, c
    say(f"  cost(matmul 64): {c.total_collective_bytes} collective bytes per device")


CORE = {  # what tests/test_multiprocess.py runs
    "matmul": check_matmul,
    "shard": check_shard,
    "lu": check_lu,
    "batched": check_batched,
    "fft": check_fft,
    "cost": check_cost,
}
REST = {  # --full adds these: every other public function, and an Auto mesh
    "lu-rest": check_lu_rest,
    "fft-rest": check_fft_rest,
    "batched-rest": check_batched_rest,
    "cannon": check_cannon,
    "grad": check_grad,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fail-on", type=int, default=None, help="this process fails")
    parser.add_argument("--fail-how", choices=["raise", "exit"], default="raise")
    parser.add_argument("--full", action="store_true", help="every public function, 2 meshes")
    parser.add_argument("--only", nargs="*", default=None, help="these checks only")
    args = parser.parse_args(argv)
    mesh = distla.make_mesh((2, 4), ("x", "y"), axis_types=AxisType.Explicit)
    check_setup(mesh)
    if args.fail_on is not None:
        one = global_array(np.ones((8, 8), np.float32), mesh, P("x", "y"))
        print("first collective:", float(gather(jax.jit(lambda v: v.sum())(one))), flush=True)
        if jax.process_index() == args.fail_on:
            if args.fail_how == "exit":
                print(f"process {args.fail_on} exits with status 3 on purpose", flush=True)
                sys.exit(3)
            raise RuntimeError(f"process {args.fail_on} fails on purpose")
        gather(distla.matmul(one, one))  # a collective that waits for the dead peer
        time.sleep(600)
        return 0
    runs = [(name, fn, mesh) for name, fn in CORE.items()]
    if args.full:
        auto = distla.make_mesh((2, 4), ("x", "y"), axis_types=AxisType.Auto)
        runs += [(name, fn, mesh) for name, fn in REST.items()]
        runs += [(name, fn, auto) for name, fn in {**CORE, **REST}.items()]
    for name, fn, m in runs:
        if args.only is not None and name not in args.only:
            continue
        say(f"{name} ({m.axis_types[0]} mesh):")
        _CLOCK[0] = time.perf_counter()
        fn(m, np.random.default_rng(0))
    print(f"mp_worker: {len(RESULTS)} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
