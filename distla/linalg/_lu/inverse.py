"""The LU family's inverses: ``inv`` and ``tensorinv`` (private).

``inv`` declares its op (``distla._core.route.Op``): for one matrix the
distributed LU's solve against the identity (``rules``), for a stack each
device's members (``stacks``).
"""

from __future__ import annotations

import functools
import math
import operator

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.checks import ShapeError, as_array, scipy_flags
from ..._core.matrix import HIGHEST
from ..._core.mesh import axes_taken_by_vmap, fitting_spec, grid_of, is_explicit, run_on_mesh
from . import rules, stacks


def _inv_unsharded(a):
    """``jnp.linalg.inv``, also per example under ``jax.vmap`` over Explicit axes.

    There jnp's own ``inv`` gathers from an unbatched identity with batched
    pivots, which sharding-in-types cannot type; the vmap becomes one
    batched call instead (the route's, on the stack: `INV`).
    """
    if not axes_taken_by_vmap():
        return jnp.linalg.inv(a)
    return _per_stack(a)


def _stack_rule(axis_size, in_batched, a):
    del axis_size, in_batched
    return route.call(INV, a), True


_stack_call = jax.custom_batching.custom_vmap(jnp.linalg.inv)
_stack_call.def_vmap(_stack_rule)
# custom_vmap's own derivative is one call of primal and tangent together, whose primal
# jax's reverse mode cannot separate ("Linearization failed to produce known values"):
# inv's rule d(a^-1) = -a^-1 da a^-1 on the stacked inverse instead
_per_stack = jax.custom_jvp(_stack_call)


@_per_stack.defjvp
def _per_stack_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    x = _per_stack(a)
    return x, -jnp.matmul(jnp.matmul(x, da, precision=HIGHEST), x, precision=HIGHEST)


INV = route.Op(
    "distla.linalg.inv",
    check=route.square,
    unsharded=_inv_unsharded,
    one_device=jnp.linalg.inv,
    is_stack=route.beyond(2),
    stacked=lambda plan, a: stacks.inv(plan, a),
    family="inv",
    distributed=lambda plan, a: rules.inv_2d(a, call=plan),
    keep_replicated=True,
)


@route.public
def inv(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Inverse, as ``jnp.linalg.inv``: ``lu_solve`` against the identity.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.
      overwrite_a: accepted and ignored, as in ``jax.scipy.linalg.inv``.
      check_finite: accepted and ignored, as in ``jax.scipy.linalg.inv``.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as [`solve`][distla.linalg.solve]'s (the one-device plan runs jnp's function).

    Returns:
      ``a^{-1}`` in ``a``'s layout (2D blocks, or sharded along the batch).
      Singular ``a`` gives inf/nan.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) * 4.0 + jnp.tri(256) / 256, mesh)
      >>> a_inv = distla.linalg.inv(a)
      >>> a_inv.sharding.spec
      P('rows', 'cols')
      >>> np.allclose(np.asarray(a) @ np.asarray(a_inv), np.eye(256), atol=1e-4)
      True
    """
    scipy_flags(INV.name, overwrite_a=overwrite_a, check_finite=check_finite)
    return route.call(INV, a, block_size=block_size, plan=plan)


@route.public
def tensorinv(a: jax.typing.ArrayLike, ind: int = 2) -> jax.Array:
    """Tensor inverse, as ``jnp.linalg.tensorinv``: [`inv`][distla.linalg.inv] of ``a`` as a matrix.

    Args:
      a: array whose first ``ind`` axes have as many elements as the rest
        (``prod(a.shape[:ind]) == prod(a.shape[ind:])``).
      ind: number of leading axes that index the rows.

    Returns:
      ``a.shape[ind:] + a.shape[:ind]``, the distributed LU's inverse of the
      ``[N, N]`` matrix reshaped back. A 2-D ``a`` keeps the layouts of
      [`inv`][distla.linalg.inv]; higher ranks are reshaped by XLA (which may move the
      operand between layouts, never into one device's memory by design).

    Raises:
      ValueError: ``ind`` is not positive or the two groups of axes differ in size.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(64).reshape(8, 8, 64) * 2.0, mesh)
      >>> a_inv = distla.linalg.tensorinv(a, ind=2)
      >>> a_inv.shape, float(np.asarray(a_inv)[0, 0, 0])
      ((64, 8, 8), 0.5)
    """
    what = "distla.linalg.tensorinv"
    a = as_array(a, "a", what)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"{what}: ind must be a positive integer; got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    n = math.prod(rows)
    if n != math.prod(cols):
        raise ShapeError(
            f"{what}: the first {ind} axes of a {a.shape} hold {n} elements, the rest "
            f"{math.prod(cols)}; they must match (choose ind so that they do)"
        )
    if a.ndim == 2:
        return route.call(INV, a)
    out = route.call(INV, reshaped(a, (n, n), lambda grid: grid.block_spec, what=what))
    layout = lambda grid: P(  # noqa: E731
        grid.row, *[None] * (len(cols) - 1), grid.col, *[None] * (len(rows) - 1)
    )
    return reshaped(out, cols + rows, layout, what=what)


def reshaped(x: jax.Array, shape: tuple[int, ...], layout, *, what: str) -> jax.Array:
    """``x.reshape(shape)``; on an ``Explicit`` mesh of several devices laid out as
    ``layout(grid)`` (a ``PartitionSpec`` of the mesh's grid) fits ``shape``.

    An Explicit reshape that merges or splits sharded dimensions may have no sharding
    rule ("This reshape is not supported"): XLA moves the blocks instead, the matrix's
    row axis onto the first row dimension, its column axis onto the first column
    dimension, where they divide.
    """
    mesh = getattr(jax.typeof(x).sharding, "mesh", None)
    if mesh is None or mesh.size <= 1 or not is_explicit(mesh):
        return x.reshape(shape)
    spec = fitting_spec(shape, mesh, layout(grid_of(mesh, what=what)))
    return _reshaped(x, shape, spec)


@functools.partial(jax.jit, static_argnames=("shape", "spec"))
def _reshaped(x, shape, spec):
    """``x.reshape(shape)``, laid out ``spec`` on ``x``'s mesh."""
    return run_on_mesh(lambda y: y.reshape(shape), jax.typeof(x).sharding.mesh, spec, x)
