"""jaxdecomp's wavenumber vectors, sharded like the spectrum they index (private)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._core.checks import as_array
from . import _fftnd


def freqs(k, d, *, real: bool):
    """``fftfreq3d`` / ``rfftfreq3d`` (see ``distla.fft``)."""
    k = as_array(k, "k", "distla.fft.fftfreq3d")
    if k.ndim != 3:
        raise ValueError(f"distla.fft.fftfreq3d: k must be 3-D; got shape {k.shape}")
    if jnp.iscomplexobj(k):
        dtype = jnp.float32 if k.dtype == jnp.complex64 else jnp.float64
    else:
        dtype = k.dtype
    x64 = bool(jax.config.jax_enable_x64)
    values = _values(tuple(k.shape), float(d), np.dtype(dtype), real, x64)
    k0, k1, k2 = (jnp.asarray(v) for v in values)
    return tuple(_shard_along(v, k, axis) for axis, v in ((2, k2), (0, k0), (1, k1)))


@functools.lru_cache(maxsize=64)
def _values(shape, d, dtype, real, x64) -> tuple[np.ndarray, ...]:
    """The wavenumbers as host constants, computed by their own compiled program.

    A caller's jit then holds constants, not the ``iota`` arithmetic: jax
    0.10.2's GSPMD partitioner splits that arithmetic of a replicated vector
    along a mesh axis and all-gathers it. Calling the compiled program (not
    the jitted function) runs it now even while the caller is being traced.
    ``x64`` (jax's switch, which decides the dtype) is part of the cache key.
    """
    compiled = _wavenumbers.lower(shape, d, dtype, real).compile()
    return tuple(np.asarray(v) for v in compiled())


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3))
def _wavenumbers(shape, d, dtype, real):
    """jaxdecomp's arithmetic, under jit as there (the same float rounding)."""
    out = []
    for axis in range(3):
        f = jnp.fft.rfftfreq if real and axis == 1 else jnp.fft.fftfreq
        v = f(shape[axis], d=d, dtype=dtype) * 2 * jnp.pi
        out.append(v.reshape([-1 if i == axis else 1 for i in range(3)]))
    return tuple(out)


def _shard_along(v: jax.Array, k: jax.Array, axis: int) -> jax.Array:
    """``v`` sharded as ``k`` is along ``axis`` (where ``k``'s layout is known and divides)."""
    spec = _fftnd.spec_of(k)
    mesh = getattr(getattr(k, "sharding", None), "mesh", None)
    if isinstance(k, jax.core.Tracer) or mesh is None:
        mesh = getattr(jax.typeof(k).sharding, "mesh", None)
    entry = (tuple(spec) + (None,) * 3)[axis]
    names = (entry,) if isinstance(entry, str) else tuple(entry or ())
    if mesh is None or mesh.empty:
        # k on one device (no mesh, or jax's empty one, which an unsharded array and
        # its tracers carry): the vector as jaxdecomp returns it there
        return v
    parts = 1
    for n in names:
        parts *= mesh.shape[n]
    spec = [None, None, None]
    if names and v.shape[axis] % parts == 0:
        spec[axis] = entry
    if isinstance(k, jax.core.Tracer):
        explicit = any(t == jax.sharding.AxisType.Explicit for t in mesh.axis_types)
        if explicit and jax.sharding.get_abstract_mesh().empty:
            # traced outside jax.set_mesh: k's shape is all the program reads of it, so jax
            # drops k and compiles for one device, where a result typed on k's mesh is an
            # error ("Length of device assignment 1 ..."); jnp's replicated constants then
            return v
        return jax.sharding.reshard(v, NamedSharding(mesh, P(*spec)))
    return jax.device_put(v, NamedSharding(mesh, P(*spec)))
