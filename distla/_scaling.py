"""``python -m distla scaling``: how time, communication and memory per device scale.

For one operation, every requested size and every requested mesh, this times
the distla call and its baselines (one device, XLA's own partitioning of the
jnp call on the same sharded input, jaxdecomp for the FFT) in interleaved
rounds, reads collective bytes and peak memory per device from the very
executable it timed (``distla.cost.cost_of_compiled``, what :func:`distla.cost`
reports), puts the communication volume the
algorithm's model predicts beside the measured one, checks the result with
DESIGN.md's scaled residual ratio, and writes::

    DIR/results.json   every figure, the machine, the versions, the command line
    DIR/results.md     the same as a table
    DIR/scaling.png    time, parallel efficiency, collective MiB and peak MiB
                       per device against the number of devices

The code only calls the public API (``distla.matmul``, ``distla.linalg``,
``distla.fft``, ``distla.shard``, ``distla.make_mesh``, ``distla.cost``).
What differs between operations lives in ``OPERATIONS`` below, one
:class:`Operation` entry each: how to build the inputs, the distla call(s),
the baselines, the flop count, the communication model and the accuracy
check. Adding an operation is adding an entry.

Parallel efficiency is throughput relative to the one-device reference
(the operation's first baseline) divided by the ideal speedup:
``(flops / time) / (flops_ref / time_ref) / ideal``. On accelerators the
ideal speedup on ``p`` devices is ``p``. Simulated CPU devices share the
machine's cores, so there the ideal is 1: the best a mesh can do is match
one device using every core (DESIGN.md's "physical limit").
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import math
import os
import platform
import re
import shlex
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# A mesh of more devices than this is refused rather than simulated.
MAX_SIMULATED_DEVICES = 64
_REEXEC_MARK = "DISTLA_SCALING_SIMULATED_DEVICES"
MIB = 2.0**20


class ScalingError(Exception):
    """A problem with the arguments or the machine: one line, exit status 2."""


class Unavailable(Exception):
    """The operation is not implemented in this checkout yet: exit status 3."""


# --------------------------------------------------------------------------
# The operation table
# --------------------------------------------------------------------------


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
class Operation:
    """Everything the scaling study needs to know about one operation.

    Attributes:
      name: the ``--op`` value.
      api: the public function(s) it exercises, for messages.
      sizes_help: how ``--sizes`` entries are written for this op.
      expand: ``--sizes`` entry (a tuple of ints) -> the problem shape; raises
        ScalingError for entries of the wrong form.
      describe: shape -> text for the table (``"2048x2048x2048"``).
      default_sizes: sizes of a default run (a few minutes on 2 cores).
      dtypes: accepted ``--dtype`` values; the first is the default.
      make: ``(shape, dtype, rng) -> tuple of host arrays`` (the inputs).
      specs: ``mesh -> PartitionSpec or None per input`` (None: the natural
        layout of ``distla.shard``).
      variants: the distla calls (``on="mesh"``).
      baselines: the others; the first must be a one-device baseline and is
        the reference of the parallel efficiency.
      flops: ``(shape, dtype) -> useful flops of one call``.
      check: ``(host inputs, host result) -> DESIGN.md's scaled ratio`` (pass
        at <= 30), or None.
      weak: ``(shape, p) -> shape`` for ``--mode weak``: the problem grown so
        that the work or memory per device stays as on one device.
      weak_rule: that rule in words.
      min_dim: ``(shape, (pr, pc)) -> error text or None``: shapes too small
        for a mesh, or that do not fit it.
      footprint: ``(shape, dtype) -> bytes`` of inputs and result.
      model_source: where the model comes from (a docs page), or a TODO.
      probe: a tiny shape to find out whether the op is implemented yet.
    """

    name: str
    api: str
    sizes_help: str
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
    probe: tuple[int, ...]


def _eps(dtype: Any) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _wide(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _random(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _cplx(dtype: np.dtype) -> int:
    """Real flops per complex multiply-add pair, as distla.cost counts them."""
    return 4 if np.dtype(dtype).kind == "c" else 1


def _round_to(x: float, multiple: int) -> int:
    return max(multiple, int(round(x / multiple)) * multiple)


def _dims(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape)


def _at_least_grid(dims: Sequence[int], grid: tuple[int, int], what: str) -> str | None:
    need = max(grid)
    if min(dims) < need:
        return (
            f"{what} {_dims(dims)} is too small for the {_dims(grid)} mesh: every dimension "
            f"needs at least {need} (one row/column per device)"
        )
    return None


# -- matmul ----------------------------------------------------------------


def _matmul_expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0],) * 3
    if len(size) == 3:
        return size
    raise ScalingError(f"matmul sizes are N (square) or MxKxN; got {_dims(size)}")


def _matmul_make(shape, dtype, rng):
    m, k, n = shape
    return _random((m, k), dtype, rng), _random((k, n), dtype, rng)


def _matmul_check(inputs, c) -> float:
    a, b = (_wide(x) for x in inputs)
    ref = a @ b
    err = np.linalg.norm(np.asarray(c).astype(ref.dtype) - ref)
    scale = np.linalg.norm(a) * np.linalg.norm(b) * a.shape[1] * _eps(np.asarray(c).dtype)
    return float(err / scale) if scale else float(err)


def _summa_model(shape, grid, dtype) -> float:
    (m, k, n), (pr, pc) = shape, grid
    elements = (m / pr) * k * (pc - 1) / pc + k * (n / pc) * (pr - 1) / pr
    return elements * np.dtype(dtype).itemsize


def _cannon_model(shape, grid, dtype) -> float:
    (m, k, n), (q, _) = shape, grid
    return (m * k + k * n) / q * np.dtype(dtype).itemsize


def _matmul() -> Operation:
    import jax.numpy as jnp

    import distla

    def call(algorithm):
        fn = functools.partial(distla.matmul, algorithm=algorithm)
        fn.__name__ = f"distla.matmul[{algorithm}]"  # type: ignore[attr-defined]
        return fn

    return Operation(
        name="matmul",
        api="distla.matmul",
        sizes_help="N (N x N times N x N) or MxKxN",
        expand=_matmul_expand,
        describe=_dims,
        default_sizes=((1024,), (2048,)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_matmul_make,
        specs=lambda mesh: (None, None),
        variants=(
            Impl(
                "distla.matmul summa",
                call("summa"),
                "mesh",
                model=_summa_model,
                model_text="(m/pr)·k·(pc−1)/pc + k·(n/pc)·(pr−1)/pr elements",
            ),
            Impl(
                "distla.matmul cannon",
                call("cannon"),
                "mesh",
                applies=lambda grid: grid[0] == grid[1] > 1,
                model=_cannon_model,
                model_text="(m·k + k·n)/q elements on a q x q mesh",
            ),
        ),
        baselines=(
            Impl("one device: jnp.matmul", jnp.matmul, "device"),
            Impl("jnp.matmul on the sharded input (XLA)", jnp.matmul, "auto"),
        ),
        flops=lambda s, dt: 2.0 * s[0] * s[1] * s[2] * _cplx(dt),
        check=_matmul_check,
        weak=lambda s, p: tuple(_round_to(x * math.sqrt(p), 16) for x in s),
        weak_rule="every dimension grows as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: _at_least_grid(s, grid, "matmul size"),
        footprint=lambda s, dt: (s[0] * s[1] + s[1] * s[2] + s[0] * s[2]) * np.dtype(dt).itemsize,
        model_source="docs/matmul.md",
        probe=(8, 8, 8),
    )


# -- solve and lu ------------------------------------------------------------


def _square_expand(size: tuple[int, ...], op: str, rhs: bool) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0], 0) if rhs else (size[0],)
    if rhs and len(size) == 2:
        return size
    form = "N (b a vector) or NxK (K right-hand sides)" if rhs else "N"
    raise ScalingError(f"{op} sizes are {form}; got {_dims(size)}")


def _solvable(n: int, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    return _random((n, n), dtype, rng)


def _solve_make(shape, dtype, rng):
    n, k = shape
    b = _random((n,) if k == 0 else (n, k), dtype, rng)
    return _solvable(n, dtype, rng), b


def _solve_ratio(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> float:
    """||A x - b||_inf / (||A||_inf ||x||_inf n eps), largest over right-hand sides."""
    a, b, xw = _wide(a), _wide(b), _wide(np.asarray(x))
    r = a @ xw - b
    if r.ndim == 1:
        r, xw = r[:, None], xw[:, None]
    norm_a = np.abs(a).sum(axis=1).max()
    denom = norm_a * np.abs(xw).max(axis=0) * a.shape[0] * _eps(np.asarray(x).dtype)
    return float(np.max(np.abs(r).max(axis=0) / denom))


def _solve_check(inputs, x) -> float:
    return _solve_ratio(inputs[0], inputs[1], x)


def _lu_check(inputs, result) -> float:
    """||P A - L U||_1 / (n ||A||_1 eps) from (lu, piv) in LAPACK's convention."""
    (a,) = inputs
    lu, piv = (np.asarray(r) for r in result)
    n = a.shape[0]
    lw = _wide(lu)
    lower = np.tril(lw, -1) + np.eye(n)
    upper = np.triu(lw)
    pa = _wide(a).copy()
    for i, p in enumerate(piv):
        if p != i:
            pa[[i, p]] = pa[[p, i]]
    err = np.abs(pa - lower @ upper).sum(axis=0).max()
    return float(err / (n * np.abs(_wide(a)).sum(axis=0).max() * _eps(lu.dtype)))


