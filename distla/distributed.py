"""Multi-process runs on jax.distributed: ``distla.init_distributed``.

distla runs across processes and machines on JAX's own multi-controller
runtime: every process runs the same program, ``jax.devices()`` lists the
devices of all processes, and a ``jax.Array`` on a mesh of those devices is a
*global* array of which each process holds its own devices' shards.
Collectives go over gloo on CPU and NCCL on GPU; distla adds no transport of
its own. [`init_distributed`][distla.init_distributed] finds out how the processes were started
(``python -m distla launch``, ``srun``, ``mpirun``, or explicit arguments) and
calls ``jax.distributed.initialize`` accordingly. See docs/multiprocess.md.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import NamedTuple

import jax

# Set by `python -m distla launch` (and readable when set by hand, e.g. on
# several machines without a cluster manager). JAX itself reads only the first.
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
# A folder where a failing process notes when it failed (set by ``python -m distla
# launch``, which reports the process that failed first, not the first to exit).
ENV_FAILURES = "DISTLA_LAUNCH_FAILURES"
# The run's timeouts in seconds, when not passed to init_distributed (set by
# ``python -m distla launch --init-timeout / --heartbeat-timeout / --shutdown-timeout``).
ENV_INIT_TIMEOUT = "DISTLA_INIT_TIMEOUT"
ENV_HEARTBEAT_TIMEOUT = "DISTLA_HEARTBEAT_TIMEOUT"
ENV_SHUTDOWN_TIMEOUT = "DISTLA_SHUTDOWN_TIMEOUT"
# Their defaults: jax.distributed.initialize's own.
INIT_TIMEOUT = 300
HEARTBEAT_TIMEOUT = 100
SHUTDOWN_TIMEOUT = 300

# MPI launchers: (process count, rank, local rank) variables.
_MPI_ENVS = {
    "open-mpi": ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"),
    "mpich": ("PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID"),
}
# What jax.distributed's own auto-detection needs to recognise SLURM / Open MPI < 5.
_SLURM_VARS = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID")
_OMPI_URI = "OMPI_MCA_orte_hnp_uri"


class DistributedInfo(NamedTuple):
    """What ``init_distributed`` found (and started).

    Attributes:
      process_id: this process's index, ``jax.process_index()``.
      num_processes: ``jax.process_count()``.
      coordinator_address: ``host:port`` of process 0's coordinator, or
        ``None`` for a single process or when jax's cluster detection chose it.
      source: where the settings came from: ``"arguments"``, ``"environment"``
        (``JAX_*`` variables, as set by ``python -m distla launch``),
        ``"open-mpi"``, ``"mpich"``, ``"slurm"``, ``"open-mpi (jax)"``,
        ``"jax"`` (``cluster_detection_method``), ``"single process"``, or
        ``"already initialized"`` (``jax.distributed`` was started without
        ``init_distributed``).
    """

    process_id: int
    num_processes: int
    coordinator_address: str | None
    source: str


def _int_env(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(
            f"init_distributed: environment variable {name}={value!r} is not an integer"
        )


def _slurm_present() -> bool:
    return all(v in os.environ for v in _SLURM_VARS)


# What this module started, returned again by later calls.
_started: DistributedInfo | None = None


def _running_state() -> DistributedInfo:
    if _started is not None:
        return _started
    return DistributedInfo(jax.process_index(), jax.process_count(), None, "already initialized")


def init_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: int | Sequence[int] | None = None,
    cluster_detection_method: str | None = None,
    cpu_collectives: str | None = "gloo",
    initialization_timeout: int | None = None,
    exit_on_uncaught_exception: bool | None = None,
    heartbeat_timeout: int | None = None,
    shutdown_timeout: int | None = None,
) -> DistributedInfo:
    """Join the other processes of a multi-process run (``jax.distributed``).

    Call it once, first thing, before any other jax call (jax refuses to start
    its distributed runtime after a backend exists). Every setting may come
    from an argument or from the environment; the first source that names it
    wins, in this order:

    1. the arguments;
    2. ``JAX_COORDINATOR_ADDRESS`` (``host:port`` of process 0),
       ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``: set by
       ``python -m distla launch``, or by hand;
    3. MPI launchers: ``OMPI_COMM_WORLD_SIZE`` / ``OMPI_COMM_WORLD_RANK`` /
       ``OMPI_COMM_WORLD_LOCAL_RANK`` (Open MPI's ``mpirun``) or ``PMI_SIZE`` /
       ``PMI_RANK`` / ``MPI_LOCALRANKID`` (MPICH, Intel MPI). MPI does not say
       where process 0 runs, so ``JAX_COORDINATOR_ADDRESS`` must be exported
       too (``mpirun -x JAX_COORDINATOR_ADDRESS=host0:1234 ...``), except
       under Open MPI < 5, whose ``OMPI_MCA_orte_hnp_uri`` jax reads;
    4. jax's own cluster detection: SLURM (``SLURM_JOB_ID``,
       ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``, ``SLURM_PROCID``,
       ``SLURM_LOCALID``; the coordinator is the first node of the step on a
       port derived from the job id, or ``JAX_COORDINATOR_PORT``), Open MPI
       < 5, or the method named by ``cluster_detection_method``.

    With none of these (a plain ``python script.py``), or when the
    environment describes a single process, nothing is started and the
    program runs on this process's devices alone, so the same script works
    with and without a launcher. Calling it again once initialised returns
    the running state (idempotent).

    On CPU the collectives between processes go over gloo
    (``jax_cpu_collectives_implementation``); GPUs use NCCL whatever
    ``cpu_collectives`` says. Under a launcher that gives every process
    simulated CPU devices, the device count comes from ``JAX_NUM_CPU_DEVICES``
    (jax's ``jax_num_cpu_devices``), read when jax starts its backend.

    Args:
      coordinator_address: ``host:port`` of process 0's coordinator service;
        every process passes the same one.
      num_processes: the number of processes.
      process_id: this process's index, ``0 <= process_id < num_processes``.
      local_device_ids: the accelerator ids this process uses (GPU); under
        MPI the default is the local rank (one GPU per process, as jax does
        under SLURM). Ignored by the CPU backend.
      cluster_detection_method: passed to ``jax.distributed.initialize``
        (for example ``"mpi4py"``); forces jax's detection to run.
      cpu_collectives: ``"gloo"`` (default), ``"mpi"``, or ``None`` to
        leave jax's setting alone.
      initialization_timeout: seconds to wait for the coordinator and for
        every process to join it (default: ``DISTLA_INIT_TIMEOUT``, else
        300, jax's). A process that cannot reach the coordinator raises a
        ``TimeoutError`` naming the address it tried; while the processes
        gather, each says on stderr, after 10 s and again just before the
        deadline, what it is still waiting for (jax ends the process at the
        deadline: "another task died" is that).
      exit_on_uncaught_exception: what a failing process does in a run of
        several processes. By default (``None``), an uncaught exception ends
        it at once: Python prints the traceback, then an ``atexit`` handler
        leaves with status 1 instead of waiting in jax's shutdown barrier
        (up to ``shutdown_timeout``) for peers that are themselves stuck in a
        collective waiting for it; nothing of the caller's is replaced.
        ``True`` also replaces ``sys.excepthook`` and ``sys.exit``, so that
        ``sys.exit(nonzero)`` ends the process at once too (with its
        status). ``False``: jax's behaviour, the barrier. A clean exit always
        waits for the others (process 0's coordinator must outlive them).
      heartbeat_timeout: seconds after which the coordinator declares a
        silent process dead and the others fail (default:
        ``DISTLA_HEARTBEAT_TIMEOUT``, else 100, jax's).
      shutdown_timeout: seconds a process that exits waits in jax's shutdown
        barrier for the others (default: ``DISTLA_SHUTDOWN_TIMEOUT``, else
        300, jax's).

    Returns:
      A ``DistributedInfo(process_id, num_processes, coordinator_address,
      source)``.

    Raises:
      ValueError: settings are incomplete (a process count and id but no
        coordinator address), not integers, out of range, or disagree with
        the already running distributed state.
      RuntimeError: a jax backend was started before this call (for example
        by ``jax.devices()``) and a multi-process run was asked for; or, in
        process 0, the coordinator's port is taken (the message names it, and
        ``python -m distla launch --port`` / ``JAX_COORDINATOR_ADDRESS``).
      TimeoutError: the coordinator could not be reached within
        ``initialization_timeout`` (the message names the address).

    See also:
      ``jax.distributed.initialize``; ``python -m distla launch`` and
      docs/multiprocess.md for launching, srun and mpirun.

    Examples:
      The first lines of a script that runs alone or under a launcher. Run
      alone, with no launcher's variables in the environment, it starts
      nothing:

      >>> import distla
      >>> info = distla.init_distributed()  # first, before any other jax call
      >>> info.num_processes, info.process_id, info.source
      (1, 0, 'single process')

      Under ``python -m distla launch -n 2 -- script.py``, ``srun`` or ``mpirun``
      the same call joins the other processes and reports, for example,
      ``(2, 1, 'environment')``.
    """
    if cpu_collectives not in (None, "gloo", "mpi"):
        raise ValueError(
            f"init_distributed: cpu_collectives must be 'gloo', 'mpi' or None; got "
            f"{cpu_collectives!r}"
        )
    init_s = _timeout(
        "initialization_timeout", initialization_timeout, ENV_INIT_TIMEOUT, INIT_TIMEOUT
    )
    beat_s = _timeout(
        "heartbeat_timeout", heartbeat_timeout, ENV_HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT
    )
    stop_s = _timeout("shutdown_timeout", shutdown_timeout, ENV_SHUTDOWN_TIMEOUT, SHUTDOWN_TIMEOUT)
    if jax.distributed.is_initialized():
        return _already_running(num_processes, process_id)
    found = _settings(
        coordinator_address, num_processes, process_id, local_device_ids, cluster_detection_method
    )
    if isinstance(found, DistributedInfo):  # one process: nothing to start
        return found
    info = _start(found, cpu_collectives, init_s, beat_s, stop_s)
    if exit_on_uncaught_exception is not False and info.num_processes > 1:
        if exit_on_uncaught_exception:
            _install_fail_fast_hook(info.process_id)
        else:
            atexit.register(_exit_after_uncaught, info.process_id)  # runs before jax's
    return info


class _Settings(NamedTuple):
    """What ``jax.distributed.initialize`` is called with, and where it came from."""

    coordinator_address: str | None
    num_processes: int | None
    process_id: int | None
    local_device_ids: int | Sequence[int] | None
    detect: str  # jax's cluster_detection_method ("deactivate": none)
    source: str


def _already_running(num_processes, process_id) -> DistributedInfo:
    """The running state, if the arguments agree with it (``ValueError`` otherwise)."""
    info = _running_state()
    wanted = {"num_processes": num_processes, "process_id": process_id}
    running = {"num_processes": info.num_processes, "process_id": info.process_id}
    for key, value in wanted.items():
        if value is not None and value != running[key]:
            raise ValueError(
                f"init_distributed: already initialised with {key}={running[key]}; "
                f"got {key}={value}"
            )
    return info


def _settings(coordinator_address, num_processes, process_id, local_device_ids, detect):
    """The settings from the arguments, the environment, MPI or jax's cluster detection
    (the order of ``init_distributed``'s docstring), or a ``DistributedInfo`` of a single
    process, where nothing is to start."""
    source = "arguments"
    if coordinator_address is None and num_processes is None and process_id is None:
        source = "environment"
    coordinator_address = coordinator_address or os.environ.get(ENV_COORDINATOR) or None
    if num_processes is None:
        num_processes = _int_env(ENV_NUM_PROCESSES)
    if process_id is None:
        process_id = _int_env(ENV_PROCESS_ID)
    if num_processes is None or process_id is None:
        for name, (size_var, rank_var, local_var) in _MPI_ENVS.items():
            if size_var in os.environ and rank_var in os.environ:
                source = name
                num_processes = _int_env(size_var) if num_processes is None else num_processes
                process_id = _int_env(rank_var) if process_id is None else process_id
                local = _int_env(local_var)
                if local_device_ids is None and local is not None:
                    local_device_ids = [local]
                break
    if detect is None and (num_processes is None or process_id is None):
        if _slurm_present():
            source = "slurm"
            detect = "slurm"
            if num_processes is None and _int_env("SLURM_NTASKS") == 1:
                return DistributedInfo(0, 1, None, "single process")
        elif _OMPI_URI in os.environ:
            source = "open-mpi (jax)"
            detect = "ompi"
    elif detect is not None:
        source = "jax"
    found = _Settings(
        coordinator_address, num_processes, process_id, local_device_ids, detect, source
    )
    return found if detect is not None else _without_detection(found)


def _without_detection(found: _Settings) -> _Settings | DistributedInfo:
    """Settings that no cluster detection completes: checked, or a single process."""
    coordinator_address, num_processes, process_id, _, _, source = found
    if num_processes is None and process_id is None:
        if coordinator_address is not None:
            raise ValueError(
                f"init_distributed: {ENV_COORDINATOR}={coordinator_address!r} is set but "
                f"the process count and id are not: set {ENV_NUM_PROCESSES} and "
                f"{ENV_PROCESS_ID} too, or pass num_processes= and process_id="
            )
        return DistributedInfo(0, 1, None, "single process")
    if num_processes is None or process_id is None:
        missing = "num_processes" if num_processes is None else "process_id"
        raise ValueError(
            f"init_distributed: {missing} is unknown (got num_processes={num_processes}, "
            f"process_id={process_id}); pass it or set {ENV_NUM_PROCESSES} / "
            f"{ENV_PROCESS_ID}"
        )
    if not 0 <= process_id < num_processes:
        raise ValueError(
            f"init_distributed: process_id={process_id} is outside 0..{num_processes - 1} "
            f"(num_processes={num_processes})"
        )
    if num_processes == 1 and source != "arguments":
        return DistributedInfo(0, 1, None, "single process")
    if coordinator_address is None:
        raise ValueError(
            f"init_distributed: {num_processes} processes ({source}) but no coordinator "
            f"address; set {ENV_COORDINATOR}=host:port of process 0 in every process "
            "(mpirun -x JAX_COORDINATOR_ADDRESS=...) or pass coordinator_address="
        )
    return found._replace(detect="deactivate")


def _start(
    found: _Settings, cpu_collectives, init_s: int, beat_s: int, stop_s: int
) -> DistributedInfo:
    """``jax.distributed.initialize`` with ``found`` and the timeouts (seconds); the state
    it started."""
    coordinator_address, num_processes, process_id, local_device_ids, detect, source = found
    if cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    watch = None
    if detect == "deactivate":  # we know the address: check it before jax aborts on it
        start = time.monotonic()
        if process_id == 0:
            _check_port_free(coordinator_address)
        else:
            _wait_for_coordinator(coordinator_address, process_id, num_processes, init_s)
        watch = _Watch(coordinator_address, process_id, num_processes, init_s, start)
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
            cluster_detection_method=detect,
            initialization_timeout=init_s,
            heartbeat_timeout_seconds=beat_s,
            shutdown_timeout_seconds=stop_s,
        )
    except RuntimeError as err:
        if "before any JAX calls" in str(err):
            raise RuntimeError(
                "init_distributed must run before any other jax call (jax.devices(), "
                "jax.numpy, device_put ...): a jax backend has already started in this "
                "process. Call distla.init_distributed() first thing in the program."
            ) from err
        raise
    finally:
        if watch is not None:
            watch.stop()
    if detect in ("slurm", "ompi"):  # what jax's detection read, without starting a backend
        prefix = "SLURM" if detect == "slurm" else "OMPI_COMM_WORLD"
        count, rank = ("NTASKS", "PROCID") if detect == "slurm" else ("SIZE", "RANK")
        num_processes = _int_env(f"{prefix}_{count}") if num_processes is None else num_processes
        process_id = _int_env(f"{prefix}_{rank}") if process_id is None else process_id
    if num_processes is None or process_id is None:  # another jax method: ask the backend
        num_processes, process_id = jax.process_count(), jax.process_index()
    global _started
    _started = DistributedInfo(process_id, num_processes, coordinator_address, source)
    return _started


def _timeout(name: str, value: int | None, env: str, default: int) -> int:
    """A timeout in whole seconds: the argument, else the environment, else the default."""
    if value is None:
        value = _int_env(env)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"init_distributed: {name} must be a whole number of seconds >= 1; got {value!r}"
        )
    return value


def _host_port(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(
            f"init_distributed: the coordinator address {address!r} is not host:port "
            f"(set {ENV_COORDINATOR}=host:port of process 0, or pass coordinator_address=)"
        )
    return host.strip("[]") or "0.0.0.0", int(port)


def port_in_use(port: int, host: str = "") -> bool:
    """Whether a server could not listen on ``host:port`` now (``""``: every interface).

    The probe binds as jax's coordinator does (``[::]:port``, dual-stack,
    ``SO_REUSEADDR``), and only "address in use" counts: a host or family this
    machine cannot bind (no IPv6) leaves the answer to the next probe.
    """
    for family, where in ((socket.AF_INET6, host or "::"), (socket.AF_INET, host or "0.0.0.0")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind((where, port))
            except OSError as err:
                if err.errno == errno.EADDRINUSE:
                    return True
                continue
            return False
    return False


def _check_port_free(address: str) -> None:
    """Process 0 hosts the coordinator on ``address``'s port: fail clearly if it is taken.

    jax's coordinator binds every interface (``[::]:port``, or
    ``JAX_COORDINATOR_BIND_ADDRESS``); on a taken port gRPC only logs "Failed to
    add port to server" and the process dies with a segmentation fault.
    """
    bind_env = os.environ.get("JAX_COORDINATOR_BIND_ADDRESS")
    host, port = _host_port(bind_env) if bind_env else ("", _host_port(address)[1])
    if port_in_use(port, host):
        raise RuntimeError(
            f"init_distributed: process 0 hosts the coordinator on port {port}, but that port "
            "is in use on this machine (another program listens on it). Pick a free port: "
            "python -m distla launch --port PORT (or leave --port out: the launcher takes a "
            f"free one), or {ENV_COORDINATOR}=host:PORT in every process."
        )


def _wait_for_coordinator(
    address: str, process_id: int, num_processes: int, timeout: float
) -> None:
    """Connect to the coordinator's port until it answers, or raise ``TimeoutError``.

    jax itself waits ``timeout`` and then ends the process with "another task
    died", which does not say what was waited for.
    """
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout
    said = False
    last: OSError | None = None
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, timeout)):
                return
        except OSError as err:
            last = err
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if not said and timeout - left > 10:
            _note(process_id, f"still waiting for the coordinator at {address} (process 0)")
            said = True
        time.sleep(min(0.2, left))
    raise TimeoutError(
        f"init_distributed: process {process_id} of {num_processes} waited {timeout:g} s for "
        f"the coordinator at {address} (process 0 of the run) and could not connect "
        f"({last}). Is process 0 running, with the same {ENV_COORDINATOR}, and is that "
        "host:port reachable from here? (initialization_timeout / "
        f"{ENV_INIT_TIMEOUT} / launch --init-timeout)"
    )


def _note(process_id: int, what: str) -> None:
    print(f"[distla] process {process_id}: {what}", file=sys.stderr, flush=True)


class _Watch:
    """Says on stderr what ``jax.distributed.initialize`` is waiting for, while it waits.

    After 10 s, and again shortly before the ``initialization_timeout``
    deadline (at which jax ends the process with "another task died").
    """

    def __init__(self, address, process_id, num_processes, timeout, start):
        self._done = threading.Event()
        what = (
            f"waiting for all {num_processes} processes to join the coordinator at {address}"
            f" (this process: {process_id})"
        )

        def run():
            deadline = start + timeout
            if self._done.wait(max(0.0, min(10.0, timeout / 2) - (time.monotonic() - start))):
                return
            _note(process_id, f"{what} ...")
            if self._done.wait(max(0.0, deadline - time.monotonic() - min(2.0, timeout / 10))):
                return
            _note(
                process_id,
                f"{what}: still not all there after {timeout:g} s (initialization_timeout); "
                "jax ends the process now. Did every process start, with the same "
                f"{ENV_COORDINATOR} and {ENV_NUM_PROCESSES}={num_processes}?",
            )

        self._thread = threading.Thread(target=run, daemon=True, name="distla-init-watch")
        self._thread.start()

    def stop(self) -> None:
        self._done.set()


def _exit_after_uncaught(process_id: int) -> None:
    """``atexit``: leave at once if the program ends on an uncaught exception.

    Python has printed the traceback and recorded the exception in
    ``sys.last_value`` (``sys.last_exc`` from 3.12) before it runs the
    ``atexit`` handlers; this one is registered after jax's, so it runs first
    and skips jax's shutdown barrier (see ``init_distributed``).
    """
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is None or isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return
    _leaving(process_id, f"uncaught {type(exc).__name__}")
    os._exit(1)


_exit_status: list = [None]  # what sys.exit was last called with (see below)


def _install_fail_fast_hook(process_id: int) -> None:
    """End the process at once when it fails (see ``init_distributed``).

    jax shuts its distributed runtime down at exit with a barrier that waits
    for every process. A process that fails while the others wait for it in
    a collective would sit in that barrier and never exit, so no launcher
    could see the failure. For an uncaught exception and for
    ``sys.exit(nonzero)``, this prints what happened and leaves with
    ``os._exit``, skipping the barrier; a clean exit keeps it (process 0's
    coordinator must outlive the others).
    """
    previous_hook, previous_exit = sys.excepthook, sys.exit

    def hook(exc_type, exc, tb):
        if issubclass(exc_type, KeyboardInterrupt):
            return previous_hook(exc_type, exc, tb)
        try:
            traceback.print_exception(exc_type, exc, tb)
            _leaving(process_id, f"uncaught {exc_type.__name__}")
        finally:
            os._exit(1)

    def exit_(status=None):
        _exit_status[0] = status
        previous_exit(status)

    def at_exit():
        status = _exit_status[0]
        if status is None or status == 0:
            return
        _leaving(process_id, f"sys.exit({status!r})")
        os._exit(status if isinstance(status, int) else 1)

    sys.excepthook = hook
    sys.exit = exit_
    atexit.register(at_exit)  # runs before jax's own exit handler (registered earlier)


def _leaving(process_id: int, why: str) -> None:
    print(
        f"[distla] process {process_id}: {why}; exiting now instead of waiting for the "
        "other processes in jax's shutdown barrier",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    folder = os.environ.get(ENV_FAILURES)
    if folder:
        # Written before the process ends, so before its peers can see it gone (a closed
        # connection) and fail in turn: the launcher orders the failures by these times.
        try:
            with open(os.path.join(folder, str(process_id)), "w") as f:
                f.write(str(time.monotonic_ns()))
        except OSError:
            pass
