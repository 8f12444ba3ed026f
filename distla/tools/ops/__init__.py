"""The operation table of the scaling study and the demo: one module per family.

``OPERATIONS`` maps each ``--op`` name to a function building its
`Operation` (the builders import jax and distla
lazily, so ``--help`` and argument errors need neither). Adding an operation
is adding a module with such a builder and one line here.
"""

from __future__ import annotations

from collections.abc import Callable

from . import batched, cholesky, fft, lu, matmul, qr, spectral
from .base import Demo, Impl, Operation, ScalingError

OPERATIONS: dict[str, Callable[[], Operation]] = {
    "matmul": matmul.build,
    "solve": lu.solve,
    "lu": lu.lu,
    "batched-solve": batched.build,
    "fft": fft.fft,
    "rfft": fft.rfft,
    "cholesky": cholesky.build,
    "qr": qr.build,
    "eigh": spectral.eigh,
    "svd": spectral.svd,
}

__all__ = ["OPERATIONS", "Demo", "Impl", "Operation", "ScalingError"]
