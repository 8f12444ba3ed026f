"""``python -m distla launch``: N local processes on jax.distributed.

Starts N copies of a Python script (or ``-m module``) on this machine, each a
process of one ``jax.distributed`` run over loopback: process 0 hosts the
coordinator on a free port, every process gets its own simulated CPU devices
and gloo collectives, and ``distla.init_distributed()`` in the script picks
the settings up from the environment. Output is streamed line by line with a
``[p0]``-style prefix. When a process fails, the others are stopped (they
would wait forever in a collective), and the launcher exits with the failing
process's status; ``--timeout`` bounds the whole run.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import IO

from distla.distributed import (
    ENV_COORDINATOR,
    ENV_FAILURES,
    ENV_HEARTBEAT_TIMEOUT,
    ENV_INIT_TIMEOUT,
    ENV_NUM_PROCESSES,
    ENV_PROCESS_ID,
    ENV_SHUTDOWN_TIMEOUT,
    port_in_use,
)

from .argtypes import positive_float, positive_int
from .devices import ENV as _DEVICES_ENV

# A device count in XLA_FLAGS would compete with JAX_NUM_CPU_DEVICES: dropped.
_DEVICE_FLAG = "--xla_force_host_platform_device_count"
# gloo prints "[Gloo] Rank R is connected to N peer ranks. Expected number of connected
# peer ranks is : N" per device and collective group, piece by piece from several
# threads, so pieces of it land on lines of their own. The launcher drops lines made
# of those pieces (and bare numbers right after them) unless --gloo-messages is given.
_GLOO_PIECES = re.compile(
    rb"\[Gloo\] Rank | is connected to | peer ranks\. ?|Expected number of connected "
    rb"peer ranks is : ?"
)
_GLOO_MESSAGE = re.compile(
    rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. Expected number of connected "
    rb"peer ranks is : \d+"
)
_NUMBER_ONLY = re.compile(rb"\s*\d*\s*")
_GLOO_WINDOW_S = 1.0
TIMEOUT_STATUS = 124
USAGE_STATUS = 2  # the launcher could not start the run (a port in use)
# The launcher's pid, for the children's parent-death check (see _DEATH_SHIM).
_ENV_LAUNCHER = "DISTLA_LAUNCHER_PID"
# Each child starts as this shim, which asks Linux to SIGKILL it when the launcher dies
# (prctl PR_SET_PDEATHSIG, kept across exec) and then becomes the real command: a
# launcher killed by SIGKILL (the OOM killer, a CI timeout) cannot stop its children
# itself, and they would run on forever waiting for each other. If the launcher died
# before the prctl, the shim's parent has already changed: it exits at once.
_DEATH_SHIM = (
    "import ctypes,os,signal,sys;"
    "ctypes.CDLL(None).prctl(1,signal.SIGKILL);"
    f"os.getppid()==int(os.environ['{_ENV_LAUNCHER}']) or os._exit(128+signal.SIGKILL);"
    "os.execv(sys.executable,[sys.executable,'-u',*sys.argv[1:]])"
)

USAGE = """python -m distla launch [-n N] [--devices-per-process D] [--timeout S] \
-- (script.py | -m module) [args ...]"""

EPILOG = """
Each process gets in its environment: JAX_COORDINATOR_ADDRESS=127.0.0.1:PORT,
JAX_NUM_PROCESSES=N, JAX_PROCESS_ID=i, JAX_PLATFORMS=cpu,
JAX_CPU_COLLECTIVES_IMPLEMENTATION=gloo and JAX_NUM_CPU_DEVICES=D (a device
count in XLA_FLAGS is removed; other XLA flags are kept).
The script calls distla.init_distributed() (or jax.distributed.initialize with
those values) before any other jax call.

Examples:
  python -m distla launch -n 2 --devices-per-process 4 -- my_script.py --size 1024
  python -m distla launch -n 2 --devices-per-process 4 -- -m distla demo --scale 0.25
