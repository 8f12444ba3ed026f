"""The LU family's determinants: ``det`` and ``slogdet`` (private).

Each declares its op (``distla._core.route.Op``): for one matrix the
determinant from the distributed LU's pivots and diagonal (``rules``), for a
stack each device's members (``stacks``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from ..._core import route
from ..._core.checks import scipy_flags
from . import rules, stacks


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)`` with ``det(a) == sign * exp(logabsdet)``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(-2.0 * jnp.eye(3), mesh)
      >>> result = distla.linalg.slogdet(a)
      >>> float(result.sign), round(float(result.logabsdet), 4)
      (-1.0, 2.0794)
    """

    sign: jax.Array
    logabsdet: jax.Array


DET = route.Op(
    "distla.linalg.det",
    check=route.square,
    one_device=jnp.linalg.det,
    is_stack=route.beyond(2),
    stacked=lambda plan, a: stacks.det(plan, a),
    family="det",
    distributed=lambda plan, a: route.distributed(rules.DET, plan, a),
)


@route.public
def det(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Determinant, as ``jnp.linalg.det``.

    ``sign * exp(logabsdet)`` from the diagonal of U and the parity of the
    pivots, as jnp forms it (an overflow gives ``+-inf``; complex: inf in both
    parts); for one sharded matrix the product is a distributed reduction.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack; integer and bool inputs
        promote to the default float.
      overwrite_a: accepted and ignored, as in ``jax.scipy.linalg.det``.
      check_finite: accepted and ignored, as in ``jax.scipy.linalg.det``.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as [`solve`][distla.linalg.solve]'s (the one-device plan runs jnp's function).

    Returns:
      Scalar (replicated), or ``[...]`` sharded along the batch like ``a``.
      ``det`` of a 0x0 matrix is 1. Derivatives of every order where ``a``
      is regular; at a singular ``a`` the gradient is the adjugate (jnp's
      cofactor construction: right for rank ``n - 1`` with the zero pivot
      last, zero for lower rank or an overflowing det), as jnp's.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(2.0 * jnp.eye(64), mesh)
      >>> distla.linalg.det(a)
      Array(1.8447098e+19, dtype=float32)
    """
    scipy_flags(DET.name, overwrite_a=overwrite_a, check_finite=check_finite)
    return route.call(DET, a, block_size=block_size, plan=plan)


def _check_slogdet(what, a, *, method):
    route.square(what, a)
    if method == "qr" and jnp.issubdtype(a.dtype, jnp.complexfloating):
        raise NotImplementedError(
            f"{what}: method='qr' is not implemented for complex inputs (nor in jnp)"
        )


SLOGDET = route.Op(
    "distla.linalg.slogdet",
    check=_check_slogdet,
    one_device=jnp.linalg.slogdet,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, *, method: stacks.slogdet(plan, a),
    family="det",
    distributed=lambda plan, a, *, method: route.distributed(rules.SLOGDET, plan, a),
    result=lambda out, *, method: SlogdetResult(*out),
)


@route.public
def slogdet(
    a: jax.typing.ArrayLike,
    *,
    method: str | None = None,
    block_size: int | None = None,
    plan: str = "auto",
) -> SlogdetResult:
    """Sign and log-magnitude of the determinant, as ``jnp.linalg.slogdet``.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.
      method: ``None``/``"lu"`` or ``"qr"`` as in jnp; distla computes both
        with its LU (the values agree).

      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as [`solve`][distla.linalg.solve]'s (the one-device plan runs jnp's function).

    Returns:
      ``SlogdetResult(sign, logabsdet)``; ``sign`` has ``a``'s dtype (a unit
      complex number for complex ``a``), ``logabsdet`` its real dtype. For a
      singular ``a``: sign 0 and logabsdet ``-inf``; a real matrix with an
      inf entry keeps a sign of +-1, as in jnp.

    Raises:
      ValueError: an unknown ``method``, or ``a`` not square.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(2.0 * jnp.eye(64), mesh)
      >>> sign, logabsdet = distla.linalg.slogdet(a)
      >>> float(sign), round(float(logabsdet), 3)
      (1.0, 44.361)
    """
    if method not in (None, "lu", "qr"):
        raise ValueError(
            f"{SLOGDET.name}: unknown method {method!r}; supported are 'lu' (None) and 'qr', as jnp"
        )
    return route.call(SLOGDET, a, block_size=block_size, plan=plan, method=method)
