"""Distributed matrix multiplication: ``distla.matmul``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from ._core.eager import hashable, on_one_mesh, one_program
from ._core.matmul import Algorithm, checked_product

# An eager call on a mesh as one jax.jit of the whole call: its checks, promotion and
# the mesh look-up run once, when the call is traced, and every later call with the
# same shapes, dtypes, shardings and options is jax's own dispatch (about 0.2 ms of
# Python a call otherwise: n = 256 on 2x4 took 1.28 ms eagerly, 1.09 ms under jit).
_compiled_product = jax.jit(checked_product, static_argnames=("algorithm", "precision", "panels"))


@one_program
def matmul(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    *,
    algorithm: Algorithm = "auto",
    precision: lax.PrecisionLike = None,
    panels: int | None = None,
    preferred_element_type: jax.typing.DTypeLike | None = None,
    out_sharding: Any = None,
) -> jax.Array:
    """Distributed ``a @ b`` for matrices sharded on a 1- or 2-axis mesh.

    No device ever holds a whole operand: SUMMA moves A's block row and B's
    block column through the devices in ``panels`` slices; Cannon shifts
    blocks between neighbours. Equal in value to ``a @ b``.

    Args:
      a: ``[m, k]`` matrix, sharded on a mesh with axes ``(r, c)`` (or one axis
        ``r``, read as an ``r x 1`` grid). Any layout is accepted (2D blocks
        ``P(r, c)``, row or column blocks, replicated, transposed blocks);
        other layouts are re-laid out to ``P(r, c)`` first.
      b: ``[k, n]`` matrix on the same mesh.
      algorithm: ``"summa"`` (any ``pr x pc`` mesh), ``"cannon"`` (square
        meshes only), ``"xla"`` (XLA's own partitioning of ``jnp.matmul`` on
        the 2D block layout: it all-gathers block rows of A and block columns
        of B, never a whole operand; faster than SUMMA for small products)
        or ``"auto"`` (SUMMA, in one step while A's block row and B's block
        column together take at most 10 MiB per device, which is then XLA's
        own partitioning; see ``docs/matmul.md`` for why); ``distla.cost``
        reports the choice.
      precision: ``lax.Precision`` of the local products, as in
        ``jnp.matmul``. ``None`` follows ``jax.default_matmul_precision`` and
        the backend's default, exactly as ``jnp.matmul`` does (on recent NVIDIA
        GPUs that is TF32 for float32; pass ``"highest"`` for full float32
        products). The factorisations in ``distla.linalg`` do not take this
        default: they use ``HIGHEST`` for the products their error bounds need.
      panels: SUMMA only: number of steps over the contraction dimension
        (``None``: chosen from the operand sizes and the algorithm). More
        panels, less memory.
      preferred_element_type: the result's dtype, as in ``jnp.matmul``: a
        wider one is the products' too (``int8`` operands, ``int32`` sums); a
        narrower one rounds the result.
      out_sharding: the result's sharding, as in ``jnp.matmul`` (a
        ``PartitionSpec`` or ``NamedSharding``; ``jax.sharding.reshard`` of the
        result, with its rules).

    Integer and bool operands stay integer/bool as in ``jnp.matmul`` (bool:
    logical and/or); zero-size operands give jnp's result.

    Returns:
      ``[m, n]`` array on the same mesh, in the 2D block layout ``P(r, c)``
      when the mesh divides ``(m, n)``; otherwise in the largest even layout
      that fits (see ``distla.shard``). Sizes the mesh does not divide are
      padded inside and cropped on the way out. Inputs on one device (or not
      sharded) give ``jnp.matmul(a, b)``.

    Raises:
      ShapeError: an operand is not 2-D or the inner dimensions differ
        ([`distla.ShapeError`][distla.ShapeError]: a ``ValueError`` and a
        ``TypeError``, as jnp raises either).
      ValueError: ``"cannon"`` on a non-square mesh, an unknown algorithm, or
        operands on different meshes.
      TypeError: dtypes jnp.matmul would not combine (for example under
        ``jax_numpy_dtype_promotion="strict"``).

    See also:
      ``jnp.matmul``, the one-device equivalent; [`distla.cost`][distla.cost.cost]
      to see what a call moves and holds per device.

    Examples:
      >>> import distla, jax.numpy as jnp
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((512, 256)), mesh)
      >>> b = distla.shard(jnp.ones((256, 128)), mesh)
      >>> c = distla.matmul(a, b)
      >>> c.shape, c.sharding.spec
      ((512, 128), P('rows', 'cols'))
    """
    if preferred_element_type is not None or out_sharding is not None:
        return _as_asked(a, b, algorithm, precision, panels, preferred_element_type, out_sharding)
    if on_one_mesh(a, b) and hashable(precision):
        return _compiled_product(a, b, algorithm=algorithm, precision=precision, panels=panels)
    return checked_product(a, b, algorithm=algorithm, precision=precision, panels=panels)


def _as_asked(a, b, algorithm, precision, panels, preferred_element_type, out_sharding):
    """``matmul`` with ``jnp.matmul``'s ``preferred_element_type`` and ``out_sharding``."""
    if preferred_element_type is not None:
        want = jnp.dtype(preferred_element_type)
        # an operand that widens to it is cast first, so the products are in it too (as
        # jnp, which then takes mixed operands without promoting them together, even
        # under strict promotion: the lattice decides the cast, not the setting)
        a, b = jnp.asarray(a), jnp.asarray(b)
        with jax.numpy_dtype_promotion("standard"):
            widens = [jnp.promote_types(x.dtype, want) == want for x in (a, b)]
        a, b = (x.astype(want) if w else x for x, w in zip((a, b), widens))
    out = matmul(a, b, algorithm=algorithm, precision=precision, panels=panels)
    if preferred_element_type is not None:
        out = out.astype(preferred_element_type)
    if isinstance(out_sharding, jax.sharding.PartitionSpec):  # on the result's mesh
        concrete = getattr(out, "sharding", None)  # a tracer has none
        mesh = (
            concrete.mesh
            if isinstance(concrete, jax.sharding.NamedSharding)
            else jax.typeof(out).sharding.mesh
        )
        out_sharding = jax.sharding.NamedSharding(mesh, out_sharding)
    if out_sharding is not None:
        out = jax.sharding.reshard(out, out_sharding)
    return out


