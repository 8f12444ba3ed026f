"""Distributed FFT of any rank over any axes: a schedule of local FFTs and axis swaps.

The per-device body for ``distla.fft``'s general route (``distla/fft/_route.py``
builds the schedule). Two kinds of step, applied in order to the local block:

- ``FftStep(axes, op, n)``: a local transform along ``axes``, all of them
  whole on this device: ``op`` is ``"fft"``/``"ifft"`` (over every axis of
  ``axes``), ``"rfft"`` (one axis, real to complex) or ``"irfft"`` (one axis,
  complex to real of output length ``n``).
- ``SwapStep(t, u, group, u_len, t_len)``: one tiled ``all_to_all`` over the
  mesh axes ``group`` that shard axis ``t``: ``t`` comes out whole and ``u``
  leaves split over ``group`` as well (its minor factor). ``u`` is first
  zero-padded at its end to ``u_len`` (a multiple of the group size; only
  when ``u`` is whole here, so the padding sits at the end of the global
  axis) and ``t`` is cropped to its true length ``t_len`` after the exchange.

Axes not named by any step are batch axes: no step ever communicates along
the mesh axes that shard them. Sizes the mesh does not divide arrive padded
with zeros at the end of their split axes; every axis is cropped to its true
length before it is transformed, so no transform sees padding.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from .fft3d import _pad_axis
from .local_fft import fft_along


class FftStep(NamedTuple):
    axes: tuple[int, ...]
    op: str  # "fft", "ifft", "rfft" or "irfft"
    n: int | None = None  # output length of "irfft"


class SwapStep(NamedTuple):
    t: int  # the sharded axis that comes out whole
    u: int  # the axis that takes t's mesh axes
    group: tuple[str, ...]  # the mesh axes that shard t (major first)
    u_len: int | None  # zero-pad u (whole here) to this length first; None: leave
    t_len: int  # crop t to this length after the exchange


def fftnd_local(x: jax.Array, *, steps: tuple, norm: str | None) -> jax.Array:
    """Run a schedule of :class:`FftStep` / :class:`SwapStep` on a local block.

    Args:
      x: this device's block of the (padded) operand.
      steps: the schedule; see the module docstring.
      norm: ``jnp.fft`` normalisation, applied axis by axis.

    Returns:
      This device's block of the transform, laid out as the schedule leaves
      it (each swap moves ``t``'s mesh axes onto ``u``).
    """
    for step in steps:
        x = _local_fft(x, step, norm) if isinstance(step, FftStep) else swap(x, step)
    return x


def swap(x: jax.Array, step: SwapStep) -> jax.Array:
    """One :class:`SwapStep` on a local block (also the DCTs' and the transposes')."""
    if step.u_len is not None:
        x = _pad_axis(x, step.u, step.u_len)
    group = step.group if len(step.group) > 1 else step.group[0]
    # all_to_all over t's group -> t whole (padded), u split |group| ways further
    x = lax.all_to_all(x, group, step.u, step.t, tiled=True)
    return _pad_axis(x, step.t, step.t_len)


def _local_fft(x: jax.Array, step: FftStep, norm: str | None) -> jax.Array:
    # The last (most minor) axis goes through fft_along, whose operand is a matrix of rows
    # (local_fft.py says why); an fft/ifft over several axes transforms the others first.
    *others, last = sorted(step.axes)
    if others:
        x = (jnp.fft.fftn if step.op == "fft" else jnp.fft.ifftn)(x, axes=others, norm=norm)
    return fft_along(x, step.op, last, norm, step.n)
