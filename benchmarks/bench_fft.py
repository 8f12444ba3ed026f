"""distla.fft against jaxdecomp's pfft3d, XLA's partitioning of jnp.fft.fftn and one device.

Groups are ``fft n=N MESH`` (complex64 fftn) and ``rfft n=N MESH`` (float32
rfftn); every case of a group runs in the same session and
benchmarks/report.py turns the medians into ratios (docs/benchmarks-log.md).

    pytest benchmarks/bench_fft.py --benchmark-json=out/fft.json
    python benchmarks/report.py out/fft.json

Every library is called the way its users call it: ``distla.fft.fftn`` and
``jaxdecomp.fft.pfft3d`` are jitted inside (distla's own jit compiles with
``distla.fft.cpu_compiler_options``); ``jax.jit(distla.fft.fftn)`` shows the
same kernel compiled inside a caller's jit, without those options. jaxdecomp
only runs on ``Auto`` meshes.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla

SIZES = [128, 256]
MESHES = [
    pytest.param((4, 2), id="4x2"),
    pytest.param((2, 4), id="2x4"),
    pytest.param((8, 1), id="slab-8x1"),
]


def _jaxdecomp():
    pytest.importorskip("packaging")  # jaxdecomp 0.3.1 imports it without declaring it
    import packaging  # noqa: F401

    return pytest.importorskip("jaxdecomp")


def _mesh(shape, axis_type):
    devices = jax.devices()[: math.prod(shape)]
    return distla.make_mesh(shape, ("x", "y"), devices=devices, axis_types=axis_type)


def _volume(n, real):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n, n), dtype=np.float32)
    if real:
        return x
    return (x + 1j * rng.standard_normal((n, n, n), dtype=np.float32)).astype(np.complex64)


def _sharded(x, shape, axis_type):
    return jax.device_put(x, NamedSharding(_mesh(shape, axis_type), P("x", "y")))


def _kind(x):
    return "explicit" if AxisType.Explicit in x.sharding.mesh.abstract_mesh.axis_types else "auto"


def _flops(n, real):
    return (2.5 if real else 5.0) * n**3 * math.log2(n**3)


def _info(n, shape, real, fn, x, name, role="distla", model=True, **kw):
    cost = distla.cost(fn, x)
    order = "yzx" if "pfft3d" in name else "xyz"
    info = dict(
        role=role,
        name=name,
        op="rfft" if real else "fft",
        n=n,
        mesh=f"{shape[0]}x{shape[1]}",
        dtype="float32" if real else "complex64",
        flops=_flops(n, real),
        collective_bytes=cost.total_collective_bytes,
        peak_bytes=cost.peak_memory_bytes,
        **kw,
    )
    if model:
        info["model_bytes"] = distla.fft.model_bytes((n, n, n), shape, real=real, order=order)
    return info


def _group(real, n, shape):
    return f"{'rfft' if real else 'fft'} n={n} {shape[0]}x{shape[1]}"


@pytest.mark.parametrize("real", [False, True], ids=["fft", "rfft"])
@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_one_device(run, benchmark, n, shape, real):
    benchmark.group = _group(real, n, shape)
    d0 = jax.devices()[0]
    fn = jnp.fft.rfftn if real else jnp.fft.fftn
    run(
        jax.jit(fn),
        (jax.device_put(_volume(n, real), d0),),
        role="baseline",
        name=f"one device: jnp.fft.{fn.__name__}",
        op="rfft" if real else "fft",
        n=n,
        mesh="1x1",
        dtype="float32" if real else "complex64",
        algorithm="one-device",
        flops=_flops(n, real),
    )


@pytest.mark.parametrize("real", [False, True], ids=["fft", "rfft"])
@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_jaxdecomp(run, benchmark, n, shape, real):
    """jaxdecomp's pfft3d (pure-JAX backend); a real input is transformed as complex."""
    jd = _jaxdecomp()
    benchmark.group = _group(real, n, shape)
    x = _sharded(_volume(n, real), shape, AxisType.Auto)
    run(
        jd.fft.pfft3d,
        (x,),
        **_info(n, shape, real, jd.fft.pfft3d, x, "jaxdecomp.fft.pfft3d", "baseline", False),
        algorithm="jaxdecomp",
    )


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_xla_sharded(run, benchmark, n, shape):
    benchmark.group = _group(False, n, shape)
    x = _sharded(_volume(n, False), shape, AxisType.Auto)
    fn = jax.jit(jnp.fft.fftn)
    run(
        fn,
        (x,),
        **_info(
            n, shape, False, fn, x, "XLA: jnp.fft.fftn on the sharded input", "baseline", False
        ),
        algorithm="xla",
    )


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_fftn(run, benchmark, n, shape, axis_type):
    benchmark.group = _group(False, n, shape)
    x = _sharded(_volume(n, False), shape, axis_type)
    fn = distla.fft.fftn
    name = f"distla.fft.fftn {_kind(x)}"
    run(fn, (x,), **_info(n, shape, False, fn, x, name), algorithm="auto")


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_fftn_in_callers_jit(run, benchmark, n, shape):
    benchmark.group = _group(False, n, shape)
    x = _sharded(_volume(n, False), shape, AxisType.Explicit)
    fn = jax.jit(distla.fft.fftn)
    run(
        fn,
        (x,),
        **_info(n, shape, False, fn, x, "jax.jit(distla.fft.fftn) explicit"),
        algorithm="auto",
    )