def _solve_flops(shape, dtype) -> float:
    n, k = shape
    return (2.0 / 3.0 * n**3 + 2.0 * n * n * max(k, 1)) * _cplx(dtype)


def _todo(doc: str) -> str:
    return f"TODO(lead): the communication model of {doc} (not written yet)"


def _solve() -> Operation:
    import jax.numpy as jnp
    import scipy.linalg

    import distla

    return Operation(
        name="solve",
        api="distla.linalg.solve",
        sizes_help="N (one N x N matrix, b a vector) or NxK (K right-hand sides)",
        expand=lambda s: _square_expand(s, "solve", rhs=True),
        describe=lambda s: f"{s[0]}x{s[0]}, b {s[0]}" + (f"x{s[1]}" if s[1] else ""),
        default_sizes=((512,), (1024,)),  # jnp.linalg.solve on 2x4 gathers: slow
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_solve_make,
        specs=lambda mesh: (None, None),
        variants=(
            Impl(
                "distla.linalg.solve",
                distla.linalg.solve,
                "mesh",
                model=lambda s, grid, dt: distla._lu.model_bytes(s[0], grid, dt, rhs=s[1]),
                model_text="docs/lu.md: relayout, panel gathers and broadcasts, swaps, solves",
            ),
        ),
        baselines=(
            Impl("one device: scipy.linalg.solve", scipy.linalg.solve, "host"),
            Impl("one device: jnp.linalg.solve", jnp.linalg.solve, "device"),
            Impl("jnp.linalg.solve on the sharded input (XLA)", jnp.linalg.solve, "auto"),
        ),
        flops=_solve_flops,
        check=_solve_check,
        weak=lambda s, p: (_round_to(s[0] * math.sqrt(p), 16), s[1]),
        weak_rule="n grows as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: _at_least_grid(s[:1], grid, "solve size"),
        footprint=lambda s, dt: (s[0] * s[0] + 2 * s[0] * max(s[1], 1)) * np.dtype(dt).itemsize,
        model_source="docs/lu.md",
        probe=(8, 0),
    )


