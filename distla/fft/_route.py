"""The general distributed FFT route: which axis swaps and local FFTs, in which order (private).

``distla.fft`` transforms any subset ``axes`` of an array of any rank. Axes it
does not transform are batch axes: they keep their sharding and nothing is
ever exchanged over the mesh axes that shard them. A transformed axis that is
whole on every device is transformed in place; one that is sharded is first
swapped (one tiled ``all_to_all`` over its mesh axes) with another axis, which
takes those mesh axes over: an axis already transformed, else a batch axis,
else the largest axis left. That is the pencil decomposition generalised: a
3-D pencil ``P(a, b, None)`` runs Z, swaps Y with Z, runs Y, swaps X with Y,
runs X and ends ``P(None, a, b)`` after two exchanges.

Naming: ``groups[d]`` is the tuple of mesh axes that shard dimension ``d``
(major first, as a ``PartitionSpec`` entry lists them); ``()`` is whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from jax.sharding import PartitionSpec as P

from distla.kernels.fftnd import FftStep, SwapStep

from .._core.matrix import round_up
from .._core.specs import layout_spec

Groups = tuple[tuple[str, ...], ...]

INVERSE = ("ifft", "irfft")
OPPOSITE = {"fft": "ifft", "ifft": "fft", "rfft": "irfft", "irfft": "rfft"}


@dataclasses.dataclass(frozen=True)
class Route:
    """A schedule for ``kernels/fftnd.py`` and the layouts on each side of it.

    Attributes:
      steps: the kernel's schedule.
      pad_in: the global shape the input is zero-padded to (each sharded axis
        to a multiple of every mesh axis it is split over before it is whole).
      spec_in, spec_out: the kernel's input and output ``PartitionSpec``.
      out_shape: the true global shape of the result (the kernel's output is
        padded on its sharded axes; the caller crops it).
      exchanges: the number of ``all_to_all``\\ s.
    """

    steps: tuple
    pad_in: tuple[int, ...]
    spec_in: P
    spec_out: P
    out_shape: tuple[int, ...]

    @property
    def exchanges(self) -> int:
        return sum(isinstance(s, SwapStep) for s in self.steps)


def spread(
    groups: Groups, shape: Sequence[int], axes: Sequence[int], sizes: Mapping[str, int]
) -> Groups:
    """The working layout: mesh axes the input leaves unused go where they cost nothing.

    Each unused mesh axis (of size > 1) goes to the batch axis with the most
    elements per device that it still splits at least once per device;
    without such an axis, to the first transformed axis when two or more are
    transformed (a slab); a lone transformed axis stays whole.
    """
    used = {n for g in groups for n in g}
    out = [list(g) for g in groups]
    batch = [d for d in range(len(shape)) if d not in axes]
    unused = [n for n in sizes if n not in used and sizes[n] > 1]
    for name in sorted(unused, key=lambda n: -sizes[n]):

        def per_device(d):
            return shape[d] // math.prod(sizes[n] for n in out[d])

        fits = [d for d in batch if per_device(d) >= sizes[name]]
        if fits:
            out[max(fits, key=per_device)].append(name)
        elif len(axes) >= 2:
            out[axes[0]].append(name)
    return tuple(tuple(g) for g in out)


def route_for(
    shape: Sequence[int],
    groups: Groups,
    axes: Sequence[int],
    kind: str,
    sizes: Mapping[str, int],
    n_last: int | None = None,
) -> Route | None:
    """Schedule the transform of ``axes`` of an array of true ``shape`` laid out ``groups``.

    Args:
      shape: the true global shape of the input (after ``s`` cropped or
        padded it; for ``irfft`` the last transformed axis holds
        ``n_last // 2 + 1`` frequencies).
      groups: the input layout (``_core.mesh.spec_groups``).
      axes: the transformed axes, distinct, in ``jnp.fft``'s order (the real
        axis of ``rfft``/``irfft`` last).
      kind: ``"fft"``, ``"ifft"``, ``"rfft"`` or ``"irfft"``.
      sizes: mesh axis sizes.
      n_last: output length of the last axis for ``irfft``.

    Returns:
      The `Route`, or ``None`` when a transformed axis is sharded and
      there is no other axis to swap it with (a sharded 1-D array).
    """
    axes = tuple(axes)
    true = list(shape)
    g = [tuple(x) for x in groups]
    inverse = kind in INVERSE
    real_axis = axes[-1] if kind in ("rfft", "irfft") else None
    pending = list(axes)
    # a "stint" is the time an axis spends sharded; its padded length must be a
    # multiple of every group size it collects before it is whole again
    stint: list[list[int] | None] = [[math.prod(sizes[n] for n in gd)] if gd else None for gd in g]
    input_stint = list(stint)
    steps: list = []  # SwapStep's u_len is filled in once each stint is known
    pads: list[tuple[int, list[int], int]] = []  # (step index, stint, true u length)

    def fft_step(ax_list):
        for d in ax_list:
            pending.remove(d)
        if real_axis in ax_list:
            # the real axis changes length here: later swaps pad and crop it to the new one
            true[real_axis] = n_last if kind == "irfft" else true[real_axis] // 2 + 1
            return FftStep((real_axis,), kind, n_last if kind == "irfft" else None)
        return FftStep(tuple(ax_list), "ifft" if inverse else "fft")

    while pending:
        whole = [d for d in pending if not g[d]]
        if real_axis in pending and kind == "rfft":
            ready = [real_axis] if real_axis in whole else []
        elif real_axis in pending:  # irfft: the real axis last of all
            ready = [d for d in whole if d != real_axis] or (
                [real_axis] if pending == [real_axis] and not g[real_axis] else []
            )
        else:
            ready = whole
        if ready:
            if real_axis in ready and len(ready) > 1:
                ready = [real_axis]
            steps.append(fft_step([d for d in axes if d in ready]))
            continue
        t = _pick_t(pending, g, axes, kind, real_axis)
        u = _pick_u(t, g, axes, pending, true, inverse, math.prod(sizes[n] for n in g[t]))
        if u is None:
            return None
        gt = g[t]
        size_t = math.prod(sizes[n] for n in gt)
        if g[u]:
            stint[u].append(size_t)
            steps.append(SwapStep(t, u, gt, None, true[t]))
        else:
            stint[u] = [size_t]
            pads.append((len(steps), stint[u], true[u]))
            steps.append(SwapStep(t, u, gt, -1, true[t]))
        g[u] = g[u] + gt
        g[t] = ()
        stint[t] = None
    for index, st, n in pads:
        steps[index] = steps[index]._replace(u_len=round_up(n, math.prod(st)))
    pad_in = tuple(round_up(n, math.prod(st)) if st else n for n, st in zip(shape, input_stint))
    out_shape = list(shape)
    if kind == "rfft":
        out_shape[real_axis] = shape[real_axis] // 2 + 1
    elif kind == "irfft":
        out_shape[real_axis] = n_last
    return Route(
        steps=tuple(steps),
        pad_in=pad_in,
        spec_in=layout_spec(tuple(groups)),
        spec_out=layout_spec(tuple(g)),
        out_shape=tuple(out_shape),
    )


def _pick_t(pending, g, axes, kind, real_axis) -> int:
    """The sharded axis to make whole next.

    Forward transforms take the last axis first (the pencil order); inverse
    ones the first (undoing it); ``rfft`` its real axis before any other and
    ``irfft`` after every other.
    """
    sharded = [d for d in axes if d in pending and g[d]]
    if kind == "rfft" and real_axis in sharded:
        return real_axis
    if kind == "irfft" and len(sharded) > 1:
        sharded = [d for d in sharded if d != real_axis]
    return sharded[0] if kind in INVERSE else sharded[-1]


def _pick_u(t, g, axes, pending, true, inverse, parts) -> int | None:
    """The axis that takes ``t``'s mesh axes (see the module docstring)."""
    i = axes.index(t)
    j = i - 1 if inverse else i + 1
    near = axes[j] if 0 <= j < len(axes) else None
    # the next axis only if it splits `parts` ways with no block of padding alone (seen with
    # a length-1 axis over 2 devices: XLA folds that block to a constant in another layout,
    # and its verifier rejects the all_to_all)
    if near is not None and not g[near] and true[near] >= parts:
        return near
    others = [d for d in range(len(g)) if d != t]
    done = [d for d in axes if d not in pending]
    batch = [d for d in others if d not in axes]
    rest = [d for d in pending if d != t]
    for whole in (True, False):
        for pool in (done, batch, rest):
            cand = [d for d in pool if d != t and bool(g[d]) != whole]
            if cand:
                return max(cand, key=lambda d: true[d])
    return None
