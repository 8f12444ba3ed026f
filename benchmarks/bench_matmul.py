"""distla.matmul against one device and against XLA's partitioning of jnp.matmul.

Every case of a group runs in the same session; benchmarks/report.py turns
the medians into ratios (docs/benchmarks-log.md).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType

import distla
from distla.matmul import model_bytes
from distla.tools.ratios import THRESHOLD, matmul_ratio
from distla.tools.run import to_host

SIZES = [1024, 2048, 4096]


def _operands(n, shape, axis_type):
    mesh = distla.make_mesh(
        shape, devices=jax.devices()[: shape[0] * shape[1]], axis_types=axis_type
    )
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    return a, b, distla.shard(a, mesh), distla.shard(b, mesh)


def _kind(x):
    return "explicit" if x.sharding.mesh.axis_types[0] == AxisType.Explicit else "auto"


def _info(n, shape, label, da, db, fn=distla.matmul, **kw):
    cost = distla.cost(fn, da, db, **kw)
    pr, pc = shape
    model = model_bytes((n, n, n), shape, np.float32, algorithm=label)  # docs/matmul.md
    return dict(
        role="distla",
        name=f"distla.matmul {label} {pr}x{pc} {_kind(da)}",
        op="matmul",
        n=n,
        mesh=f"{pr}x{pc}",
        dtype="float32",
        algorithm=label,
        flops=2.0 * n**3,
        collective_bytes=cost.total_collective_bytes,
        model_bytes=model,
        peak_bytes=cost.peak_memory_bytes,
    )


@pytest.mark.parametrize("n", SIZES)
def test_one_device(run, benchmark, n):
    benchmark.group = f"matmul n={n}"
    a, b, _, _ = _operands(n, (1, 1), AxisType.Explicit)
    d0 = jax.devices()[0]
    run(
        jax.jit(jnp.matmul),
        (jax.device_put(a, d0), jax.device_put(b, d0)),
        role="baseline",
        name="one device: jnp.matmul",
        op="matmul",
        n=n,
        mesh="1x1",
        dtype="float32",
        algorithm="one-device",
        flops=2.0 * n**3,
    )


@pytest.mark.parametrize("n", SIZES)
def test_xla_sharded(run, benchmark, n):
    benchmark.group = f"matmul n={n}"
    _, _, da, db = _operands(n, (2, 4), AxisType.Auto)
    cost = distla.cost(jnp.matmul, da, db)
    run(
        jax.jit(jnp.matmul),
        (da, db),
        role="baseline",
        name="XLA: jnp.matmul on the sharded inputs",
        op="matmul",
        n=n,
        mesh="2x4",
        dtype="float32",
        algorithm="xla",
        flops=2.0 * n**3,
        collective_bytes=cost.total_collective_bytes,
        peak_bytes=cost.peak_memory_bytes,
    )


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("n", SIZES)
def test_summa(run, benchmark, n, axis_type):
    benchmark.group = f"matmul n={n}"
    a, b, da, db = _operands(n, (2, 4), axis_type)
    c = run(jax.jit(distla.matmul), (da, db), **_info(n, (2, 4), "summa", da, db))
    assert matmul_ratio(to_host(c), a, b) <= THRESHOLD


@pytest.mark.parametrize("n", SIZES)
def test_cannon_2x2(run, benchmark, n):
    benchmark.group = f"matmul n={n}"
    _, _, da, db = _operands(n, (2, 2), AxisType.Explicit)
    run(
        jax.jit(lambda x, y: distla.matmul(x, y, algorithm="cannon")),
        (da, db),
        **_info(n, (2, 2), "cannon", da, db, algorithm="cannon"),
    )


@pytest.mark.parametrize("n", SIZES)
def test_summa_2x2(run, benchmark, n):
    benchmark.group = f"matmul n={n}"
    _, _, da, db = _operands(n, (2, 2), AxisType.Explicit)
    run(
        jax.jit(lambda x, y: distla.matmul(x, y, algorithm="summa")),
        (da, db),
        **_info(n, (2, 2), "summa", da, db, algorithm="summa"),
    )
