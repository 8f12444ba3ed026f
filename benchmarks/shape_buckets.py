"""Shape buckets (``distla.linalg.set_shape_buckets``): what a new order's first call
costs, and what every call pays (docs/benchmarks-log.md, "Shape buckets"):

    JAX_PLATFORMS=cpu python benchmarks/shape_buckets.py --orders 2000 2010 2016 --rounds 7

For each function (eager, distributed, 2x4 ``Explicit``, float32): the first call
at each order, the largest first (give the bucket's own order, the largest of its
bucket: the others then reuse its compiled kernel), with buckets on; then, timed in turn
(``interleaved.medians``), each order with buckets on and with them off. The orders
should share one bucket (at 32 steps: 1985-2016, 993-1008, ...).
"""

import argparse
import os
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians, waited  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

import distla  # noqa: E402

FUNCTIONS = {
    "lu_factor": lambda a, b: distla.linalg.lu_factor(a, plan="distributed"),
    "solve": lambda a, b: distla.linalg.solve(a, b, plan="distributed"),
    "cholesky": lambda a, b: distla.linalg.cholesky(a, plan="distributed"),
}


def _operands(n: int, mesh, spd: bool):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n)).astype(np.float32)
    if spd:
        a = (a @ a.T + n * np.eye(n)).astype(np.float32)
    return distla.shard(a, mesh), distla.shard(rng.standard_normal(n).astype(np.float32), mesh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, nargs="+", default=[2000, 2010])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=list(FUNCTIONS))
    args = parser.parse_args()
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    print(f"orders {args.orders} at {args.steps} steps per doubling")
    print(
        "| function | order | first call, buckets on | call, buckets on | call, own order |"
        " on / off |"
    )
    print("|---|---|---|---|---|---|")
    for name in args.functions:
        fn = FUNCTIONS[name]
        first = {}
        distla.linalg.set_shape_buckets(args.steps)
        for n in sorted(args.orders, reverse=True):  # the largest first: the bucket's own
            a, b = _operands(n, mesh, name == "cholesky")
            first[n] = waited(lambda: fn(a, b))
        rows = []
        for n in args.orders:
            a, b = _operands(n, mesh, name == "cholesky")

            def with_steps(steps, a=a, b=b):
                def call():
                    distla.linalg.set_shape_buckets(steps)
                    return fn(a, b)

                return call

            ms = medians({"on": with_steps(args.steps), "off": with_steps(0)}, args.rounds)
            rows.append((n, ms))
        distla.linalg.set_shape_buckets(0)
        for n, ms in rows:
            print(
                f"| {name} | {n} | {first[n]:.2f} s | {ms['on'] * 1e3:.1f} ms "
                f"| {ms['off'] * 1e3:.1f} ms | {ms['on'] / ms['off']:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t:.0f} s)")
