"""``jax.scipy``'s namespaces, distributed: ``distla.scipy.linalg``.

``import distla.scipy.linalg as sla`` replaces ``import jax.scipy.linalg as sla``:
the same names, parameters and defaults, with the work kept on the mesh the
operands live on.
"""

from . import linalg as linalg
