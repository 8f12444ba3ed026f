"""``jax.scipy.linalg``, distributed: ``distla.scipy.linalg``.

``import distla.scipy.linalg as sla`` replaces ``import jax.scipy.linalg as sla``:
every public name of the installed jax's ``jax.scipy.linalg``, with jax's
parameters and defaults (distla adds keyword-only ones such as ``plan=`` and
``block_size=``) and jax.scipy's semantics (``cholesky`` returns the upper
factor by default, ``qr`` has ``mode="full"`` and ``pivoting``), while
``distla.linalg`` keeps ``jnp.linalg``'s. Both namespaces share one
implementation per family: the names ``jnp.linalg`` lacks or spells alike
(``lu_factor``, ``cho_solve``, ``expm``, ...) are distla.linalg's own functions,
re-exported; ``cholesky``, ``eigh``, ``qr`` and ``svd`` take scipy's parameters
and call distla.linalg's. The names only scipy has live in the private
modules of this package: the structured matrices (``toeplitz``, ``hilbert``,
...), the Hessenberg and Schur forms, the matrix functions and the Sylvester
solver (see docs/scipy-linalg.md).
"""

from __future__ import annotations

from ...linalg import cho_factor as cho_factor
from ...linalg import cho_solve as cho_solve
from ...linalg import det as det
from ...linalg import expm as expm
from ...linalg import expm_frechet as expm_frechet
from ...linalg import inv as inv
from ...linalg import lu as lu
from ...linalg import lu_factor as lu_factor
from ...linalg import lu_solve as lu_solve
from ...linalg import polar as polar
from ...linalg import solve as solve
from ...linalg import solve_triangular as solve_triangular
from ._decompositions import cholesky as cholesky
from ._decompositions import eigh as eigh
from ._decompositions import qr as qr
from ._decompositions import svd as svd
from ._eigh_tridiagonal import eigh_tridiagonal as eigh_tridiagonal
from ._hessenberg import hessenberg as hessenberg
from ._matfuncs import funm as funm
from ._matfuncs import sqrtm as sqrtm
from ._qr_multiply import qr_multiply as qr_multiply
from ._schur import rsf2csf as rsf2csf
from ._schur import schur as schur
from ._schur import solve_sylvester as solve_sylvester
from ._special import block_diag as block_diag
from ._special import circulant as circulant
from ._special import companion as companion
from ._special import convolution_matrix as convolution_matrix
from ._special import dft as dft
from ._special import fiedler as fiedler
from ._special import fiedler_companion as fiedler_companion
from ._special import hadamard as hadamard
from ._special import hankel as hankel
from ._special import helmert as helmert
from ._special import hilbert as hilbert
from ._special import invhilbert as invhilbert
from ._special import invpascal as invpascal
from ._special import leslie as leslie
from ._special import pascal as pascal
from ._special import toeplitz as toeplitz

__all__ = [
    "block_diag",
    "cho_factor",
    "cho_solve",
    "cholesky",
    "circulant",
    "companion",
    "convolution_matrix",
    "det",
    "dft",
    "eigh",
    "eigh_tridiagonal",
    "expm",
    "expm_frechet",
    "fiedler",
    "fiedler_companion",
    "funm",
    "hadamard",
    "hankel",
    "helmert",
    "hessenberg",
    "hilbert",
    "inv",
    "invhilbert",
    "invpascal",
    "leslie",
    "lu",
    "lu_factor",
    "lu_solve",
    "pascal",
    "polar",
    "qr",
    "qr_multiply",
    "rsf2csf",
    "schur",
    "solve",
    "solve_sylvester",
    "solve_triangular",
    "sqrtm",
    "svd",
    "toeplitz",
]
