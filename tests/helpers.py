"""Reference checks shared by the tests: DESIGN.md's scaled residual ratios."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

# LAPACK's pass mark for its scaled ratios.
THRESHOLD = 30.0


def eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def random_matrix(rng, shape, dtype):
    dtype = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def place(x, mesh, spec=P("x", "y")):
    """device_put in ``spec``, dropping axes that do not divide (as jax requires)."""
    entries = []
    for dim, entry in enumerate((tuple(spec) + (None,) * x.ndim)[: x.ndim]):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
        entries.append(entry if x.shape[dim] % parts == 0 else None)
    return jax.device_put(x, NamedSharding(mesh, P(*entries)))


def matmul_ratio(c, a, b) -> float:
    """||C - A B||_F / (||A||_F ||B||_F k eps), the reference product in float64/complex128."""
    a64 = np.asarray(a).astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    b64 = np.asarray(b).astype(np.complex128 if np.iscomplexobj(b) else np.float64)
    ref = a64 @ b64
    k = a64.shape[1]
    err = np.linalg.norm(np.asarray(c).astype(ref.dtype) - ref)
    scale = np.linalg.norm(a64) * np.linalg.norm(b64) * k * eps(np.asarray(c).dtype)
    return float(err / scale) if scale else float(err)


def has_layout(x, mesh, spec) -> bool:
    """True if ``x`` is laid out as ``spec`` on ``mesh`` (trailing ``None``s do not matter)."""
    return x.sharding.is_equivalent_to(NamedSharding(mesh, spec), x.ndim)