def _lu() -> Operation:
    import jax.scipy.linalg as jsl
    import scipy.linalg

    import distla

    return Operation(
        name="lu",
        api="distla.linalg.lu_factor",
        sizes_help="N (one N x N matrix)",
        expand=lambda s: _square_expand(s, "lu", rhs=False),
        describe=lambda s: f"{s[0]}x{s[0]}",
        default_sizes=((1024,), (2048,)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=lambda s, dt, rng: (_solvable(s[0], dt, rng),),
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                "distla.linalg.lu_factor",
                distla.linalg.lu_factor,
                "mesh",
                model=lambda s, grid, dt: distla._lu.model_bytes(s[0], grid, dt),
                model_text="docs/lu.md: relayout + panel gathers/broadcasts + interchanges",
            ),
        ),
        baselines=(
            Impl("one device: scipy.linalg.lu_factor", scipy.linalg.lu_factor, "host"),
            Impl("one device: jax.scipy.linalg.lu_factor", jsl.lu_factor, "device"),
            Impl("jax.scipy.linalg.lu_factor on the sharded input (XLA)", jsl.lu_factor, "auto"),
        ),
        flops=lambda s, dt: 2.0 / 3.0 * s[0] ** 3 * _cplx(dt),
        check=_lu_check,
        weak=lambda s, p: (_round_to(s[0] * math.sqrt(p), 16),),
        weak_rule="n grows as sqrt(p): memory per device stays constant",
        min_dim=lambda s, grid: _at_least_grid(s, grid, "lu size"),
        footprint=lambda s, dt: 2 * s[0] * s[0] * np.dtype(dt).itemsize,
        model_source="docs/lu.md",
        probe=(8,),
    )


# -- batched solves ----------------------------------------------------------


def _batched_expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 2:
        return size
    raise ScalingError(f"batched-solve sizes are BxN (B matrices of N x N); got {_dims(size)}")


def _batched_make(shape, dtype, rng):
    bsz, n = shape
    a = _random((bsz, n, n), dtype, rng)
    return a, _random((bsz, n, 1), dtype, rng)


def _batched_check(inputs, x) -> float:
    a, b = inputs
    x = np.asarray(x)
    return max(_solve_ratio(a[i], b[i], x[i]) for i in range(a.shape[0]))


def _batched_fits(shape, grid) -> str | None:
    p = grid[0] * grid[1]
    if shape[0] % p:
        return (
            f"batched-solve batch {shape[0]} does not fit the {_dims(grid)} mesh: the batch "
            f"is split over all {p} devices and must be a multiple of {p}"
        )
    return None


def _batch_spec(mesh):
    from jax.sharding import PartitionSpec as P

    names = tuple(mesh.axis_names)
    return P(names, None, None)


def _batched() -> Operation:
    import jax.numpy as jnp
    import numpy.linalg

    import distla

    return Operation(
        name="batched-solve",
        api="distla.linalg.solve (a stack sharded along its batch)",
        sizes_help="BxN (B matrices of N x N, B a multiple of every mesh's devices)",
        expand=_batched_expand,
        describe=lambda s: f"{s[0]} x ({s[1]}x{s[1]}), b {s[0]}x{s[1]}x1",
        default_sizes=((512, 64), (64, 256)),
        dtypes=("float32", "float64", "complex64", "complex128"),
        make=_batched_make,
        specs=lambda mesh: (_batch_spec(mesh), _batch_spec(mesh)),
        variants=(
            Impl(
                "distla.linalg.solve (batched)",
                distla.linalg.solve,
                "mesh",
                model=lambda s, grid, dt: 0.0,
                model_text="0: each device solves its own matrices (DESIGN.md)",
            ),
        ),
        baselines=(  # numpy's batched solve is no yardstick: 20x slower than jax's here
            Impl("one device: jnp.linalg.solve", jnp.linalg.solve, "device"),
            Impl("one device: numpy.linalg.solve", numpy.linalg.solve, "host"),
            Impl("jnp.linalg.solve on the sharded input (XLA)", jnp.linalg.solve, "auto"),
        ),
        flops=lambda s, dt: s[0] * (2.0 / 3.0 * s[1] ** 3 + 2.0 * s[1] ** 2) * _cplx(dt),
        check=_batched_check,
        weak=lambda s, p: (s[0] * p, s[1]),
        weak_rule="the batch grows as p: matrices per device stay constant",
        min_dim=_batched_fits,
        footprint=lambda s, dt: s[0] * (s[1] * s[1] + 2 * s[1]) * np.dtype(dt).itemsize,
        model_source="DESIGN.md (batched solves move nothing); see docs/batched.md",
        probe=(2, 4),
    )


# -- 3D FFT ------------------------------------------------------------------


def _fft_expand(size: tuple[int, ...]) -> tuple[int, ...]:
    if len(size) == 1:
        return (size[0],) * 3
    if len(size) == 3:
        return size
    raise ScalingError(f"fft sizes are N (an N^3 volume) or XxYxZ; got {_dims(size)}")


def _fft_check(real: bool) -> Callable[[tuple[np.ndarray, ...], Any], float]:
    def check(inputs, y) -> float:
        (x,) = inputs
        ref = np.fft.rfftn(_wide(x)) if real else np.fft.fftn(_wide(x))
        y = np.asarray(y)
        err = np.linalg.norm(y.astype(ref.dtype) - ref)
        eps = _eps(np.finfo(y.dtype).dtype)
        return float(err / (np.linalg.norm(ref) * math.log2(x.size) * eps))

    return check


def _jaxdecomp(name: str) -> Callable[..., Any]:
    def call(x):
        import packaging  # noqa: F401  (jaxdecomp 0.3.1 imports it without declaring it)
        from jaxdecomp import fft

        return getattr(fft, name)(x)

    call.__name__ = f"jaxdecomp.fft.{name}"
    return call


