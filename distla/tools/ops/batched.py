"""The ``batched-solve`` operation: ``distla.linalg.solve`` on a stack sharded along its batch."""

from __future__ import annotations

import numpy as np

from ..ratios import solve_ratio
from .base import Demo, Impl, Operation, ScalingError, cplx, dims, random, round_to


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 2:
        return size
    raise ScalingError(f"batched-solve sizes are BxN (B matrices of N x N); got {dims(size)}")


def _make(shape, dtype, rng):
    bsz, n = shape
    return random((bsz, n, n), dtype, rng), random((bsz, n, 1), dtype, rng)


def _fits(shape, grid) -> str | None:
    p = grid[0] * grid[1]
    if shape[0] % p:
        return (
            f"batched-solve batch {shape[0]} does not fit the {dims(grid)} mesh: the batch "
            f"is split over all {p} devices and must be a multiple of {p}"
        )
    return None


def _batch_spec(mesh):
    from jax.sharding import PartitionSpec as P

    return P(tuple(mesh.axis_names), None, None)


def build() -> Operation:
    """The operation's entry of the table (imports jax and distla)."""
    import jax.numpy as jnp
    import numpy.linalg

    import distla

    return Operation(
        name="batched-solve",
        api="distla.linalg.solve (a stack sharded along its batch)",
        expand=_expand,
        describe=lambda s: f"{s[0]} x ({s[1]}x{s[1]}), b {s[0]}x{s[1]}x1",
        default_sizes=((512, 64), (64, 256)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_make,
        specs=lambda mesh: (_batch_spec(mesh), _batch_spec(mesh)),
        variants=(
            Impl(
                "distla.linalg.solve (batched)",
                distla.linalg.solve,
                "mesh",
                model=lambda s, grid, dt: 0.0,
                model_text="0: each device solves its own matrices",
            ),
        ),
        baselines=(  # numpy's batched solve is no yardstick: much slower than jax's
            Impl("one device: jnp.linalg.solve", jnp.linalg.solve, "device"),
            Impl("one device: numpy.linalg.solve", numpy.linalg.solve, "host"),
            Impl("jnp.linalg.solve on the sharded input (XLA)", jnp.linalg.solve, "auto"),
        ),
        flops=lambda s, dt: s[0] * (2.0 / 3.0 * s[1] ** 3 + 2.0 * s[1] ** 2) * cplx(dt),
        check=lambda inputs, x: solve_ratio(inputs[0], x, inputs[1]),
        weak=lambda s, p: (s[0] * p, s[1]),
        weak_rule="the batch grows as p: matrices per device stay constant",
        min_dim=_fits,
        footprint=lambda s, dt: s[0] * (s[1] * s[1] + 2 * s[1]) * np.dtype(dt).itemsize,
        model_source="batched solves move nothing (docs/batched.md)",
        demo=Demo(
            label="batched solve",
            group="batched",
            size=lambda scale, p: (round_to(4096 * scale, p), 64),
            grid=distla.layout.squarest_grid,
            shape_text=lambda s: f"{s[0]}x{s[1]}x{s[1]}",
        ),
    )
