"""Distributed cholesky against one device, one call of each case in turn per round,
medians (docs/benchmarks.md, "Cholesky"):

    JAX_PLATFORMS=cpu python benchmarks/cholesky_interleaved.py --sizes 2048 --rounds 15

Cases, on the same float32 SPD matrix: ``scipy.linalg.cholesky`` on one device with
every core to its BLAS (the reference of DESIGN's "one-device scipy"), jnp's
``cholesky`` jitted on one device, and eager ``distla.linalg.cholesky`` (its default
plan, distributed above ``CROSSOVER["cholesky"]``) on 2x4 ``Auto`` and ``Explicit``
meshes, and its one-device plan (``plan="one_device"``, eager: the matrix to one device,
LAPACK there with every BLAS thread, the factor back) on ``Auto``, which says whether
the eager crossover should move. Each case is called twice before the rounds (compile).
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import threadpoolctl  # noqa: E402
from interleaved import medians  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(
        "| n | scipy, one device | jnp, one device | distla Auto | distla Explicit "
        "| one-device plan | Auto / scipy | Explicit / scipy | one-device plan / scipy |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    one_chol = jax.jit(jnp.linalg.cholesky)
    for n in args.sizes:
        g = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
        a = g @ g.T / n + np.eye(n, dtype=np.float32)
        one = jax.device_put(a, jax.devices()[0])

        def scipy_call(a=a):
            # every core to its BLAS (distla keeps OpenBLAS to one thread per call while
            # simulated devices share the process)
            with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
                return scipy.linalg.cholesky(a, lower=True, check_finite=False)

        cases = {"scipy": scipy_call, "jnp": lambda one=one: one_chol(one)}
        for kind in (AxisType.Auto, AxisType.Explicit):
            mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(kind,) * 2)
            x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
            cases[kind.name] = (lambda x: lambda: distla.linalg.cholesky(x))(x)
            if kind == AxisType.Auto:
                cases["plan"] = (lambda x: lambda: distla.linalg.cholesky(x, plan="one_device"))(x)
        s = medians(cases, args.rounds)
        print(
            f"| {n} | {s['scipy'] * 1e3:.1f} ms | {s['jnp'] * 1e3:.1f} ms "
            f"| {s['Auto'] * 1e3:.1f} ms | {s['Explicit'] * 1e3:.1f} ms "
            f"| {s['plan'] * 1e3:.1f} ms | {s['Auto'] / s['scipy']:.2f}x "
            f"| {s['Explicit'] / s['scipy']:.2f}x | {s['plan'] / s['scipy']:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
