"""``eig`` and ``eigvals`` of non-Hermitian matrices: jnp's, with the gather said (private)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.eager import one_program
from .._core.mesh import replicated


@one_program
def eig(a: jax.typing.ArrayLike) -> jnp.linalg.EigResult:
    """Eigenvalues and right eigenvectors of a general matrix, as ``jnp.linalg.eig``.

    This is ``jnp.linalg.eig`` (on an ``Explicit`` mesh, of the matrix replicated
    first, as jnp refuses split matrix axes there): jax solves the non-Hermitian
    eigenproblem with LAPACK's ``geev`` on the CPU only, one matrix per
    device, so **a sharded matrix is gathered whole onto every device**. For
    Hermitian or symmetric matrices use :func:`distla.linalg.eigh`, which is
    distributed.

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only).

    Returns:
      ``EigResult(eigenvalues [..., n], eigenvectors [..., n, n])``, complex,
      with jnp's sharding for the gathered input.
    """
    return jnp.linalg.eig(replicated(a))  # jnp refuses split matrix axes on Explicit meshes


@one_program
def eigvals(a: jax.typing.ArrayLike) -> jax.Array:
    """Eigenvalues of a general matrix, as ``jnp.linalg.eigvals`` (gathers; see :func:`eig`).

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only).

    Returns:
      ``[..., n]`` complex eigenvalues; the sharded input is gathered whole
      onto every device, as in :func:`eig`. Hermitian input: use
      :func:`distla.linalg.eigvalsh`.
    """
    return jnp.linalg.eigvals(replicated(a))
