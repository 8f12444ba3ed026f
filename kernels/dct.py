"""Discrete cosine transforms: local ones along an axis, and the distributed schedule.

The per-device body of ``distla.scipy.fft``'s ``dct``/``dctn``/``idct``/
``idctn``. A DCT is separable and real-to-real, so the distributed
transform is ``distla.fft``'s route (``kernels/fftnd.py``) with each local
FFT replaced by local DCTs along the same axes: the same ``all_to_all``
swaps, moving real values (half the bytes of a complex FFT's).

Local transforms, along the last axis of length ``N`` (scipy's definitions,
``norm="backward"``), each by one real FFT:

- type II, ``y[k] = 2 sum x[n] cos(pi k (2n + 1) / 2N)``: Makhoul's
  reordering ``v = (x[0], x[2], ..., x[3], x[1])``, ``V = rfft(v)``,
  ``Z[k] = exp(-i pi k / 2N) V[k]``; then ``y[k] = 2 Re Z[k]`` for
  ``k <= N/2`` and ``y[N - k] = -2 Im Z[k]`` (J. Makhoul, "A fast cosine
  transform in one and two dimensions", 1980);
- its exact inverse, backwards through the same steps with ``irfft``
  (type III is ``2N`` times it);
- type I, ``y[k] = x[0] + (-1)^k x[N-1] + 2 sum_{0<n<N-1} x[n] cos(pi k n / (N-1))``:
  the real part of the ``rfft`` of the even extension ``(x, x[N-2:0:-1])``;
- type IV, ``y[k] = 2 sum x[n] cos(pi (2n + 1)(2k + 1) / 4N)``: for even
  ``N`` a complex FFT of ``N/2`` points of ``x[2n] + i x[N-1-2n]`` between
  two twiddles; for odd ``N`` one of ``2N`` points.

Normalisations and inverses are scalings around these four (``_SCALES``):
``"forward"`` divides the forward transform by ``2N`` (``2(N-1)`` for type
I); ``"ortho"`` makes it orthonormal with scipy's ``orthogonalize=True``
weights on the first (type II's output, type III's input) or end (type I)
coefficients.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .fft3d import pencil_forward, pencil_inverse
from .fftnd import FftStep, swap
from .local_fft import fft_last


def dctnd_local(
    x: jax.Array, *, steps: tuple, type: int, norm: str | None, inverse: bool
) -> jax.Array:
    """Run ``distla.fft``'s schedule of swaps with DCTs in place of its FFTs.

    Args:
      x: this device's block of the (padded) operand, real or complex (the
        real and imaginary parts are transformed apart).
      steps: the route's ``FftStep``/``SwapStep`` schedule (``kernels/fftnd.py``);
        each ``FftStep`` transforms every axis it names, all whole here.
      type, norm: scipy's DCT type (1-4) and normalisation.
      inverse: ``idct`` rather than ``dct``.

    Returns:
      This device's block of the transform, laid out as the schedule leaves it.
    """
    for step in steps:
        if isinstance(step, FftStep):
            for axis in step.axes:
                x = dct_along(x, axis, type=type, norm=norm, inverse=inverse)
        else:
            # all_to_all over t's mesh axes -> t whole, u split (see fftnd.swap)
            x = swap(x, step)
    return x


def pencil_dct(
    x: jax.Array,
    *,
    row_axis: str | None,
    col_axis: str | None,
    sizes: tuple[int, int, int],
    type: int,
    norm: str | None,
    inverse: bool,
    tile: int = 8,
) -> jax.Array:
    """3-D DCT of a pencil volume: ``fft3d.py``'s pencil algorithm with DCT passes.

    Forward: ``(Xp/pa, Yp/pb, Z)`` Z-pencils in, ``(X, Yq/pa, Zq/pb)``
    X-pencils out (natural order); a DCT along Z, an ``all_to_all`` over
    ``col_axis`` to ``(Xp/pa, Zq/pb, Y)``, along Y, one over ``row_axis`` to
    ``(Yq/pa, Zq/pb, X)``, along X, then a local transpose. Inverse: the way
    back. Every pass runs along the contiguous last axis; ``col_axis`` (or
    ``row_axis``) ``None`` or of size 1 makes its exchange a local transpose
    (slabs). ``sizes``: the true ``(X, Y, Z)``.
    """
    one_pass = functools.partial(dct_along, axis=-1, type=type, norm=norm, inverse=inverse)
    kw = dict(row_axis=row_axis, col_axis=col_axis, sizes=sizes, real=False, norm=None)
    if inverse:
        return pencil_inverse(x, inp="xyz", tile=tile, transform=one_pass, **kw)
    return pencil_forward(x, out="xyz", tile=tile, transform=one_pass, **kw)


def dct_along(x: jax.Array, axis: int, *, type: int, norm: str | None, inverse: bool) -> jax.Array:
    """``scipy.fft.dct`` (``idct`` when ``inverse``) of ``x`` along ``axis``."""
    if jnp.iscomplexobj(x):
        re = dct_along(x.real, axis, type=type, norm=norm, inverse=inverse)
        im = dct_along(x.imag, axis, type=type, norm=norm, inverse=inverse)
        return lax.complex(re, im)
    if axis % x.ndim == x.ndim - 1:
        return dct_last(x, type=type, norm=norm, inverse=inverse)
    moved = jnp.moveaxis(x, axis, -1)
    return jnp.moveaxis(dct_last(moved, type=type, norm=norm, inverse=inverse), -1, axis)


def dct_last(x: jax.Array, *, type: int, norm: str | None, inverse: bool) -> jax.Array:
    """The real DCT along the last axis: a core transform between two scalings."""
    n = x.shape[-1]
    core, pre, post = _plan(type, norm or "backward", inverse, n)
    if pre is not None:
        x = x * _weights(pre, x.dtype, x.ndim)
    y = _CORE[core](x)
    if post is not None:
        y = y * _weights(post, y.dtype, y.ndim)
    return y


def _weights(w, dtype, ndim: int):
    """A scale: a number, or a vector along the last axis (a constant)."""
    if isinstance(w, float):
        return jnp.asarray(w, dtype)
    return _last(jnp.asarray(np.asarray(w), dtype), ndim)


def _last(v: jax.Array, ndim: int) -> jax.Array:
    """A vector shaped to broadcast along the last of ``ndim`` axes (rank promotion off)."""
    return v.reshape((1,) * (ndim - 1) + (-1,))


def _plan(type: int, norm: str, inverse: bool, n: int):
    """``(core transform, input scale, output scale)`` for scipy's ``dct``/``idct``.

    The cores: ``"dct1"``, ``"dct2"``, ``"dct4"`` (backward, unscaled) and
    ``"dct2inv"``, the exact inverse of ``"dct2"``; type III is ``2N`` times
    ``"dct2inv"``. Type I, II's ortho transform and IV are their own
    inverses up to scale; III's inverse is II's.
    """
    m = 2 * (n - 1) if type == 1 else 2 * n
    if type == 2 and not inverse or type == 3 and inverse:
        # forward II (inverse III): dct2, scaled
        scale = {"backward": 1.0, "forward": 1.0 / m, "ortho": _ortho2(n)}[norm]
        if inverse:  # the inverse of III = 2N dct2inv (backward) is dct2 / 2N
            scale = {"backward": 1.0 / m, "forward": 1.0, "ortho": _ortho2(n)}[norm]
        return "dct2", None, scale
    if type == 3 or type == 2:  # forward III, inverse II: dct2inv, scaled
        if norm == "ortho":
            return "dct2inv", 1.0 / _ortho2(n), None
        forward_iii = type == 3 and not inverse
        scale = {
            ("backward", True): float(m),  # III = 2N dct2inv
            ("forward", True): 1.0,
            ("backward", False): 1.0,  # idct II = dct2inv
            ("forward", False): float(m),
        }[(norm, forward_iii)]
        return "dct2inv", None, scale
    core = "dct1" if type == 1 else "dct4"
    if norm == "ortho":
        if type == 4:
            return core, None, math.sqrt(1.0 / m)
        ends = np.ones(n)
        ends[[0, -1]] = math.sqrt(2.0)
        return core, ends, math.sqrt(1.0 / m) / ends
    # backward: the forward unscaled, the inverse / m; forward: the other way round
    scaled = (norm == "backward") == inverse
    return core, None, (1.0 / m if scaled else 1.0)


def _ortho2(n: int) -> np.ndarray:
    """Type II's orthonormal output weights: ``sqrt(1/4N)`` for ``k = 0``, ``sqrt(1/2N)``."""
    w = np.full(n, math.sqrt(1.0 / (2 * n)))
    w[0] = math.sqrt(1.0 / (4 * n))
    return w


