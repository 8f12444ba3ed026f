"""``jax.scipy.fft`` on sharded arrays: ``import distla.scipy.fft as sfft``.

``dct``, ``dctn``, ``idct`` and ``idctn``, with ``jax.scipy.fft``'s
signatures and defaults, computing scipy's transforms (types 1 to 4, where
jax has type 2) on ``distla.fft``'s pencil and slab routes: local DCTs
between the same ``all_to_all`` swaps as ``distla.fft.fftn``, no gather.
"""

from distla.fft._dct import dct as dct
from distla.fft._dct import dctn as dctn
from distla.fft._dct import idct as idct
from distla.fft._dct import idctn as idctn

__all__ = ["dct", "dctn", "idct", "idctn"]
