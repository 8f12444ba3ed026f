"""The FFTs' public functions (re-exported by ``distla.fft``): checks, layouts, dispatch
to the 3-D algorithms (``_fft3d``) or the general route (``_fftnd``)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.checks import as_array, empty_results, result_types
from .._core.mesh import grid_of, is_explicit, shard_spec, spec_groups
from .._core.plan import Plan
from .._core.specs import entry_axes
from . import _fft3d, _fftnd, _freq, _settings
from ._fft3d import ALGORITHMS

NORMS = (None, "backward", "ortho", "forward")


@route.public
def fftn(
    a: jax.typing.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    *,
    algorithm: str = "auto",
) -> jax.Array:
    """Distributed N-D FFT, equal to ``jnp.fft.fftn(a, s, axes, norm)``.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout
        (or on one device: ``jnp.fft`` runs). Integer and boolean inputs are
        cast as ``jnp.fft`` casts them.
      s: lengths of the transformed axes, as in ``jnp.fft`` (the input is
        cropped or zero-padded to them).
      axes: the transformed axes (default: all, or the last ``len(s)``).
        The others are batch axes: they keep their sharding and nothing is
        exchanged over the mesh axes that shard them.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.
      algorithm: the 3-D algorithm (``"auto"``, ``"slab-pencil"``, ``"pencil"``;
        ``docs/fft.md``) for 3-D volumes over all axes; ignored otherwise.

    Returns:
      Complex array of ``jnp.fft.fftn``'s shape and dtype on ``a``'s mesh. A
      3-D pencil volume ``P(a, b, None)`` comes back ``P(None, a, b)``
      (``P(b, a, None)``: ``P(None, b, a)``), a slab ``P(a, None, None)``
      ``P(None, a, None)``; any other 3-D volume transformed over all its
      axes runs the pencil algorithm and comes back ``P(None, a, b)`` too.
      Otherwise (batches, subsets of axes, other ranks), for an ``a`` that
      uses every mesh axis, the result is where the exchanges leave it when
      [`ifftn`][distla.fft.ifftn] brings that back to ``a``'s layout, else in ``a``'s
      layout, as jnp keeps it; ``docs/fft.md`` lists the exceptions. The
      largest even layout that fits where the mesh does not divide the
      shape.

    Raises:
      ValueError: bad ``s``, ``axes`` or ``norm`` (jnp's checks), an unknown
        ``algorithm``, or a mesh of more than 2 axes.

    See also:
      ``jnp.fft.fftn``, the one-device equivalent; [`ifftn`][distla.fft.ifftn].

    Examples:
      A pencil volume on a 4 x 2 mesh: the spectrum comes back in pencils
      along the other axes, equal to jnp's.

      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(np.arange(8 * 8 * 8, dtype=np.complex64).reshape(8, 8, 8), mesh)
      >>> x.sharding.spec
      P('rows', 'cols', None)
      >>> y = distla.fft.fftn(x)
      >>> y.shape, y.dtype, y.sharding.spec
      ((8, 8, 8), dtype('complex64'), P(None, 'rows', 'cols'))
      >>> bool(np.allclose(y, np.fft.fftn(x), rtol=1e-5, atol=1e-2))
      True
    """
    return _public(a, "fftn", "fft", s, axes, norm, algorithm)


@route.public
def ifftn(
    a: jax.typing.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    *,
    algorithm: str = "auto",
) -> jax.Array:
    """Distributed inverse N-D FFT, equal to ``jnp.fft.ifftn(a, s, axes, norm)``.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout
        (or on one device: ``jnp.fft`` runs). Integer and boolean inputs are
        cast as ``jnp.fft`` casts them.
      s: lengths of the transformed axes, as in ``jnp.fft`` (the input is
        cropped or zero-padded to them).
      axes: the transformed axes (default: all, or the last ``len(s)``).
        The others are batch axes: they keep their sharding and nothing is
        exchanged over the mesh axes that shard them.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.
      algorithm: the 3-D algorithm (``"auto"``, ``"slab-pencil"``, ``"pencil"``;
        ``docs/fft.md``) for 3-D volumes over all axes; ignored otherwise.

    Returns:
      Complex array on ``a``'s mesh. [`fftn`][distla.fft.fftn]'s output layouts come
      back in its input layouts (``P(None, a, b)`` -> ``P(a, b, None)``);
      ``docs/fft.md`` lists the others.

    Raises:
      ValueError: bad ``s``, ``axes`` or ``norm`` (jnp's checks), an unknown
        ``algorithm``, or a mesh of more than 2 axes.

    See also:
      ``jnp.fft.ifftn``, the one-device equivalent; [`fftn`][distla.fft.fftn].

    Examples:
      The round trip brings the spectrum back to the volume's layout.

      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((8, 8, 8), jnp.complex64), mesh)
      >>> back = distla.fft.ifftn(distla.fft.fftn(x))
      >>> back.sharding.spec, bool(np.allclose(back, x, atol=1e-5))
      (P('rows', 'cols', None), True)
    """
    return _public(a, "ifftn", "ifft", s, axes, norm, algorithm)


@route.public
def rfftn(
    a: jax.typing.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    *,
    algorithm: str = "auto",
) -> jax.Array:
    """Distributed real-to-complex N-D FFT, equal to ``jnp.fft.rfftn(a, s, axes, norm)``.

    The last axis of ``axes`` is transformed first, real to complex, so every
    ``all_to_all`` after it moves half the bytes of [`fftn`][distla.fft.fftn]'s.

    Args:
      a: real array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout
        (or on one device: ``jnp.fft`` runs). Integer and boolean inputs are
        cast as ``jnp.fft`` casts them.
      s: lengths of the transformed axes, as in ``jnp.fft`` (the input is
        cropped or zero-padded to them).
      axes: the transformed axes (default: all, or the last ``len(s)``).
        The others are batch axes: they keep their sharding and nothing is
        exchanged over the mesh axes that shard them.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.
      algorithm: the 3-D algorithm (``"auto"``, ``"slab-pencil"``, ``"pencil"``;
        ``docs/fft.md``) for 3-D volumes over all axes; ignored otherwise.

    Returns:
      Complex array, the last transformed axis ``s[-1]//2 + 1`` long; laid
      out as [`fftn`][distla.fft.fftn] lays it out (for a 3-D volume with an odd
      ``Z//2 + 1`` on a mesh with ``b > 1``: ``P(b, a, None)``).

    Raises:
      TypeError: ``a`` is complex (also a ``ValueError``, as jnp raises).
      ValueError: a transformed length is 0, as numpy raises; bad ``s``,
        ``axes`` or ``norm``; an unknown ``algorithm``.

    See also:
      ``jnp.fft.rfftn``, the one-device equivalent; [`irfftn`][distla.fft.irfftn].

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((8, 8, 8), jnp.float32), mesh)
      >>> k = distla.fft.rfftn(x)
      >>> k.shape, k.dtype, k.sharding.spec  # Z // 2 + 1 = 5 is odd: XY pencils
      ((8, 8, 5), dtype('complex64'), P('cols', 'rows', None))
    """
    return _public(a, "rfftn", "rfft", s, axes, norm, algorithm)


@route.public
def irfftn(
    a: jax.typing.ArrayLike,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: str | None = None,
    *,
    algorithm: str = "auto",
) -> jax.Array:
    """Distributed complex-to-real inverse N-D FFT, equal to ``jnp.fft.irfftn(a, s, axes, norm)``.

    ``s[-1]`` (default ``2 * (n - 1)`` for the last transformed axis of
    length ``n``) is the output length of that axis, transformed last.

    Args:
      a: complex half spectrum, any rank >= 1, sharded on a 1- or 2-axis mesh in any layout
        (or on one device: ``jnp.fft`` runs). Integer and boolean inputs are
        cast as ``jnp.fft`` casts them.
      s: lengths of the transformed axes, as in ``jnp.fft`` (the input is
        cropped or zero-padded to them).
      axes: the transformed axes (default: all, or the last ``len(s)``).
        The others are batch axes: they keep their sharding and nothing is
        exchanged over the mesh axes that shard them.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.
      algorithm: the 3-D algorithm (``"auto"``, ``"slab-pencil"``, ``"pencil"``;
        ``docs/fft.md``) for 3-D volumes over all axes; ignored otherwise.

    Returns:
      Real array on ``a``'s mesh; [`rfftn`][distla.fft.rfftn]'s 3-D output layouts come
      back in its input layouts.

    Raises:
      ValueError: bad ``s``, ``axes`` or ``norm`` (jnp's checks), an unknown
        ``algorithm``, or a mesh of more than 2 axes.

    See also:
      ``jnp.fft.irfftn``, the one-device equivalent; [`rfftn`][distla.fft.rfftn].

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((8, 8, 8), jnp.float32), mesh)
      >>> back = distla.fft.irfftn(distla.fft.rfftn(x), s=(8, 8, 8))
      >>> back.shape, back.sharding.spec, bool(np.allclose(back, x, atol=1e-5))
      ((8, 8, 8), P('rows', 'cols', None), True)
    """
    return _public(a, "irfftn", "irfft", s, axes, norm, algorithm)


@route.public
def fft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """Distributed 1-D FFT along ``axis``, equal to ``jnp.fft.fft(a, n, axis, norm)``.

    [`fftn`][distla.fft.fftn] over the one axis: a sharded ``axis`` is swapped with
    another axis (``all_to_all``), transformed where it lies whole, and swapped back.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout.
      n: length of the transformed axis (crop or zero-pad; default: its length).
      axis: the transformed axis; the others are batch axes, which keep their
        sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array of ``jnp.fft.fft``'s shape, in ``a``'s layout.

    Raises:
      ValueError: bad ``n``, ``axis`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.complex64), mesh)
      >>> y = distla.fft.fft(x, axis=0)
      >>> y.shape, y.sharding.spec, bool(np.allclose(y, np.fft.fft(x, axis=0)))
      ((16, 16), P('rows', 'cols'), True)
    """
    return fftn(a, None if n is None else (n,), (axis,), norm)


@route.public
def ifft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """Distributed inverse 1-D FFT, equal to ``jnp.fft.ifft(a, n, axis, norm)``.

    [`ifftn`][distla.fft.ifftn] over the one axis ``axis``.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout.
      n: length of the transformed axis (crop or zero-pad; default: its length).
      axis: the transformed axis; the others are batch axes, which keep their
        sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array of ``jnp.fft.ifft``'s shape, in ``a``'s layout.

    Raises:
      ValueError: bad ``n``, ``axis`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.complex64), mesh)
      >>> back = distla.fft.ifft(distla.fft.fft(x))
      >>> back.sharding.spec, bool(np.allclose(back, x, atol=1e-6))
      (P('rows', 'cols'), True)
    """
    return ifftn(a, None if n is None else (n,), (axis,), norm)


@route.public
def rfft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """Distributed real-to-complex 1-D FFT, equal to ``jnp.fft.rfft(a, n, axis, norm)``.

    [`rfftn`][distla.fft.rfftn] over the one axis ``axis``.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout.
      n: length of the real input along ``axis`` (crop or zero-pad).
      axis: the transformed axis; the others are batch axes, which keep their
        sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array, ``n // 2 + 1`` long along ``axis``; batch axes keep their
      sharding.

    Raises:
      ValueError: bad ``n``, ``axis`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.float32), mesh)
      >>> k = distla.fft.rfft(x)
      >>> k.shape, k.dtype, k.sharding.spec
      ((16, 9), dtype('complex64'), P(('rows', 'cols'), None))
    """
    return rfftn(a, None if n is None else (n,), (axis,), norm)


@route.public
def irfft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """Distributed complex-to-real inverse 1-D FFT, equal to ``jnp.fft.irfft(a, n, axis, norm)``.

    [`irfftn`][distla.fft.irfftn] over the one axis ``axis``.

    Args:
      a: array of any rank >= 1, sharded on a 1- or 2-axis mesh in any layout.
      n: length of the real output along ``axis`` (default ``2 (k - 1)`` for an
        input ``k`` long).
      axis: the transformed axis; the others are batch axes, which keep their
        sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Real array, ``n`` long along ``axis``; batch axes keep their sharding.

    Raises:
      ValueError: bad ``n``, ``axis`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.float32), mesh)
      >>> back = distla.fft.irfft(distla.fft.rfft(x), n=16)
      >>> back.shape, bool(np.allclose(back, x, atol=1e-6))
      ((16, 16), True)
    """
    return irfftn(a, None if n is None else (n,), (axis,), norm)


@route.public
def fft2(a: jax.typing.ArrayLike, s=None, axes: Sequence[int] = (-2, -1), norm=None) -> jax.Array:
    """Distributed 2-D FFT, equal to ``jnp.fft.fft2(a, s, axes, norm)``.

    [`fftn`][distla.fft.fftn] over two axes (default the last two).

    Args:
      a: array of rank >= 2, sharded on a 1- or 2-axis mesh in any layout.
      s: lengths of the two transformed axes (crop or zero-pad), as jnp's.
      axes: the two transformed axes; the others are batch axes, which keep
        their sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array of ``jnp.fft.fft2``'s shape, laid out as
      [`fftn`][distla.fft.fftn] lays it out.

    Raises:
      ValueError: ``axes`` is not two axes, or bad ``s`` or ``norm``, as jnp raises.

    Examples:
      A stack of 4 images of 16 x 16, split along the stack and the rows:

      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> from jax.sharding import PartitionSpec as P
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((4, 16, 16), jnp.complex64), mesh, P("rows", "cols", None))
      >>> y = distla.fft.fft2(x)
      >>> y.shape, bool(np.allclose(y, np.fft.fft2(x)))
      ((4, 16, 16), True)
    """
    _two_axes(axes, "fft2")
    return fftn(a, s, axes, norm)


@route.public
def ifft2(a: jax.typing.ArrayLike, s=None, axes: Sequence[int] = (-2, -1), norm=None) -> jax.Array:
    """Distributed inverse 2-D FFT, equal to ``jnp.fft.ifft2(a, s, axes, norm)``.

    [`ifftn`][distla.fft.ifftn] over two axes (default the last two).

    Args:
      a: array of rank >= 2, sharded on a 1- or 2-axis mesh in any layout.
      s: lengths of the two transformed axes (crop or zero-pad), as jnp's.
      axes: the two transformed axes; the others are batch axes, which keep
        their sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array of ``jnp.fft.ifft2``'s shape.

    Raises:
      ValueError: ``axes`` is not two axes, or bad ``s`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.complex64), mesh)
      >>> back = distla.fft.ifft2(distla.fft.fft2(x))
      >>> back.sharding.spec, bool(np.allclose(back, x, atol=1e-6))
      (P('rows', 'cols'), True)
    """
    _two_axes(axes, "ifft2")
    return ifftn(a, s, axes, norm)


@route.public
def rfft2(a: jax.typing.ArrayLike, s=None, axes: Sequence[int] = (-2, -1), norm=None) -> jax.Array:
    """Distributed real-to-complex 2-D FFT, equal to ``jnp.fft.rfft2(a, s, axes, norm)``.

    [`rfftn`][distla.fft.rfftn] over two axes (default the last two).

    Args:
      a: array of rank >= 2, sharded on a 1- or 2-axis mesh in any layout.
      s: lengths of the two transformed axes (crop or zero-pad), as jnp's.
      axes: the two transformed axes; the others are batch axes, which keep
        their sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Complex array, the last transformed axis ``s[-1] // 2 + 1`` long.

    Raises:
      ValueError: ``axes`` is not two axes, or bad ``s`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.float32), mesh)
      >>> k = distla.fft.rfft2(x)
      >>> k.shape, k.dtype
      ((16, 9), dtype('complex64'))
    """
    _two_axes(axes, "rfft2")
    return rfftn(a, s, axes, norm)


@route.public
def irfft2(a: jax.typing.ArrayLike, s=None, axes: Sequence[int] = (-2, -1), norm=None) -> jax.Array:
    """Distributed complex-to-real inverse 2-D FFT, equal to ``jnp.fft.irfft2(a, s, axes, norm)``.

    [`irfftn`][distla.fft.irfftn] over two axes (default the last two).

    Args:
      a: array of rank >= 2, sharded on a 1- or 2-axis mesh in any layout.
      s: lengths of the two transformed axes (crop or zero-pad), as jnp's.
      axes: the two transformed axes; the others are batch axes, which keep
        their sharding and exchange nothing.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``.

    Returns:
      Real array of ``jnp.fft.irfft2``'s shape.

    Raises:
      ValueError: ``axes`` is not two axes, or bad ``s`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.float32), mesh)
      >>> back = distla.fft.irfft2(distla.fft.rfft2(x), s=(16, 16))
      >>> back.shape, bool(np.allclose(back, x, atol=1e-6))
      ((16, 16), True)
    """
    _two_axes(axes, "irfft2")
    return irfftn(a, s, axes, norm)


@route.public
def pfft3d(
    x: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    algorithm: str = "auto",
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Drop-in for ``jaxdecomp.fft.pfft3d``: ``fftn(x).transpose(1, 2, 0)``.

    Same values, shape and sharding spec as jaxdecomp 0.3.1's pure-JAX
    backend, also on ``Explicit`` meshes, 1-axis meshes and sizes the mesh
    does not divide (which jaxdecomp rejects).

    Args:
      x: ``[X, Y, Z]`` volume in pencils ``P(a, b)`` on a 2-axis mesh (or
        ``P(a)`` on a 1-axis mesh); other layouts are re-laid out first.
      norm: as in ``jnp.fft`` (jaxdecomp's default ``"backward"``).
      backend: accepted for compatibility (``"JAX"`` or ``"cudecomp"``).
      algorithm: the 3-D algorithm (``docs/fft.md``).
      transpose_axis_contiguous: jaxdecomp's setting of that name: ``True``
        returns ``(Y, Z, X)``, ``False`` the natural ``(X, Y, Z)`` order.
        ``None`` reads ``distla.jaxdecomp.config``, which follows
        ``jaxdecomp.config`` when jaxdecomp is imported until it is set
        itself (else ``True``).
      a: jaxdecomp's keyword for ``x`` (``pfft3d(a=vol)``); give one of
        the two.

    Returns:
      Contiguous: ``[Y, Z, X]``, spec ``P(a, b)`` on an ``a x b`` mesh with
      both axes > 1, ``P(b, a)`` when ``b`` has size 1, ``P(None, b, a)``
      when ``a`` has size 1, ``P(None, a)`` on a 1-axis mesh. Not
      contiguous: ``[X, Y, Z]``, the same blocks (``P(None, a, b)``,
      ``P(None, None, a)``, ``P(None, None, b)``, ``P(None, None, a)``).

    Raises:
      ValueError: ``x`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` or ``backend`` is unknown.

    See also:
      [`pifft3d`][distla.fft.pifft3d]; [`fftn`][distla.fft.fftn] for the natural order.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((8, 8, 8), jnp.complex64), mesh)
      >>> k = distla.fft.pfft3d(x)  # (Y, Z, X), as jaxdecomp returns it
      >>> k.shape, k.sharding.spec
      ((8, 8, 8), P('rows', 'cols', None))
      >>> bool(np.allclose(k, np.fft.fftn(x).transpose(1, 2, 0)))
      True
    """
    _check_backend(backend, "pfft3d")
    x = _operand(x, a, ("x", "a"), "pfft3d")
    return _public(
        x, "pfft3d", "fft", None, None, norm, algorithm, "yzx",
        _contiguous(transpose_axis_contiguous),
    )  # fmt: skip


@route.public
def pifft3d(
    y: jax.typing.ArrayLike | None = None,
    norm: str | None = "backward",
    backend: str = "JAX",
    *,
    algorithm: str = "auto",
    transpose_axis_contiguous: bool | None = None,
    a: jax.typing.ArrayLike | None = None,
) -> jax.Array:
    """Drop-in for ``jaxdecomp.fft.pifft3d``: the inverse of [`pfft3d`][distla.fft.pfft3d].

    Args:
      y: the spectrum as [`pfft3d`][distla.fft.pfft3d] returns it: ``[Y, Z, X]``
        (contiguous) or ``[X, Y, Z]``, in its layout (others are re-laid
        out first).
      norm: as for [`pfft3d`][distla.fft.pfft3d].
      backend: as for [`pfft3d`][distla.fft.pfft3d].
      algorithm: as for [`pfft3d`][distla.fft.pfft3d].
      transpose_axis_contiguous: as for [`pfft3d`][distla.fft.pfft3d].
      a: jaxdecomp's keyword for ``y`` (``pifft3d(a=k)``); give one of
        the two.

    Returns:
      ``[X, Y, Z]`` complex array in [`pfft3d`][distla.fft.pfft3d]'s input layout
      (``P(a, b, None)``; ``P(a, None, None)`` on a 1-axis mesh).

    Raises:
      ValueError: ``y`` is not 3-D, its mesh has more than 2 axes, or
        ``norm`` or ``backend`` is unknown.

    See also:
      [`pfft3d`][distla.fft.pfft3d]; [`ifftn`][distla.fft.ifftn] for the natural order.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> x = distla.shard(jnp.ones((8, 8, 8), jnp.complex64), mesh)
      >>> back = distla.fft.pifft3d(distla.fft.pfft3d(x))
      >>> back.sharding.spec, bool(np.allclose(back, x, atol=1e-5))
      (P('rows', 'cols', None), True)
    """
    _check_backend(backend, "pifft3d")
    y = _operand(y, a, ("y", "a"), "pifft3d")
    return _public(
        y, "pifft3d", "ifft", None, None, norm, algorithm, "yzx",
        _contiguous(transpose_axis_contiguous),
    )  # fmt: skip


def fftfreq3d(
    k: jax.typing.ArrayLike | None = None,
    d: float = 1.0,
    *,
    array: jax.typing.ArrayLike | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Drop-in for ``jaxdecomp.fft.fftfreq3d``: angular wavenumbers of a 3-D spectrum.

    Args:
      k: a 3-D array (the spectrum they index, in its layout); only its
        shape, dtype and sharding are read.
      d: sample spacing.
      array: jaxdecomp's name for ``k``, as a keyword (give one of the two).

    Returns:
      ``(k2, k0, k1)`` as jaxdecomp names them ``(kz, ky, kx)``:
      ``2*pi*fftfreq(k.shape[i], d)`` for axis ``i``, shaped to broadcast
      along that axis (``k0`` is ``[n0, 1, 1]``, ``k1`` ``[1, n1, 1]``,
      ``k2`` ``[1, 1, n2]``), real of ``k``'s precision, and each sharded
      as ``k`` is along its axis (where the mesh divides it): vectors, never
      a replicated volume.

    Raises:
      ValueError: ``k`` is not 3-D, or given both as ``k`` and ``array``.

    Examples:
      The wavenumbers of a spectrum, sharded as it is along each axis (the
      Poisson solve of ``docs/tutorials/fft.md`` divides by ``kx**2 + ky**2 + kz**2``):

      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> spectrum = distla.fft.fftn(distla.shard(jnp.ones((8, 8, 8), jnp.complex64), mesh))
      >>> kz, ky, kx = distla.fft.fftfreq3d(spectrum)
      >>> kx.shape, ky.shape, kz.shape
      ((1, 8, 1), (8, 1, 1), (1, 1, 8))
      >>> kx.sharding.spec, kz.sharding.spec
      (P(None, 'rows', None), P(None, None, 'cols'))
    """
    return _freq.freqs(_operand(k, array, ("k", "array"), "fftfreq3d"), d, real=False)


def rfftfreq3d(
    k: jax.typing.ArrayLike | None = None,
    d: float = 1.0,
    *,
    array: jax.typing.ArrayLike | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Drop-in for ``jaxdecomp.fft.rfftfreq3d``: axis 1 by ``rfftfreq``, the rest as ``fftfreq3d``.

    jaxdecomp's own rule, kept as is: ``k1`` is ``2*pi*rfftfreq(k.shape[1], d)``
    (``k.shape[1]//2 + 1`` values).

    Args:
      k: a 3-D array (the spectrum they index, in its layout); only its
        shape, dtype and sharding are read.
      d: sample spacing.
      array: jaxdecomp's name for ``k``, as a keyword (give one of the two).

    Returns:
      ``(k2, k0, k1)``, as [`fftfreq3d`][distla.fft.fftfreq3d]'s, with ``k1``
      ``[1, k.shape[1] // 2 + 1, 1]``.

    Raises:
      ValueError: ``k`` is not 3-D, or given both as ``k`` and ``array``.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((4, 2))
      >>> k = distla.shard(jnp.ones((8, 8, 8), jnp.complex64), mesh)
      >>> [f.shape for f in distla.fft.rfftfreq3d(k)]
      [(1, 1, 8), (8, 1, 1), (1, 5, 1)]
    """
    return _freq.freqs(_operand(k, array, ("k", "array"), "rfftfreq3d"), d, real=True)


def _operand(value: Any, alias: Any, names: tuple[str, str], what: str) -> Any:
    """The operand given once: by distla's name (or position) or by jaxdecomp's keyword."""
    if (value is None) == (alias is None):
        got = "both" if value is not None else "neither"
        raise TypeError(
            f"distla.fft.{what} takes its operand once, as {names[0]} (or by position) or as "
            f"jaxdecomp's keyword {names[1]}=; got {got}."
        )
    return alias if value is None else value


# --- dispatch -----------------------------------------------------------------------


def _length_along(a: jax.Array, n: int | None, axis: int, name: str) -> None:
    """jnp's checks of ``hfft``/``ihfft``, in its order: one axis (a ``ValueError``), then
    ``a.shape[axis]`` read when ``n`` is not given, so that an axis out of range is its
    ``IndexError`` there (elsewhere jnp's ``ValueError``)."""
    if isinstance(axis, (list, tuple)):
        raise ValueError(
            f"distla.fft.{name} does not support multiple axes. Please use "
            f"distla.fft.{name}n. Got axis = {axis}."
        )
    if n is None:
        a.shape[axis]  # noqa: B018 (the IndexError is the point)


def _two_axes(axes: Sequence[int], name: str) -> None:
    """jnp's check of the 2-D transforms: exactly two axes (``ValueError``)."""
    if len(axes) != 2:
        raise ValueError(
            f"distla.fft.{name} only supports 2 axes. Got axes = {axes!r}; "
            f"for other counts use distla.fft.{name[:-1]}n."
        )


def _contiguous(flag: bool | None) -> bool:
    """``transpose_axis_contiguous``: ``flag``, else ``distla.jaxdecomp.config``'s (which
    follows jaxdecomp's own until set)."""
    return _settings.contiguous(flag)


def _check_backend(backend: Any, name: str) -> None:
    if not isinstance(backend, str) or backend.lower() not in ("jax", "cudecomp"):
        raise ValueError(
            f"distla.fft.{name}: backend must be 'JAX' or 'cudecomp' (accepted for "
            f"jaxdecomp compatibility); got {backend!r}"
        )


def _public(x, name, kind, s, axes, norm, algorithm, order="xyz", contiguous=True, hint=None):
    what = f"distla.fft.{name}"
    x = as_array(x, "x", what)
    if norm not in NORMS:
        raise ValueError(f"{what}: norm must be one of {NORMS}; got {norm!r}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{what}: algorithm must be one of {ALGORITHMS}; got {algorithm!r}")
    if order == "yzx" and x.ndim != 3:
        raise ValueError(
            f"{what} transforms 3-D volumes (X, Y, Z); got x of shape {x.shape} "
            f"({x.ndim}-D). For other ranks use distla.fft.fftn with axes=."
        )
    in_dtype, _ = _fftnd.result_dtypes(x, kind, what)
    given = (s, axes)
    s, axes, result = _fftnd.normalize(x, s, axes, kind, norm)
    if kind == "rfft" and tuple(s)[-1:] == (0,):
        # a zero length on the halved (last) axis: numpy refuses, jnp fails inside XLA, and
        # its Z//2 + 1 = 1 output would mean nothing. Zero lengths elsewhere give jnp's
        # empty result below.
        raise ValueError(
            f"{what}: Invalid number of FFT data points (0) specified: "
            f"x of shape {x.shape}, lengths {tuple(s)} along axes {tuple(axes)}."
        )
    if result.size == 0:  # an empty result: where jnp puts it (Explicit: in jax's type)
        ref = functools.partial(_fftnd.JNP[kind], s=given[0], axes=given[1], norm=norm)
        return empty_results(result_types(ref, (x,)) if order == "xyz" else result, x)
    if x.size == 0:  # the transform of nothing: zeros
        return jnp.zeros(result.shape, result.dtype)
    if not axes:  # nothing to transform: jnp's own cast
        return _one_device(x.astype(in_dtype), kind, *given, norm, order, contiguous)
    if x.dtype != in_dtype:  # as jnp.fft casts integer, boolean and real inputs
        x = x.astype(in_dtype)
    return route.call(TRANSFORM, x, key=(name, kind, s, axes, norm, algorithm, what), hint=hint,
                      order=order, contiguous=contiguous)  # fmt: skip


def _unsharded(x, *, key, hint, order, contiguous):
    """No mesh resolved (one device, or a ``jax.vmap`` holding the mesh axes): `_dispatch`
    runs jnp's own transform, inside the rules of `_traced` for a traced call, whose
    vmap rule makes the batch one call, which the route then resolves afresh."""
    return _distributed(None, x, key=key, hint=hint, order=order, contiguous=contiguous)


def _distributed(plan: Plan | None, x, *, key, hint, order, contiguous):
    """The transform on ``plan``'s mesh (``None``: jnp's): ``_dispatch``, inside the vmap
    and derivative rules (`_traced`) when a transformation traces the call."""
    name, kind, s, axes, norm, algorithm, what = key
    mesh = None if plan is None else plan.mesh
    # the layout and the platform, read here: under the jit below x is a tracer, which on
    # an Auto mesh carries no layout
    spec, on_cpu = _fftnd.spec_of(x), _fft3d._on_cpu_outside_jit(x)
    known = not _layout_unknown(x)
    if not known:  # the vmap rule's guess; None: _dispatch takes distla.shard's
        spec = hint
    key = (name, kind, s, axes, norm, algorithm, what, spec, order, contiguous, known, mesh)
    if not isinstance(x, jax.core.Tracer):  # no vmap or derivative is tracing this call
        return _inner(key, on_cpu)(x)
    return _traced(x, key=key, devices=_devices_of(x, mesh))


def _devices_of(x, mesh) -> jax.sharding.Mesh | None:
    """The concrete mesh of ``x`` on an ``Auto`` mesh, where the call can read it (``x``
    a concrete array under ``jax.grad`` or ``jax.jvp``); ``None`` elsewhere.

    The transform is linear: its transpose (reverse mode) is a program of the cotangent
    alone, which names no device of the mesh when the cotangent lives on one device; its
    ``shard_map`` over the (abstract) mesh then compiles for one device (XLA: "No
    registered implementation for untyped custom call to xla.sdy.GlobalToLocalShape").
    On an ``Explicit`` mesh the cotangent's type names the mesh.
    """
    primal = getattr(x, "primal", x)  # a JVP tracer's primal: the array the call was given
    if mesh is None or isinstance(primal, jax.core.Tracer):  # jit, vmap, eval_shape
        return None
    sharding = getattr(primal, "sharding", None)
    if not isinstance(sharding, NamedSharding) or is_explicit(mesh):
        return None
    return sharding.mesh


#: every transform of this module: checked by `_public`, then the route
TRANSFORM = route.Op(
    "distla.fft",
    operands=("x",),
    one_device=_unsharded,
    distributed=_distributed,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=route.never,
    own_placement=True,
)


def _inner(key, on_cpu=False):
    name, kind, s, axes, norm, algorithm, what, spec, order, contiguous, known, mesh = key
    return functools.partial(
        _dispatch, kind=kind, s=s, axes=axes, norm=norm, algorithm=algorithm, what=what,
        spec=spec, on_cpu=on_cpu, order=order, contiguous=contiguous, known=known, mesh=mesh,
    )  # fmt: skip


@functools.partial(jax.jit, static_argnames=("key", "devices"))
def _traced(x, *, key, devices=None):
    """The transform under jax.vmap and derivatives (jit: eager custom_jvp trips XLA:CPU).

    ``jax.vmap`` of the call is one call with the vmapped axis as a batch axis
    (no collective along it); ``custom_vmap`` has no reverse mode, so the
    derivatives (a ``custom_jvp``; the transform is linear) bypass it.
    """
    name, kind, s, axes, norm, algorithm, what, spec, order, contiguous, known, _ = key
    inner = _inner(key)
    batched = jax.custom_batching.custom_vmap(inner)

    @batched.def_vmap
    def _(axis_size, in_batched, xb):
        if not in_batched[0]:
            return inner(xb), False
        # an Auto mesh's tracer has no layout: the members' layout stands for the batch's,
        # and 3-D members of unknown layout are taken to be in distla's own (pencils)
        entries = (tuple(spec or ()) + (None,) * xb.ndim)[: xb.ndim - 1]
        names = tuple(jax.typeof(xb).sharding.mesh.axis_names)
        if not any(entries) and xb.ndim == 4 and len(names) == 2 and _layout_unknown(xb):
            pencils = (names[0], names[1], None)
            entries = pencils if kind in ("fft", "rfft") else (None, *names)
            if order == "yzx" and contiguous and kind == "ifft":
                entries = pencils  # (Y, Z, X) in: the forward's output blocks
        if order == "xyz":
            moved = tuple(a + 1 for a in axes)
            return _public(xb, name, kind, s, moved, norm, algorithm, hint=P(None, *entries)), True
        # pfft3d / pifft3d: the natural-order transform of the batch, in jaxdecomp's order
        if contiguous and kind == "ifft":
            xb = xb.transpose(0, 3, 1, 2)
            entries = (entries[2], entries[0], entries[1])
        y = _public(xb, name, kind, None, (1, 2, 3), norm, algorithm, hint=P(None, *entries))
        return (y.transpose(0, 2, 3, 1) if contiguous and kind == "fft" else y), True

    def tangent(x, t):
        if devices is not None:  # names the devices in the transposed program too
            laid = spec if spec is not None else shard_spec(t.shape, devices)
            t = jax.lax.with_sharding_constraint(t, NamedSharding(devices, laid))
        else:  # inside an enclosing jit on an Auto mesh: its devices are x's
            t = _fftnd.tied_to(t, x)
        return inner(t)

    f = jax.custom_jvp(batched)
    f.defjvp(lambda primals, tangents: (inner(*primals), tangent(*primals, *tangents)))
    return f(x)


def _layout_unknown(x) -> bool:
    """A tracer on a mesh with no ``Explicit`` axis: its layout is XLA's to choose."""
    mesh = getattr(jax.typeof(x).sharding, "mesh", None)
    return isinstance(x, jax.core.Tracer) and mesh is not None and not is_explicit(mesh)


def _dispatch(
    x,
    *,
    kind,
    s,
    axes,
    norm,
    algorithm,
    what,
    spec,
    on_cpu,
    order="xyz",
    contiguous=True,
    known=True,
    mesh,
):
    """The transform of ``x`` (already in the dtype the transform reads) on ``mesh``,
    the mesh the route resolved (``None``: none).

    ``known``: ``spec`` is ``x``'s layout, not a guess (``None``: distla.shard's,
    or the vmap rule's) for a tracer on an ``Auto`` mesh.
    """
    if mesh is None:  # one device: jnp's own transform, no padding
        # (on a one-device Explicit mesh in x's own layout: the result in jnp's, which
        # shard_map over that mesh takes back as it is)
        x = _whole_along(x, kind, s, axes)
        return _one_device(x, kind, s, axes, norm, order, contiguous)
    grid_of(mesh, what=what)  # a 1- or 2-axis mesh, or ValueError
    if spec is None:
        spec = shard_spec(x.shape, mesh)
    in_dtype = x.dtype
    if x.ndim == 3 and sorted(axes) == [0, 1, 2] and (kind in ("fft", "ifft") or axes[-1] == 2):
        s3 = [0, 0, 0]
        for a, n in zip(axes, s):
            s3[a] = n
        s3 = tuple(s3)
        if kind != "irfft" and s3 == tuple(x.shape):
            s3 = None
        return _fft3d.transform(
            x,
            on_cpu=on_cpu,
            kind=kind,
            norm=norm,
            s=s3,
            order=order,
            algorithm=algorithm,
            in_dtype=in_dtype,
            swap_grid=order == "xyz" and _swapped_pencils(spec, mesh, kind),
            contiguous=contiguous,
        )
    batch = _batch_of_volumes(x, axes, kind, spec, mesh)
    # (B, X, Y, Z) over (X, Y, Z), B split: the 3-D algorithms per member
    if batch and order == "xyz":
        s3 = [0, 0, 0]
        for a, n in zip(axes, s):
            s3[a - 1] = n
        s3 = tuple(s3)
        if kind != "irfft" and s3 == tuple(x.shape[1:]):
            s3 = None
        return _fft3d.transform(
            x, on_cpu=on_cpu, kind=kind, norm=norm, s=s3, order=order, algorithm=algorithm,
            in_dtype=in_dtype, swap_grid=False, contiguous=True, batch=batch,
        )  # fmt: skip
    return _fftnd.general(x, kind, s, axes, norm, mesh, in_dtype, spec, known)


def _batch_of_volumes(x, axes, kind, spec, mesh) -> tuple[str, ...] | None:
    """The mesh axes that split B of a ``(B, X, Y, Z)`` batch transformed over (X, Y, Z).

    ``None`` unless B is split evenly and some mesh axis (of size > 1) is
    left for the volumes.
    """
    if x.ndim != 4 or sorted(axes) != [1, 2, 3] or (kind in ("rfft", "irfft") and axes[-1] != 3):
        return None
    names = spec_groups(spec, x.ndim, dict(mesh.shape))[0]
    parts = math.prod(mesh.shape[n] for n in names)
    left = [n for n in mesh.axis_names if n not in names and mesh.shape[n] > 1]
    if not names or not left or x.shape[0] % parts:
        return None
    return names


def _swapped_pencils(spec: P, mesh, kind: str) -> bool:
    """``x`` in pencils with the mesh axes' roles exchanged: ``P(b, a, None)``.

    For the inverses, the forward's output ``P(None, b, a)``.
    """
    names = tuple(mesh.axis_names)
    if len(names) != 2 or min(mesh.shape[n] for n in names) < 2:
        return False
    spec = (tuple(spec) + (None,) * 3)[:3]
    a, b = names
    return spec == ((None, b, a) if kind in ("ifft", "irfft") else (b, a, None))


def _whole_along(x, kind, s, axes):
    """``x`` with each transformed axis whose output length its mesh axes do not divide
    whole on every device.

    Under ``jax.vmap`` over a batch on ``Explicit`` mesh axes, a member split
    along a transformed axis goes to jnp (see the route, ``_core.route``),
    whose sharding rule refuses an output length the split does not divide
    (``rfft`` of 12 points split 4 ways gives 7). Such an axis is gathered
    first, as a sharded vector is outside ``vmap``; the batch keeps its layout.
    """
    if not isinstance(x, jax.core.Tracer) or s is None or axes is None:
        return x
    sharding = jax.typeof(x).sharding
    spec = tuple(sharding.spec) + (None,) * (x.ndim - len(tuple(sharding.spec)))
    out = dict(zip(axes, s))
    if kind == "rfft" and axes:
        out[axes[-1]] = s[-1] // 2 + 1
    split = {
        d
        for d, n in out.items()
        if n % math.prod(sharding.mesh.shape[a] for a in entry_axes(spec[d]))
    }
    if not split:
        return x
    whole = P(*(None if d in split else e for d, e in enumerate(spec)))
    return jax.sharding.reshard(x, jax.sharding.NamedSharding(sharding.mesh, whole))


def _one_device(x, kind, s, axes, norm, order, contiguous):
    if order == "yzx" and contiguous:
        x = x.transpose(2, 0, 1) if kind == "ifft" else x
        y = _fftnd.JNP[kind](x, norm=norm)
        return y.transpose(1, 2, 0) if kind == "fft" else y
    return _fftnd.one_device(x, kind, s, axes, norm)


_SWAPPED_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _swapped(norm, what):
    if norm not in _SWAPPED_NORM:
        raise ValueError(f"{what}: norm must be one of {NORMS}; got {norm!r}")
    return _SWAPPED_NORM[norm]


@route.public
def hfft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """FFT of a Hermitian-symmetric signal, as ``jnp.fft.hfft``.

    ``irfft(conj(a), n, axis)`` with the opposite normalisation (numpy's
    definition), on [`irfft`][distla.fft.irfft]: the other axes are batch axes and keep
    their sharding at no communication cost; a sharded ``axis`` is swapped
    with another axis (``all_to_all``), as every one-axis transform
    ([`fft`][distla.fft.fft]) does, and only a sharded vector is gathered.

    Args:
      a: ``[..., k, ...]`` half spectrum (``k`` along ``axis``), any layout.
      n: length of the real output along ``axis`` (default ``2 (k - 1)``).
      axis: the transformed axis.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as jnp's.

    Returns:
      Real array with ``n`` along ``axis``, sharded as [`irfft`][distla.fft.irfft] leaves it.

    Raises:
      ValueError: ``axis`` is a tuple or list, or bad ``n`` or ``norm``, as jnp raises.

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((16, 9), jnp.complex64), mesh)
      >>> y = distla.fft.hfft(a)
      >>> y.shape, y.dtype, bool(np.allclose(y, np.fft.hfft(a)))
      ((16, 16), dtype('float32'), True)
    """
    what = "distla.fft.hfft"
    a = as_array(a, "a", what)
    _length_along(a, n, axis, "hfft")
    return irfft(jnp.conj(a), n, axis, _swapped(norm, what))


@route.public
def ihfft(
    a: jax.typing.ArrayLike, n: int | None = None, axis: int = -1, norm: str | None = None
) -> jax.Array:
    """Inverse of [`hfft`][distla.fft.hfft], as ``jnp.fft.ihfft``: ``conj(rfft(a))``, norm swapped.

    Args:
      a: real ``[..., n, ...]`` signal, any layout (complex input is refused
        as jnp refuses it).
      n: length of the transform along ``axis`` (crop or zero-pad).
      axis: the transformed axis.
      norm: ``None``/``"backward"``, ``"ortho"`` or ``"forward"``, as jnp's.

    Returns:
      Complex half spectrum ``n // 2 + 1`` long along ``axis``, sharded as
      [`rfft`][distla.fft.rfft] leaves it (batch axes keep their sharding; a sharded
      ``axis`` is swapped with another axis, as [`fft`][distla.fft.fft]'s).

    Raises:
      ValueError: ``axis`` is a tuple or list, or bad ``n`` or ``norm``, as jnp raises.
      TypeError: ``a`` is complex (also a ``ValueError``, as jnp raises).

    Examples:
      >>> import jax.numpy as jnp
      >>> import numpy as np
      >>> import distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(jnp.ones((16, 16), jnp.float32), mesh)
      >>> k = distla.fft.ihfft(x)
      >>> k.shape, bool(np.allclose(k, np.fft.ihfft(x)))
      ((16, 9), True)
    """
    what = "distla.fft.ihfft"
    a = as_array(a, "a", what)
    _length_along(a, n, axis, "ihfft")
    return jnp.conj(rfft(a, n, axis, _swapped(norm, what)))
