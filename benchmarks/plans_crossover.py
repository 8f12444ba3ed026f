"""The two plans of the LU, Cholesky, expm and triangular-solve families head to head.

Eager calls with ``plan="distributed"`` and ``plan="one_device"``, and the jnp function on
one device, one call of each in turn per round, medians over the rounds
(docs/benchmarks-log.md, "The LU, Cholesky and expm crossovers").
The matrix is symmetric positive definite
(so that every family runs on it), float32, ``P(x, y)`` on a 2x4 mesh:

    JAX_PLATFORMS=cpu python benchmarks/plans_crossover.py --sizes 512 1024 2048 4096 \
        --rounds 3 --meshes Auto Explicit

``plan="auto"`` takes the one-device plan up to a crossover size per family (within the
memory budget); this script is what those sizes are read from.
"""

import argparse
import functools
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402
import distla.linalg as dl  # noqa: E402

# name: (distla function, jnp function, takes b)
FUNCTIONS = {
    "solve": (dl.solve, jnp.linalg.solve, True),
    "lu_factor": (dl.lu_factor, jsl.lu_factor, False),
    "inv": (dl.inv, jnp.linalg.inv, False),
    "slogdet": (dl.slogdet, jnp.linalg.slogdet, False),
    "cholesky": (dl.cholesky, jnp.linalg.cholesky, False),
    "expm": (dl.expm, jsl.expm, False),
    # the matrix's lower triangle (its diagonal is at least 1)
    "solve_triangular": (
        functools.partial(dl.solve_triangular, lower=True),
        functools.partial(jsl.solve_triangular, lower=True),
        True,
    ),
    # the matrix as its own lower Cholesky factor (a triangle with a positive diagonal)
    "cho_solve": (
        lambda c, b, **kw: dl.cho_solve((c, True), b, **kw),
        lambda c, b: jsl.cho_solve((c, True), b),
        True,
    ),
    # on the matrix's LU factors (computed once, outside the timing)
    "lu_solve": (
        lambda lu, piv, b, **kw: dl.lu_solve((lu, piv), b, **kw),
        lambda lu, piv, b: jsl.lu_solve((lu, piv), b),
        True,
    ),
}


def _operands(n: int, mesh: jax.sharding.Mesh):
    rng = np.random.default_rng(0)
    g = rng.standard_normal((n, n), dtype=np.float32)
    spd = (g @ g.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)
    b = rng.standard_normal((n,), dtype=np.float32)
    sharded = (
        jax.device_put(spd, NamedSharding(mesh, P("x", "y"))),
        jax.device_put(b, NamedSharding(mesh, P())),
    )
    one = tuple(jax.device_put(x, jax.devices()[0]) for x in (spd, b))
    return sharded, one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048])
    parser.add_argument("--meshes", nargs="+", default=["Auto"], choices=["Auto", "Explicit"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=list(FUNCTIONS), default=list(FUNCTIONS))
    parser.add_argument(
        "--jit",
        action="store_true",
        help="time jax.jit of each distla call (the plan as one program)",
    )
    args = parser.parse_args()
    print(
        "| function | n | mesh | distributed ms | one device plan ms | jnp, one device ms "
        "| one-device plan / distributed | distributed / jnp one device |"
    )
    print("|---" * 8 + "|")
    for kind in args.meshes:
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(getattr(AxisType, kind),) * 2)
        for n in args.sizes:
            (a, b), (a1, b1) = _operands(n, mesh)
            for name in args.only:
                fn, ref, with_b = FUNCTIONS[name]
                ops, ops1 = ((a, b), (a1, b1)) if with_b else ((a,), (a1,))
                if name == "lu_solve":
                    ops = (*dl.lu_factor(a, plan="distributed"), b)
                    ops1 = (*jax.jit(jsl.lu_factor)(a1), b1)
                jitted = jax.jit(ref)

                def one_device(*xs, jitted=jitted):  # one device alone: every BLAS thread
                    distla.limit_cpu_blas(False)
                    try:
                        return jax.block_until_ready(jitted(*xs))
                    finally:
                        distla.limit_cpu_blas(True)

                plans = {p: functools.partial(fn, plan=p) for p in ("distributed", "one_device")}
                if args.jit:
                    plans = {p: jax.jit(f) for p, f in plans.items()}
                m = medians(
                    {
                        "distributed": lambda: plans["distributed"](*ops),
                        "one_device": lambda: plans["one_device"](*ops),
                        "jnp": lambda: one_device(*ops1),
                    },
                    args.rounds,
                    warmups=1,
                )
                print(
                    f"| {name} | {n} | 2x4 {kind} | {m['distributed'] * 1e3:.1f} | "
                    f"{m['one_device'] * 1e3:.1f} | {m['jnp'] * 1e3:.1f} | "
                    f"{m['one_device'] / m['distributed']:.2f}x | "
                    f"{m['distributed'] / m['jnp']:.2f}x |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
