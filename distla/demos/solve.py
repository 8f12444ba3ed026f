"""Demo rows for the distributed LU: one n = 2048 float32 system over all devices."""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import threadpoolctl
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import _lu

from .._demo import Row, to_host
from .._timing import time_calls


def solve_ratio(a: np.ndarray, x: np.ndarray, b: np.ndarray) -> float:
    """``||A x - b||_inf / (||A||_inf ||x||_inf n eps)`` in float64 (DESIGN.md)."""
    eps = np.finfo(x.dtype).eps
    a64, x64, b64 = (v.astype(np.float64) for v in (a, x, b))
    resid = np.abs(a64 @ x64 - b64).max()
    return float(resid / (np.abs(a64).sum(1).max() * np.abs(x64).max() * a.shape[0] * eps))


def rows(size_scale: float = 1.0, rounds: int = 5) -> list[Row]:
    devices = jax.device_count()
    n = max(64, int(2048 * size_scale) // 64 * 64)
    shape = distla.layout.squarest_grid(devices)
    names = ("rows", "cols")
    mesh = distla.make_mesh(shape, names, axis_types=AxisType.Explicit)
    mesh_auto = distla.make_mesh(shape, names, axis_types=AxisType.Auto)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)

    def put(m):
        return (
            jax.device_put(a, NamedSharding(m, P(*names))),
            jax.device_put(b, NamedSharding(m, P(names[0]))),
        )

    da, db = put(mesh)
    cases = {
        "distla": (jax.jit(distla.linalg.solve), (da, db)),
        "xla": (jax.jit(jnp.linalg.solve), put(mesh_auto)),
    }
    if jax.process_count() == 1:
        d0 = jax.devices()[0]
        one_device = jax.jit(jnp.linalg.solve)

        def one(a, b):  # every core to the BLAS, whatever distla set for its devices
            with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
                return jax.block_until_ready(one_device(a, b))

        cases["one"] = (one, (jax.device_put(a, d0), jax.device_put(b, d0)))
    t = time_calls(cases, rounds=rounds)
    cost = distla.cost(distla.linalg.solve, da, db)
    x = to_host(distla.linalg.solve(da, db))
    model = _lu.model_bytes(n, shape, np.float32, rhs=0)
    note = (
        "blocked LU, partial pivoting, block-cyclic; collective bytes "
        f"{cost.total_collective_bytes / model:.2f}x the model of docs/lu.md"
    )
    flops = 2.0 / 3.0 * n**3 + 2.0 * n * n
    return [
        Row.measured(
            "solve (LU)", f"{n}x{n}", shape, "float32", times=t, flops=flops,
            error_ratio=solve_ratio(a, x, b), cost=cost, note=note,
        )  # fmt: skip
    ]
