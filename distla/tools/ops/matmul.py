"""The ``matmul`` operation: ``distla.matmul`` (SUMMA and, on square meshes, Cannon)."""

from __future__ import annotations

import functools
import math

import numpy as np

from ..ratios import matmul_ratio
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, cplx, dims, random, round_to


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0],) * 3
    if len(size) == 3:
        return size
    raise ScalingError(f"matmul sizes are N (square) or MxKxN; got {dims(size)}")


def _make(shape, dtype, rng):
    m, k, n = shape
    return random((m, k), dtype, rng), random((k, n), dtype, rng)


def _check(inputs, c) -> float:
    a, b = inputs
    return matmul_ratio(c, a, b)


def build() -> Operation:
    """The operation's entry of the table (imports jax and distla)."""
    import jax.numpy as jnp

    import distla
    from distla.matmul import model_bytes

    def call(algorithm):
        fn = functools.partial(distla.matmul, algorithm=algorithm)
        fn.__name__ = f"distla.matmul[{algorithm}]"  # type: ignore[attr-defined]
        return fn

    def model(algorithm):
        return lambda s, grid, dt: model_bytes(s, grid, dt, algorithm=algorithm)

    return Operation(
        name="matmul",
        api="distla.matmul",
        expand=_expand,
        describe=dims,
        default_sizes=((1024,), (2048,)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_make,
        specs=lambda mesh: (None, None),
        variants=(
            Impl(
                "distla.matmul summa",
                call("summa"),
                "mesh",
                model=model("summa"),
                model_text="(m/pr)·k·(pc−1)/pc + k·(n/pc)·(pr−1)/pr elements "
                "(distla.matmul.model_bytes)",
            ),
            Impl(
                "distla.matmul cannon",
                call("cannon"),
                "mesh",
                applies=lambda grid: grid[0] == grid[1] > 1,
                model=model("cannon"),
                model_text="(m·k + k·n)/q elements on a q x q mesh",
            ),
        ),
        baselines=(
            Impl("one device: jnp.matmul", jnp.matmul, "device"),
            Impl("jnp.matmul on the sharded input (XLA)", jnp.matmul, "auto"),
        ),
        flops=lambda s, dt: 2.0 * s[0] * s[1] * s[2] * cplx(dt),
        check=_check,
        weak=lambda s, p: tuple(round_to(x * math.sqrt(p), 16) for x in s),
        weak_rule="every dimension grows as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: at_least_grid(s, grid, "matmul size"),
        footprint=lambda s, dt: (s[0] * s[1] + s[1] * s[2] + s[0] * s[2]) * np.dtype(dt).itemsize,
        model_source="docs/matmul.md",
        demo=Demo(
            label="matmul (summa)",
            group="matmul",
            size=lambda scale, p: (round_to(4096 * scale, 64),),
            grid=distla.layout.squarest_grid,
            shape_text=dims,
        ),
    )
