"""Where the time of ``distla.linalg.solve`` goes: its pieces timed back to back in one process.

Not a pytest suite (a profile, run by hand): n = 4096 float32, one right-hand
side, on 2x4, the same padded order and block size as ``distla.linalg.solve``
chooses. Each piece is its own compiled ``shard_map`` program on the kernels of
``distla.kernels``, timed after a warm-up (median of ``--rounds``):

- ``relayout``: contiguous -> block-cyclic along both mesh axes (the solve's
  only relayout of the matrix);
- ``factor``: ``lu_block_cyclic`` on the block-cyclic matrix (its loops);
- ``factor, panel only``: the steps' panels alone (gather, ``getrf`` on the
  owner mesh column, broadcast along the mesh row), nothing else;
- ``factor, GEMM only``: the same trailing updates (the static shapes every
  step of every loop multiplies) with no panel, swap or collective: the floor
  of this algorithm's GEMMs on 8 devices sharing the cores;
- ``solves``: permutation and both triangular solves (``lu_solve_block_cyclic``);
- the public ``solve`` and ``lu_factor``, and one-device ``scipy.linalg.solve``.

    python benchmarks/profile_lu.py --n 4096 --rounds 3 --out out/profile-lu.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import time

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import threadpoolctl  # noqa: E402
from distla.kernels import lu as lu_kernel  # noqa: E402
from distla.kernels.cyclic import to_block_cyclic  # noqa: E402
from distla.kernels.trsm import lu_solve_block_cyclic  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402

HI = lax.Precision.HIGHEST


def block_plan(n: int, pr: int, pc: int, wide: int = 192, narrow: int = 128) -> tuple[int, int]:
    """``(nb, n_pad)`` as distla's default plan picks them (blocks near 192, else 128)."""
    q = math.lcm(pr, pc)
    target = wide if n >= 4 * q * wide else narrow
    nbr = -(-max(1, -(-n // target)) // q) * q
    nb = -(-n // nbr)
    return nb, nb * nbr


def timed(fn, args, rounds):
    jax.block_until_ready(fn(*args))  # compile and warm up
    jax.block_until_ready(fn(*args))
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def gemm_only(a, *, row, col, nb, max_phases):
    """The trailing-update GEMMs of ``lu_block_cyclic``'s loops, with nothing else."""
    pr, pc = lax.axis_size(row), lax.axis_size(col)
    mloc, nloc = a.shape
    nbr = mloc * pr // nb
    for k0, k1 in lu_kernel.phases(nbr, pr, pc, max_phases):
        rows, cols = ((k0 + 1) // pr) * nb, ((k0 + 1) // pc) * nb

        def step(k, a, rows=rows, cols=cols):
            l21 = lax.dynamic_slice(a, (rows, (k // pc) * nb), (mloc - rows, nb))
            u12 = lax.dynamic_slice(a, ((k // pr) * nb, cols), (nb, nloc - cols))
            return a.at[rows:, cols:].add(-jnp.dot(l21, u12, precision=HI))

        a = lax.fori_loop(k0, k1, step, a)
    return a


def panel_only(a, *, row, col, nb, max_phases):
    """The panel steps of ``lu_block_cyclic``'s loops alone: gather, ``getrf`` and broadcast."""
    pr, pc = lax.axis_size(row), lax.axis_size(col)
    mloc = a.shape[0]
    nbr = mloc * pr // nb
    j = lax.axis_index(col)
    acc = jnp.zeros((), a.dtype)
    for k0, k1 in lu_kernel.phases(nbr, pr, pc, max_phases):
        w = lu_kernel._Window.of(k0, k1, pr=pr, pc=pc, nb=nb, mloc=mloc)

        def step(k, acc, w=w):
            blk = lax.dynamic_slice(a, (w.top, (k // pc) * nb), (w.height, nb)) + acc
            panel = lax.cond(
                j == k % pc,
                functools.partial(lu_kernel._panel, w=w, row_axis=row, pr=pr, nb=nb),
                functools.partial(lu_kernel._skip_panel, nb=nb),
                blk,
                k,
            )
            panel = lax.psum(panel, col)  # the broadcast along the mesh row
            return acc + 0 * panel[0][0, 0]

        acc = lax.fori_loop(k0, k1, step, acc)
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phases", type=int, nargs="*", default=[lu_kernel.MAX_PHASES])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    n, pr, pc = args.n, 2, 4
    nb, n_pad = block_plan(n, pr, pc)
    mesh = distla.make_mesh((pr, pc), ("r", "c"))
    spec = P("r", "c")
    rng = np.random.default_rng(n)
    a_np = rng.standard_normal((n, n), dtype=np.float32)
    b_np = rng.standard_normal(n, dtype=np.float32)
    pad = np.eye(n_pad, dtype=np.float32)
    pad[:n, :n] = a_np
    a_pad = jax.device_put(pad, NamedSharding(mesh, spec))
    bp = np.zeros((n_pad, 1), np.float32)
    bp[:n, 0] = b_np
    b_pad = jax.device_put(bp, NamedSharding(mesh, P("r", None)))
    a = jax.device_put(a_np, NamedSharding(mesh, spec))
    b = jax.device_put(b_np, NamedSharding(mesh, P("r")))
    sm = functools.partial(jax.shard_map, mesh=mesh, check_vma=False)
    results = {}

    def record(name, seconds):
        results[name] = seconds
        print(f"{name:48s} {seconds * 1e3:9.1f} ms", flush=True)

    def scipy_solve(a, b):
        with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
            return scipy.linalg.solve(a, b)

    record("one device: scipy.linalg.solve", timed(scipy_solve, (a_np, b_np), args.rounds))

    def cyc(x):
        x = to_block_cyclic(x, axis=0, axis_name="r", nb=nb)
        return to_block_cyclic(x, axis=1, axis_name="c", nb=nb)

    relayout = jax.jit(sm(cyc, in_specs=spec, out_specs=spec))  # (no LAPACK call)
    record("relayout (contiguous -> block-cyclic)", timed(relayout, (a_pad,), args.rounds))
    a_cyc = relayout(a_pad)
    # one BLAS thread per LAPACK call, as distla sets it for its CPU devices (else each
    # device's getrf and trsm start their own threads: 8 devices oversubscribe the cores)
    limit = threadpoolctl.threadpool_limits(1, user_api="blas")

    for ph in args.phases:
        factor = jax.jit(
            sm(
                functools.partial(
                    lu_kernel.lu_block_cyclic,
                    row_axis="r",
                    col_axis="c",
                    nb=nb,
                    precision=HI,
                    max_phases=ph,
                ),
                in_specs=spec,
                out_specs=(spec, P()),
            )
        )
        record(f"factor ({ph} loops)", timed(factor, (a_cyc,), args.rounds))
        gemm = jax.jit(
            sm(
                functools.partial(gemm_only, row="r", col="c", nb=nb, max_phases=ph),
                in_specs=spec,
                out_specs=spec,
            )
        )
        record(f"factor, GEMM only ({ph} loops)", timed(gemm, (a_cyc,), args.rounds))
        panel = jax.jit(
            sm(
                functools.partial(panel_only, row="r", col="c", nb=nb, max_phases=ph),
                in_specs=spec,
                out_specs=P(),
            )
        )
        record(f"factor, panel only ({ph} loops)", timed(panel, (a_cyc,), args.rounds))

    factor = jax.jit(
        sm(
            functools.partial(
                lu_kernel.lu_block_cyclic, row_axis="r", col_axis="c", nb=nb, precision=HI
            ),
            in_specs=spec,
            out_specs=(spec, P()),
        )
    )
    lu_cyc, piv = factor(a_cyc)

    def solves(lu, piv, b):
        b = to_block_cyclic(b, axis=0, axis_name="r", nb=nb)
        return lu_solve_block_cyclic(
            lu, piv, b, trans=0, few=True, row_axis="r", col_axis="c", nb=nb, precision=HI
        )

    solve_fn = jax.jit(sm(solves, in_specs=(spec, P(), P("r", None)), out_specs=P("r", None)))
    record("solves (permutation, L and U)", timed(solve_fn, (lu_cyc, piv, b_pad), args.rounds))
    record("distla.linalg.solve", timed(jax.jit(distla.linalg.solve), (a, b), args.rounds))
    record("distla.linalg.lu_factor", timed(jax.jit(distla.linalg.lu_factor), (a,), args.rounds))
    limit.restore_original_limits()
    info = dict(
        n=n,
        nb=nb,
        n_pad=n_pad,
        mesh=f"{pr}x{pc}",
        dtype="float32",
        jax=jax.__version__,
        load=os.getloadavg(),
        seconds=results,
    )
    print(json.dumps(info))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
