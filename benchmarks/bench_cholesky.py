"""Distributed Cholesky: distla.linalg.cholesky of one matrix over a 2x4 mesh.

For n = 2048 and 4096 (float32, symmetric positive definite), in one session:

- ``scipy.linalg.cholesky`` on one device with every core to its BLAS (the
  performance target: distla at most 1.5x at n = 4096);
- ``jax.scipy.linalg.cho_factor`` on one device;
- ``jnp.linalg.cholesky`` on the same sharded input (XLA's partitioning;
  target: distla at least 5x faster; 2048 only, it gathers the matrix);
- distla's ``cholesky``, recording collective bytes against the model of
  docs/cholesky.md (``distla.linalg.cholesky_model_bytes``) and the flop
  efficiency: useful flops (n³/3) over the flops all devices execute together
  (each panel is solved only by its owner mesh column:
  ``distla.Cost.conditional_flops``).

    pytest benchmarks/bench_cholesky.py --benchmark-json=out/cholesky.json
    python benchmarks/report.py out/cholesky.json
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import threadpoolctl
from conftest import cost_info
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla

SIZES = [2048, 4096]
MESH = (2, 4)


def _problem(n):
    rng = np.random.default_rng(n)
    g = rng.standard_normal((n, n), dtype=np.float32)
    return (g @ g.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def _sharded(n, axis_type=AxisType.Explicit):
    mesh = distla.make_mesh(MESH, ("rows", "cols"), axis_types=axis_type)
    return (jax.device_put(_problem(n), NamedSharding(mesh, P("rows", "cols"))),)


def _info(role, name, n, *, fn=None, args=None, **extra):
    flops = n**3 / 3.0
    info = dict(role=role, name=name, op="cholesky", n=n, dtype="float32", flops=flops, **extra)
    if fn is not None:
        model = distla.linalg.cholesky_model_bytes(n, MESH, np.float32)
        info.update(cost_info(fn, args, grid=MESH, useful_flops=flops, model_bytes=model))
    return info


@pytest.mark.parametrize("n", SIZES)
def test_scipy_cholesky(run, benchmark, n):
    benchmark.group = f"Cholesky n={n}"
    a = _problem(n)

    def factor(a):  # every core to the BLAS, whatever distla set for its devices
        with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
            return scipy.linalg.cholesky(a, lower=True)

    run(factor, (a,), **_info("baseline", "one device: scipy.linalg.cholesky", n))


@pytest.mark.parametrize("n", SIZES)
def test_jax_cho_factor(run, benchmark, n):
    benchmark.group = f"Cholesky n={n}"
    fn = jax.jit(lambda a: jax.scipy.linalg.cho_factor(a, lower=True)[0])
    args = (jax.device_put(_problem(n), jax.devices()[0]),)
    run(fn, args, **_info("baseline", "one device: jax cho_factor", n))


@pytest.mark.parametrize("n", [2048])
def test_xla_sharded_cholesky(run, benchmark, n):
    benchmark.group = f"Cholesky n={n}"
    args = _sharded(n, AxisType.Auto)
    run(
        jax.jit(jnp.linalg.cholesky),
        args,
        **_info("baseline", "XLA: jnp.linalg.cholesky, sharded", n, mesh="2x4"),
    )


@pytest.mark.parametrize("n", SIZES)
def test_distla_cholesky(run, benchmark, n):
    benchmark.group = f"Cholesky n={n}"
    args = _sharded(n)
    fn = jax.jit(distla.linalg.cholesky)
    run(fn, args, **_info("distla", "distla.linalg.cholesky 2x4", n, fn=fn, args=args))
