"""The ``fft`` and ``rfft`` operations: ``distla.fft.fftn`` and ``rfftn`` of 3D volumes."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ratios import fft_ratio, wide
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, dims, random, round_to


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0],) * 3
    if len(size) == 3:
        return size
    raise ScalingError(f"fft sizes are N (an N^3 volume) or XxYxZ; got {dims(size)}")


def _check(real: bool) -> Callable[[tuple[np.ndarray, ...], Any], float]:
    def check(inputs, y) -> float:
        (x,) = inputs
        ref = np.fft.rfftn(wide(x)) if real else np.fft.fftn(wide(x))
        return fft_ratio(y, ref, points=x.size)

    return check


def _jaxdecomp(name: str) -> Callable[..., Any]:
    def call(x):
        import packaging  # noqa: F401  (jaxdecomp 0.3.1 imports it without declaring it)
        from jaxdecomp import fft

        return getattr(fft, name)(x)

    call.__name__ = f"jaxdecomp.fft.{name}"
    return call


def _transposed_squarest(devices: int) -> tuple[int, int]:
    import distla

    pr, pc = distla.layout.squarest_grid(devices)
    return pc, pr  # 4x2 on 8 devices


def _build(real: bool) -> Operation:
    import jax.numpy as jnp

    import distla

    jfn = jnp.fft.rfftn if real else jnp.fft.fftn
    name = "rfftn" if real else "fftn"
    fn = getattr(distla.fft, name)

    def model(shape, grid, dtype) -> float:
        spectrum = np.result_type(dtype, np.complex64)  # what the all-to-alls move
        return distla.fft.model_bytes(shape, grid, real=real, itemsize=np.dtype(spectrum).itemsize)

    return Operation(
        name="rfft" if real else "fft",
        api=f"distla.fft.{name}",
        expand=_expand,
        describe=dims,
        default_sizes=((64,), (128,)),
        dtypes=("float32", "float64") if real else ("complex64", "complex128"),
        make=lambda s, dt, rng: (random(s, dt, rng),),
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                f"distla.fft.{name}",
                fn,
                "mesh",
                model=model,
                model_text="all-to-alls of the local spectrum, (g−1)/g each: "
                "distla.fft.model_bytes",
            ),
        ),
        baselines=(
            Impl(f"one device: jnp.fft.{name}", jfn, "device"),
            Impl(f"jnp.fft.{name} on the sharded input (XLA)", jfn, "auto"),
            # jaxdecomp 0.3.1's prfft3d raises "Not implemented": no real-input peer.
            *(() if real else (Impl("jaxdecomp.fft.pfft3d", _jaxdecomp("pfft3d"), "auto"),)),
        ),
        flops=lambda s, dt: (2.5 if real else 5.0) * math.prod(s) * math.log2(math.prod(s)),
        check=_check(real),
        weak=lambda s, p: tuple(round_to(x * p ** (1 / 3), 8) for x in s),
        weak_rule="every dimension grows as p^(1/3): points per device stay constant",
        min_dim=lambda s, grid: at_least_grid(s[:2], grid, "fft size"),
        footprint=lambda s, dt: 2 * math.prod(s) * np.dtype(dt).itemsize * (2 if real else 1),
        model_source="docs/fft.md",
        demo=Demo(
            label=name,
            group="fft",
            size=lambda scale, p: (round_to(256 * scale, 16),),
            grid=_transposed_squarest,
            shape_text=dims,
        ),
    )


def fft() -> Operation:
    """The ``fft`` entry of the table (imports jax and distla)."""
    return _build(real=False)


def rfft() -> Operation:
    """The ``rfft`` entry of the table (imports jax and distla)."""
    return _build(real=True)
