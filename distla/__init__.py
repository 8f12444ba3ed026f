"""distla: distributed dense linear algebra and 3D FFT for sharded JAX arrays.

Keep your ``jax.Array``s sharded over a device mesh and call distla where you
would call ``@``, ``jnp.linalg``, ``jax.scipy.linalg``, ``jnp.fft`` or
``jax.scipy.fft`` (``distla.scipy.fft``; jaxdecomp's names: ``distla.jaxdecomp``): the work
stays distributed (no device holds a whole operand) and the result comes back
sharded.
"""

from . import fft as fft
from . import linalg as linalg
from . import scipy as scipy
from ._core.blas import limit_cpu_blas as limit_cpu_blas
from ._core.checks import ShapeError as ShapeError
from ._version import __version__ as __version__
from .cost import Cost as Cost
from .cost import cost as cost
from .distributed import init_distributed as init_distributed
from .layout import make_mesh as make_mesh
from .layout import shard as shard
from .matmul import matmul as matmul

__all__ = [
    "Cost",
    "ShapeError",
    "__version__",
    "cost",
    "fft",
    "init_distributed",
    "limit_cpu_blas",
    "linalg",
    "make_mesh",
    "matmul",
    "scipy",
    "shard",
]
