"""``python -m distla scaling``: how time, communication and memory per device scale.

For one operation, every requested size and every requested mesh, this times
the distla call and its baselines (one device, XLA's own partitioning of the
jnp call on the same sharded input, jaxdecomp for the FFT) in interleaved
rounds, reads collective bytes and peak memory per device from the very
executable it timed, puts the communication volume the algorithm's model
predicts beside the measured one, checks the result with LAPACK's scaled
residual ratio, and writes::

    DIR/results.json   every figure, the machine, the versions, the command line
    DIR/results.md     the same as a table
    DIR/scaling.png    time, parallel efficiency, collective MiB and peak MiB
                       per device against the number of devices

What differs between operations lives in the operation table
(`distla.tools.ops`); running is `run`, the files
`report` and `plot`.

Parallel efficiency is throughput relative to the one-device reference
(the operation's first baseline) divided by the ideal speedup:
``(flops / time) / (flops_ref / time_ref) / ideal``. On accelerators the
ideal speedup on ``p`` devices is ``p``. Simulated CPU devices share the
machine's cores, so there the ideal is 1: the best a mesh can do is match
one device using every core (the physical limit when simulated devices share the cores).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from . import memory
from .ops import OPERATIONS, Operation, ScalingError
from .run import RunSpec, run_cases

DESCRIPTION = (
    "Time one distla operation and its baselines over meshes and sizes; write "
    "results.json, results.md and scaling.png. Uses the real devices when there are "
    "enough for the largest mesh, else as many simulated CPU devices."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m distla scaling``."""
    p.add_argument(
        "--op", metavar="OP", help=" | ".join(OPERATIONS) + " (required unless --memory)"
    )
    p.add_argument(
        "--sizes",
        nargs="+",
        metavar="SIZE",
        help="problem sizes, comma or space separated (matmul: N or MxKxN; solve: N or NxK; "
        "lu, cholesky: N; qr: N or MxN; batched-solve: BxN; fft/rfft: N or XxYxZ). In weak "
        "mode: the 1-device size (default: two sizes per operation)",
    )
    p.add_argument(
        "--meshes",
        nargs="+",
        default=["1x1,1x2,2x2,2x4"],
        metavar="RxC",
        help="meshes (rows x cols), comma or space separated (default: 1x1,1x2,2x2,2x4)",
    )
    p.add_argument("--mode", default="strong", help="strong (fixed sizes) or weak")
    p.add_argument(
        "--dtype", help="float32, float64, complex64, complex128 (default: the op's first)"
    )
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per case (median)")
    p.add_argument(
        "--baselines",
        default="all",
        help="all, or reference (only the one-device reference the efficiency needs)",
    )
    p.add_argument("--no-check", action="store_true", help="skip the accuracy check")
    p.add_argument("--out", metavar="DIR", help="output folder (default: scaling-OP)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--memory",
        action="store_true",
        help="instead of timing one op: compile only, and plot peak memory per device "
        "against n for distla and for jnp on the same sharded input, per family, on the "
        "largest mesh of --meshes; state the largest n each fits in --device-memory "
        f"(sizes default to {','.join(map(str, memory.DEFAULT_SIZES))}; writes memory.json, "
        "memory.md, memory.png in --out, default scaling-memory)",
    )
    p.add_argument(
        "--families",
        nargs="+",
        metavar="FAMILY",
        help="with --memory: families, comma or space separated, from "
        + ", ".join(memory.FAMILIES)
        + f" (default: {','.join(memory.DEFAULT_FAMILIES)})",
    )
    p.add_argument(
        "--device-memory",
        metavar="BYTES",
        help="with --memory: memory per device the largest n is stated for, e.g. 16GiB or "
        "80GB (default: the device's own where jax reports it, else "
        f"{memory.DEFAULT_DEVICE_MEMORY // 2**30}GiB)",
    )


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


