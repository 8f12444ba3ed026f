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
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.mesh import replicated
from .._core.one_device import block_layout
from .._core.plan import Plan


def _replicated(plan: Plan, a, *, results, **options):
    """The one-device plan's layouts: jnp's results come back replicated."""
    del options
    return (block_layout(a.shape, plan.mesh),), (P(),) * len(results)


def _op(name, fn):
    """``fn`` (jnp's) of one sharded matrix on one device within the budget; otherwise
    jnp's own, on an ``Explicit`` mesh of the matrix replicated first (jnp refuses split
    matrix axes there)."""

    def gathered(*args, **options):
        *_, a = args  # (plan, a) on a mesh, (a,) unsharded
        return fn(replicated(a))

    return route.Op(
        f"distla.linalg.{name}",
        promote=lambda what, a, **options: a.dtype,  # jnp's own promotion
        unsharded=gathered,
        one_device=fn,
        is_stack=route.beyond(2),
        stacked=gathered,
        family="eig",
        layouts=_replicated,
        distributed=gathered,
    )


EIG = _op("eig", jnp.linalg.eig)
EIGVALS = _op("eigvals", jnp.linalg.eigvals)


@route.public
def eig(a: jax.typing.ArrayLike, *, plan: str = "auto") -> tuple[jax.Array, jax.Array]:
    """Eigenvalues and right eigenvectors of a general matrix, as ``jnp.linalg.eig``.

    jax solves the non-Hermitian eigenproblem with LAPACK's ``geev`` (on the
    CPU), one matrix per device; nothing here distributes it. For one sharded
    matrix, ``plan="auto"`` moves the matrix to the mesh's first device, runs
    ``jnp.linalg.eig`` there and sends the results back replicated, while the
    plan's peak on that device fits the plan budget (``distla.linalg.set_plan_budget``;
    ``distla.cost`` reports the plan and its bytes). Above the budget, or with
    ``plan="distributed"``, it is ``jnp.linalg.eig`` itself, which **gathers the
    matrix whole onto every device** and repeats the work there (on an
    ``Explicit`` mesh of the matrix replicated first, as jnp refuses split
    matrix axes there). For Hermitian or symmetric matrices use
    [`distla.linalg.eigh`][distla.linalg.eigh], which is distributed.

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only). A
        stack sharded along its batch runs each device's own matrices, as jnp.
      plan: ``"auto"``, ``"one_device"`` (whatever the budget) or
        ``"distributed"`` (jnp's gather) for one sharded matrix.

    Returns:
      ``EigResult(eigenvalues [..., n], eigenvectors [..., n, n])``, complex,
      replicated for one sharded matrix, as jnp's result for the gathered input.
      The values are jnp's on one device, bit for bit.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([[0.0, 1.0], [-1.0, 0.0]]), mesh)
      >>> w, v = distla.linalg.eig(a)
      >>> np.round(np.sort_complex(np.asarray(w)), 4) + 0.0
      array([0.-1.j, 0.+1.j], dtype=complex64)
    """
    return route.call(EIG, a, plan=plan)


@route.public
def eigvals(a: jax.typing.ArrayLike, *, plan: str = "auto") -> jax.Array:
    """Eigenvalues of a general matrix, as ``jnp.linalg.eigvals``; plans as
    [`eig`][distla.linalg.eig].

    Args:
      a: ``[..., n, n]`` matrix or stack, any layout (CPU backend only).
      plan: as [`eig`][distla.linalg.eig]'s.

    Returns:
      ``[..., n]`` complex eigenvalues, replicated for one sharded matrix.
      Hermitian input: use [`distla.linalg.eigvalsh`][distla.linalg.eigvalsh].

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([[2.0, 1.0], [0.0, 3.0]]), mesh)
      >>> np.round(np.sort(np.asarray(distla.linalg.eigvals(a)).real), 4) + 0.0
      array([2., 3.], dtype=float32)
    """
    return route.call(EIGVALS, a, plan=plan)