def _fft(real: bool) -> Operation:
    import jax.numpy as jnp

    import distla

    jfn = jnp.fft.rfftn if real else jnp.fft.fftn
    name = "rfftn" if real else "fftn"
    fn = getattr(distla.fft, name)
    documented = getattr(distla.fft, "model_bytes", None)  # the model of docs/fft.md

    def model(shape, grid, dtype) -> float:
        spectrum = np.result_type(dtype, np.complex64)  # what the all-to-alls move
        return documented(shape, grid, real=real, itemsize=np.dtype(spectrum).itemsize)

    return Operation(
        name="rfft" if real else "fft",
        api=f"distla.fft.{name}",
        sizes_help="N (an N x N x N volume) or XxYxZ",
        expand=_fft_expand,
        describe=_dims,
        default_sizes=((64,), (128,)),
        dtypes=("float32", "float64") if real else ("complex64", "complex128"),
        make=lambda s, dt, rng: (_random(s, dt, rng),),
        specs=lambda mesh: (None,),
        variants=(
            Impl(
                f"distla.fft.{name}",
                fn,
                "mesh",
                model=model if documented else None,
                model_text="all-to-alls of the local spectrum, (g−1)/g each: "
                "distla.fft.model_bytes",
            ),
        ),
        baselines=(
            Impl(f"one device: jnp.fft.{name}", jfn, "device"),
            Impl(f"jnp.fft.{name} on the sharded input (XLA)", jfn, "auto"),
            # jaxdecomp 0.3.1's prfft3d raises "Not implemented": no real-input peer.
            *(() if real else (Impl("jaxdecomp.fft.pfft3d", _jaxdecomp("pfft3d"), "auto"),)),
        ),
        flops=lambda s, dt: (2.5 if real else 5.0) * math.prod(s) * math.log2(math.prod(s)),
        check=_fft_check(real),
        weak=lambda s, p: tuple(_round_to(x * p ** (1 / 3), 8) for x in s),
        weak_rule="every dimension grows as p^(1/3): points per device stay constant",
        min_dim=lambda s, grid: _at_least_grid(s[:2], grid, "fft size"),
        footprint=lambda s, dt: 2 * math.prod(s) * np.dtype(dt).itemsize * (2 if real else 1),
        model_source="docs/fft.md" if documented else _todo("docs/fft.md"),
        probe=(4, 4, 4),
    )


# One entry per operation: name -> a function building its Operation (the
# builders import lazily, so `--help` and argument errors need no jax).
OPERATIONS: dict[str, Callable[[], Operation]] = {
    "matmul": _matmul,
    "solve": _solve,
    "lu": _lu,
    "batched-solve": _batched,
    "fft": lambda: _fft(real=False),
    "rfft": lambda: _fft(real=True),
}


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block
        raise ScalingError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m distla scaling",
        description=(
            "Time one distla operation and its baselines over meshes and sizes; write "
            "results.json, results.md and scaling.png. Uses the real devices when there are "
            "enough for the largest mesh, else as many simulated CPU devices."
        ),
    )
    p.add_argument("--op", required=True, metavar="OP", help=" | ".join(OPERATIONS))
    p.add_argument(
        "--sizes",
        nargs="+",
        metavar="SIZE",
        help="problem sizes, comma or space separated (matmul: N or MxKxN; solve: N or NxK; "
        "lu: N; batched-solve: BxN; fft/rfft: N or XxYxZ). In weak mode: the 1-device size",
    )
    p.add_argument(
        "--meshes",
        nargs="+",
        default=["1x1,1x2,2x2,2x4"],
        metavar="RxC",
        help="meshes (rows x cols), comma or space separated; default 1x1,1x2,2x2,2x4",
    )
    p.add_argument("--mode", default="strong", help="strong (fixed sizes) or weak")
    p.add_argument("--dtype", help="float32, float64, complex64, complex128 (default: per op)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per case (median)")
    p.add_argument(
        "--baselines",
        default="all",
        help="all, or reference (only the one-device reference the efficiency needs)",
    )
    p.add_argument("--no-check", action="store_true", help="skip the accuracy check")
    p.add_argument("--out", help="output folder (default: scaling-OP)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


@dataclasses.dataclass(frozen=True)
class Plan:
    op: str
    sizes: tuple[tuple[int, ...], ...]
    meshes: tuple[tuple[int, int], ...]
    mode: str
    dtype: str
    rounds: int
    baselines: str
    check: bool
    out: Path
    quiet: bool

    @property
    def devices_needed(self) -> int:
        return max(r * c for r, c in self.meshes)


def _split(items: Sequence[str] | None) -> list[str]:
    return [t for item in items or () for t in re.split(r"[,\s]+", item) if t]


def _parse_ints(text: str, what: str) -> tuple[int, ...]:
    parts = text.lower().split("x")
    if not all(re.fullmatch(r"\d+", p) for p in parts):
        raise ScalingError(f"bad {what} {text!r}: write positive integers joined by 'x'")
    vals = tuple(int(p) for p in parts)
    if any(v < 1 for v in vals):
        raise ScalingError(f"bad {what} {text!r}: every entry must be at least 1")
    return vals


def parse_args(argv: Sequence[str]) -> Plan:
    """Parse and validate the command line (no devices needed); ScalingError on problems."""
    args = _parser().parse_args(list(argv))
    if args.op not in OPERATIONS:
        raise ScalingError(f"unknown op {args.op!r}; choose one of {', '.join(OPERATIONS)}")
    if args.mode not in ("strong", "weak"):
        raise ScalingError(f"unknown mode {args.mode!r}; choose strong or weak")
    if args.baselines not in ("all", "reference"):
        raise ScalingError(f"unknown --baselines {args.baselines!r}; choose all or reference")
    if args.rounds < 1:
        raise ScalingError(f"--rounds must be at least 1; got {args.rounds}")
    meshes = []
    for text in _split(args.meshes):
        shape = _parse_ints(text, "mesh")
        if len(shape) != 2:
            raise ScalingError(f"bad mesh {text!r}: write meshes as ROWSxCOLS, for example 2x4")
        meshes.append(shape)
    if not meshes:
        raise ScalingError("--meshes is empty")
    op = OPERATIONS[args.op]()
    if args.dtype is None:
        dtype = op.dtypes[0]
    elif args.dtype in op.dtypes:
        dtype = args.dtype
    else:
        raise ScalingError(
            f"--op {op.name} takes --dtype {', '.join(op.dtypes)}; got {args.dtype!r}"
        )
    entries = [_parse_ints(t, "size") for t in _split(args.sizes)] or op.default_sizes
    sizes = tuple(op.expand(s) for s in entries)
    plan = Plan(
        op=op.name,
        sizes=tuple(dict.fromkeys(sizes)),
        meshes=tuple(dict.fromkeys(meshes)),
        mode=args.mode,
        dtype=dtype,
        rounds=args.rounds,
        baselines=args.baselines,
        check=not args.no_check,
        out=Path(args.out or f"scaling-{op.name}"),
        quiet=args.quiet,
    )
    _check_sizes(op, plan)
    return plan


def _shape_on(op: Operation, plan: Plan, size: tuple[int, ...], grid: tuple[int, int]):
    return op.weak(size, grid[0] * grid[1]) if plan.mode == "weak" else size


def _available_memory() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _check_sizes(op: Operation, plan: Plan) -> None:
    dt = np.dtype(plan.dtype)
    avail = _available_memory()
    for size in plan.sizes:
        for grid in plan.meshes:
            shape = _shape_on(op, plan, size, grid)
            problem = op.min_dim(shape, grid)
            if problem:
                raise ScalingError(problem)
            # The host copy, the sharded copies (distla's mesh, the Auto mesh, one
            # device) and the results: about 5x the operands and result.
            need = 5 * op.footprint(shape, dt)
            if avail is not None and need > avail:
                raise ScalingError(
                    f"{op.name} size {op.describe(shape)} does not fit: it needs about "
                    f"{need / 2**30:.1f} GiB and {avail / 2**30:.1f} GiB are available"
                )


# --------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------


def _launched_by_cli() -> bool:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "distla.__main__"


def _ensure_devices(need: int, allow_reexec: bool) -> None:
    """Make sure ``need`` devices exist: real ones, else simulated CPU devices.

    XLA reads its flags once, when the first backend starts, so getting more
    CPU devices after looking means a fresh interpreter (as ``demo`` does).
    """
    import jax

    have = jax.device_count()
    if have >= need:
        return
    kind = jax.default_backend()
    if need > MAX_SIMULATED_DEVICES:
        raise ScalingError(
            f"a mesh of {need} devices is bigger than the {have} {kind} devices here, and "
            f"distla simulates at most {MAX_SIMULATED_DEVICES} CPU devices"
        )
    if not allow_reexec or os.environ.get(_REEXEC_MARK):
        raise ScalingError(
            f"a mesh of {need} devices is bigger than the {have} {kind} devices of this process "
            f"(set XLA_FLAGS=--xla_force_host_platform_device_count={need} before jax starts, "
            "or run `python -m distla scaling`, which does)"
        )
    env = dict(os.environ)
    flags = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", ""))
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={need}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    env[_REEXEC_MARK] = str(need)
    print(
        f"[distla] {have} {kind} device(s) found; running on {need} simulated CPU devices "
        "(they share this machine's cores).",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "distla", *sys.argv[1:]], env)


