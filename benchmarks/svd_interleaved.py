"""Distributed svd against one device, one call of each case in turn per round, medians
(docs/benchmarks-log.md, "svd on the tridiagonal eigh"):

    JAX_PLATFORMS=cpu python benchmarks/svd_interleaved.py --sizes 1024 2048 --rounds 3

Cases, on the same float32 random matrix: ``jnp.linalg.svd`` (jitted) on one device and
``distla.linalg.svd(plan="distributed")`` eager on 2x4 ``Auto`` and ``Explicit`` meshes
(``full_matrices=False``). Each case is called once before the rounds (compile).
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        "| n | one device | distributed, Auto | distributed, Explicit "
        "| Auto / one | Explicit / one |"
    )
    print("|---|---|---|---|---|---|")
    one_svd = jax.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))
    for n in args.sizes:
        a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
        one = jax.device_put(a, jax.devices()[0])
        cases = {"one": lambda: one_svd(one)}
        for kind in (AxisType.Auto, AxisType.Explicit):
            mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(kind,) * 2)
            x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
            cases[kind.name] = (
                lambda x: lambda: distla.linalg.svd(x, full_matrices=False, plan="distributed")
            )(x)
        s = medians(cases, args.rounds, warmups=1)
        print(
            f"| {n} | {s['one']:.2f} s | {s['Auto']:.2f} s | {s['Explicit']:.2f} s "
            f"| {s['Auto'] / s['one']:.2f}x | {s['Explicit'] / s['one']:.2f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
