"""eigh on 2x4: the first call (compile + run), the median of three timed calls, and
jnp.linalg.eigh on one device (docs/benchmarks-log.md, "eigh by tridiagonal reduction")."""

import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla

mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
for n in map(int, sys.argv[1:]):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    a = (a + a.T) / 2
    x = jax.device_put(a, NamedSharding(mesh, P("x", "y")))
    t = time.time()
    jax.block_until_ready(distla.linalg.eigh(x, plan="distributed"))
    first = time.time() - t
    ts = []
    for _ in range(3):
        t = time.time()
        jax.block_until_ready(distla.linalg.eigh(x, plan="distributed"))
        ts.append(time.time() - t)
    one = jax.device_put(a, jax.devices()[0])
    f = jax.jit(jnp.linalg.eigh)
    jax.block_until_ready(f(one))
    t1 = []
    for _ in range(3):
        t = time.time()
        jax.block_until_ready(f(one))
        t1.append(time.time() - t)
    print(
        f"n={n} first {first:.1f}s timed {np.median(ts):.2f}s "
        f"one-device {np.median(t1):.2f}s ratio {np.median(ts) / np.median(t1):.2f}",
        flush=True,
    )