@functools.cache
def unavailable(op_name: str) -> str | None:
    """Why ``op_name`` cannot run in this checkout (a stub), or None when it can.

    Traces the public function (``jax.eval_shape``: nothing is compiled) on a
    tiny input on a 1x2 mesh, which needs 2 devices.
    """
    import jax

    op = OPERATIONS[op_name]()
    if jax.device_count() < 2:
        return None
    mesh = _mesh((1, 2))
    inputs = _place(op, op.make(op.probe, np.dtype(op.dtypes[0]), np.random.default_rng(0)), mesh)
    try:
        jax.eval_shape(op.variants[0].fn, *inputs)
    except NotImplementedError as e:
        return f"{op.api} is not implemented in this checkout yet ({e})"
    return None


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def _mesh(grid: tuple[int, int], auto: bool = False):
    import jax
    from jax.sharding import AxisType

    import distla

    p = grid[0] * grid[1]
    kind = AxisType.Auto if auto else AxisType.Explicit
    return distla.make_mesh(grid, devices=jax.devices()[:p], axis_types=kind)


def _place(op: Operation, host: tuple[np.ndarray, ...], mesh) -> tuple[Any, ...]:
    import distla

    return tuple(distla.shard(x, mesh, spec) for x, spec in zip(host, op.specs(mesh)))


class _Group:
    """The inputs of one (shape, mesh) group, placed lazily where impls want them."""

    def __init__(self, op: Operation, host: tuple[np.ndarray, ...], grid: tuple[int, int]):
        self.op, self.host, self.grid = op, host, grid
        self._placed: dict[str, tuple[Any, ...]] = {}

    def args(self, on: str) -> tuple[Any, ...]:
        import jax

        if on == "host":
            return self.host
        if on not in self._placed:
            if on == "device":
                d0 = jax.devices()[0]
                self._placed[on] = tuple(jax.device_put(x, d0) for x in self.host)
            else:
                self._placed[on] = _place(self.op, self.host, _mesh(self.grid, auto=on == "auto"))
        return self._placed[on]


@dataclasses.dataclass
class _Case:
    impl: Impl
    role: str  # "distla" or "baseline"
    shape: tuple[int, ...]
    grid: tuple[int, int]  # (1, 1) for one-device baselines
    series: int  # index of the --sizes entry this case belongs to
    base: tuple[int, ...]  # the shape whose one-device reference it is compared with
    plot_devices: int  # where the plot puts it
    reference: bool = False
    group: _Group | None = None
    fn: Callable[..., Any] | None = None
    args: tuple[Any, ...] = ()
    compiled: Any = None


def _plan_cases(op: Operation, plan: Plan) -> list[tuple[tuple[int, ...], tuple[int, int], list]]:
    """The cases, grouped by the (shape, mesh) whose inputs they share.

    A group times the distla variants on its mesh and the per-mesh baselines
    (not on 1x1, where they are the one-device call); the one-device
    baselines run once per distinct shape, in the first group of that shape.
    In weak mode the 1-device shape of each series is measured too: it is the
    reference of the whole series.
    """
    wanted = op.baselines if plan.baselines == "all" else op.baselines[:1]
    seen: set[tuple[int, ...]] = set()
    groups = []
    for si, size in enumerate(plan.sizes):
        base = _shape_on(op, plan, size, (1, 1))
        for gi, grid in enumerate(plan.meshes):
            shape = _shape_on(op, plan, size, grid)
            p = grid[0] * grid[1]
            ref = shape if plan.mode == "strong" else base
            cases = [
                _Case(v, "distla", shape, grid, si, ref, p) for v in op.variants if v.applies(grid)
            ]
            if p > 1:
                cases += [
                    _Case(b, "baseline", shape, grid, si, ref, p) for b in wanted if b.per_mesh
                ]
            one = [(shape, p)] + ([(base, 1)] if gi == 0 and base != shape else [])
            for s, x in one:
                if s in seen:
                    continue
                seen.add(s)
                cases += [
                    _Case(
                        b,
                        "baseline",
                        s,
                        (1, 1),
                        si,
                        ref if s == shape else base,
                        x,
                        reference=b is op.baselines[0],
                    )
                    for b in wanted
                    if not b.per_mesh
                ]
            groups.append((shape, grid, cases))
    return groups


