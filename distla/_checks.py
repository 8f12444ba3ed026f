"""Input validation shared by the public functions (private)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def as_array(x: Any, name: str, what: str) -> jax.Array:
    """``x`` as a jax array (jax arrays and tracers pass through untouched)."""
    if isinstance(x, jax.Array):
        return x
    try:
        return jnp.asarray(x)
    except TypeError as e:
        raise TypeError(f"{what}: {name} must be an array, got {type(x).__name__}") from e


def result_dtype(what: str, *arrays: jax.Array) -> np.dtype:
    """The promoted floating/complex dtype of ``arrays``; TypeError otherwise."""
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.inexact):
        got = ", ".join(str(a.dtype) for a in arrays)
        raise TypeError(
            f"{what} works on floating and complex arrays; got dtype {got}. "
            "Cast first, for example x.astype(jnp.float32)."
        )
    return np.dtype(dtype)


def canonical_precision(precision: Any) -> Any:
    """``None`` means ``HIGHEST``: distla's error bounds assume full-precision dots.

    Strings and ``lax.Precision`` values are normalised so they can be static
    arguments of ``jax.jit``.
    """
    if precision is None:
        return lax.Precision.HIGHEST
    if isinstance(precision, str):
        try:
            return lax.Precision(precision.lower())
        except ValueError:
            return lax.Precision[precision.upper()]
    if isinstance(precision, (list, tuple)):
        return tuple(canonical_precision(p) for p in precision)
    return precision
