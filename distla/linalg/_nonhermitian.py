"""``eig`` and ``eigvals`` of non-Hermitian matrices: jnp's, on one device (private).

jax solves the non-Hermitian eigenproblem with LAPACK's ``geev``, one matrix per
device; there is no distributed algorithm here. XLA's own partitioning of
``jnp.linalg.eig`` on a sharded matrix gathers the matrix onto every device and
repeats the ``geev`` there; the one-device plan (``distla._core.one_device``) moves
it to one device instead, within the plan budget, and sends the results back in
jnp's layout (replicated).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._core.checks import as_array
from .._core.eager import one_program
from .._core.mesh import replicated
from .._core.one_device import replicated_on_one_device


@one_program
def eig(a: jax.typing.ArrayLike, *, plan: str = "auto") -> tuple[jax.Array, jax.Array]:
    """Eigenvalues and right eigenvectors of a general matrix, as ``jnp.linalg.eig``.

    jax solves the non-Hermitian eigenproblem with LAPACK's ``geev`` (on the
    CPU), one matrix per device; nothing here distributes it. For one sharded
    matrix, ``plan="auto"`` moves the matrix to the mesh's first device, runs
    ``jnp.linalg.eig`` there and sends the results back replicated, while the
    operand and results fit the plan budget (``distla.linalg.set_plan_budget``;
    ``distla.cost`` reports the plan and its bytes). Above the budget, or with
    ``plan="distributed"``, it is ``jnp.linalg.eig`` itself, which **gathers the
    matrix whole onto every device** and repeats the work there (on an
    ``Explicit`` mesh of the matrix replicated first, as jnp refuses split
    matrix axes there). For Hermitian or symmetric matrices use
    :func:`distla.linalg.eigh`, which is distributed.

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only). A
        stack sharded along its batch runs each device's own matrices, as jnp.
      plan: ``"auto"``, ``"one_device"`` (whatever the budget) or
        ``"distributed"`` (jnp's gather) for one sharded matrix.

    Returns:
      ``EigResult(eigenvalues [..., n], eigenvectors [..., n, n])``, complex,
      replicated for one sharded matrix, as jnp's result for the gathered input.
      The values are jnp's on one device, bit for bit.
    """
    what = "distla.linalg.eig"
    a = as_array(a, "a", what)
    one = replicated_on_one_device("eig", plan, jnp.linalg.eig, a, what=what)
    if one is not None:
        return one  # jnp's EigResult, as the one-device call returned it
    return jnp.linalg.eig(replicated(a))  # jnp refuses split matrix axes on Explicit meshes


@one_program
def eigvals(a: jax.typing.ArrayLike, *, plan: str = "auto") -> jax.Array:
    """Eigenvalues of a general matrix, as ``jnp.linalg.eigvals``; plans as :func:`eig`.

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only).
      plan: as :func:`eig`'s.

    Returns:
      ``[..., n]`` complex eigenvalues, replicated for one sharded matrix.
      Hermitian input: use :func:`distla.linalg.eigvalsh`.
    """
    what = "distla.linalg.eigvals"
    a = as_array(a, "a", what)
    one = replicated_on_one_device("eig", plan, jnp.linalg.eigvals, a, what=what)
    if one is not None:
        return one
    return jnp.linalg.eigvals(replicated(a))