@pytest.mark.parametrize("algorithm", ["pencil", "slab-pencil"])
@pytest.mark.parametrize("n", SIZES)
def test_fftn_algorithms(run, benchmark, n, algorithm):
    shape = (4, 2)
    benchmark.group = _group(False, n, shape)
    x = _sharded(_volume(n, False), shape, AxisType.Explicit)
    fn = functools.partial(distla.fft.fftn, algorithm=algorithm)
    name = f"distla.fft.fftn algorithm={algorithm!r}"
    info = _info(n, shape, False, fn, x, name, model=False, algorithm=algorithm)
    info["model_bytes"] = distla.fft.model_bytes((n, n, n), shape, algorithm=algorithm)
    run(fn, (x,), **info)


@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_pfft3d(run, benchmark, n, shape):
    benchmark.group = _group(False, n, shape)
    x = _sharded(_volume(n, False), shape, AxisType.Auto)
    fn = distla.fft.pfft3d
    run(fn, (x,), **_info(n, shape, False, fn, x, "distla.fft.pfft3d auto"), algorithm="auto")


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("shape", MESHES)
@pytest.mark.parametrize("n", SIZES)
def test_rfftn(run, benchmark, n, shape, axis_type):
    benchmark.group = _group(True, n, shape)
    x = _sharded(_volume(n, True), shape, axis_type)
    fn = distla.fft.rfftn
    name = f"distla.fft.rfftn {_kind(x)}"
    run(fn, (x,), **_info(n, shape, True, fn, x, name), algorithm="auto")


# --- a batch of fields: B volumes, the batch over the first mesh axis ---------

BATCH = 8


def _batch_group(n, shape):
    return f"fft batch B={BATCH} n={n} {shape[0]}x{shape[1]}"


def _batch_info(n, shape, name, role, fn=None, x=None, **kw):
    info = dict(
        role=role,
        name=name,
        op="fft-batch",
        n=n,
        batch=BATCH,
        mesh=f"{shape[0]}x{shape[1]}",
        dtype="complex64",
        flops=BATCH * _flops(n, False),
        **kw,
    )
    if fn is not None:
        cost = distla.cost(fn, x)
        info.update(collective_bytes=cost.total_collective_bytes, peak_bytes=cost.peak_memory_bytes)
    if role == "distla":  # B/pa separate slab FFTs over the second mesh axis on each device
        info["model_bytes"] = BATCH // shape[0] * distla.fft.model_bytes((n, n, n), (shape[1],))
    return info


def _fields(n, shape, axis_type):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, n, n, n), dtype=np.float32).astype(np.complex64)
    if shape is None:
        return jax.device_put(x, jax.devices()[0])
    return jax.device_put(x, NamedSharding(_mesh(shape, axis_type), P("x", "y", None, None)))


@pytest.mark.parametrize("n", [128])
def test_batch_one_device_vmap(run, benchmark, n):
    shape = (4, 2)
    benchmark.group = _batch_group(n, shape)
    fn = jax.jit(jax.vmap(jnp.fft.fftn))
    name = "one device: jax.vmap(jnp.fft.fftn)"
    run(fn, (_fields(n, None, None),), **_batch_info(n, shape, name, "baseline"))


@pytest.mark.parametrize("n", [128])
def test_batch_xla_sharded(run, benchmark, n):
    shape = (4, 2)
    benchmark.group = _batch_group(n, shape)
    x = _fields(n, shape, AxisType.Auto)
    fn = jax.jit(functools.partial(jnp.fft.fftn, axes=(1, 2, 3)))
    name = "XLA: jnp.fft.fftn(x, axes=(1, 2, 3)), sharded"
    run(fn, (x,), **_batch_info(n, shape, name, "baseline", fn, x))


@pytest.mark.parametrize("axis_type", [AxisType.Explicit, AxisType.Auto], ids=["explicit", "auto"])
@pytest.mark.parametrize("n", [128])
def test_batch_distla(run, benchmark, n, axis_type):
    shape = (4, 2)
    benchmark.group = _batch_group(n, shape)
    x = _fields(n, shape, axis_type)
    fn = functools.partial(distla.fft.fftn, axes=(1, 2, 3))
    name = f"distla.fft.fftn(x, axes=(1, 2, 3)) {_kind(x)}"
    run(fn, (x,), **_batch_info(n, shape, name, "distla", fn, x))


@pytest.mark.parametrize("n", [128])
def test_batch_distla_vmap(run, benchmark, n):
    shape = (4, 2)
    benchmark.group = _batch_group(n, shape)
    x = _fields(n, shape, AxisType.Explicit)
    fn = jax.jit(jax.vmap(distla.fft.fftn))
    name = "jax.jit(jax.vmap(distla.fft.fftn)) explicit"
    run(fn, (x,), **_batch_info(n, shape, name, "distla", fn, x))
