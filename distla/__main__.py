"""Command line: ``python -m distla demo``."""

from __future__ import annotations

import argparse
import os
import sys

SIMULATED_DEVICES = 8
_REEXEC_MARK = "DISTLA_SIMULATED_DEVICES"


def _ensure_devices() -> None:
    """Re-run this command on 8 simulated CPU devices when fewer than 2 devices exist.

    XLA reads its flags once, when the first backend starts, so the only way
    to get more CPU devices after looking is a fresh interpreter.
    """
    import jax

    if jax.device_count() >= 2 or os.environ.get(_REEXEC_MARK):
        return
    env = dict(os.environ)
    flag = f"--xla_force_host_platform_device_count={SIMULATED_DEVICES}"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
    env["JAX_PLATFORMS"] = "cpu"
    env[_REEXEC_MARK] = str(SIMULATED_DEVICES)
    print(
        f"[distla] {jax.device_count()} device found; running on {SIMULATED_DEVICES} "
        "simulated CPU devices (they share this machine's cores).",
        flush=True,
    )
    os.execve(sys.executable, [sys.executable, "-m", "distla", *sys.argv[1:]], env)


def _demo(args: argparse.Namespace) -> int:
    # Under `python -m distla launch` (or srun/mpirun) join the other processes first:
    # jax.distributed must start before anything else touches jax. Alone, a no-op.
    from .distributed import init_distributed

    info = init_distributed()
    if info.num_processes == 1:
        _ensure_devices()
    import jax

    from . import _demo

    if jax.process_index() == 0:
        devs = jax.devices()
        where = f" in {jax.process_count()} processes" if jax.process_count() > 1 else ""
        print(
            f"distla demo: {len(devs)} {devs[0].platform} devices{where}, jax {jax.__version__}, "
            f"{args.rounds} timed rounds (medians)",
            flush=True,
        )
    rows = _demo.run(size_scale=args.scale, rounds=args.rounds, only=args.only)
    if jax.process_index() == 0:
        print(_demo.format_rows(rows))
        print(
            "vs 1 dev: distla time / one-device time; vs XLA: distla time / the jnp call on the "
            "same sharded inputs (Auto mesh); err ratio passes at <= 30."
        )
        if jax.process_count() > 1:
            print(
                "Across processes the one-device baseline cannot run (no device holds the "
                "operands): '-' in vs 1 dev. Times are process 0's."
            )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distla")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run every capability once and print a cost table")
    demo.add_argument("--scale", type=float, default=1.0, help="problem size factor (0.25 = quick)")
    demo.add_argument("--rounds", type=int, default=5, help="timed rounds per case")
    demo.add_argument(
        "--only", nargs="+", choices=["matmul", "solve", "batched", "fft"], help="run only these"
    )
    demo.set_defaults(run=_demo)
    # `launch` (distla/_launch.py) and `scaling` (distla/_scaling.py) parse their own arguments.
    sub.add_parser("launch", help="start N local processes on jax.distributed", add_help=False)
    sub.add_parser("scaling", help="time an operation over meshes and sizes", add_help=False)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "launch":
        from . import _launch

        return _launch.main(argv[1:])
    if argv and argv[0] == "scaling":
        from . import _scaling

        return _scaling.main(argv[1:])
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
