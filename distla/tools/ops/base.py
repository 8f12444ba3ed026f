"""What the scaling study and the demo know about an operation: ``Operation`` and ``Impl``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ratios import random_matrix


class ScalingError(Exception):
    """A problem with the arguments or the machine: one line, exit status 2."""


@dataclasses.dataclass(frozen=True)
class Impl:
    """One thing to time for an operation: a distla variant or a baseline.

    Attributes:
      name: label in the table and the plot legend.
      fn: the callable. Jax callables are jitted and measured with
        ``distla.cost``; host callables (``on="host"``) are only timed.
      on: where its inputs live. ``"mesh"``: the distla mesh (``Explicit``
        axes, the layouts of ``Operation.specs``); ``"auto"``: a mesh of the
        same shape with ``Auto`` axes (what XLA's partitioner and jaxdecomp
        need); ``"device"``: the first device; ``"host"``: numpy arrays.
      applies: ``(pr, pc) -> bool``; the impl is skipped on other meshes.
      model: ``(shape, (pr, pc), dtype) -> bytes received per device``, or None.
      model_text: the model's formula, as written in the results.
    """

    name: str
    fn: Callable[..., Any]
    on: str
    applies: Callable[[tuple[int, int]], bool] = lambda grid: True
    model: Callable[[tuple[int, ...], tuple[int, int], np.dtype], float] | None = None
    model_text: str = ""

    @property
    def per_mesh(self) -> bool:
        return self.on in ("mesh", "auto")


@dataclasses.dataclass(frozen=True)
class Demo:
    """The operation's row of ``python -m distla demo``.

    Attributes:
      label: the row's name (``"matmul (summa)"``).
      group: the ``--only`` name that selects it (``"fft"`` for fftn and rfftn).
      size: ``(scale, devices) -> --sizes entry`` of the row.
      grid: ``devices -> (pr, pc)``, the mesh of the row.
      shape_text: shape -> the row's shape column.
    """

    label: str
    group: str
    size: Callable[[float, int], tuple[int, ...]]
    grid: Callable[[int], tuple[int, int]]
    shape_text: Callable[[tuple[int, ...]], str]


@dataclasses.dataclass(frozen=True)
class Operation:
    """Everything the scaling study and the demo need to know about one operation.

    Attributes:
      name: the ``--op`` value.
      api: the public function(s) it exercises, for messages.
      expand: ``--sizes`` entry (a tuple of ints) -> the problem shape; raises
        ScalingError for entries of the wrong form.
      describe: shape -> text for the table (``"2048x2048x2048"``).
      default_sizes: sizes of a default run (a few minutes on 2 cores).
      dtypes: accepted ``--dtype`` values; the first is the default.
      make: ``(shape, dtype, rng) -> tuple of host arrays`` (the inputs).
      specs: ``mesh -> PartitionSpec or None per input`` (None: the natural
        layout of ``distla.shard``).
      variants: the distla calls (``on="mesh"``); the first is the demo's.
      baselines: the others; the first must be a one-device baseline and is
        the reference of the parallel efficiency.
      flops: ``(shape, dtype) -> useful flops of one call``.
      check: ``(host inputs, host result) -> scaled ratio`` (LAPACK-style, from
        ``distla.tools.ratios``; pass at <= 30), or None.
      weak: ``(shape, p) -> shape`` for ``--mode weak``: the problem grown so
        that the work or memory per device stays as on one device.
      weak_rule: that rule in words.
      min_dim: ``(shape, (pr, pc)) -> error text or None``: shapes too small
        for a mesh, or that do not fit it.
      footprint: ``(shape, dtype) -> bytes`` of inputs and result.
      model_source: where the model comes from (a docs page).
      demo: the demo's row, or None (not in the demo).
    """

    name: str
    api: str
    expand: Callable[[tuple[int, ...]], tuple[int, ...]]
    describe: Callable[[tuple[int, ...]], str]
    default_sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    make: Callable[[tuple[int, ...], np.dtype, np.random.Generator], tuple[np.ndarray, ...]]
    specs: Callable[[Any], tuple[Any, ...]]
    variants: tuple[Impl, ...]
    baselines: tuple[Impl, ...]
    flops: Callable[[tuple[int, ...], np.dtype], float]
    check: Callable[[tuple[np.ndarray, ...], Any], float] | None
    weak: Callable[[tuple[int, ...], int], tuple[int, ...]]
    weak_rule: str
    min_dim: Callable[[tuple[int, ...], tuple[int, int]], str | None]
    footprint: Callable[[tuple[int, ...], np.dtype], float]
    model_source: str
    demo: Demo | None = None


# -- helpers shared by the operation modules ------------------------------


def random(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    """Standard normal entries of ``dtype`` (``ratios.random_matrix``, shape first)."""
    return random_matrix(rng, shape, dtype)


def cplx(dtype: np.dtype) -> int:
    """Real flops per complex multiply-add pair, as distla.cost counts them."""
    return 4 if np.dtype(dtype).kind == "c" else 1


def round_to(x: float, multiple: int) -> int:
    """``x`` rounded to the nearest multiple of ``multiple``, at least ``multiple``."""
    return max(multiple, int(round(x / multiple)) * multiple)


def dims(shape: Sequence[int]) -> str:
    """``"2x4"`` for ``(2, 4)``."""
    return "x".join(str(s) for s in shape)


def at_least_grid(shape: Sequence[int], grid: tuple[int, int], what: str) -> str | None:
    """Why ``shape`` is too small for ``grid`` (a row/column per device), or None."""
    need = max(grid)
    if min(shape) < need:
        return (
            f"{what} {dims(shape)} is too small for the {dims(grid)} mesh: every dimension "
            f"needs at least {need} (one row/column per device)"
        )
    return None