"""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def child_env(
    base: dict[str, str],
    *,
    coordinator: str,
    num_processes: int,
    process_id: int,
    devices: int,
    failures: str | None = None,
    timeouts: dict[str, float | None] | None = None,
) -> dict[str, str]:
    """The environment of process ``process_id`` (see the module docstring).

    ``timeouts``: ``{"init": s, "heartbeat": s, "shutdown": s}``, for
    ``distla.init_distributed`` in the child (``None``: its default).
    """
    env = dict(base)
    flags = " ".join(re.sub(rf"{_DEVICE_FLAG}=\S*", "", env.get("XLA_FLAGS", "")).split())
    if flags:
        env["XLA_FLAGS"] = flags
    else:
        env.pop("XLA_FLAGS", None)
    env[_DEVICES_ENV] = str(devices)
    env["JAX_PLATFORMS"] = "cpu"
    env["JAX_CPU_COLLECTIVES_IMPLEMENTATION"] = "gloo"
    env[ENV_COORDINATOR] = coordinator
    env[ENV_NUM_PROCESSES] = str(num_processes)
    env[ENV_PROCESS_ID] = str(process_id)
    env["PYTHONUNBUFFERED"] = "1"
    if failures is not None:
        env[ENV_FAILURES] = failures
    names = {"init": ENV_INIT_TIMEOUT, "heartbeat": ENV_HEARTBEAT_TIMEOUT,
             "shutdown": ENV_SHUTDOWN_TIMEOUT}  # fmt: skip
    for key, value in (timeouts or {}).items():
        if value is not None:
            env[names[key]] = str(int(math.ceil(value)))
    return env


DESCRIPTION = (
    "Run a script as N local processes of one jax.distributed run "
    "(loopback, gloo CPU collectives, simulated CPU devices)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m distla launch``."""
    parser.add_argument(
        "-n", "--num-processes", type=positive_int, default=2, metavar="N", help="processes"
    )
    parser.add_argument(
        "--devices-per-process",
        type=positive_int,
        default=4,
        metavar="D",
        help="simulated CPU devices each",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="S",
        help="stop everything after S seconds, exit status 124 (default: no limit)",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds the other processes get to exit after one fails, before SIGKILL",
    )
    parser.add_argument(
        "--port", type=positive_int, default=None, help="coordinator port (default: a free one)"
    )
    parser.add_argument(
        "--init-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds the processes wait for the coordinator and each other at start (300)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds of silence after which a process is declared dead (100)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds an exiting process waits for the others in jax's shutdown barrier (300)",
    )
    parser.add_argument("--no-prefix", action="store_true", help="do not prefix output lines")
    parser.add_argument(
        "--gloo-messages",
        action="store_true",
        help="keep gloo's 'Rank i is connected to n peer ranks' lines",
    )
    parser.add_argument(
        "-m", dest="module", default=None, metavar="MODULE", help="run a module, as python -m"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="script.py [args ...]")


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (after ``launch``) parsed by ``parser``; ``command`` is what each process runs.

    Everything after the first ``--`` is the command, untouched, unless the
    script was named before it (then the ``--`` is the script's own).
    """
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else None
    args = parser.parse_args(argv if cut is None else argv[:cut])
    if cut is not None and args.module is None and not args.command:
        rest = argv[cut + 1 :]
        if rest[:1] == ["-m"]:
            if len(rest) < 2:
                parser.error("-m needs a module name")
            args.module, rest = rest[1], rest[2:]
        args.command = rest
    elif cut is not None:  # the "--" belongs to the script's own arguments
        args = parser.parse_args(argv)
    args.command = ["-m", args.module, *args.command] if args.module else list(args.command)
    if not args.command:
        parser.error("no script given: python -m distla launch -n 2 -- script.py [args]")
    for name in ("init_timeout", "heartbeat_timeout", "shutdown_timeout"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1 second; got {value:g}")
    return args


def _pump(
    stream: IO[bytes], out: IO[bytes], prefix: bytes, lock: threading.Lock, quiet: bool
) -> None:
    """Copy ``stream`` to ``out`` line by line, each line prefixed (gloo chatter dropped)."""
    last_gloo = -math.inf
    for line in iter(stream.readline, b""):
        if quiet:
            line, whole = _GLOO_MESSAGE.subn(b"", line)
            rest, pieces = _GLOO_PIECES.subn(b"", line)
            now = time.monotonic()
            if whole or pieces:
                last_gloo = now
            if _NUMBER_ONLY.fullmatch(rest) and (
                whole or pieces or (rest.strip() and now - last_gloo < _GLOO_WINDOW_S)
            ):
                continue
        if not line.endswith(b"\n"):
            line += b"\n"
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def _say(message: str) -> None:
    print(f"[launch] {message}", file=sys.stderr, flush=True)


def _status(returncode: int) -> int:
    """A shell-style exit status: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def _stop(procs: Sequence[subprocess.Popen], grace: float) -> None:
    """SIGTERM every live process group, then SIGKILL what is left after ``grace`` s.

    jax's preemption service catches SIGTERM in a process that joined a
    distributed run, so the SIGKILL is what usually ends it.
    """
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in live) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in live:
        if p.poll() is None:
            _signal_group(p, signal.SIGKILL)
    for p in live:
        p.wait()


class _Terminated(BaseException):
    """The launcher got SIGTERM or SIGHUP (``args[0]``: the signal number)."""


def _terminated(signum, frame):
    raise _Terminated(signum)


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(p.pid, sig)  # the child leads its own group (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass


def launch(
    command: Sequence[str],
    *,
    num_processes: int = 2,
    devices_per_process: int = 4,
    timeout: float | None = None,
    grace: float = 3.0,
    port: int | None = None,
    prefix: bool = True,
    gloo_messages: bool = False,
    init_timeout: float | None = None,
    heartbeat_timeout: float | None = None,
    shutdown_timeout: float | None = None,
) -> int:
    """Run ``python *command`` as ``num_processes`` processes; return the exit status.

    0 when every process exits with 0; otherwise the status of the first
    process that failed (the others are stopped), 124 on ``timeout``, or 2
    when ``port`` is in use (nothing is started). The children end with the
    launcher, even when it is killed with SIGKILL (Linux: a parent-death
    signal). The three timeouts go to ``distla.init_distributed`` in each
    process (``DISTLA_INIT_TIMEOUT``, ...; ``None``: its defaults).
    """
    if port is not None and port_in_use(port):
        _say(
            f"port {port} is in use on this machine: process 0's coordinator cannot listen "
            "on it. Pick another with --port PORT, or leave --port out to use a free one."
        )
        return USAGE_STATUS
    coordinator = f"127.0.0.1:{port or free_port()}"
    timeouts = {"init": init_timeout, "heartbeat": heartbeat_timeout, "shutdown": shutdown_timeout}
    shim = ["-c", _DEATH_SHIM] if sys.platform.startswith("linux") else ["-u"]
    if threading.current_thread() is threading.main_thread():
        # The children lead their own sessions, so a SIGTERM/SIGHUP sent to the launcher
        # alone would orphan them: stop them too.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, _terminated)
    lock = threading.Lock()
    procs: list[subprocess.Popen] = []
    pumps: list[threading.Thread] = []
    failures = tempfile.TemporaryDirectory(prefix="distla-launch-")
    try:
        for i in range(num_processes):
            env = child_env(
                dict(os.environ),
                coordinator=coordinator,
                num_processes=num_processes,
                process_id=i,
                devices=devices_per_process,
                failures=failures.name,
                timeouts=timeouts,
            )
            env[_ENV_LAUNCHER] = str(os.getpid())
            p = subprocess.Popen(
                [sys.executable, *shim, *command],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            procs.append(p)
            tag = f"[p{i}] ".encode() if prefix else b""
            for stream, out in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
                t = threading.Thread(
                    target=_pump, args=(stream, out, tag, lock, not gloo_messages), daemon=True
                )
                t.start()
                pumps.append(t)
        status = _wait(procs, timeout=timeout, grace=grace, failures=failures.name)
    except KeyboardInterrupt:
        _say("interrupted; stopping every process")
        _stop(procs, grace=0.5)
        status = 130
    except _Terminated as sig:
        _say(f"got signal {sig.args[0]}; stopping every process")
        _stop(procs, grace=0.5)
        status = 128 + sig.args[0]
    except BaseException:
        _stop(procs, grace=0.5)
        raise
    for t in pumps:
        t.join(timeout=5)
    failures.cleanup()
    return status


def _wait(
    procs: Sequence[subprocess.Popen], *, timeout: float | None, grace: float, failures: str
) -> int:
    """Wait for every process; on the first failure stop the rest.

    The process reported is the one that failed first by the times that failing
    processes note in ``failures`` (``distla.distributed``), not the first to
    exit: a failing process's peers see its connections close and may fail and
    exit before it has.
    """
    exits: queue.Queue[tuple[int, int]] = queue.Queue()
    for i, p in enumerate(procs):
        threading.Thread(target=lambda i=i, p=p: exits.put((i, p.wait())), daemon=True).start()
    deadline = None if timeout is None else time.monotonic() + timeout
    done = 0
    while done < len(procs):
        wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            i, code = exits.get(timeout=wait_s)
        except queue.Empty:
            running = [j for j, p in enumerate(procs) if p.poll() is None]
            _say(f"timeout after {timeout:g} s; stopping processes {', '.join(map(str, running))}")
            _stop(procs, grace=min(grace, 1.0))
            return TIMEOUT_STATUS
        done += 1
        if code != 0:
            i, code = _first_failure(procs, i, code, failures, grace)
            running = [j for j, p in enumerate(procs) if p.poll() is None]
            stopping = f"; stopping processes {', '.join(map(str, running))}" if running else ""
            _say(f"process {i} exited with status {_status(code)}{stopping}")
            _stop(procs, grace)
            return _status(code) or 1
    return 0


def _first_failure(
    procs: Sequence[subprocess.Popen], i: int, code: int, failures: str, grace: float
) -> tuple[int, int]:
    """``(process, status)`` of the first failure, given that process ``i`` exited with
    ``code``: the process that noted the earliest failure time, once it has exited (it
    is on its way out; waited for at most ``grace`` seconds), else ``i``."""
    noted = {}
    for name in os.listdir(failures):
        try:
            with open(os.path.join(failures, name)) as f:
                noted[int(name)] = int(f.read())
        except (OSError, ValueError):  # a note being written: that process is not first
            continue
    first = min(noted, key=noted.get, default=i)
    if first == i or not 0 <= first < len(procs):
        return i, code
    try:
        first_code = procs[first].wait(timeout=grace)
    except subprocess.TimeoutExpired:
        return i, code
    return (first, first_code) if first_code != 0 else (i, code)


def main(args: argparse.Namespace) -> int:
    """``python -m distla launch`` with arguments from `parse`; the exit status."""
    return launch(
        args.command,
        num_processes=args.num_processes,
        devices_per_process=args.devices_per_process,
        timeout=args.timeout,
        grace=args.grace,
        port=args.port,
        prefix=not args.no_prefix,
        gloo_messages=args.gloo_messages,
        init_timeout=args.init_timeout,
        heartbeat_timeout=args.heartbeat_timeout,
        shutdown_timeout=args.shutdown_timeout,
    )
