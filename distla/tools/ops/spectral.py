"""The ``eigh`` and ``svd`` operations: ``distla.linalg.eigh`` and ``distla.linalg.svd``."""

from __future__ import annotations

import math

import numpy as np

from ..ratios import eigh_ratio, svd_ratio, wide
from .base import Demo, Impl, Operation, ScalingError, at_least_grid, cplx, dims, random, round_to

_DTYPES = ("float32", "float64", "complex64", "complex128")
_WEAK_RULE = "n grows as sqrt(p): memory per device stays constant"


def _expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return size
    raise ScalingError(f"eigh and svd sizes are N (one N x N matrix); got {dims(size)}")


def _hermitian(shape, dtype, rng):
    (n,) = shape
    x = wide(random((n, n), dtype, rng))
    return (((x + x.conj().T) / 2).astype(dtype),)


def _model_text() -> str:
    return "docs/spectral.md (no closed-form model: bytes are reported, not compared)"


def _demo(label: str) -> Demo:
    import distla

    return Demo(
        label=label,
        group="spectral",
        size=lambda scale, p: (round_to(512 * scale, 64),),
        grid=distla.layout.squarest_grid,
        shape_text=lambda s: f"{s[0]}x{s[0]}",
    )


def eigh() -> Operation:
    """The ``eigh`` entry of the table (imports jax and distla)."""
    import jax.numpy as jnp
    import scipy.linalg

    import distla

    return Operation(
        name="eigh",
        api="distla.linalg.eigh",
        expand=_expand,
        describe=lambda s: f"{s[0]}x{s[0]}",
        default_sizes=((512,), (1024,)),
        dtypes=_DTYPES,
        make=_hermitian,
        specs=lambda mesh: (None,),
        variants=(
            Impl("distla.linalg.eigh", distla.linalg.eigh, "mesh", model_text=_model_text()),
        ),
        baselines=(
            Impl("one device: scipy.linalg.eigh", scipy.linalg.eigh, "host"),
            Impl("one device: jnp.linalg.eigh", jnp.linalg.eigh, "device"),
            Impl("jnp.linalg.eigh on the sharded input (XLA)", jnp.linalg.eigh, "auto"),
        ),
        # LAPACK's syevd with vectors: about 9 n^3 real flops (4/3 n^3 tridiagonal reduction,
        # the back-transformation and the divide and conquer).
        flops=lambda s, dt: 9.0 * s[0] ** 3 * cplx(dt),
        check=lambda inputs, wv: eigh_ratio(inputs[0], *wv),
        weak=lambda s, p: (round_to(s[0] * math.sqrt(p), 16),),
        weak_rule=_WEAK_RULE,
        min_dim=lambda s, grid: at_least_grid(s, grid, "eigh size"),
        footprint=lambda s, dt: 2 * s[0] * s[0] * np.dtype(dt).itemsize,
        model_source="docs/spectral.md",
        demo=_demo("eigh"),
    )


def svd() -> Operation:
    """The ``svd`` entry of the table (imports jax and distla)."""
    import functools

    import jax.numpy as jnp
    import scipy.linalg

    import distla

    reduced = functools.partial(distla.linalg.svd, full_matrices=False)
    return Operation(
        name="svd",
        api="distla.linalg.svd",
        expand=_expand,
        describe=lambda s: f"{s[0]}x{s[0]}",
        default_sizes=((512,), (1024,)),
        dtypes=_DTYPES,
        make=lambda s, dt, rng: (random((s[0], s[0]), dt, rng),),
        specs=lambda mesh: (None,),
        variants=(Impl("distla.linalg.svd", reduced, "mesh", model_text=_model_text()),),
        baselines=(
            Impl(
                "one device: scipy.linalg.svd",
                functools.partial(scipy.linalg.svd, full_matrices=False),
                "host",
            ),
            Impl(
                "one device: jnp.linalg.svd",
                functools.partial(jnp.linalg.svd, full_matrices=False),
                "device",
            ),
            Impl(
                "jnp.linalg.svd on the sharded input (XLA)",
                functools.partial(jnp.linalg.svd, full_matrices=False),
                "auto",
            ),
        ),  # fmt: skip
        # LAPACK's gesdd with vectors: about 22 n^3 real flops for a square matrix.
        flops=lambda s, dt: 22.0 * s[0] ** 3 * cplx(dt),
        check=lambda inputs, usv: svd_ratio(inputs[0], *usv),
        weak=lambda s, p: (round_to(s[0] * math.sqrt(p), 16),),
        weak_rule=_WEAK_RULE,
        min_dim=lambda s, grid: at_least_grid(s, grid, "svd size"),
        footprint=lambda s, dt: 4 * s[0] * s[0] * np.dtype(dt).itemsize,
        model_source="docs/spectral.md",
        demo=_demo("svd"),
    )
