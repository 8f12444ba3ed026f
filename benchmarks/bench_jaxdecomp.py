"""distla.jaxdecomp against jaxdecomp: prfft3d against pfft3d, and halo_exchange.

Groups ``pfft3d n=N MESH`` (distla's pfft3d of a complex64 volume, prfft3d of
the float32 one, jaxdecomp's pfft3d) and ``halo n=N MESH`` (halo exchange of a
float32 volume with 2 ghost cells per side, distla's and jaxdecomp's on an
Auto mesh, and one device's copy of the volume for scale). Every row carries
the bytes ``distla.cost`` reads from its program; ``model_bytes`` is each
function's communication model (the halo slabs alone for the exchange).

    pytest benchmarks/bench_jaxdecomp.py --benchmark-json=out/jaxdecomp.json
    python benchmarks/report.py out/jaxdecomp.json
"""

import math

import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.jaxdecomp

SIZES = [128, 256]
MESHES = [pytest.param((4, 2), id="4x2"), pytest.param((2, 4), id="2x4")]
HALO = 2


def _jaxdecomp():
    pytest.importorskip("packaging")  # jaxdecomp 0.3.1 imports it without declaring it
    return pytest.importorskip("jaxdecomp")


def _mesh(shape, axis_type):
    devices = jax.devices()[: math.prod(shape)]
    return distla.make_mesh(shape, ("x", "y"), devices=devices, axis_types=axis_type)


def _volume(n, shape, axis_type, dtype=np.float32):
    x = np.random.default_rng(0).standard_normal((n, n, n), dtype=np.float32).astype(dtype)
    return jax.device_put(x, NamedSharding(_mesh(shape, axis_type), P("x", "y")))


def _info(fn, x, n, shape, name, role, op, model=None):
    cost = distla.cost(fn, x)
    info = dict(role=role, name=name, op=op, n=n, mesh=f"{shape[0]}x{shape[1]}")
    info.update(collective_bytes=cost.total_collective_bytes, peak_bytes=cost.peak_memory_bytes)
    if model is not None:
        info["model_bytes"] = model
    return info


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_pfft3d(run, benchmark, n, shape):
    benchmark.group = f"pfft3d n={n} {shape[0]}x{shape[1]}"
    x = _volume(n, shape, AxisType.Auto, np.complex64)
    fn = distla.jaxdecomp.fft.pfft3d
    model = distla.fft.model_bytes((n, n, n), shape, order="yzx")
    run(fn, (x,), **_info(fn, x, n, shape, "distla pfft3d complex64", "distla", "pfft3d", model))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_prfft3d(run, benchmark, n, shape):
    benchmark.group = f"pfft3d n={n} {shape[0]}x{shape[1]}"
    x = _volume(n, shape, AxisType.Auto)
    fn = distla.jaxdecomp.fft.prfft3d
    run(fn, (x,), **_info(fn, x, n, shape, "distla prfft3d float32", "distla", "prfft3d"))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_jaxdecomp_pfft3d(run, benchmark, n, shape):
    jd = _jaxdecomp()
    benchmark.group = f"pfft3d n={n} {shape[0]}x{shape[1]}"
    x = _volume(n, shape, AxisType.Auto, np.complex64)
    name = "jaxdecomp.fft.pfft3d"
    run(jd.fft.pfft3d, (x,), **_info(jd.fft.pfft3d, x, n, shape, name, "baseline", "pfft3d"))


def _halo_model(n, shape):
    """Bytes one device receives: two ghost slabs per split axis, the second axis's over
    the block as the first exchange left it (halo_exchange's docstring)."""
    local = (n // shape[0], n // shape[1], n)
    return 4 * (2 * HALO * local[1] * local[2] + 2 * HALO * local[0] * local[2])


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_halo_exchange(run, benchmark, n, shape, axis_type):
    benchmark.group = f"halo n={n} {shape[0]}x{shape[1]}"
    x = _volume(n, shape, axis_type)
    kind = "explicit" if axis_type == AxisType.Explicit else "auto"

    def fn(v):
        return distla.jaxdecomp.halo_exchange(v, (HALO, HALO), (True, True))

    info = _info(fn, x, n, shape, f"distla halo_exchange {kind}", "distla", "halo")
    info["model_bytes"] = _halo_model(n, shape)
    run(fn, (x,), **info)


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_jaxdecomp_halo_exchange(run, benchmark, n, shape):
    jd = _jaxdecomp()
    benchmark.group = f"halo n={n} {shape[0]}x{shape[1]}"
    x = _volume(n, shape, AxisType.Auto)

    def fn(v):
        return jd.halo_exchange(v, (HALO, HALO), (True, True))

    run(fn, (x,), **_info(fn, x, n, shape, "jaxdecomp.halo_exchange", "baseline", "halo"))


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_one_device_copy(run, benchmark, n, shape):
    """Scale: one read and one write of the whole volume on one device."""
    benchmark.group = f"halo n={n} {shape[0]}x{shape[1]}"
    x = jax.device_put(np.ones((n, n, n), np.float32), jax.devices()[0])
    fn = jax.jit(lambda v: v * np.float32(1))
    run(fn, (x,), role="baseline", name="one device: a copy", op="halo", n=n, mesh="1x1")
