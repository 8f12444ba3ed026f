"""jax's persistent compilation cache for the command-line tools.

The tools switch it on (the library never changes jax's configuration): a
program compiled once is read back from disk by the next process that
compiles the same program with the same jax, devices and flags, so a second
``python -m distla demo`` skips most of its compile time. ``--no-compile-cache``
turns it off; ``--compile-cache DIR`` picks the directory (default
``$XDG_CACHE_HOME/distla/jax``, else ``~/.cache/distla/jax``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

# Programs that compile faster than this are not written (jax's own default, 1 s).
MIN_COMPILE_SECS = 1.0


def default_dir() -> Path:
    """Where the tools keep compiled programs unless told otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "distla" / "jax"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--compile-cache DIR`` and ``--no-compile-cache`` on a tool's parser."""
    p.add_argument(
        "--compile-cache",
        metavar="DIR",
        type=Path,
        default=None,
        help=f"keep compiled programs here across runs (default: {default_dir()})",
    )
    p.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not read or write jax's persistent compilation cache",
    )


def enable(args: argparse.Namespace) -> Path | None:
    """Switch jax's persistent compilation cache on as ``args`` ask; the directory or None."""
    if getattr(args, "no_compile_cache", False):
        return None
    import jax

    where = getattr(args, "compile_cache", None) or default_dir()
    where.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(where))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECS)
    return where
