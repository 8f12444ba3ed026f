"""Batched solves: distla.linalg.solve on a stack sharded along the batch, 8 devices.

Against one device running ``jnp.linalg.solve`` on the whole stack (target:
at most 1.1x, nothing beyond sharing the cores) and against ``jnp.linalg.solve``
on the same sharded stack (XLA's partitioning). Every case of a group runs in
the same session; benchmarks/report.py turns the medians into ratios.

    pytest benchmarks/bench_batched.py --benchmark-json=out/batched.json
    python benchmarks/report.py out/batched.json
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla.tools.ratios import THRESHOLD, solve_ratio
from distla.tools.run import to_host

# (members, n): many small systems, and fewer larger ones
SIZES = [pytest.param((4096, 64), id="B4096-n64"), pytest.param((256, 256), id="B256-n256")]
K = 1  # right-hand sides per member


def _stack(batch, n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((batch, n, n), dtype=np.float32)
    b = rng.standard_normal((batch, n, K), dtype=np.float32)
    return a, b


def _sharded(a, b, shape, axis_type):
    names = ("rows", "cols")[: len(shape)]
    mesh = distla.make_mesh(shape, names, axis_types=axis_type)
    spec = P(names if len(names) > 1 else names[0], None, None)
    put = lambda x: jax.device_put(x, NamedSharding(mesh, spec))  # noqa: E731
    return put(a), put(b)


def _info(role, name, batch, n, mesh, fn=None, args=None, **extra):
    info = dict(
        role=role,
        name=name,
        op="batched_solve",
        batch=batch,
        n=n,
        k=K,
        mesh=mesh,
        dtype="float32",
        # LU (2/3 n^3) and two triangular solves (2 n^2 k) per member
        flops=batch * (2.0 / 3.0 * n**3 + 2.0 * n * n * K),
        **extra,
    )
    if fn is not None:
        cost = distla.cost(fn, *args)
        info.update(
            collective_bytes=cost.total_collective_bytes,
            collective_ops=sum(cost.collective_counts.values()),
            peak_bytes=cost.peak_memory_bytes,
        )
    return info


@pytest.mark.parametrize("size", SIZES)
def test_one_device(run, benchmark, size):
    batch, n = size
    benchmark.group = f"batched solve B={batch} n={n}"
    a, b = _stack(batch, n)
    d0 = jax.devices()[0]
    args = (jax.device_put(a, d0), jax.device_put(b, d0))
    fn = jax.jit(jnp.linalg.solve)
    run(fn, args, **_info("baseline", "one device: jnp.linalg.solve", batch, n, "1"))


@pytest.mark.parametrize("size", SIZES)
def test_xla_sharded(run, benchmark, size):
    batch, n = size
    benchmark.group = f"batched solve B={batch} n={n}"
    args = _sharded(*_stack(batch, n), (2, 4), AxisType.Auto)
    fn = jax.jit(jnp.linalg.solve)
    info = _info("baseline", "XLA: jnp.linalg.solve, sharded", batch, n, "2x4", fn, args)
    run(fn, args, **info)


@pytest.mark.parametrize("shape", [pytest.param((2, 4), id="2x4"), pytest.param((8,), id="8")])
@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("size", SIZES)
def test_distla(run, benchmark, size, axis_type, shape):
    batch, n = size
    benchmark.group = f"batched solve B={batch} n={n}"
    a, b = _stack(batch, n)
    args = _sharded(a, b, shape, axis_type)
    fn = jax.jit(distla.linalg.solve)
    mesh = "x".join(map(str, shape))
    kind = "explicit" if axis_type == AxisType.Explicit else "auto"
    info = _info("distla", f"distla.linalg.solve {mesh} {kind}", batch, n, mesh, fn, args)
    assert info["collective_ops"] == 0  # each device solves its own members
    x = run(fn, args, **info)
    assert solve_ratio(a, to_host(x), b) <= THRESHOLD