def plan_of(args: argparse.Namespace) -> tuple[RunSpec, Path]:
    """Validate parsed arguments (no devices needed): the plan and the output folder.

    Raises:
      ScalingError: one line saying what is wrong.
    """
    if args.op is None:
        raise ScalingError("--op is required (or --memory)")
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
    plan = RunSpec(
        op=op.name,
        sizes=tuple(dict.fromkeys(sizes)),
        meshes=tuple(dict.fromkeys(meshes)),
        mode=args.mode,
        dtype=dtype,
        rounds=args.rounds,
        baselines=args.baselines,
        check=not args.no_check,
        quiet=args.quiet,
    )
    check_sizes(op, plan)
    return plan, Path(args.out or f"scaling-{op.name}")


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


def check_sizes(op: Operation, plan: RunSpec) -> None:
    """Every size fits every mesh and the memory here, else ScalingError."""
    dt = np.dtype(plan.dtype)
    avail = _available_memory()
    for size in plan.sizes:
        for grid in plan.meshes:
            shape = plan.shape_on(op, size, grid)
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


def run(plan: RunSpec, argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the study of ``plan`` on the devices present; returns the results document."""
    import jax

    from .report import document

    have = jax.device_count()
    if have < plan.devices_needed:
        raise ScalingError(
            f"a mesh of {plan.devices_needed} devices is bigger than the {have} "
            f"{jax.default_backend()} devices of this process (ask for simulated CPU "
            f"devices with JAX_NUM_CPU_DEVICES={plan.devices_needed} before jax starts, or "
            "run `python -m distla scaling`, which does)"
        )
    op = OPERATIONS[plan.op]()
    started = time.time()
    with jax.enable_x64(plan.dtype in ("float64", "complex128")):
        rows = run_cases(op, plan)
    return document(op, plan, rows, time.time() - started, argv)


def main(args: argparse.Namespace, argv: Sequence[str], *, devices: bool = False) -> int:
    """``python -m distla scaling`` with parsed ``args``; returns the exit status.

    ``argv`` is the command line after ``scaling`` (for the results). With
    ``devices``, simulated CPU devices are asked for when the real ones are
    too few (the command line does; a caller whose jax already runs does not).
    """
    from .devices import DeviceError, ensure_devices
    from .report import markdown, write

    if getattr(args, "memory", False):
        return _memory_main(args, argv, devices=devices)
    try:
        plan, out = plan_of(args)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ScalingError("the plot needs matplotlib: pip install 'distla[scaling]'") from None
        if devices:
            ensure_devices(plan.devices_needed, ["scaling", *argv])
        doc = run(plan, argv)
        paths = write(doc, out)
    except (ScalingError, DeviceError) as e:
        print(f"python -m distla scaling: error: {e}", file=sys.stderr)
        return 2
    print(markdown(doc))
    print("wrote " + ", ".join(str(p) for p in paths))
    failed = [r for r in doc["rows"] if r["role"] == "distla" and r["error"]]
    for r in failed:
        print(f"FAILED {r['impl']} {r['shape_text']} on {r['mesh']}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0


def _memory_main(args: argparse.Namespace, argv: Sequence[str], *, devices: bool) -> int:
    """``--memory``: the compile-only study of peak memory per device (``tools/memory.py``)."""
    from .devices import DeviceError, ensure_devices

    try:
        spec, out = memory.spec_of(args, _split)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ScalingError("the plot needs matplotlib: pip install 'distla[scaling]'") from None
        if devices:
            ensure_devices(spec.mesh[0] * spec.mesh[1], ["scaling", *argv])
        import jax

        need = spec.mesh[0] * spec.mesh[1]
        if jax.device_count() < need:
            raise ScalingError(
                f"a {spec.mesh[0]}x{spec.mesh[1]} mesh needs {need} devices; this process has "
                f"{jax.device_count()} (JAX_NUM_CPU_DEVICES={need} before jax starts)"
            )
        with jax.enable_x64(spec.dtype in ("float64", "complex128")):
            doc = memory.measure(spec, progress=(lambda _: None) if args.quiet else print)
        paths = memory.write(doc, out)
    except (ScalingError, DeviceError) as e:
        print(f"python -m distla scaling: error: {e}", file=sys.stderr)
        return 2
    print(memory.markdown(doc))
    print("wrote " + ", ".join(str(p) for p in paths))
    return 1 if any(r["error"] for r in doc["rows"] if r["impl"] == "distla") else 0
