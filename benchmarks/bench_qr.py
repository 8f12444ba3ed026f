"""Distributed QR: distla.linalg.qr against one device and against XLA's partitioning.

Two problems, float32, ``mode="reduced"`` (Q and R), in one session:

- square ``n x n`` (n = 2048, 4096) on a 2x4 mesh, ``P(rows, cols)``: the
  blocked Householder kernel. Baselines: ``scipy.linalg.qr`` on one device
  with every core to its BLAS, ``jnp.linalg.qr`` on one device, and
  ``jnp.linalg.qr`` on the same sharded input (XLA's partitioning; about
  34 s at n = 2048 here, so it runs at 2048 only). Targets: distla within 2x
  the best one-device time at n = 4096, and at least 5x faster than XLA.
- tall-skinny 65536 x 128 on a 1-axis mesh of 8, ``P(rows, None)``: TSQR.
  Baselines: the same one-device functions and XLA on the sharded input.
  Target: within 1.3x one device.

Each distla row records collective bytes per device against the model of
docs/qr.md (``distla.linalg.qr_model_bytes``) and the peak memory per device.

    DISTLA_BENCH_ROUNDS=3 pytest benchmarks/bench_qr.py --benchmark-json=out/qr.json
    python benchmarks/report.py out/qr.json
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import threadpoolctl
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla.linalg import _qr

SQUARE = [2048, 4096]
XLA_SQUARE = [2048]
TALL = (65536, 128)
MESH = (2, 4)


def _matrix(m, n):
    return np.random.default_rng(m + n).standard_normal((m, n), dtype=np.float32)


def _square(n, axis_type=AxisType.Explicit):
    mesh = distla.make_mesh(MESH, ("rows", "cols"), axis_types=axis_type)
    return jax.device_put(_matrix(n, n), NamedSharding(mesh, P("rows", "cols")))


def _tall(axis_type=AxisType.Explicit):
    mesh = distla.make_mesh((8,), ("rows",), axis_types=axis_type)
    return jax.device_put(_matrix(*TALL), NamedSharding(mesh, P("rows", None)))


def _flops(m, n):  # geqrf + orgqr (Q m x n): 2mn² - 2n³/3, twice
    return 2 * (2.0 * m * n * n - 2.0 / 3.0 * n**3)


def _info(role, name, m, n, *, grid=None, fn=None, args=None, **extra):
    info = dict(role=role, name=name, op="qr", m=m, n=n, dtype="float32", flops=_flops(m, n))
    info.update(extra)
    if fn is not None:
        cost = distla.cost(fn, *args)
        info.update(
            mesh="x".join(map(str, grid)),
            kernel="tsqr" if _qr.use_tsqr(m, n, cost.num_devices, "reduced") else "householder",
            collective_bytes=cost.total_collective_bytes,
            collective_ops=sum(cost.collective_counts.values()),
            peak_bytes=cost.peak_memory_bytes,
            model_bytes=distla.linalg.qr_model_bytes(m, n, grid, np.float32),
        )
    return info


def _run_once(benchmark, fn, args, **info):
    """XLA's partitioned QR takes tens of seconds: compile apart, then time one call."""
    compiled = jax.jit(fn).lower(*args).compile()
    benchmark.extra_info.update(info, jax=jax.__version__, devices=jax.device_count())
    benchmark.pedantic(
        lambda: jax.block_until_ready(compiled(*args)), rounds=1, iterations=1, warmup_rounds=0
    )


def _scipy_qr(a):
    with threadpoolctl.threadpool_limits(os.cpu_count(), user_api="blas"):
        return scipy.linalg.qr(a, mode="economic")


@pytest.mark.parametrize("n", SQUARE)
def test_scipy_square(run, benchmark, n):
    benchmark.group = f"QR square n={n}"
    run(_scipy_qr, (_matrix(n, n),), **_info("baseline", "one device: scipy.linalg.qr", n, n))


@pytest.mark.parametrize("n", SQUARE)
def test_jax_square(run, benchmark, n):
    benchmark.group = f"QR square n={n}"
    args = (jax.device_put(_matrix(n, n), jax.devices()[0]),)
    run(jax.jit(jnp.linalg.qr), args, **_info("baseline", "one device: jnp.linalg.qr", n, n))


@pytest.mark.parametrize("n", XLA_SQUARE)
def test_xla_sharded_square(benchmark, n):
    benchmark.group = f"QR square n={n}"
    args = (_square(n, AxisType.Auto),)
    _run_once(
        benchmark,
        jnp.linalg.qr,
        args,
        **_info("baseline", "XLA: jnp.linalg.qr, sharded 2x4", n, n, mesh="2x4"),
    )


@pytest.mark.parametrize("n", SQUARE)
def test_distla_square(run, benchmark, n):
    benchmark.group = f"QR square n={n}"
    args = (_square(n),)
    fn = jax.jit(distla.linalg.qr)
    run(fn, args, **_info("distla", "distla.linalg.qr 2x4", n, n, grid=MESH, fn=fn, args=args))


def test_scipy_tall(run, benchmark):
    benchmark.group = "QR tall-skinny 65536x128"
    run(_scipy_qr, (_matrix(*TALL),), **_info("baseline", "one device: scipy.linalg.qr", *TALL))


def test_jax_tall(run, benchmark):
    benchmark.group = "QR tall-skinny 65536x128"
    args = (jax.device_put(_matrix(*TALL), jax.devices()[0]),)
    run(jax.jit(jnp.linalg.qr), args, **_info("baseline", "one device: jnp.linalg.qr", *TALL))


def test_xla_sharded_tall(benchmark):
    benchmark.group = "QR tall-skinny 65536x128"
    args = (_tall(AxisType.Auto),)
    _run_once(
        benchmark,
        jnp.linalg.qr,
        args,
        **_info("baseline", "XLA: jnp.linalg.qr, sharded 8", *TALL, mesh="8"),
    )


def test_distla_tall(run, benchmark):
    benchmark.group = "QR tall-skinny 65536x128"
    args = (_tall(),)
    fn = jax.jit(distla.linalg.qr)
    run(
        fn, args, **_info("distla", "distla.linalg.qr TSQR 8", *TALL, grid=(8, 1), fn=fn, args=args)
    )
