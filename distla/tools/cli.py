"""The command line of the tools: ``python -m distla demo | doctor | scaling | launch``.

One parser with a subcommand per tool; each tool module contributes its
options (``add_arguments``) and runs from the parsed arguments (``main``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import cache, demo, doctor, launch, scaling
from .argtypes import HelpFormatter
from .ops import ScalingError

PROG = "python -m distla"


def _one_line_error(message: str):
    """The scaling subcommand's argument errors: one line, no usage block (exit status 2)."""
    raise ScalingError(message)


def parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The parser and its subcommands' parsers, by name."""
    top = argparse.ArgumentParser(prog=PROG, description="distla's command-line tools.")
    sub = top.add_subparsers(dest="tool", required=True, metavar="{demo,doctor,scaling,launch}")
    subs = {
        "demo": sub.add_parser(
            "demo",
            help="run every capability once and print a cost table (about a minute)",
            description=demo.DESCRIPTION,
            formatter_class=HelpFormatter,
        ),
        "doctor": sub.add_parser(
            "doctor",
            help="check and time every family on the devices here (run it first)",
            description=doctor.__doc__.splitlines()[0].split(": ", 1)[1],
            formatter_class=HelpFormatter,
        ),
        "scaling": sub.add_parser(
            "scaling",
            help="time an operation over meshes and sizes",
            description=scaling.DESCRIPTION,
            formatter_class=HelpFormatter,
        ),
        "launch": sub.add_parser(
            "launch",
            help="start N local processes on jax.distributed",
            usage=launch.USAGE,
            description=launch.DESCRIPTION,
            epilog=launch.EPILOG,
            formatter_class=HelpFormatter,
        ),
    }
    demo.add_arguments(subs["demo"])
    doctor.add_arguments(subs["doctor"])
    scaling.add_arguments(subs["scaling"])
    for name in ("demo", "scaling"):
        cache.add_arguments(subs[name])
    subs["scaling"].error = _one_line_error  # type: ignore[method-assign]
    launch.add_arguments(subs["launch"])
    return top, subs


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (after ``python -m distla``) parsed; ``tool`` names the subcommand.

    ``launch`` reads its own ``--``: everything after it is the command the
    processes run. Errors exit with status 2 (scaling: raise ScalingError).
    """
    argv = list(argv)
    top, subs = parser()
    if argv[:1] == ["launch"]:
        args = launch.parse(subs["launch"], argv[1:])
        args.tool = "launch"
    else:
        args = top.parse_args(argv)
    args.argv = argv[1:]
    return args


def _from_command_line() -> bool:
    """True when this process is ``python -m distla ...`` (it may ask for devices)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "distla.__main__"


def main(
    argv: Sequence[str] | None = None,
    *,
    devices: bool | None = None,
    compile_cache: bool | None = None,
) -> int:
    """Run ``python -m distla ARGV``; returns the exit status.

    ``devices``: whether the tool may ask for simulated CPU devices (set
    ``jax_num_cpu_devices``, or start again in a fresh interpreter); by
    default only when this process is the command line itself.
    ``compile_cache``: whether ``demo`` and ``scaling`` switch on jax's
    persistent compilation cache (``tools/cache.py``; off with
    ``--no-compile-cache``); by default, as ``devices``, only on the command
    line, so that a caller's jax configuration is left alone.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if devices is None:
        devices = _from_command_line()
    if compile_cache is None:
        compile_cache = _from_command_line()
    try:
        args = parse(argv)
    except ScalingError as e:
        print(f"{PROG} scaling: error: {e}", file=sys.stderr)
        return 2
    if args.tool == "launch":
        return launch.main(args)
    if compile_cache:
        cache.enable(args)
    if args.tool == "doctor":
        return doctor.main(args, devices=devices)
    if args.tool == "scaling":
        return scaling.main(args, args.argv, devices=devices)
    return demo.main(args, devices=devices)
