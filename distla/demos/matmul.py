"""Demo rows for distla.matmul: n = 4096 float32 on a 2x4 mesh."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType

import distla

from .._demo import Row, to_host
from .._timing import time_calls


def _ratio(c, a, b) -> float:
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.linalg.norm(c.astype(np.float64) - ref)
    return float(err / (np.linalg.norm(a) * np.linalg.norm(b) * a.shape[1] * np.finfo(c.dtype).eps))


def rows(size_scale: float = 1.0, rounds: int = 5) -> list[Row]:
    n = max(64, int(4096 * size_scale) // 64 * 64)
    shape = distla.layout.squarest_grid(jax.device_count())
    mesh = distla.make_mesh(shape, axis_types=AxisType.Explicit)
    mesh_auto = distla.make_mesh(shape, axis_types=AxisType.Auto)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    da, db = distla.shard(a, mesh), distla.shard(b, mesh)
    xa, xb = distla.shard(a, mesh_auto), distla.shard(b, mesh_auto)
    cases = {
        "distla": (jax.jit(distla.matmul), (da, db)),
        "xla": (jax.jit(jnp.matmul), (xa, xb)),
    }
    if jax.process_count() == 1:
        d0 = jax.devices()[0]
        cases["one"] = (jax.jit(jnp.matmul), (jax.device_put(a, d0), jax.device_put(b, d0)))
    t = time_calls(cases, rounds=rounds)
    cost = distla.cost(distla.matmul, da, db)
    c = to_host(distla.matmul(da, db))
    return [
        Row.measured(
            "matmul (summa)", f"{n}x{n}x{n}", shape, "float32", times=t, flops=2.0 * n**3,
            error_ratio=_ratio(c, a, b), cost=cost,
        )  # fmt: skip
    ]
