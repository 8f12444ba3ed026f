"""A stack's LAPACK calls on a mesh of CPU devices: few enough members per call (private).

jaxlib 0.10.0 up to 0.11.0 split the batch of a CPU LAPACK call (``getrf``,
``trsm``, ``potrf``, ``geqrf``, ``syevd``, ``gesdd``, ...) over XLA's intra-op
thread pool once their flop estimate for the call reaches 2e5, and the calling
thread blocks until every piece has run (``GetLapackBatchChunkSize`` and
``ParallelBatchMap`` in jaxlib's ``cpu/lapack_kernels.cc``; later releases run
the batch in the calling thread, as this module makes these ones do). When the
devices of a CPU mesh make such a call at the same moment, each from a thread
of that same pool, every pool thread can end up waiting for pieces no thread is
free to run, and the program never finishes. Seen: the 4096 members of 64 x 64
of ``docs/batched.md`` solved on 2x4 hung in one CI run in three; a debugger
found the 8 pool threads all in that wait, inside ``getrf``.

distla's stacked calls (:mod:`distla._core.stacked`, the batched solves) run
each device's members through :func:`in_member_chunks`: on such a jaxlib and a
mesh of several CPU devices, the members go to LAPACK in chunks small enough
that no call is split (a ``lax.map`` over chunks), and elsewhere in one call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


# The jaxlib releases whose CPU LAPACK kernels split a batch over the thread pool.
SPLITS_BATCHES = (0, 10, 0) <= _release(jaxlib.version.__version__) < (0, 11, 1)
# jaxlib splits a call whose estimated work reaches this many flops ...
SPLIT_FLOPS = 200_000
# ... its estimate for one member is at most this many times d^3, d the largest
# matrix dimension (the largest estimate is gesdd's on complex input, 3 x 10 m n min(m, n)).
FLOPS_PER_MEMBER_PER_D3 = 30


def members_per_call(mesh: Any, largest_dim: int) -> int | None:
    """How many members one LAPACK call may take on ``mesh`` (``None``: no limit).

    Args:
      mesh: the mesh the stacked call runs on (a ``Mesh`` or ``AbstractMesh``).
      largest_dim: the largest matrix dimension of any operand.

    Returns:
      ``None`` where one call for all of a device's members is safe (a jaxlib
      that does not split batches, one device, or devices that are not CPUs),
      else the most members whose estimated work stays under jaxlib's split
      threshold (at least 1: a call with one member is never split).
    """
    if not SPLITS_BATCHES or math.prod(mesh.shape.values()) < 2:
        return None
    platform = getattr(getattr(mesh, "abstract_device", None), "platform", None)
    if (platform or jax.default_backend()) != "cpu":
        return None
    per_member = FLOPS_PER_MEMBER_PER_D3 * max(largest_dim, 1) ** 3
    return max(1, (SPLIT_FLOPS - 1) // per_member)


def in_member_chunks(
    fn: Callable[..., Any], cores: Sequence[int], per_call: int | None
) -> Callable[..., Any]:
    """``fn`` on a device's members, at most ``per_call`` members to a LAPACK call.

    Args:
      fn: a function of stacks that treats every member alone (jax's
        one-device linalg functions), returning an array or a tuple of arrays
        with the operands' broadcast batch dimensions first.
      cores: the number of matrix (core) dimensions of each operand; an
        operand's other dimensions are batch dimensions, broadcast as numpy
        does (an operand with none is the same for every member).
      per_call: from :func:`members_per_call`; ``None`` runs ``fn`` once.

    Returns:
      A function of the same operands and results. With a limit and more
      members than it, the members are flattened and mapped in chunks of
      ``per_call`` (``lax.map``: one loop body, one call per chunk); the
      results are those of ``fn`` on the whole stack.
    """
    if per_call is None:
        return fn

    def run(*xs: jax.Array) -> Any:
        batch = tuple(np.broadcast_shapes(*(x.shape[: x.ndim - c] for x, c in zip(xs, cores))))
        count = math.prod(batch)
        if count <= per_call:
            return fn(*xs)
        flat = tuple(
            jnp.broadcast_to(x, batch + x.shape[x.ndim - c :]).reshape(
                (count,) + x.shape[x.ndim - c :]
            )
            for x, c in zip(xs, cores)
        )
        outs = jax.lax.map(lambda members: fn(*members), flat, batch_size=per_call)
        return jax.tree.map(lambda y: y.reshape(batch + y.shape[1:]), outs)

    return run
