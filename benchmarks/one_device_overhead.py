"""distla on a 1x1 mesh against jnp on the same array: medians, eager calls and under jit.

    JAX_PLATFORMS=cpu python benchmarks/one_device_overhead.py [--sizes 256 1024] [--rounds 9]
    JAX_PLATFORMS=cpu python benchmarks/one_device_overhead.py --per-call 1000

On a mesh of one device every family runs jnp's own program, so the two
``jit`` columns time the same program (their ratio shows the machine's noise)
and the eager columns add what distla does in Python around it (checks, dtype
promotion, the dispatch to jnp). Each round times one call of each of the
four in turn (interleaved, so that load on a shared machine hits them alike),
each the best of 3 runs of a few calls (one call from 0.2 s up); the table
gives medians over the rounds. With ``--per-call K`` each round is one call of
each (waited for, as a user's eager call is) and the table gives medians of
``K`` rounds (fewer for slow calls: about 4 s of each function, at least 7):
the steadier figure for calls of a millisecond or less. FFTs transform an ``(n/4)³`` complex64
volume (``n/8`` from 1024 up), the rest ``n x n`` float32 matrices.
"""

import argparse
import functools
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla


def _families(mesh, n):
    rng = np.random.default_rng(0)
    m = n // 4 if n < 1024 else n // 8
    a = rng.standard_normal((n, n)).astype(np.float32)
    vol = (rng.standard_normal((m,) * 3) + 1j * rng.standard_normal((m,) * 3)).astype(np.complex64)

    def put(x):
        return jax.device_put(x, NamedSharding(mesh, P()))

    gen = put(a + n * np.eye(n, dtype=np.float32))
    spd = put(a @ a.T / n + np.eye(n, dtype=np.float32))
    low = put(np.tril(a) + n * np.eye(n, dtype=np.float32))
    rhs, v = put(rng.standard_normal((n, 4)).astype(np.float32)), put(vol)
    L = distla.linalg
    return {
        "matmul": (distla.matmul, jnp.matmul, (gen, gen)),
        "solve": (L.solve, jnp.linalg.solve, (gen, rhs)),
        "cholesky": (L.cholesky, jnp.linalg.cholesky, (spd,)),
        "lu_factor": (L.lu_factor, jax.scipy.linalg.lu_factor, (gen,)),
        "solve_triangular": (
            functools.partial(L.solve_triangular, lower=True),
            functools.partial(jax.scipy.linalg.solve_triangular, lower=True),
            (low, rhs),
        ),
        "inv": (L.inv, jnp.linalg.inv, (gen,)),
        "slogdet": (L.slogdet, jnp.linalg.slogdet, (gen,)),
        "qr": (L.qr, jnp.linalg.qr, (gen,)),
        "eigh": (L.eigh, jnp.linalg.eigh, (spd,)),
        "svd": (L.svd, jnp.linalg.svd, (gen,)),
        f"fftn {m}³": (distla.fft.fftn, jnp.fft.fftn, (v,)),
    }


def _seconds(fn, args, number=1):
    start = time.perf_counter()
    for _ in range(number):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - start) / number


def _best(fn, args, number, repeat):
    return min(_seconds(fn, args, number) for _ in range(repeat))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    p.add_argument("--rounds", type=int, default=9, help="interleaved rounds (medians)")
    p.add_argument(
        "--per-call",
        type=int,
        default=0,
        metavar="K",
        help="K rounds of one call each (medians), instead of --rounds",
    )
    p.add_argument("--explicit", action="store_true", help="an Explicit 1x1 mesh (default Auto)")
    args = p.parse_args(argv)
    kind = jax.sharding.AxisType.Explicit if args.explicit else jax.sharding.AxisType.Auto
    mesh = jax.make_mesh(
        (1, 1), ("rows", "cols"), devices=jax.devices()[:1], axis_types=(kind,) * 2
    )
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, 1x1 {kind.name} mesh, "
        f"medians of {'up to ' if args.per_call else ''}"
        f"{args.per_call or args.rounds} interleaved rounds"
        f"{' of one call each' if args.per_call else ''} (ms)"
    )
    print("| family | n | distla | jnp | ratio | jit(distla) | jit(jnp) | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    with jax.set_mesh(mesh):
        for n in args.sizes:
            for name, (ours, theirs, operands) in _families(mesh, n).items():
                fns = (ours, theirs, jax.jit(ours), jax.jit(theirs))
                for fn in fns:  # compile, warm up
                    _seconds(fn, operands)
                    one = _seconds(fn, operands)
                number = max(1, round(0.02 / one))  # about 20 ms per run
                repeat = 1 if one > 0.2 else 3
                if args.per_call:
                    number, repeat = 1, 1
                times = [[] for _ in fns]
                # per call: K rounds, fewer for slow calls (about 4 s of each function)
                rounds = (
                    max(7, min(args.per_call, round(4 / one))) if args.per_call else args.rounds
                )
                for _ in range(rounds):
                    for t, fn in zip(times, fns):
                        t.append(_best(fn, operands, number, repeat))
                d, j, jd, jj = (statistics.median(t) * 1e3 for t in times)
                print(
                    f"| {name} | {n} | {d:.3f} | {j:.3f} | {d / j:.2f} | {jd:.3f} | {jj:.3f} "
                    f"| {jd / jj:.2f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
