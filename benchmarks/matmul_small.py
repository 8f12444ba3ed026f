"""Products on 2x4: eager ``distla.matmul`` on ``Auto`` and ``Explicit`` meshes, ``jax.jit``
of it, ``jnp.matmul`` on the same sharded inputs (XLA's own partitioning) and on one
device, one call of each in turn per round (waited for, as a user's eager call is),
medians over the rounds (docs/benchmarks-log.md, "Small products"):

    JAX_PLATFORMS=cpu python benchmarks/matmul_small.py --sizes 128 256 512 1024 --rounds 100
    JAX_PLATFORMS=cpu python benchmarks/matmul_small.py --sizes 2048 --rounds 15

On an ``Explicit`` mesh ``jnp.matmul`` of two ``P(x, y)`` matrices is refused (the
contracting dimension is sharded two ways), so both mesh kinds' rows take the ``Auto``
mesh's ``jnp.matmul`` of the same values, timed in the same rounds, as their reference;
the last column is the eager call over one device's ``jnp.matmul``.
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
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    print(
        "| mesh | n | distla ms | jit(distla) ms | jnp, sharded (Auto) ms | one device ms "
        "| distla / jnp | distla / one device |"
    )
    print("|---|---|---|---|---|---|---|---|")
    xla = jax.jit(jnp.matmul)
    jitted = jax.jit(distla.matmul)
    kinds = (AxisType.Auto, AxisType.Explicit)
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a_np, b_np = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
        one_a, one_b = (jax.device_put(x, jax.devices()[0]) for x in (a_np, b_np))
        cases = {"jnp": None, "one": lambda: xla(one_a, one_b)}
        for kind in kinds:
            mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(kind,) * 2)
            a, b = (jax.device_put(x, NamedSharding(mesh, P("x", "y"))) for x in (a_np, b_np))
            cases[f"distla {kind.name}"] = (lambda a, b: lambda: distla.matmul(a, b))(a, b)
            cases[f"jit {kind.name}"] = (lambda a, b: lambda: jitted(a, b))(a, b)
            if kind == AxisType.Auto:
                cases["jnp"] = (lambda a, b: lambda: xla(a, b))(a, b)
        ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
        for kind in kinds:
            got = ms[f"distla {kind.name}"]
            print(
                f"| 2x4 {kind.name} | {n} | {got:.3f} | {ms[f'jit {kind.name}']:.3f} "
                f"| {ms['jnp']:.3f} | {ms['one']:.3f} | {got / ms['jnp']:.2f}x "
                f"| {got / ms['one']:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