def _host(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_host(t) for t in x)
    return np.asarray(x)


class _Progress:
    """A rich progress bar on stderr; plain lines without rich; nothing when quiet."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.done, self.quiet, self.bar = total, 0, quiet, None
        if quiet:
            return
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )
        except ImportError:  # rich comes with the `scaling` extra
            return
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        )
        self.bar.start()
        self.task = self.bar.add_task("scaling", total=total)

    def say(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)
        elif not self.quiet:
            print(f"[{self.done}/{self.total}] {text}", file=sys.stderr, flush=True)

    def advance(self) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.advance(self.task)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def run(plan: Plan) -> dict[str, Any]:
    """Run the study of ``plan`` on the devices present; returns the results document."""
    import jax

    from ._timing import time_calls

    op = OPERATIONS[plan.op]()
    dtype = np.dtype(plan.dtype)
    if plan.devices_needed > 1:
        why = unavailable(op.name)
        if why:
            raise Unavailable(why)
    groups = _plan_cases(op, plan)
    progress = _Progress(sum(len(cases) for _, _, cases in groups), plan.quiet)
    rows: list[dict[str, Any]] = []
    started = time.time()
    try:
        for shape, grid, cases in groups:
            rng = np.random.default_rng(0)
            inputs = {shape: _Group(op, op.make(shape, dtype, rng), grid)}
            for c in cases:  # in weak scaling, one-device references of other shapes
                if c.shape not in inputs:
                    inputs[c.shape] = _Group(op, op.make(c.shape, dtype, rng), (1, 1))
                c.group = inputs[c.shape]
            rows += _run_group(op, plan, cases, progress, time_calls)
            del inputs, cases
            jax.clear_caches()
    finally:
        progress.close()
    _derive(op, plan, rows)
    return _document(op, plan, rows, time.time() - started)


def _run_group(op, plan, cases, progress, time_calls) -> list[dict[str, Any]]:
    from .cost import cost_of_compiled

    rows = []
    live = []
    for c in cases:
        progress.say(f"compiling {op.describe(c.shape)} on {_dims(c.grid)}: {c.impl.name}")
        row = _row(op, plan, c)
        rows.append(row)
        try:
            try:
                row["compile_s"] = _first_call(c, c.impl.on)
            except Exception as e:
                if not (c.role == "distla" and c.grid == (1, 1)):
                    raise
                # A 1x1 mesh is one device: what the call does there matters little,
                # that it runs does. Say so, and time it on an Auto 1x1 mesh.
                row["note"] = f"on the 1x1 Explicit mesh: {_one_line(e)}; timed on Auto"
                row["compile_s"] = _first_call(c, "auto")
            live.append((c, row))
        except Exception as e:  # a failing case is recorded, the study goes on
            row["error"] = _one_line(e)
            if c.role == "distla":
                row["traceback"] = traceback.format_exc()
            progress.advance()
    if live:
        progress.say(f"timing {op.describe(cases[0].shape)} on {_dims(cases[0].grid)}")
        times = time_calls(
            {str(i): (c.fn, c.args) for i, (c, _) in enumerate(live)}, rounds=plan.rounds
        )
    for i, (c, row) in enumerate(live):
        t = times[str(i)]
        row["time_s"] = t.median_s
        row["times_s"] = list(t.times_s)
        progress.say(f"cost of {c.impl.name}")
        try:
            if c.compiled is not None:
                cost = cost_of_compiled(c.compiled)
                row["collective_bytes"] = dict(cost.collective_bytes)
                row["collective_counts"] = dict(cost.collective_counts)
                row["collective_mib"] = cost.total_collective_bytes / MIB
                row["peak_mib"] = cost.peak_memory_bytes / MIB
                row["flops_per_device"] = cost.flops
                row["cost_exact"] = cost.exact
            if plan.check and c.role == "distla" and op.check is not None:
                row["error_ratio"] = op.check(c.group.host, _host(c.fn(*c.args)))
        except Exception as e:
            row["error"] = _one_line(e)
        progress.advance()
    return rows


def _first_call(c: _Case, on: str) -> float:
    """Place the inputs, compile (once: the same executable is timed and costed) and run.

    Returns the seconds the compile and the first run took.
    """
    import jax

    c.args = c.group.args(on)
    t0 = time.perf_counter()
    if on == "host":
        c.fn = c.impl.fn
    else:
        c.compiled = jax.jit(c.impl.fn).lower(*c.args).compile()
        c.fn = c.compiled
    jax.block_until_ready(c.fn(*c.args))
    return time.perf_counter() - t0


def _row(op: Operation, plan: Plan, c: _Case) -> dict[str, Any]:
    pr, pc = c.grid
    impl = c.impl
    model = None
    if impl.model is not None and c.role == "distla":
        model = impl.model(c.shape, c.grid, np.dtype(plan.dtype)) / MIB
    return {
        "impl": impl.name,
        "role": c.role,
        "series": c.series,
        "reference_shape": list(c.base),
        "plot_devices": c.plot_devices,
        "reference": c.reference,
        "on": impl.on,
        "shape": list(c.shape),
        "shape_text": op.describe(c.shape),
        "mesh": _dims(c.grid),
        "devices": pr * pc,
        "dtype": plan.dtype,
        "flops": op.flops(c.shape, np.dtype(plan.dtype)),
        "time_s": None,
        "times_s": [],
        "compile_s": None,
        "gflops": None,
        "speedup": None,
        "efficiency": None,
        "collective_bytes": None,
        "collective_counts": None,
        "collective_mib": 0.0 if impl.on == "device" else None,
        "model_mib": model,
        "model_ratio": None,
        "peak_mib": None,
        "flops_per_device": None,
        "cost_exact": None,
        "error_ratio": None,
        "error": None,
        "note": None,
    }


def _ideal_speedup(devices: int, platform_name: str) -> int:
    return devices if platform_name != "cpu" else 1


def _derive(op: Operation, plan: Plan, rows: list[dict[str, Any]]) -> None:
    """GFLOP/s, speedup and efficiency against the reference; measured/model."""
    import jax

    plat = jax.default_backend()
    ref = {
        tuple(r["shape"]): r for r in rows if r["reference"] and r["time_s"] is not None
    }  # shape -> one-device reference row
    for r in rows:
        if r["time_s"] is None:
            continue
        r["gflops"] = r["flops"] / r["time_s"] / 1e9
        base = ref.get(tuple(r["reference_shape"]))
        if base is not None:
            speed = (r["flops"] / r["time_s"]) / (base["flops"] / base["time_s"])
            r["speedup"] = speed
            r["efficiency"] = speed / _ideal_speedup(r["devices"], plat)
        if r["model_mib"] is not None and r["collective_mib"] is not None and r["model_mib"] > 0:
            r["model_ratio"] = r["collective_mib"] / r["model_mib"]


def _machine() -> dict[str, Any]:
    import jax

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    mem = None
    try:
        mem = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    devs = jax.devices()
    return {
        "system": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu,
        "cores": cores,
        "memory_gib": mem,
        "python": platform.python_version(),
        "platform": jax.default_backend(),
        "device_kind": devs[0].device_kind,
        "device_count": len(devs),
        "simulated_cpu_devices": jax.default_backend() == "cpu" and len(devs) > 1,
    }


def _versions() -> dict[str, str]:
    import jax
    import jaxlib

    import distla

    out = {"distla": distla.__version__, "jax": jax.__version__, "jaxlib": jaxlib.__version__}
    out["numpy"] = np.__version__
    try:
        import scipy

        out["scipy"] = scipy.__version__
    except ImportError:
        pass
    return out


def _document(op: Operation, plan: Plan, rows: list[dict[str, Any]], wall: float) -> dict:
    machine = _machine()
    models = {v.name: v.model_text or None for v in op.variants}
    return {
        "command": " ".join(["python -m distla scaling", *map(shlex.quote, _ARGV)]),
        "argv": list(_ARGV),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "op": op.name,
        "api": op.api,
        "mode": plan.mode,
        "weak_rule": op.weak_rule if plan.mode == "weak" else None,
        "dtype": plan.dtype,
        "sizes": [list(s) for s in plan.sizes],
        "meshes": [_dims(g) for g in plan.meshes],
        "rounds": plan.rounds,
        "baselines": plan.baselines,
        "machine": machine,
        "versions": _versions(),
        "model": {"source": op.model_source, "formulas": models},
        "efficiency": (
            "throughput relative to the one-device reference ("
            + op.baselines[0].name
            + ") divided by the ideal speedup: p devices on accelerators, 1 on simulated CPU "
            "devices, which share the machine's cores"
        ),
        "units": {"time_s": "seconds (median)", "mib": "2**20 bytes per device"},
        "wall_s": wall,
        "rows": rows,
    }


_ARGV: list[str] = []


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _fmt(x: Any, spec: str, none: str = "–") -> str:
    return none if x is None else format(x, spec)


def markdown(doc: dict[str, Any]) -> str:
    """``results.md``: a header of context and one table row per case."""
    m = doc["machine"]
    v = doc["versions"]
    lines = [
        f"# distla scaling: {doc['op']} ({doc['mode']} scaling, {doc['dtype']})",
        "",
        f"- command: `{doc['command']}`",
        f"- machine: {m['cpu']}, {m['cores']} cores; {m['device_count']} {m['platform']} "
        f"devices{' (simulated: they share the cores)' if m['simulated_cpu_devices'] else ''}",
        f"- versions: distla {v['distla']}, jax {v['jax']}, jaxlib {v['jaxlib']}, "
        f"numpy {v['numpy']}",
        f"- efficiency: {doc['efficiency']}",
    ]
    if doc["weak_rule"]:
        lines.append(f"- weak scaling: {doc['weak_rule']}")
    formulas = [f"{k}: {f}" for k, f in doc["model"]["formulas"].items() if f]
    if formulas:
        lines.append(
            f"- model (received per device; {doc['model']['source']}): " + "; ".join(formulas)
        )
    else:
        lines.append(f"- model: **{doc['model']['source']}**")
    lines += [
        "",
        "| impl | shape | mesh | dev | time ms | GFLOP/s | speedup | eff. | coll MiB/dev "
        "| model MiB/dev | meas/model | peak MiB/dev | err ratio |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in doc["rows"]:
        model = _fmt(r["model_mib"], ".2f")
        if r["model_mib"] is None and r["role"] == "distla":
            model = "TODO"
        time_ms = None if r["time_s"] is None else r["time_s"] * 1e3
        cells = [
            r["impl"] + (f" (failed: {r['error']})" if r["error"] else ""),
            r["shape_text"],
            r["mesh"],
            str(r["devices"]),
            _fmt(time_ms, ".1f"),
            _fmt(r["gflops"], ".1f"),
            _fmt(r["speedup"], ".2f"),
            _fmt(r["efficiency"], ".2f"),
            _fmt(r["collective_mib"], ".2f"),
            model,
            _fmt(r["model_ratio"], ".3f"),
            _fmt(r["peak_mib"], ".1f"),
            _fmt(r["error_ratio"], ".3g"),
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    notes = [r for r in doc["rows"] if r["note"]]
    if notes:
        lines.append("")
        lines += [f"- note, {r['impl']} on {r['mesh']}: {r['note']}" for r in notes]
    lines += [
        "",
        "speedup: throughput / the one-device reference's at the same size (weak scaling: at "
        "the 1-device size). err ratio: DESIGN.md's scaled residual, passes at <= 30. "
        "MiB per device from `distla.cost` (the compiled program).",
        "",
    ]
    return "\n".join(lines)


_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"]
_STYLES = ["-", "--", ":", "-."]
_MARKERS = ["o", "s", "^", "D", "v"]


def plot(doc: dict[str, Any], path: Path) -> None:
    """``scaling.png``: time, efficiency, collective and peak MiB against devices.

    One colour per implementation; in strong scaling one line style per size.
    One-device baselines are horizontal lines in strong scaling (what one
    device does with the whole problem); in weak scaling they sit at the
    device count whose problem they solve. Black bars: the model.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    rows = [r for r in doc["rows"] if r["time_s"] is not None]
    impls = list(dict.fromkeys(r["impl"] for r in doc["rows"]))
    color = {name: _COLORS[i % len(_COLORS)] for i, name in enumerate(impls)}
    series: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        series.setdefault((r["impl"], r["series"]), []).append(r)
    meshes: dict[int, list[str]] = {1: []}
    for r in doc["rows"]:
        if r["role"] == "distla" or r["on"] == "auto":
            meshes.setdefault(r["devices"], []).append(r["mesh"])
    devices = sorted(meshes)
    strong = doc["mode"] == "strong"

    fig = Figure(figsize=(12, 9), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2)
    panels = [
        (axes[0, 0], "time_s", "time per call (s)", True),
        (axes[0, 1], "efficiency", "parallel efficiency", False),
        (axes[1, 0], "collective_mib", "collective MiB received per device", True),
        (axes[1, 1], "peak_mib", "peak MiB per device", True),
    ]
    for ax, key, label, log in panels:
        for (impl, si), rs in series.items():
            rs = sorted(rs, key=lambda r: (r["plot_devices"], r["mesh"]))
            style, mark = _STYLES[si % len(_STYLES)], _MARKERS[si % len(_MARKERS)]
            pts = [(r["plot_devices"], r[key]) for r in rs if r[key] is not None]
            pts = [(x, y) for x, y in pts if y > 0 or not log]
            if pts:
                xs, ys = zip(*pts)
                if strong and rs[0]["on"] in ("device", "host"):
                    ax.axhline(ys[0], color=color[impl], ls=style, lw=1, alpha=0.7)
                    ax.plot(xs, ys, ls="none", marker=mark, color=color[impl], ms=5)
                else:
                    ax.plot(xs, ys, ls=style, marker=mark, color=color[impl], ms=5)
            model = [(r["plot_devices"], r["model_mib"]) for r in rs if r["model_mib"]]
            if key == "collective_mib" and model:
                ax.plot(*zip(*model), ls="none", marker="_", color="black", ms=16, mew=2)
        if key == "efficiency":
            ax.axhline(1.0, color="gray", lw=0.8)
            ax.set_ylim(bottom=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(devices)
        ax.set_xticklabels([f"{d}\n{' '.join(dict.fromkeys(meshes[d]))}" for d in devices])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(devices[0] / 1.4, devices[-1] * 1.4)
        if log:
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: ""))
        ax.set_ylabel(label)
        ax.set_xlabel("devices (meshes)")
        ax.grid(True, which="major", alpha=0.3)
    ax = axes[1, 0]
    ax.set_title("black bars: the algorithm's communication model", fontsize=9)
    simulated = doc["machine"]["simulated_cpu_devices"]
    axes[0, 1].set_title(
        "1 = ideal: "
        + ("the one-device throughput (simulated devices share the cores)" if simulated else "")
        + ("" if simulated else "p times the one-device throughput"),
        fontsize=9,
    )
    handles = [Line2D([], [], color=color[n], lw=2, label=n) for n in impls]
    describe = OPERATIONS[doc["op"]]().describe if doc.get("op") in OPERATIONS else _dims
    if len(doc["sizes"]) > 1:
        handles += [
            Line2D(
                [],
                [],
                color="gray",
                ls=_STYLES[i % len(_STYLES)],
                marker=_MARKERS[i % len(_MARKERS)],
                label=("size " if strong else "1-device size ") + describe(s),
            )
            for i, s in enumerate(doc["sizes"])
        ]
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=9)
    m = doc["machine"]
    fig.suptitle(
        f"distla scaling: {doc['op']} {doc['dtype']}, {doc['mode']} scaling; "
        f"{m['device_count']} {m['platform']} devices"
        f"{' (simulated)' if simulated else ''}, jax {doc['versions']['jax']}"
    )
    fig.savefig(path, dpi=100)