def model_bytes(
    shape: tuple[int, int, int],
    grid: tuple[int, int],
    dtype: jax.typing.DTypeLike,
    *,
    algorithm: Algorithm = "summa",
) -> float:
    """Bytes each device receives in ``distla.matmul``: the model of docs/matmul.md.

    For an ``(m, k) @ (k, n)`` product of ``dtype`` on a ``pr x pc`` mesh
    (``grid = (pr, pc)``), SUMMA receives the block row of A and the block
    column of B less the device's own share,
    ``(m/pr)·k·(pc−1)/pc + k·(n/pc)·(pr−1)/pr`` elements; Cannon on a
    ``q x q`` mesh shifts each operand's block ``q`` times (skew included),
    ``(m·k + k·n)/q`` elements. ``"auto"`` is SUMMA. Exact where the mesh
    divides the sizes (``distla.cost`` of the call reports the same bytes);
    padding adds at most a block row and column.

    Args:
      shape: ``(m, k, n)`` of the product.
      grid: ``(pr, pc)``, the mesh's shape.
      dtype: the operands' dtype.
      algorithm: ``"summa"``, ``"cannon"`` or ``"auto"`` (SUMMA's model).

    Returns:
      Bytes received per device over the whole call.

    Examples:
      >>> from distla.matmul import model_bytes
      >>> model_bytes((4096, 4096, 4096), (2, 4), "float32") / 2**20
      32.0
    """
    (m, k, n), (pr, pc) = shape, grid
    if algorithm == "cannon":
        elements = (m * k + k * n) / pr
    else:
        elements = (m / pr) * k * (pc - 1) / pc + k * (n / pc) * (pr - 1) / pr
    return elements * jnp.dtype(dtype).itemsize
