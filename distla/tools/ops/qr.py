"""The ``qr`` operation: ``distla.linalg.qr`` (reduced) of one matrix, any (m, n)."""

from __future__ import annotations

import math

import numpy as np

from ..ratios import qr_ratio
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, cplx, dims, random, round_to


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0], size[0])
    if len(size) == 2:
        return size
    raise ScalingError(f"qr sizes are N (square) or MxN; got {dims(size)}")


def _flops(shape, dtype) -> float:
    """Householder QR and forming the reduced Q: about 4mk² − 4k³/3, k = min(m, n)."""
    m, n = shape
    k = min(m, n)
    return (2.0 * m * n * k - 2.0 / 3.0 * k**3 + 2.0 * m * k * k - 2.0 / 3.0 * k**3) * cplx(dtype)


def build() -> Operation:
    """The ``qr`` entry of the table (imports jax and distla)."""
    import jax.numpy as jnp
    import scipy.linalg

    import distla

    model = distla.linalg.qr_model_bytes
    return Operation(
        name="qr",
        api="distla.linalg.qr",
        expand=_expand,
        describe=dims,
        default_sizes=((512,), (1024,)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=lambda s, dt, rng: (random(s, dt, rng),),
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                "distla.linalg.qr",
                distla.linalg.qr,
                "mesh",
                model=lambda s, grid, dt: model(s[0], s[1], grid, dt),
                model_text="docs/qr.md: TSQR's R factors, or Householder panels and updates",
            ),
        ),
        baselines=(
            Impl(
                "one device: scipy.linalg.qr", lambda a: scipy.linalg.qr(a, mode="economic"), "host"
            ),
            Impl("one device: jnp.linalg.qr", jnp.linalg.qr, "device"),
            Impl("jnp.linalg.qr on the sharded input (XLA)", jnp.linalg.qr, "auto"),
        ),  # fmt: skip
        flops=_flops,
        check=lambda inputs, qr: qr_ratio(inputs[0], *qr),
        weak=lambda s, p: tuple(round_to(x * math.sqrt(p), 16) for x in s),
        weak_rule="both dimensions grow as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: at_least_grid(s, grid, "qr size"),
        footprint=lambda s, dt: (2 * s[0] * s[1] + s[1] * s[1]) * np.dtype(dt).itemsize,
        model_source="docs/qr.md",
        demo=Demo(
            label="qr",
            group="qr",
            size=lambda scale, p: (round_to(1024 * scale, 64),) * 2,
            grid=distla.layout.squarest_grid,
            shape_text=dims,
        ),
    )
