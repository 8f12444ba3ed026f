"""Small products on 2x4: eager ``distla.matmul``, ``jax.jit`` of it and ``jnp.matmul`` on
the same sharded inputs (XLA's own partitioning), one call of each in turn per round
(waited for, as a user's eager call is), medians over the rounds (docs/benchmarks-log.md,
"Small products"):

    JAX_PLATFORMS=cpu python benchmarks/matmul_small.py --sizes 128 256 512 1024 --rounds 100

On an ``Explicit`` mesh ``jnp.matmul`` of two ``P(x, y)`` matrices is refused (the
contracting dimension is sharded two ways), so only the ``Auto`` rows have a jnp column.
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
    print("| mesh | n | distla ms | jit(distla) ms | jnp ms | distla / jnp |")
    print("|---|---|---|---|---|---|")
    for kind in (AxisType.Auto, AxisType.Explicit):
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(kind,) * 2)
        for n in args.sizes:
            rng = np.random.default_rng(0)
            a, b = (
                jax.device_put(
                    rng.standard_normal((n, n)).astype(np.float32), NamedSharding(mesh, P("x", "y"))
                )
                for _ in range(2)
            )
            jitted, xla = jax.jit(distla.matmul), jax.jit(jnp.matmul)
            cases = {"distla": lambda: distla.matmul(a, b), "jit": lambda: jitted(a, b)}
            if kind == AxisType.Auto:
                cases["jnp"] = lambda: xla(a, b)
            ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
            jnp_ms = f"{ms['jnp']:.3f}" if "jnp" in ms else "-"
            ratio = f"{ms['distla'] / ms['jnp']:.2f}x" if "jnp" in ms else "-"
            print(
                f"| 2x4 {kind.name} | {n} | {ms['distla']:.3f} | {ms['jit']:.3f} | {jnp_ms} "
                f"| {ratio} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