def write(doc: dict[str, Any], out: Path) -> list[Path]:
    """Write results.json, results.md and scaling.png into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "results.json", out / "results.md", out / "scaling.png"]
    paths[0].write_text(json.dumps(doc, indent=1, default=float) + "\n")
    paths[1].write_text(markdown(doc))
    plot(doc, paths[2])
    return paths


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def main(argv: Sequence[str]) -> int:
    """``python -m distla scaling ...``; returns the exit status."""
    global _ARGV
    _ARGV = list(argv)
    try:
        plan = parse_args(argv)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ScalingError("the plot needs matplotlib: pip install 'distla[scaling]'") from None
        _ensure_devices(plan.devices_needed, allow_reexec=_launched_by_cli())
        import jax

        with jax.enable_x64(plan.dtype in ("float64", "complex128")):
            doc = run(plan)
        paths = write(doc, plan.out)
    except ScalingError as e:
        print(f"python -m distla scaling: error: {e}", file=sys.stderr)
        return 2
    except Unavailable as e:
        print(f"python -m distla scaling: {e}", file=sys.stderr)
        return 3
    print(markdown(doc))
    print("wrote " + ", ".join(str(p) for p in paths))
    failed = [r for r in doc["rows"] if r["role"] == "distla" and r["error"]]
    for r in failed:
        print(f"FAILED {r['impl']} {r['shape_text']} on {r['mesh']}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0
