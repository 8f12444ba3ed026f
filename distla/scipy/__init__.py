"""``jax.scipy``'s namespaces on sharded arrays: ``import distla.scipy.fft``.

Each submodule mirrors its ``jax.scipy`` counterpart name for name, with
jax's parameters and defaults, and keeps the work distributed.
"""

from . import fft as fft
