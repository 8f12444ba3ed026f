"""jaxdecomp's six pencil transposes, the public functions (private module).

Re-exported by ``distla.jaxdecomp``; the machinery (global transpose, one
``all_to_all`` swap, jaxdecomp's layout rules) is ``_pencils``.
"""

from __future__ import annotations

import jax

from .._core import route
from .._core.checks import as_array
from . import _settings
from ._halo import check_backend
from ._pencils import transpose


def _public(x, backend, flag, kind, name):
    what = f"distla.jaxdecomp.{name}"
    check_backend(backend, what)
    x = as_array(x, "x", what)
    return transpose(x, kind, contiguous=_settings.contiguous(flag), what=what)


@route.public
def transposeXtoY(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """X-pencils to Y-pencils, as ``jaxdecomp.transposeXtoY``.

    One ``all_to_all`` over mesh axis ``b`` (``(pb - 1)/pb`` of the local block
    received per device) moves the mesh axes of the distributed axis that the
    Y-pencil needs whole onto the axis the X-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in X-pencils: ``P(a, b, None)`` on a mesh ``(a, b)``, as
        jaxdecomp's chain of transposes from X-pencils ``P(a, b, None)``
        lays them out; any layout is taken (one that splits nothing, or a
        tracer on an ``Auto`` mesh, whose layout jax does not tell while
        tracing, is taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(2, 0, 1)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s0, s2, s1)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeYtoX`][distla.jaxdecomp.transposeYtoX], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((8, 16, 32), np.float32), mesh, P("z", "y"))
      >>> y = jaxdecomp.transposeXtoY(x)
      >>> y.shape, y.sharding.spec
      ((32, 8, 16), P('y', 'z', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "x_y", "transposeXtoY")


@route.public
def transposeYtoZ(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """Y-pencils to Z-pencils, as ``jaxdecomp.transposeYtoZ``.

    One ``all_to_all`` over mesh axis ``a`` (``(pa - 1)/pa`` of the local block
    received per device) moves the mesh axes of the distributed axis that the
    Z-pencil needs whole onto the axis the Y-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in Y-pencils: ``P(b, a, None)`` (contiguous) or
        ``P(a, None, b)`` on a mesh ``(a, b)``, as jaxdecomp's chain of
        transposes from X-pencils ``P(a, b, None)`` lays them out; any
        layout is taken (one that splits nothing, or a tracer on an
        ``Auto`` mesh, whose layout jax does not tell while tracing, is
        taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(2, 0, 1)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s1, s0, s2)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeZtoY`][distla.jaxdecomp.transposeZtoY], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((32, 8, 16), np.float32), mesh, P("y", "z"))
      >>> y = jaxdecomp.transposeYtoZ(x)
      >>> y.shape, y.sharding.spec
      ((16, 32, 8), P('z', 'y', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "y_z", "transposeYtoZ")


@route.public
def transposeZtoY(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """Z-pencils to Y-pencils, as ``jaxdecomp.transposeZtoY``.

    One ``all_to_all`` over mesh axis ``a`` (``(pa - 1)/pa`` of the local block
    received per device) moves the mesh axes of the distributed axis that the
    Y-pencil needs whole onto the axis the Z-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in Z-pencils: ``P(a, b, None)`` (contiguous;
        ``P(b, a, None)`` after ``transposeXtoZ``) or ``P(None, a, b)`` on a
        mesh ``(a, b)``, as jaxdecomp's chain of transposes from X-pencils ``P(a, b, None)``
        lays them out; any layout is taken (one that splits nothing, or a
        tracer on an ``Auto`` mesh, whose layout jax does not tell while
        tracing, is taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(1, 2, 0)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s1, s0, s2)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeYtoZ`][distla.jaxdecomp.transposeYtoZ], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((16, 32, 8), np.float32), mesh, P("z", "y"))
      >>> y = jaxdecomp.transposeZtoY(x)
      >>> y.shape, y.sharding.spec
      ((32, 8, 16), P('y', 'z', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "z_y", "transposeZtoY")


@route.public
def transposeYtoX(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """Y-pencils to X-pencils, as ``jaxdecomp.transposeYtoX``.

    One ``all_to_all`` over mesh axis ``b`` (``(pb - 1)/pb`` of the local block
    received per device) moves the mesh axes of the distributed axis that the
    X-pencil needs whole onto the axis the Y-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in Y-pencils: ``P(b, a, None)`` (contiguous) or
        ``P(a, None, b)`` on a mesh ``(a, b)``, as jaxdecomp's chain of
        transposes from X-pencils ``P(a, b, None)`` lays them out; any
        layout is taken (one that splits nothing, or a tracer on an
        ``Auto`` mesh, whose layout jax does not tell while tracing, is
        taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(1, 2, 0)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s0, s2, s1)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeXtoY`][distla.jaxdecomp.transposeXtoY], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((32, 8, 16), np.float32), mesh, P("y", "z"))
      >>> y = jaxdecomp.transposeYtoX(x)
      >>> y.shape, y.sharding.spec
      ((8, 16, 32), P('z', 'y', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "y_x", "transposeYtoX")


@route.public
def transposeXtoZ(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """X-pencils to Z-pencils, as ``jaxdecomp.transposeXtoZ``.

    Also with ``transpose_axis_contiguous=False``, where jaxdecomp refuses
    X<->Z. One ``all_to_all`` over mesh axis ``a`` (``(pa - 1)/pa`` of the
    local block received per device) moves the mesh axes of the distributed axis that the
    Z-pencil needs whole onto the axis the X-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in X-pencils: ``P(a, b, None)`` on a mesh ``(a, b)``, as
        jaxdecomp's chain of transposes from X-pencils ``P(a, b, None)``
        lays them out; any layout is taken (one that splits nothing, or a
        tracer on an ``Auto`` mesh, whose layout jax does not tell while
        tracing, is taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(1, 2, 0)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s2, s1, s0)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeZtoX`][distla.jaxdecomp.transposeZtoX], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((8, 16, 32), np.float32), mesh, P("z", "y"))
      >>> y = jaxdecomp.transposeXtoZ(x)
      >>> y.shape, y.sharding.spec
      ((16, 32, 8), P('y', 'z', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "x_z", "transposeXtoZ")


@route.public
def transposeZtoX(
    x: jax.typing.ArrayLike,
    backend: str = "jax",
    *,
    transpose_axis_contiguous: bool | None = None,
) -> jax.Array:
    """Z-pencils to X-pencils, as ``jaxdecomp.transposeZtoX``.

    Also with ``transpose_axis_contiguous=False``, where jaxdecomp refuses
    X<->Z. One ``all_to_all`` over mesh axis ``a`` (``(pa - 1)/pa`` of the
    local block received per device) moves the mesh axes of the distributed axis that the
    X-pencil needs whole onto the axis the Z-pencil had whole; the
    values are jaxdecomp's global transpose. Also on ``Explicit`` meshes,
    1-axis meshes and sizes the mesh does not divide.

    Args:
      x: ``[d0, d1, d2]`` volume (or ``[B, d0, d1, d2]``, a batch along a
        leading axis) in Z-pencils: ``P(a, b, None)`` (contiguous;
        ``P(b, a, None)`` after ``transposeXtoZ``) or ``P(None, a, b)`` on a
        mesh ``(a, b)``, as jaxdecomp's chain of transposes from X-pencils ``P(a, b, None)``
        lays them out; any layout is taken (one that splits nothing, or a
        tracer on an ``Auto`` mesh, whose layout jax does not tell while
        tracing, is taken in that one). On one device: jaxdecomp's local
        transpose.
      backend: ``"jax"`` or ``"cudecomp"``, accepted for compatibility.
      transpose_axis_contiguous: jaxdecomp's setting for this call; ``None``
        reads ``distla.jaxdecomp.config``.

    Returns:
      The volume transposed in value by ``(2, 0, 1)`` (contiguous) or not at all,
      laid out as jaxdecomp lays it out: the operand's ``(s0, s1, s2)``
      becomes ``(s1, s0, s2)`` (contiguous), else ``(s2, s1, s0)``; the largest even
      layout like it where the mesh does not divide the result.

    Raises:
      ValueError: ``x`` is not 3-D or 4-D, its mesh has more than 2 axes, or
        ``backend`` is unknown.

    See also:
      ``jnp.transpose``, the one-device equivalent;
      [`transposeXtoZ`][distla.jaxdecomp.transposeXtoZ], the way back.

    Examples:
      >>> import numpy as np, distla, distla.jaxdecomp as jaxdecomp
      >>> from jax.sharding import PartitionSpec as P
      >>> mesh = distla.make_mesh((2, 4), ("z", "y"))
      >>> x = distla.shard(np.ones((16, 32, 8), np.float32), mesh, P("y", "z"))
      >>> y = jaxdecomp.transposeZtoX(x)
      >>> y.shape, y.sharding.spec
      ((8, 16, 32), P('z', 'y', None))
    """
    return _public(x, backend, transpose_axis_contiguous, "z_x", "transposeZtoX")
