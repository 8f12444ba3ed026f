"""distla's eager calls on a 2x4 mesh against the same calls under ``jax.jit``.

    JAX_PLATFORMS=cpu python benchmarks/eager_vs_jit.py [--sizes 256] [--kinds explicit auto]

An eager call runs the same distributed kernels as a jitted one, plus the
Python around them (checks, promotion, the plan) and one dispatch per
kernel; the ratio is what a user pays for calling distla eagerly, as in a
notebook. The distributed plan is forced (``DISTLA_PLAN_BUDGET=0``, as in the
tests) so that small sizes time the distributed kernels. Each round times one
eager and one jitted call (waited for, interleaved); medians over ``--rounds``.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("DISTLA_PLAN_BUDGET", "0")
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402

L = distla.linalg


def _families(mesh, n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32)
    block = NamedSharding(mesh, P("x", "y"))
    x = jax.device_put(a, block)
    b = jax.device_put(rng.standard_normal((n, 4)).astype(np.float32), NamedSharding(mesh, P("x")))
    spd = jax.device_put(a @ a.T / n, block)
    low = jax.device_put(np.tril(a), block)
    return {
        "matmul": (lambda x: distla.matmul(x, x), (x,)),
        "solve": (L.solve, (x, b)),
        "lu_factor": (L.lu_factor, (x,)),
        "slogdet": (L.slogdet, (x,)),
        "inv": (L.inv, (x,)),
        "cholesky": (L.cholesky, (spd,)),
        "solve_triangular": (lambda t, y: L.solve_triangular(t, y, lower=True), (low, b)),
        "qr": (L.qr, (x,)),
    }


def _waited(fn, args):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256])
    parser.add_argument(
        "--kinds", nargs="+", default=["explicit", "auto"], choices=["explicit", "auto"]
    )
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, 2x4 mesh, "
        f"medians of {args.rounds} interleaved calls (ms)"
    )
    print("| family | n | mesh | eager | jit | eager / jit |")
    print("|---|---|---|---|---|---|")
    for kind in args.kinds:
        axis = AxisType.Explicit if kind == "explicit" else AxisType.Auto
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(axis, axis))
        with jax.set_mesh(mesh):
            for n in args.sizes:
                for name, (fn, operands) in _families(mesh, n).items():
                    jitted = jax.jit(fn)
                    for f in (fn, jitted, fn, jitted):  # compile and warm both
                        jax.block_until_ready(f(*operands))
                    eager, traced = [], []
                    for _ in range(args.rounds):
                        eager.append(_waited(fn, operands))
                        traced.append(_waited(jitted, operands))
                    e, j = statistics.median(eager) * 1e3, statistics.median(traced) * 1e3
                    print(
                        f"| {name} | {n} | 2x4 {kind} | {e:.2f} | {j:.2f} | {e / j:.2f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