def _twiddle(n, count, dtype, ndim, sign: float = -1.0, shift: float = 0.0, den=None):
    """``exp(sign i pi (k + shift) / den)`` for ``k < count`` (``den`` defaults to 2N),
    along the last of ``ndim`` axes."""
    den = 2 * n if den is None else den
    k = np.arange(count, dtype=np.float64)
    w = np.exp(sign * 1j * np.pi * (k + shift) / den)
    return _last(jnp.asarray(w, dtype), ndim)


def _complex(dtype) -> np.dtype:
    return np.result_type(dtype, np.complex64)


def _dct2(x: jax.Array) -> jax.Array:
    n = x.shape[-1]
    # Makhoul's order: even samples ascending, odd ones descending
    v = jnp.concatenate([x[..., 0::2], x[..., 1::2][..., ::-1]], axis=-1)
    m = n // 2 + 1
    z = fft_last(v, "rfft", None) * _twiddle(n, m, _complex(x.dtype), x.ndim)  # (..., N//2 + 1)
    head = 2 * z.real  # y[k], k <= N/2
    tail = -2 * z.imag[..., 1 : n - m + 1]  # y[N - k], 0 < k < N - N/2
    return jnp.concatenate([head, tail[..., ::-1]], axis=-1)


def _dct2inv(y: jax.Array) -> jax.Array:
    n = y.shape[-1]
    m = n // 2 + 1
    # y[N - k] for k < m (y[N] = 0)
    mirror = jnp.concatenate([jnp.zeros_like(y[..., :1]), y[..., :0:-1]], axis=-1)[..., :m]
    z = lax.complex(y[..., :m], -mirror) * 0.5  # exp(-i pi k/2N) V[k]
    # (irfft's length given only where its default, 2 (m - 1), differs: jnp pads whenever
    # a length is given)
    length = None if n == 2 * (m - 1) else n
    v = fft_last(z * _twiddle(n, m, _complex(y.dtype), y.ndim, sign=1.0), "irfft", None, length)
    # undo Makhoul's order: x[2j] = v[j], x[2j + 1] = v[N - 1 - j]
    evens, odds = v[..., : (n + 1) // 2], v[..., (n + 1) // 2 :][..., ::-1]
    if n % 2:
        odds = jnp.pad(odds, [(0, 0)] * (odds.ndim - 1) + [(0, 1)])
    out = jnp.stack([evens, odds], axis=-1).reshape(*y.shape[:-1], 2 * evens.shape[-1])
    return out[..., :n]


def _dct1(x: jax.Array) -> jax.Array:
    n = x.shape[-1]
    if n == 1:  # scipy refuses; the caller checks (kept defined for tracing)
        return x
    even = jnp.concatenate([x, x[..., n - 2 : 0 : -1]], axis=-1)  # length 2(N - 1)
    return fft_last(even, "rfft", None).real


def _dct4(x: jax.Array) -> jax.Array:
    n = x.shape[-1]
    cdt = _complex(x.dtype)
    if n % 2:  # a 2N-point FFT of the twiddled, zero-padded signal
        t = x * _twiddle(n, n, cdt, x.ndim, den=2 * n)  # exp(-i pi n / 2N)
        t = jnp.concatenate([t, jnp.zeros_like(t)], axis=-1)
        f = fft_last(t, "fft", None)[..., :n]
        return 2 * (f * _twiddle(n, n, cdt, x.ndim, shift=0.5, den=2 * n)).real
    half = n // 2
    # t[j] = (x[2j] + i x[N-1-2j]) exp(-i pi (4j + 1) / 4N), j < N/2
    t = lax.complex(x[..., 0::2], x[..., ::-2]) * _twiddle(n, half, cdt, x.ndim, shift=0.25, den=n)
    u = fft_last(t, "fft", None) * _twiddle(n, half, cdt, x.ndim, den=n)  # exp(-i pi k / N)
    # y[2k] = 2 Re u[k], y[N-1-2k] = -2 Im u[k]
    evens, odds = 2 * u.real, (-2 * u.imag)[..., ::-1]
    return jnp.stack([evens, odds], axis=-1).reshape(x.shape)


_CORE = {"dct1": _dct1, "dct2": _dct2, "dct2inv": _dct2inv, "dct4": _dct4}
