"""``fftshift`` and ``ifftshift`` of arrays on any mesh.

jnp's shift is a roll by half the length: a slice and a concatenation, which XLA's
partitioner runs as a collective-permute of block halves between neighbours on a
sharded axis (no gather). On an ``Explicit`` mesh jax types each slice first and refuses
one whose length the mesh does not divide ("slicing on sharded dims ... is not
implemented"), so there the roll is traced with the mesh's axes ``Auto`` and the result
typed back in the operand's own layout (``jax.sharding.auto_axes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding

from .._core.mesh import is_explicit


def _explicit_sharding(x) -> NamedSharding | None:
    """The operand's type-level sharding when its mesh has ``Explicit`` axes, else None."""
    sharding = getattr(jax.typeof(x), "sharding", None) if isinstance(x, jax.Array) else None
    mesh = getattr(sharding, "mesh", None)
    if mesh is None or not mesh.axis_names or not is_explicit(mesh):
        return None
    return sharding


def _on_any_mesh(shift: Callable) -> Callable:
    def run(x, axes: int | Sequence[int] | None = None) -> jax.Array:
        sharding = _explicit_sharding(x)
        if sharding is None:
            return shift(x, axes)
        roll = jax.sharding.auto_axes(
            lambda y: shift(y, axes), axes=tuple(sharding.mesh.axis_names), out_sharding=sharding
        )
        return roll(x)

    return run


_fftshift = _on_any_mesh(jnp.fft.fftshift)
_ifftshift = _on_any_mesh(jnp.fft.ifftshift)


def fftshift(x: jax.typing.ArrayLike, axes: int | Sequence[int] | None = None) -> jax.Array:
    """Shift the zero frequency to the centre: ``jnp.fft.fftshift`` on any mesh.

    Args:
      x: array of any shape and layout (numpy, one device, any mesh).
      axes: the axes to shift (all by default), as ``jnp.fft.fftshift``.

    Returns:
      ``jnp.fft.fftshift(x, axes)``, in ``x``'s layout: a sharded axis moves as a
      collective-permute of block halves between devices (no gather).

    Examples:
      >>> import numpy as np, distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.arange(8.0), mesh)
      >>> np.asarray(distla.fft.fftshift(x))
      array([4., 5., 6., 7., 0., 1., 2., 3.], dtype=float32)
    """
    return _fftshift(x, axes)


def ifftshift(x: jax.typing.ArrayLike, axes: int | Sequence[int] | None = None) -> jax.Array:
    """The inverse of [`fftshift`][distla.fft.fftshift]: ``jnp.fft.ifftshift`` on any mesh.

    Args:
      x: array of any shape and layout (numpy, one device, any mesh).
      axes: the axes to shift (all by default), as ``jnp.fft.ifftshift``.

    Returns:
      ``jnp.fft.ifftshift(x, axes)``, in ``x``'s layout.

    Examples:
      >>> import numpy as np, distla
      >>> mesh = distla.make_mesh((2, 4))
      >>> x = distla.shard(np.arange(5.0), mesh)
      >>> np.asarray(distla.fft.ifftshift(x))
      array([2., 3., 4., 0., 1.], dtype=float32)
    """
    return _ifftshift(x, axes)
