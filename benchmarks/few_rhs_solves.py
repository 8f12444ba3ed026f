"""The solves from a factor with few right-hand sides against jnp on the same sharded
input: eager ``solve_triangular``, ``cho_solve`` and ``lu_solve`` (defaults, as users
call them) and ``jax.jit`` of the jax.scipy function, on a 2x4 ``Auto`` mesh, one call
of each in turn per round, medians (docs/benchmarks-log.md, "The LU, Cholesky and expm
crossovers"):

    JAX_PLATFORMS=cpu python benchmarks/few_rhs_solves.py --sizes 256 1024 --rhs 1 4 --rounds 30

The factors are distla's (``P(rows, cols)``), and both sides solve with those.
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

import distla  # noqa: E402
import distla.linalg as dl  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--rhs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    mesh = jax.make_mesh((2, 4), ("rows", "cols"), axis_types=(AxisType.Auto,) * 2)
    tri = jax.jit(lambda t, b: jsl.solve_triangular(t, b, lower=True))
    cho = jax.jit(lambda c, b: jsl.cho_solve((c, True), b))
    lus = jax.jit(lambda lu, piv, b: jsl.lu_solve((lu, piv), b))
    print("| n | k | function | distla ms | jnp ms | distla / jnp |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        rng = np.random.default_rng(0)
        g = rng.standard_normal((n, n))
        a = distla.shard((g @ g.T / n + np.eye(n)).astype(np.float32), mesh)
        c, _ = dl.cho_factor(a, lower=True)
        lu, piv = dl.lu_factor(a)
        for k in args.rhs:
            b = distla.shard(rng.standard_normal((n, k)).astype(np.float32), mesh)
            cases = {
                "solve_triangular": (
                    lambda: dl.solve_triangular(c, b, lower=True),
                    lambda: tri(c, b),
                ),
                "cho_solve": (lambda: dl.cho_solve((c, True), b), lambda: cho(c, b)),
                "lu_solve": (lambda: dl.lu_solve((lu, piv), b), lambda: lus(lu, piv, b)),
            }
            m = medians(
                {
                    f"{name} {side}": fn
                    for name, pair in cases.items()
                    for side, fn in zip(("distla", "jnp"), pair)
                },
                args.rounds,
            )
            for name in cases:
                mine, theirs = m[f"{name} distla"], m[f"{name} jnp"]
                print(
                    f"| {n} | {k} | {name} | {mine * 1e3:.2f} | {theirs * 1e3:.2f} | "
                    f"{mine / theirs:.2f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
