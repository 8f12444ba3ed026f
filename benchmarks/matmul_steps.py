"""SUMMA's steps against XLA's partitioning on 2x4 ``Auto``: eager ``distla.matmul`` with
``algorithm="auto"``, ``"xla"``, ``panels=1`` and ``panels=2``, and ``jnp.matmul`` on the
same sharded inputs, one call of each in turn per round, medians over the rounds, as
ratios to jnp (docs/benchmarks-log.md, "Large products"):

    JAX_PLATFORMS=cpu python benchmarks/matmul_steps.py --sizes 1024 1280 1536 1792 2048 --rounds 30
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

VARIANTS = {
    '"auto"': {},
    '"xla"': {"algorithm": "xla"},
    "one step": {"panels": 1},
    "two steps": {"panels": 2},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 1536, 2048])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    product = jax.jit(jnp.matmul)
    print("| n | " + " | ".join(VARIANTS) + " | jnp ms |")
    print("|---" * (len(VARIANTS) + 2) + "|")
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a, b = (
            jax.device_put(
                rng.standard_normal((n, n)).astype(np.float32), NamedSharding(mesh, P("x", "y"))
            )
            for _ in range(2)
        )
        cases = {
            name: (lambda kw: lambda: distla.matmul(a, b, **kw))(kw)
            for name, kw in VARIANTS.items()
        }
        cases["jnp"] = lambda: product(a, b)
        ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
        cells = [f"{ms[name] / ms['jnp']:.2f}x" for name in VARIANTS]
        print(f"| {n} | " + " | ".join(cells) + f" | {ms['jnp']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
