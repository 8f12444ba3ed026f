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
import os
import sys
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
    initialization_timeout: int = 300,
    exit_on_uncaught_exception: bool = False,
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
      initialization_timeout: seconds to wait for all processes to connect.
      exit_on_uncaught_exception: opt in (default off: nothing in this
        process is replaced unless asked). In a run of several processes,
        install ``sys.excepthook`` and ``sys.exit`` hooks that end the process
        at once after an uncaught exception (status 1, traceback printed) or
        ``sys.exit(nonzero)``. Without them, a failing process waits in jax's
        shutdown barrier (up to 5 minutes) for peers that are themselves stuck
        in a collective waiting for it, and no launcher sees the failure; so
        scripts run by ``python -m distla launch`` (the demo among them) ask
        for it. A clean exit still waits for the others.

    Returns:
      A ``DistributedInfo(process_id, num_processes, coordinator_address,
      source)``.

    Raises:
      ValueError: settings are incomplete (a process count and id but no
        coordinator address), not integers, out of range, or disagree with
        the already running distributed state.
      RuntimeError: a jax backend was started before this call (for example
        by ``jax.devices()``) and a multi-process run was asked for.

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
    if jax.distributed.is_initialized():
        return _already_running(num_processes, process_id)
    found = _settings(
        coordinator_address, num_processes, process_id, local_device_ids, cluster_detection_method
    )
    if isinstance(found, DistributedInfo):  # one process: nothing to start
        return found
    info = _start(found, cpu_collectives, initialization_timeout)
    if exit_on_uncaught_exception and info.num_processes > 1:
        _install_fail_fast_hook(info.process_id)
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


def _start(found: _Settings, cpu_collectives, initialization_timeout) -> DistributedInfo:
    """``jax.distributed.initialize`` with ``found``; the state it started."""
    coordinator_address, num_processes, process_id, local_device_ids, detect, source = found
    if cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", cpu_collectives)
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
            cluster_detection_method=detect,
            initialization_timeout=initialization_timeout,
        )
    except RuntimeError as err:
        if "before any JAX calls" in str(err):
            raise RuntimeError(
                "init_distributed must run before any other jax call (jax.devices(), "
                "jax.numpy, device_put ...): a jax backend has already started in this "
                "process. Call distla.init_distributed() first thing in the program."
            ) from err
        raise
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
