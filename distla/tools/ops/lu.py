"""The ``solve`` and ``lu`` operations: the distributed LU of ``distla.linalg``."""

from __future__ import annotations

import math

import numpy as np

from ..ratios import lu_factor_ratio, solve_ratio
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, cplx, dims, random, round_to


def _expand(size: tuple[int, ...], op: str, rhs: bool) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0], 0) if rhs else (size[0],)
    if rhs and len(size) == 2:
        return size
    form = "N (b a vector) or NxK (K right-hand sides)" if rhs else "N"
    raise ScalingError(f"{op} sizes are {form}; got {dims(size)}")


def _solve_make(shape, dtype, rng):
    n, k = shape
    b = random((n,) if k == 0 else (n, k), dtype, rng)
    return random((n, n), dtype, rng), b


def _solve_flops(shape, dtype) -> float:
    n, k = shape
    return (2.0 / 3.0 * n**3 + 2.0 * n * n * max(k, 1)) * cplx(dtype)


def _weak(shape, p):
    return (round_to(shape[0] * math.sqrt(p), 16), *shape[1:])


_WEAK_RULE = "n grows as sqrt(p): memory per device stays constant"
_DTYPES = ("float32", "float64", "complex64", "complex128")


def solve() -> Operation:
    """The ``solve`` entry of the table (imports jax and distla)."""
    import jax.numpy as jnp
    import scipy.linalg

    import distla

    model = distla.linalg.lu_model_bytes
    return Operation(
        name="solve",
        api="distla.linalg.solve",
        expand=lambda s: _expand(s, "solve", rhs=True),
        describe=lambda s: f"{s[0]}x{s[0]}, b {s[0]}" + (f"x{s[1]}" if s[1] else ""),
        default_sizes=((512,), (1024,)),  # jnp.linalg.solve on 2x4 gathers: slow
        dtypes=_DTYPES,
        make=_solve_make,
        specs=lambda mesh: (None, None),
        variants=(
            Impl(
                "distla.linalg.solve",
                distla.linalg.solve,
                "mesh",
                model=lambda s, grid, dt: model(s[0], grid, dt, rhs=s[1]),
                model_text="docs/lu.md: relayout, panel gathers and broadcasts, swaps, solves",
            ),
        ),
        baselines=(
            Impl("one device: scipy.linalg.solve", scipy.linalg.solve, "host"),
            Impl("one device: jnp.linalg.solve", jnp.linalg.solve, "device"),
            Impl("jnp.linalg.solve on the sharded input (XLA)", jnp.linalg.solve, "auto"),
        ),
        flops=_solve_flops,
        check=lambda inputs, x: solve_ratio(inputs[0], x, inputs[1]),
        weak=_weak,
        weak_rule=_WEAK_RULE,
        min_dim=lambda s, grid: at_least_grid(s[:1], grid, "solve size"),
        footprint=lambda s, dt: (s[0] * s[0] + 2 * s[0] * max(s[1], 1)) * np.dtype(dt).itemsize,
        model_source="docs/lu.md",
        demo=Demo(
            label="solve (LU)",
            group="solve",
            size=lambda scale, p: (round_to(2048 * scale, 64),),
            grid=distla.layout.squarest_grid,
            shape_text=lambda s: f"{s[0]}x{s[0]}",
        ),
    )


def lu() -> Operation:
    """The ``lu`` entry of the table (imports jax and distla)."""
    import jax.scipy.linalg as jsl
    import scipy.linalg

    import distla

    model = distla.linalg.lu_model_bytes
    return Operation(
        name="lu",
        api="distla.linalg.lu_factor",
        expand=lambda s: _expand(s, "lu", rhs=False),
        describe=lambda s: f"{s[0]}x{s[0]}",
        default_sizes=((1024,), (2048,)),
        dtypes=_DTYPES,
        make=lambda s, dt, rng: (random((s[0], s[0]), dt, rng),),
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                "distla.linalg.lu_factor",
                distla.linalg.lu_factor,
                "mesh",
                model=lambda s, grid, dt: model(s[0], grid, dt),
                model_text="docs/lu.md: relayout + panel gathers/broadcasts + interchanges",
            ),
        ),
        baselines=(
            Impl("one device: scipy.linalg.lu_factor", scipy.linalg.lu_factor, "host"),
            Impl("one device: jax.scipy.linalg.lu_factor", jsl.lu_factor, "device"),
            Impl("jax.scipy.linalg.lu_factor on the sharded input (XLA)", jsl.lu_factor, "auto"),
        ),
        flops=lambda s, dt: 2.0 / 3.0 * s[0] ** 3 * cplx(dt),
        check=lambda inputs, result: lu_factor_ratio(inputs[0], *result),
        weak=_weak,
        weak_rule=_WEAK_RULE,
        min_dim=lambda s, grid: at_least_grid(s, grid, "lu size"),
        footprint=lambda s, dt: 2 * s[0] * s[0] * np.dtype(dt).itemsize,
        model_source="docs/lu.md",
    )
