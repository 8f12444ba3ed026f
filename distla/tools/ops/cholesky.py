"""The ``cholesky`` operation: ``distla.linalg.cholesky`` of one positive definite matrix."""

from __future__ import annotations

import math

import numpy as np

from ..ratios import cholesky_ratio, wide
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, cplx, dims, random, round_to


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return size
    raise ScalingError(f"cholesky sizes are N (one N x N matrix); got {dims(size)}")


def _make(shape, dtype, rng):
    """``X X^H / n + I``: Hermitian positive definite, well conditioned."""
    (n,) = shape
    x = wide(random((n, n), dtype, rng))
    return (((x @ x.conj().T) / n + np.eye(n)).astype(dtype),)


def build() -> Operation:
    """The ``cholesky`` entry of the table (imports jax and distla)."""
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl
    import scipy.linalg

    import distla

    model = distla.linalg.cholesky_model_bytes

    def cho_factor(a):  # the factor only (cho_factor's flag is no array)
        return jsl.cho_factor(a, lower=True)[0]

    return Operation(
        name="cholesky",
        api="distla.linalg.cholesky",
        expand=_expand,
        describe=lambda s: f"{s[0]}x{s[0]}",
        default_sizes=((1024,), (2048,)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_make,
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                "distla.linalg.cholesky",
                distla.linalg.cholesky,
                "mesh",
                model=lambda s, grid, dt: model(s[0], grid, dt),
                model_text="docs/cholesky.md: relayout, panel broadcasts, trailing updates",
            ),
        ),
        baselines=(
            Impl(
                "one device: scipy.linalg.cholesky",
                lambda a: scipy.linalg.cholesky(a, lower=True),
                "host",
            ),
            Impl("one device: jax.scipy.linalg.cho_factor", cho_factor, "device"),
            Impl("jnp.linalg.cholesky on the sharded input (XLA)", jnp.linalg.cholesky, "auto"),
        ),  # fmt: skip
        flops=lambda s, dt: s[0] ** 3 / 3.0 * cplx(dt),
        check=lambda inputs, l_: cholesky_ratio(inputs[0], l_),
        weak=lambda s, p: (round_to(s[0] * math.sqrt(p), 16),),
        weak_rule="n grows as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: at_least_grid(s, grid, "cholesky size"),
        footprint=lambda s, dt: 2 * s[0] * s[0] * np.dtype(dt).itemsize,
        model_source="docs/cholesky.md",
        demo=Demo(
            label="cholesky",
            group="cholesky",
            size=lambda scale, p: (round_to(2048 * scale, 64),),
            grid=distla.layout.squarest_grid,
            shape_text=lambda s: f"{s[0]}x{s[0]}",
        ),
    )
