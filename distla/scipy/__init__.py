"""``jax.scipy``'s namespaces on sharded arrays: ``distla.scipy.linalg`` and ``distla.scipy.fft``.

``import distla.scipy.linalg as sla`` replaces ``import jax.scipy.linalg as sla``
(and ``distla.scipy.fft`` replaces ``jax.scipy.fft``): the same names, parameters
and defaults, with the work kept on the mesh the operands live on.
"""

from . import fft as fft
from . import linalg as linalg
