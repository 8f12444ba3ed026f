"""distla.scipy.fft.dctn against distla.fft.fftn of the same size, one device and XLA.

Groups are ``dct n=N MESH``: every case of a group runs in the same session and
benchmarks/report.py turns the medians into ratios (docs/benchmarks.md). The
contract: ``dctn`` of a float32 volume within 1.3x of ``fftn`` of a complex64
one of the same size (a DCT per line is one real FFT plus a reordering, and its
exchanges move real values: half of ``fftn``'s bytes).

    pytest benchmarks/bench_dct.py --benchmark-json=out/dct.json
    python benchmarks/report.py out/dct.json

``benchmarks/fft_side_interleaved.py`` measures the same ratios with the cases
timed in turn, which a loaded machine needs.
"""

import math

import jax
import jax.numpy as jnp
import jax.scipy.fft
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.fft

SIZES = [128, 256]
MESHES = [pytest.param((4, 2), id="4x2"), pytest.param((2, 4), id="2x4")]


def _mesh(shape, axis_type=AxisType.Explicit):
    devices = jax.devices()[: math.prod(shape)]
    return distla.make_mesh(shape, ("x", "y"), devices=devices, axis_types=axis_type)


def _volume(n, dtype=np.float32):
    return np.random.default_rng(0).standard_normal((n, n, n), dtype=np.float32).astype(dtype)


def _info(fn, x, n, shape, name, role, dtype):
    info = dict(role=role, name=name, op="dct", n=n, mesh=f"{shape[0]}x{shape[1]}", dtype=dtype)
    if x.sharding.num_devices > 1:
        cost = distla.cost(fn, x)
        info.update(
            collective_bytes=cost.total_collective_bytes,
            all_gather_bytes=cost.collective_bytes["all-gather"],
            peak_bytes=cost.peak_memory_bytes,
        )
    return info


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_dctn(run, benchmark, n, shape):
    benchmark.group = f"dct n={n} {shape[0]}x{shape[1]}"
    x = jax.device_put(_volume(n), NamedSharding(_mesh(shape), P("x", "y")))
    fn = distla.scipy.fft.dctn
    run(fn, (x,), **_info(fn, x, n, shape, "distla.scipy.fft.dctn", "distla", "float32"))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_fftn_same_size(run, benchmark, n, shape):
    """The reference of the contract: distla's complex FFT of the same size."""
    benchmark.group = f"dct n={n} {shape[0]}x{shape[1]}"
    x = jax.device_put(_volume(n, np.complex64), NamedSharding(_mesh(shape), P("x", "y")))
    fn = distla.fft.fftn
    run(fn, (x,), **_info(fn, x, n, shape, "distla.fft.fftn complex64", "baseline", "complex64"))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_one_device(run, benchmark, n, shape):
    benchmark.group = f"dct n={n} {shape[0]}x{shape[1]}"
    x = jax.device_put(_volume(n), jax.devices()[0])
    fn = jax.jit(jax.scipy.fft.dctn)
    run(fn, (x,), **_info(fn, x, n, shape, "one device: jax.scipy.fft.dctn", "baseline", "f32"))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", [128])
def test_xla_sharded(run, benchmark, n, shape):
    """jax's own dctn on the sharded input (XLA's partitioning)."""
    benchmark.group = f"dct n={n} {shape[0]}x{shape[1]}"
    x = jax.device_put(_volume(n), NamedSharding(_mesh(shape, AxisType.Auto), P("x", "y")))
    fn = jax.jit(jax.scipy.fft.dctn)
    name = "XLA: jax.scipy.fft.dctn on the sharded input"
    run(fn, (x,), **_info(fn, x, n, shape, name, "baseline", "float32"))


def test_model_bytes_are_half_of_fftn():
    """Not a timing: the bytes the dct group's rows report, as the model says."""
    shape, n = (4, 2), 64
    mesh = _mesh(shape)
    real = jax.device_put(_volume(n), NamedSharding(mesh, P("x", "y")))
    ours = distla.cost(distla.scipy.fft.dctn, real)
    theirs = distla.cost(
        lambda v: distla.fft.fftn(v, algorithm="pencil"), real.astype(jnp.complex64)
    )
    assert 2 * ours.total_collective_bytes == theirs.total_collective_bytes
