"""Distributed FFTs of sharded arrays of any rank: ``distla.fft``.

``fftn``, ``ifftn``, ``rfftn`` and ``irfftn`` take ``jnp.fft``'s arguments
(``s``, ``axes``, ``norm``) and equal it in value, shape and dtype; ``fft``,
``ifft``, ``rfft``, ``irfft``, ``fft2``, ``ifft2``, ``rfft2`` and ``irfft2``
are the same code.
``pfft3d`` and ``pifft3d`` are drop-ins for ``jaxdecomp.fft.pfft3d`` /
``pifft3d``, ``prfft3d``/``pirfft3d`` their real-to-complex halves;
``fftfreq3d`` and ``rfftfreq3d`` for jaxdecomp's wavenumbers (the rest of
jaxdecomp's names: ``distla.jaxdecomp``).

Layouts (a 2-axis mesh ``(a, b)``; see ``docs/fft.md``):

- a 3-D volume over all its axes runs the tuned 3-D algorithms: pencils
  ``P(a, b, None)`` in, ``P(None, a, b)`` out after two ``all_to_all``\\ s
  (``P(b, a, None)`` in gives ``P(None, b, a)``, as the same algorithm with the
  axes' roles exchanged); slabs ``P(a, None, None)`` on a 1-axis mesh (or a
  2-axis mesh whose second axis has size 1) give ``P(None, a, None)`` after
  one; the inverses accept the forward's output and return its input layout;
- any other call runs the general route (``_route.py``): axes not
  transformed are batch axes and keep their sharding, with nothing exchanged
  over the mesh axes that shard them; each sharded transformed axis is
  swapped by one ``all_to_all`` with an axis already transformed (else a
  batch axis), which takes its mesh axes over.

Sizes the mesh does not divide are padded inside and cropped on the way out;
the result comes back in the largest even layout of the mesh that fits its
shape. Unsharded and zero-size inputs fall back to ``jnp.fft``.
"""

from __future__ import annotations

import jax.numpy as jnp

from ._fft3d import choose_algorithm as choose_algorithm  # public, see docs/fft.md
from ._fft3d import cpu_compiler_options as cpu_compiler_options
from ._fft3d import model_bytes as model_bytes
from ._real3d import pirfft3d as pirfft3d
from ._real3d import prfft3d as prfft3d
from ._shift import fftshift as fftshift
from ._shift import ifftshift as ifftshift
from ._transforms import fft as fft
from ._transforms import fft2 as fft2
from ._transforms import fftfreq3d as fftfreq3d
from ._transforms import fftn as fftn
from ._transforms import hfft as hfft
from ._transforms import ifft as ifft
from ._transforms import ifft2 as ifft2
from ._transforms import ifftn as ifftn
from ._transforms import ihfft as ihfft
from ._transforms import irfft as irfft
from ._transforms import irfft2 as irfft2
from ._transforms import irfftn as irfftn
from ._transforms import pfft3d as pfft3d
from ._transforms import pifft3d as pifft3d
from ._transforms import rfft as rfft
from ._transforms import rfft2 as rfft2
from ._transforms import rfftfreq3d as rfftfreq3d
from ._transforms import rfftn as rfftn

__all__ = [
    "fft",
    "fftfreq",
    "fftshift",
    "hfft",
    "ifftshift",
    "ihfft",
    "rfftfreq",
    "fft2",
    "fftfreq3d",
    "fftn",
    "ifft",
    "ifft2",
    "ifftn",
    "irfft",
    "irfft2",
    "irfftn",
    "model_bytes",
    "pfft3d",
    "pifft3d",
    "pirfft3d",
    "prfft3d",
    "rfft",
    "rfft2",
    "rfftfreq3d",
    "rfftn",
]

# jnp's own: an iota; the shifts are jnp's roll, typed back on Explicit meshes
# (_shift.py); see docs/namespace.md.
fftfreq = jnp.fft.fftfreq
rfftfreq = jnp.fft.rfftfreq
