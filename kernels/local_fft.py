"""Local 1D FFTs on an operand seen as a matrix of rows.

XLA's CPU FFT needs its operand and result row-major along the transformed
axes (releases from 0.10 on check it at run time: ``fft_thunk.cc``'s
``IsMonotonicWithDim0Major``). Its layout assignment does not always honour
that: where a 3-D FFT's result is all-gathered or cropped along another axis,
GSPMD (jax's older partitioner, still selectable) lays the FFT out with that
axis outermost (``{2,0,1}``), and the program fails when it runs. A 2-D
operand of rows cannot take such a layout, so every 1D transform here runs
on ``x`` reshaped to ``(-1, length)``: a bitcast when ``x`` is row-major, a
copy of the result where XLA wants another layout downstream.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_OPS = {"fft": jnp.fft.fft, "ifft": jnp.fft.ifft, "rfft": jnp.fft.rfft, "irfft": jnp.fft.irfft}


def fft_last(x: jax.Array, op: str, norm: str | None, n: int | None = None) -> jax.Array:
    """``jnp.fft.<op>(x, n=n, axis=-1, norm=norm)``, run on ``x`` as rows.

    ``op`` is ``"fft"``, ``"ifft"``, ``"rfft"`` or ``"irfft"``; ``n`` as in
    ``jnp.fft`` (the output length of ``"irfft"``).
    """
    rows = _OPS[op](x.reshape(-1, x.shape[-1]), n=n, axis=-1, norm=norm)
    return rows.reshape(x.shape[:-1] + rows.shape[-1:])


def fft_along(
    x: jax.Array, op: str, axis: int, norm: str | None, n: int | None = None
) -> jax.Array:
    """:func:`fft_last` along ``axis`` (moved last and back, as ``jnp.fft`` does itself)."""
    if axis % x.ndim == x.ndim - 1:
        return fft_last(x, op, norm, n)
    return jnp.moveaxis(fft_last(jnp.moveaxis(x, axis, -1), op, norm, n), -1, axis)
