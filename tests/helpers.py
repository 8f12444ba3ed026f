"""Reference checks shared by the tests: LAPACK's scaled residual ratios.

The ratios live in ``distla.tools.ratios`` (one home for the tests, the demo,
the scaling study, the benchmarks and the multi-process worker); this module
re-exports them under the names the tests import, beside the placement
helpers.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from distla.tools.ratios import (  # noqa: F401  (re-exported)
    THRESHOLD,
    eps,
    fft_ratio,
    lu_factor_ratio,
    lu_ratio,
    matmul_ratio,
    random_matrix,
    solve_ratio,
)


def place(x, mesh, spec=P("x", "y")):
    """device_put in ``spec``, dropping axes that do not divide (as jax requires)."""
    entries = []
    for dim, entry in enumerate((tuple(spec) + (None,) * x.ndim)[: x.ndim]):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
        entries.append(entry if x.shape[dim] % parts == 0 else None)
    return jax.device_put(x, NamedSharding(mesh, P(*entries)))


def has_layout(x, mesh, spec) -> bool:
    """True if ``x`` is laid out as ``spec`` on ``mesh`` (trailing ``None``s do not matter)."""
    return x.sharding.is_equivalent_to(NamedSharding(mesh, spec), x.ndim)
