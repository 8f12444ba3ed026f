"""``jnp.linalg`` and the ``jax.scipy.linalg`` factorisations, distributed: ``distla.linalg``.

Semantics follow ``jax.scipy.linalg`` and ``jnp.linalg``. Where the operands
are one matrix sharded over a mesh, the work runs distributed (blocked LU with
partial pivoting, Cholesky, Householder QR and TSQR, the tridiagonal eigh, QDWH
polar and svd, SUMMA products), or, below a memory budget and where it is
faster, on one device of the mesh (the one-device plan; ``set_plan_budget``).
Where they are a stack of matrices (leading batch dimensions), each device
factors and solves its own matrices with no communication. Unsharded operands
fall back to the one-device jax functions.

This module only re-exports. Each public function lives in the room of its
family, named for it: ``_lu`` (a package: lu_factor, lu_solve, lu, solve, det,
slogdet, inv and the tensor forms), ``_cholesky`` (cholesky, cho_factor,
cho_solve), ``_triangular``, ``_qr``, ``_eigh`` (a package: eigh, eigvalsh and
their drivers), ``_svd``, ``_polar`` (its iteration in ``_qdwh``), ``_lstsq``
(lstsq, pinv, matrix_rank), ``_norms`` (norm, matrix_norm, cond), ``_products``,
``_expm``, ``_eig``; mixed precision is ``_refine``. Each declares what it does
(``distla._core.route.Op``) and takes the one route: its operands checked and
promoted once, the call resolved once (the mesh, dtype and block size) and that
plan handed down; the layers below never read the operands' mesh again.
"""

from __future__ import annotations

import jax.numpy as jnp

from .._core.buckets import set_shape_buckets as set_shape_buckets
from .._core.buckets import shape_buckets as shape_buckets
from .._core.plan import plan_budget as plan_budget
from .._core.plan import set_plan_budget as set_plan_budget
from ._cholesky import cho_factor as cho_factor
from ._cholesky import cho_solve as cho_solve
from ._cholesky import cholesky as cholesky
from ._cholesky import model_bytes as cholesky_model_bytes
from ._eig import eig as eig
from ._eig import eigvals as eigvals
from ._eigh.eigh import EighResult as EighResult
from ._eigh.eigh import eigh as eigh
from ._eigh.eigh import eigvalsh as eigvalsh
from ._explicit import cross as cross
from ._explicit import diagonal as diagonal
from ._explicit import outer as outer
from ._explicit import vecdot as vecdot
from ._expm import expm as expm
from ._expm import expm_frechet as expm_frechet
from ._lstsq import lstsq as lstsq
from ._lstsq import matrix_rank as matrix_rank
from ._lstsq import pinv as pinv
from ._lu.det import SlogdetResult as SlogdetResult
from ._lu.det import det as det
from ._lu.det import slogdet as slogdet
from ._lu.factor import LUResult as LUResult
from ._lu.factor import lu as lu
from ._lu.factor import lu_factor as lu_factor
from ._lu.factor import lu_solve as lu_solve
from ._lu.inverse import inv as inv
from ._lu.inverse import tensorinv as tensorinv
from ._lu.programs import model_bytes as lu_model_bytes
from ._lu.solve import solve as solve
from ._lu.solve import tensorsolve as tensorsolve
from ._norms import cond as cond
from ._norms import matrix_norm as matrix_norm
from ._norms import norm as norm
from ._polar import polar as polar
from ._products import matmul as matmul
from ._products import matrix_power as matrix_power
from ._products import multi_dot as multi_dot
from ._products import tensordot as tensordot
from ._qr import model_bytes as qr_model_bytes
from ._qr import qr as qr
from ._svd import SVDResult as SVDResult
from ._svd import svd as svd
from ._svd import svdvals as svdvals
from ._triangular import solve_triangular as solve_triangular

# jnp's own: elementwise or batch-only work that XLA partitions without moving a
# whole operand (see docs/namespace.md); diagonal, vecdot, outer and cross are jnp's too
# except where jax refuses them (``_explicit``: sharding rules on Explicit meshes, an
# operand on one device beside a sharded one).
matrix_transpose = jnp.linalg.matrix_transpose
trace = jnp.linalg.trace
vector_norm = jnp.linalg.vector_norm

__all__ = [
    "cross",
    "diagonal",
    "eig",
    "eigvals",
    "expm",
    "expm_frechet",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_transpose",
    "multi_dot",
    "outer",
    "tensordot",
    "tensorinv",
    "tensorsolve",
    "trace",
    "vecdot",
    "vector_norm",
    "EighResult",
    "SVDResult",
    "cond",
    "eigh",
    "eigvalsh",
    "lstsq",
    "matrix_rank",
    "norm",
    "pinv",
    "polar",
    "svd",
    "svdvals",
    "LUResult",
    "SlogdetResult",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "cholesky_model_bytes",
    "det",
    "inv",
    "lu",
    "lu_factor",
    "lu_model_bytes",
    "lu_solve",
    "qr",
    "qr_model_bytes",
    "slogdet",
    "solve",
    "solve_triangular",
    "plan_budget",
    "set_plan_budget",
    "shape_buckets",
    "set_shape_buckets",
]
