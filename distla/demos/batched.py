"""Demo rows for batched solves: 4096 systems of n = 64 float32 over all devices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla

from .._demo import Row, to_host
from .._timing import time_calls

N = 64
K = 1


def solve_ratio(a: np.ndarray, x: np.ndarray, b: np.ndarray) -> float:
    """Max over members of ||A x - b||_inf / (||A||_inf ||x||_inf n eps), in float64."""
    eps = np.finfo(x.dtype).eps
    a64, x64, b64 = (v.astype(np.float64) for v in (a, x, b))
    resid = np.abs(a64 @ x64 - b64).sum(-1).max(-1)
    scale = np.abs(a64).sum(-1).max(-1) * np.abs(x64).sum(-1).max(-1) * a.shape[-1] * eps
    return float((resid / scale).max())


def rows(size_scale: float = 1.0, rounds: int = 5) -> list[Row]:
    devices = jax.device_count()
    batch = max(devices, int(4096 * size_scale) // devices * devices)
    shape = distla.layout.squarest_grid(devices)
    names = ("rows", "cols")
    spec = P(names, None, None)  # every device holds batch / devices whole members
    mesh = distla.make_mesh(shape, names, axis_types=AxisType.Explicit)
    mesh_auto = distla.make_mesh(shape, names, axis_types=AxisType.Auto)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, N, N), dtype=np.float32)
    b = rng.standard_normal((batch, N, K), dtype=np.float32)

    def put(x, m):
        return jax.device_put(x, NamedSharding(m, spec))

    da, db = put(a, mesh), put(b, mesh)
    cases = {
        "distla": (jax.jit(distla.linalg.solve), (da, db)),
        "xla": (jax.jit(jnp.linalg.solve), (put(a, mesh_auto), put(b, mesh_auto))),
    }
    if jax.process_count() == 1:
        d0 = jax.devices()[0]
        cases["one"] = (jax.jit(jnp.linalg.solve), (jax.device_put(a, d0), jax.device_put(b, d0)))
    t = time_calls(cases, rounds=rounds)
    cost = distla.cost(distla.linalg.solve, da, db)
    x = to_host(distla.linalg.solve(da, db))
    flops = batch * (2.0 / 3.0 * N**3 + 2.0 * N * N * K)
    note = (
        f"{sum(cost.collective_counts.values())} collectives; each device solves "
        f"{batch // devices} members with LAPACK"
    )
    return [
        Row.measured(
            "batched solve", f"{batch}x{N}x{N}", shape, "float32", times=t, flops=flops,
            error_ratio=solve_ratio(a, x, b), cost=cost, note=note,
        )  # fmt: skip
    ]
