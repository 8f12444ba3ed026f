"""Multi-process runs: real processes on jax.distributed through ``python -m distla launch``.

The main test starts 2 processes x 4 simulated CPU devices on one global 2x4
mesh and runs tests/mp_worker.py, which checks matmul, distla.shard,
lu_factor, solve, batched solve and fftn on global arrays built with
``jax.make_array_from_callback`` against numpy (the whole public API, on
Explicit and Auto meshes, with ``DISTLA_MP_FULL=1``). The others check that a
failing process ends the run with a non-zero status in bounded time, the
launcher's plumbing (cheap: no jax in the children), and
``distla.init_distributed``'s choices and errors in this process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import distla
from distla.distributed import DistributedInfo, init_distributed
from distla.tools import cli
from distla.tools import launch as _launch

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "mp_worker.py"


def _gloo_available() -> bool:
    try:
        from jax._src.lib import _jax
    except ImportError:
        return False
    return hasattr(_jax, "make_gloo_tcp_collectives")


needs_gloo = pytest.mark.skipif(
    not _gloo_available(), reason="this jaxlib has no gloo CPU collectives"
)


def launch(*args: str, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m distla launch *args`` from pytest's directory; (result, seconds).

    Not from the repository root: there ``python -m distla`` would import the source
    tree, not the package under test (CI runs the suite on the installed wheel).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "SLURM_", "OMPI_"))}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "distla", "launch", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - t0


def _explain(proc: subprocess.CompletedProcess) -> str:
    out, err = proc.stdout[-6000:], proc.stderr[-6000:]
    return f"status {proc.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"


# ------------------------------------------------------------------ real jax processes


@needs_gloo
def test_operations_on_global_arrays_across_two_processes():
    proc, _ = launch(
        "-n", "2", "--devices-per-process", "4", "--timeout", "170", "--", str(WORKER),
        timeout=200,
    )  # fmt: skip
    assert proc.returncode == 0, _explain(proc)
    for op in ("matmul summa", "shard + matmul", "lu_factor", "solve 64x3", "batched solve",
               "fftn"):  # fmt: skip
        assert f"[p0]   {op}" in proc.stdout, _explain(proc)
    for p in (0, 1):
        assert f"[p{p}] mp_worker: 8 checks passed" in proc.stdout, _explain(proc)
    assert "[Gloo] Rank" not in proc.stdout  # the launcher drops gloo's chatter


@needs_gloo
@pytest.mark.skipif(
    not os.environ.get("DISTLA_MP_FULL"),
    reason="the whole public API on 2 meshes compiles for ~4 minutes on 2 cores; "
    "run with DISTLA_MP_FULL=1",
)
def test_every_public_function_across_two_processes():
    proc, _ = launch(
        "-n", "2", "--timeout", "1100", "--", str(WORKER), "--full", timeout=1200
    )  # fmt: skip
    assert proc.returncode == 0, _explain(proc)
    for p in (0, 1):  # 7 + 19 checks, on an Explicit and an Auto mesh
        assert f"[p{p}] mp_worker: 54 checks passed" in proc.stdout, _explain(proc)


@needs_gloo
@pytest.mark.parametrize(
    "how, status, message",
    [
        pytest.param("raise", 1, "[p1] RuntimeError: process 1 fails on purpose", id="raises"),
        pytest.param("exit", 3, "[p1] [distla] process 1: sys.exit(3); exiting now", id="exits-3"),
    ],
)
def test_a_failing_process_ends_the_run(how, status, message):
    # process 1 fails after a first collective; process 0 goes on into a collective
    # that can never complete. The launcher must report the failure and stop it.
    proc, seconds = launch(
        "-n", "2", "--timeout", "90", "--", str(WORKER), "--fail-on", "1", "--fail-how", how,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == status, _explain(proc)  # process 1's status, not timeout's 124
    assert seconds < 60, seconds  # stopped by the launcher, well before --timeout 90
    assert message in proc.stderr, _explain(proc)
    # process 0 is stopped by the launcher, or ends itself when gloo sees the peer gone
    assert f"[launch] process 1 exited with status {status}" in proc.stderr, _explain(proc)


_FAIL_WITH_DEFAULTS = """
import sys
import distla

info = distla.init_distributed()  # the defaults: no hook asked for
import jax
import jax.numpy as jnp
from jax.experimental import multihost_utils

multihost_utils.sync_global_devices("both started")
if info.process_id == 1:
    raise RuntimeError("process 1 fails on purpose")
multihost_utils.sync_global_devices("never completes")  # process 0 waits for process 1
print("unreachable", flush=True)
"""


@needs_gloo
def test_a_failing_process_ends_the_run_with_the_defaults(tmp_path):
    # Before: with init_distributed()'s defaults, a process that raised waited in jax's
    # shutdown barrier (5 minutes) while its peer waited for it in a collective. Now it
    # prints its traceback and leaves at once; the launcher stops the peer.
    script = _script(tmp_path, _FAIL_WITH_DEFAULTS)
    proc, seconds = launch("-n", "2", "--timeout", "100", "--", script, timeout=130)
    assert proc.returncode == 1, _explain(proc)  # process 1's status, not the timeout's 124
    assert seconds < 60, seconds
    assert "[p1] RuntimeError: process 1 fails on purpose" in proc.stderr, _explain(proc)
    assert "[p1] Traceback (most recent call last):" in proc.stderr, _explain(proc)
    assert "[launch] process 1 exited with status 1" in proc.stderr, _explain(proc)
    assert "unreachable" not in proc.stdout


def _python(code: str, *, timeout: float, env: dict[str, str] | None = None):
    """``python -c code`` in a fresh process (its own jax); (result, seconds)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR",
            "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "DISTLA_"))}  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT / "tests", env={**base, **(env or {})}, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    return proc, time.monotonic() - t0


def test_a_coordinator_port_in_use_is_a_clear_error():
    # Process 0 hosts the coordinator; on a taken port jax's gRPC server only logged
    # "Failed to add port to server" and the process died of a segmentation fault.
    proc, _ = _python(
        """
        import socket, distla
        busy = socket.socket(); busy.bind(("127.0.0.1", 0)); busy.listen()
        port = busy.getsockname()[1]
        try:
            distla.init_distributed(f"127.0.0.1:{port}", 2, 0, initialization_timeout=10)
        except RuntimeError as err:
            print("ERROR", port, err)
        """,
        timeout=120,
    )
    assert proc.returncode == 0, _explain(proc)
    _, port, message = proc.stdout.split(" ", 2)
    assert f"port {port}, but that port is in use" in message, _explain(proc)
    assert "python -m distla launch --port" in message


def test_an_unreachable_coordinator_says_what_was_waited_for():
    # jax waited initialization_timeout, then ended the process with "another task died".
    port = _launch.free_port()  # nobody listens there
    proc, seconds = _python(
        f"""
        import distla
        try:
            distla.init_distributed("127.0.0.1:{port}", 2, 1, initialization_timeout=3)
        except TimeoutError as err:
            print("ERROR", err)
        """,
        timeout=120,
    )
    assert proc.returncode == 0, _explain(proc)
    assert proc.stdout.startswith("ERROR"), _explain(proc)
    assert f"waited 3 s for the coordinator at 127.0.0.1:{port}" in proc.stdout
    assert "initialization_timeout" in proc.stdout and "another task died" not in proc.stderr


@needs_gloo
def test_a_process_waiting_for_missing_peers_says_so():
    # process 0 alone of 2: jax ends it at the deadline; distla says what it waited for
    port = _launch.free_port()
    proc, _ = _python(
        f"""
        import distla
        distla.init_distributed("127.0.0.1:{port}", 2, 0, initialization_timeout=4)
        """,
        timeout=120,
    )
    assert proc.returncode != 0
    assert "waiting for all 2 processes to join the coordinator at" in proc.stderr, _explain(proc)
    assert "still not all there after 4 s (initialization_timeout)" in proc.stderr


@needs_gloo
def test_demo_under_the_launcher_prints_one_table():
    proc, _ = launch(
        "-n", "2", "--timeout", "100", "--", "-m", "distla", "demo",
        "--only", "batched", "--scale", "0.02", "--rounds", "1",
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, _explain(proc)
    headers = [line for line in proc.stdout.splitlines() if "operation" in line.split()]
    assert len(headers) == 1 and headers[0].startswith("[p0] operation"), _explain(proc)
    assert "8 simulated cpu devices in 2 processes" in proc.stdout
    lines = [line.removeprefix("[p0] ") for line in proc.stdout.splitlines()]
    rows = [line.split() for line in lines if "x64x64" in line and not line.startswith("[")]
    assert len(rows) == 1 and rows[0][-2] == "-", rows  # vs 1 dev: "-"
    assert "[p1] " not in proc.stdout


# ------------------------------------------------------------------ launcher plumbing


def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def launch_here(capfd, *argv: str) -> tuple[int, str, str, float]:
    """The launcher in this process (children without jax: fast); (status, out, err, s)."""
    t0 = time.monotonic()
    status = cli.main(["launch", *argv])
    seconds = time.monotonic() - t0
    out, err = capfd.readouterr()
    return status, out, err, seconds


def test_launch_prefixes_output_and_sets_the_environment(tmp_path, capfd, monkeypatch):
    script = _script(
        tmp_path,
        """
        import os, sys
        keys = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID",
                "JAX_NUM_CPU_DEVICES", "JAX_CPU_COLLECTIVES_IMPLEMENTATION", "XLA_FLAGS")
        print(*(os.environ[k] for k in keys), *sys.argv[1:])
        """,
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=8 --xla_dump_to=x")
    status, out, err, _ = launch_here(
        capfd, "-n", "3", "--devices-per-process", "2", script, "a", "--b"
    )
    assert status == 0, err
    lines = sorted(out.splitlines())
    assert len(lines) == 3, lines
    addresses = set()
    for i, line in enumerate(lines):
        tag, address, count, pid, devices, impl, flags, *args = line.split()
        assert (tag, count, pid, devices, impl) == (f"[p{i}]", "3", str(i), "2", "gloo")
        assert flags == "--xla_dump_to=x"  # other flags kept, a device count dropped
        assert args == ["a", "--b"]
        addresses.add(address)
    (address,) = addresses
    assert address.startswith("127.0.0.1:")


def test_launch_runs_a_module(capfd):
    status, out, err, _ = launch_here(capfd, "-n", "2", "--", "-m", "platform", "--terse")
    assert status == 0, err
    assert sorted(line[:5] for line in out.splitlines()) == ["[p0] ", "[p1] "]


def test_launch_stops_the_others_when_one_fails(tmp_path, capfd):
    script = _script(
        tmp_path,
        """
        import os, sys, time
        if os.environ["JAX_PROCESS_ID"] == "1":
            sys.exit(3)
        time.sleep(120)
        """,
    )
    status, out, err, seconds = launch_here(capfd, "-n", "2", "--grace", "1", script)
    assert status == 3, err
    assert seconds < 20, seconds  # stopped, not waited for: the children sleep 120 s
    assert "[launch] process 1 exited with status 3; stopping processes 0" in err


def test_launch_reports_the_first_failure_not_the_first_exit(tmp_path, capfd):
    # Process 1 fails first and is slow to leave; process 0 fails after it (as it does
    # when a peer's connections close under it) and exits at once. The launcher reports
    # process 1, from the failure times that failing processes note (distla.distributed).
    script = _script(
        tmp_path,
        """
        import os, sys, time
        from distla.distributed import _leaving
        me = int(os.environ["JAX_PROCESS_ID"])
        folder = os.environ["DISTLA_LAUNCH_FAILURES"]
        if me == 1:
            _leaving(1, "sys.exit(3)")
            time.sleep(1)  # a large process takes a while to end
            os._exit(3)
        while not os.path.exists(os.path.join(folder, "1")):
            time.sleep(0.01)
        _leaving(0, "uncaught RuntimeError")
        os._exit(1)
        """,
    )
    status, out, err, _ = launch_here(capfd, "-n", "2", "--grace", "5", script)
    assert status == 3, err
    assert "[launch] process 1 exited with status 3" in err


def test_launch_timeout(tmp_path, capfd):
    script = _script(tmp_path, "import time\ntime.sleep(120)\n")
    status, out, err, seconds = launch_here(capfd, "-n", "2", "--timeout", "1", script)
    assert status == _launch.TIMEOUT_STATUS, err
    assert seconds < 20, seconds  # stopped, not waited for: the children sleep 120 s
    assert "[launch] timeout after 1 s; stopping processes 0, 1" in err


def test_launcher_terminated_stops_its_processes(tmp_path):
    script = _script(
        tmp_path,
        f"""
        import os, time
        open(os.path.join({str(tmp_path)!r}, "pid" + os.environ["JAX_PROCESS_ID"]), "w").write(
            str(os.getpid()))
        time.sleep(120)
        """,
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "distla", "launch", "-n", "2", script],
        stderr=subprocess.PIPE,
        text=True,
    )
    pid_files = [tmp_path / "pid0", tmp_path / "pid1"]
    # a bound on a hang, not a speed: three processes importing jax took over 30 s once,
    # on 2 cores at a load of 15 with the suite at nice 19
    deadline = time.monotonic() + 120
    while not all(f.exists() and f.read_text() for f in pid_files):
        assert time.monotonic() < deadline and launcher.poll() is None, "children did not start"
        time.sleep(0.05)
    launcher.terminate()
    _, err = launcher.communicate(timeout=30)
    assert launcher.returncode == 143, err
    assert "[launch] got signal 15; stopping every process" in err
    for f in pid_files:
        with pytest.raises(ProcessLookupError):
            os.kill(int(f.read_text()), 0)  # no orphan left behind


def test_launch_port_in_use_is_a_clear_error(tmp_path, capfd):
    import socket

    script = _script(tmp_path, "print('started')\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, out, err, _ = launch_here(capfd, "-n", "2", "--port", str(port), script)
    assert status == _launch.USAGE_STATUS, err
    assert f"[launch] port {port} is in use on this machine" in err
    assert "--port" in err.split("in use", 1)[1]
    assert "started" not in out  # nothing was started


def test_launcher_killed_takes_its_processes_along(tmp_path):
    # SIGKILL (the OOM killer, a CI timeout) gives the launcher no chance to stop its
    # processes: each asks Linux for a parent-death signal before it runs the script.
    if not sys.platform.startswith("linux"):
        pytest.skip("parent-death signals are Linux's")
    script = _script(
        tmp_path,
        f"""
        import os, time
        open(os.path.join({str(tmp_path)!r}, "pid" + os.environ["JAX_PROCESS_ID"]), "w").write(
            str(os.getpid()))
        time.sleep(120)
        """,
    )
    launcher = subprocess.Popen(
        [sys.executable, "-m", "distla", "launch", "-n", "2", script],
        cwd=ROOT / "tests",  # not the source tree: CI tests the installed wheel
        stderr=subprocess.DEVNULL,
    )
    pid_files = [tmp_path / "pid0", tmp_path / "pid1"]
    # a bound on a hang, not a speed: three processes importing jax took over 30 s once,
    # on 2 cores at a load of 15 with the suite at nice 19
    deadline = time.monotonic() + 120
    while not all(f.exists() and f.read_text() for f in pid_files):
        assert time.monotonic() < deadline and launcher.poll() is None, "children did not start"
        time.sleep(0.05)
    launcher.kill()
    launcher.wait(timeout=30)
    pids = [int(f.read_text()) for f in pid_files]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = [pid for pid in pids if _alive(pid)]
    for pid in alive:  # do not leave them behind if the test fails
        os.kill(pid, 9)
    assert not alive, f"processes {alive} outlived their launcher"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not reaped by its new parent, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_launch_passes_the_timeouts(tmp_path, capfd):
    script = _script(
        tmp_path,
        """
        import os
        print(*(os.environ.get(k, "-") for k in ("DISTLA_INIT_TIMEOUT",
              "DISTLA_HEARTBEAT_TIMEOUT", "DISTLA_SHUTDOWN_TIMEOUT")))
        """,
    )
    status, out, err, _ = launch_here(
        capfd, "-n", "1", "--init-timeout", "20", "--shutdown-timeout", "7.5", script
    )
    assert status == 0, err
    assert out.split() == ["[p0]", "20", "-", "8"]


@pytest.mark.parametrize(
    "argv, command",
    [
        pytest.param(["--", "s.py", "-x"], ["s.py", "-x"], id="dashdash-script"),
        pytest.param(["s.py", "-x", "--", "y"], ["s.py", "-x", "--", "y"], id="own-dashdash"),
        pytest.param(["--", "-m", "m", "x"], ["-m", "m", "x"], id="dashdash-module"),
        pytest.param(["-m", "m", "x", "--y", "1"], ["-m", "m", "x", "--y", "1"], id="module"),
    ],
)
def test_launch_command_line(argv, command):
    assert cli.parse(["launch", "-n", "2", *argv]).command == command


@pytest.mark.parametrize(
    "argv, message",
    [
        pytest.param([], "no script given", id="no-script"),
        pytest.param(
            ["-n", "0", "s.py"], "-n/--num-processes: must be at least 1", id="zero-processes"
        ),
        pytest.param(["--devices-per-process", "0", "s.py"], "at least 1", id="zero-devices"),
        pytest.param(["--", "-m"], "-m needs a module name", id="module-missing"),
    ],
)
def test_launch_command_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit):
        cli.parse(["launch", *argv])
    assert message in capsys.readouterr().err


def test_gloo_chatter_is_dropped():
    import io
    import threading

    chatter = (
        b"[Gloo] Rank 1 is connected to 7 peer ranks. Expected number of connected peer ranks"
        b" is : 7\n"
        b"sum [Gloo] Rank 2 is connected to 3 peer ranks. Expected number of connected peer "
        b"ranks is : 3\n"
        b"0\n"
        b" is connected to 1 peer ranks. Expected number of connected peer ranks is : 1\n"
        b"4032.0\n"
        b"\n"
        b"last line without newline"
    )
    out = io.BytesIO()
    _launch._pump(io.BytesIO(chatter), out, b"[p0] ", threading.Lock(), True)
    assert out.getvalue().decode().splitlines() == [
        "[p0] sum ",
        "[p0] 4032.0",
        "[p0] ",
        "[p0] last line without newline",
    ]


# ------------------------------------------------------------------ init_distributed


_ENV_PREFIXES = ("JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_", "OMPI_",
                 "PMI_", "MPI_LOCALRANKID")  # fmt: skip


@pytest.fixture
def clean_env(monkeypatch):
    for key in list(os.environ):
        if key.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(key)
    return monkeypatch


def test_init_distributed_alone_is_a_single_process(clean_env):
    assert init_distributed() == DistributedInfo(0, 1, None, "single process")
    assert distla.init_distributed is init_distributed


@pytest.mark.parametrize(
    "env",
    [
        pytest.param({"JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}, id="launcher-n1"),
        pytest.param({"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, id="mpirun-n1"),
        pytest.param(
            {"SLURM_JOB_ID": "7", "SLURM_STEP_NODELIST": "node1", "SLURM_NTASKS": "1",
             "SLURM_PROCID": "0"},
            id="srun-n1",
        ),
    ],
)  # fmt: skip
def test_init_distributed_one_process_environments_start_nothing(clean_env, env):
    for key, value in env.items():
        clean_env.setenv(key, value)
    assert init_distributed() == DistributedInfo(0, 1, None, "single process")


@pytest.mark.parametrize(
    "env, kwargs, match",
    [
        pytest.param({"JAX_COORDINATOR_ADDRESS": "h:1"}, {}, "process count and id are not",
                     id="address-only"),
        pytest.param({"JAX_NUM_PROCESSES": "2"}, {}, "process_id is unknown", id="count-only"),
        pytest.param({"JAX_NUM_PROCESSES": "two", "JAX_PROCESS_ID": "0"}, {},
                     "JAX_NUM_PROCESSES='two' is not an integer", id="not-an-integer"),
        pytest.param({}, {"num_processes": 2, "process_id": 2}, r"process_id=2 is outside 0\.\.1",
                     id="id-out-of-range"),
        pytest.param({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1"}, {},
                     r"4 processes \(open-mpi\) but no coordinator", id="mpirun-no-address"),
        pytest.param({"PMI_SIZE": "2", "PMI_RANK": "0"}, {},
                     r"2 processes \(mpich\) but no coordinator", id="mpich-no-address"),
        pytest.param({}, {"cpu_collectives": "nccl"}, "cpu_collectives must be", id="collectives"),
    ],
)  # fmt: skip
def test_init_distributed_errors(clean_env, env, kwargs, match):
    for key, value in env.items():
        clean_env.setenv(key, value)
    with pytest.raises(ValueError, match=match):
        init_distributed(**kwargs)


@pytest.mark.parametrize("asked", [False, True], ids=["default", "asked"])
def test_init_distributed_replaces_exit_hooks_only_when_asked(clean_env, asked):
    """sys.excepthook and sys.exit are replaced only with exit_on_uncaught_exception=True."""
    import jax

    from distla import distributed

    hook, exit_ = sys.excepthook, sys.exit
    clean_env.setattr(sys, "excepthook", hook)  # restored after the test
    clean_env.setattr(sys, "exit", exit_)
    clean_env.setattr(distributed, "_started", None)
    clean_env.setattr(jax.distributed, "initialize", lambda **kwargs: None)  # no real run
    clean_env.setattr(distributed, "_wait_for_coordinator", lambda *args: None)  # nor its peer
    registered = []
    clean_env.setattr(distributed.atexit, "register", lambda fn, *args: registered.append(fn))
    kwargs = {"exit_on_uncaught_exception": True} if asked else {}
    info = init_distributed("127.0.0.1:1", 2, 1, cpu_collectives=None, **kwargs)
    assert info == DistributedInfo(1, 2, "127.0.0.1:1", "arguments")
    assert (sys.excepthook is not hook, sys.exit is not exit_) == (asked, asked)
    # by default an atexit handler alone ends a process that fails (nothing replaced)
    assert (distributed._exit_after_uncaught in registered) == (not asked)


@pytest.mark.parametrize(
    "kwargs, env, expected",
    [
        pytest.param({}, {}, (300, 100, 300), id="jax-defaults"),
        pytest.param({"initialization_timeout": 9, "heartbeat_timeout": 8, "shutdown_timeout": 7},
                     {"DISTLA_INIT_TIMEOUT": "1"}, (9, 8, 7), id="arguments"),
        pytest.param({}, {"DISTLA_INIT_TIMEOUT": "20", "DISTLA_HEARTBEAT_TIMEOUT": "30",
                          "DISTLA_SHUTDOWN_TIMEOUT": "40"}, (20, 30, 40), id="environment"),
    ],
)  # fmt: skip
def test_init_distributed_timeouts(clean_env, kwargs, env, expected):
    import jax

    from distla import distributed

    seen = {}
    clean_env.setattr(distributed, "_started", None)
    clean_env.setattr(jax.distributed, "initialize", lambda **kw: seen.update(kw))
    clean_env.setattr(distributed, "_wait_for_coordinator", lambda *args: None)
    clean_env.setattr(distributed.atexit, "register", lambda fn, *args: None)
    for key, value in env.items():
        clean_env.setenv(key, value)
    init_distributed("127.0.0.1:1", 2, 1, cpu_collectives=None, **kwargs)
    got = tuple(seen[k] for k in ("initialization_timeout", "heartbeat_timeout_seconds",
                                  "shutdown_timeout_seconds"))  # fmt: skip
    assert got == expected


def test_init_distributed_rejects_a_bad_timeout(clean_env):
    with pytest.raises(ValueError, match="heartbeat_timeout must be a whole number of seconds"):
        init_distributed("127.0.0.1:1", 2, 1, heartbeat_timeout=0)


def test_init_distributed_after_jax_started(clean_env):
    import jax

    jax.devices()  # the backend of this test process is running
    clean_env.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1")
    with pytest.raises(RuntimeError, match="must run before any other jax call"):
        init_distributed(num_processes=2, process_id=0)


# ------------------------------------------------------------------ shard in one process


def test_shard_places_host_data_in_the_natural_layout(mesh24):
    import numpy as np
    from jax.sharding import PartitionSpec as P

    x = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    y = distla.shard(x, mesh24)
    assert y.sharding.spec == P("x", "y")
    np.testing.assert_array_equal(np.asarray(y), x)
    z = distla.shard(y, mesh24, P(None, "y"))  # a jax array is re-laid out
    assert z.sharding.spec == P(None, "y")
    np.testing.assert_array_equal(np.asarray(z), x)
    odd = distla.shard(x[:, :18], mesh24)  # 18 does not split 4 ways: the largest even layout
    assert odd.sharding.spec == P(("x", "y"), None)


@pytest.mark.parametrize(
    "shape, spec, match",
    [
        pytest.param((8, 8), ("x", "z"), "names axis 'z', which the 2x4 mesh", id="unknown-axis"),
        pytest.param((8, 6), ("x", "y"), "splits dimension 1 of shape", id="not-dividing"),
        pytest.param((8,), ("x", "y"), "more entries than x has dimensions", id="too-long"),
    ],
)
def test_shard_errors(mesh24, shape, spec, match):
    import numpy as np
    from jax.sharding import PartitionSpec as P

    with pytest.raises(ValueError, match=match):
        distla.shard(np.zeros(shape, np.float32), mesh24, P(*spec))


def test_shard_checksums_tell_processes_apart():
    import numpy as np

    from distla.layout import _fingerprint

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert (_fingerprint(x) == _fingerprint(x.copy())).all()
    assert _fingerprint(x)[1] != _fingerprint(x + 1)[1]  # values
    assert _fingerprint(x)[0] != _fingerprint(x.reshape(4, 3))[0]  # shape
    assert _fingerprint(x)[0] != _fingerprint(x.astype(np.float64))[0]  # dtype
    assert (_fingerprint(np.asfortranarray(x)) == _fingerprint(x)).all()  # memory order
    assert _fingerprint(np.float32(1.0)).shape == (2,)  # 0-d


def test_natural_sharding_matches_shard(mesh24):
    import numpy as np

    x = np.arange(30 * 20, dtype=np.float32).reshape(30, 20)
    sharding = distla.layout.natural_sharding(x.shape, mesh24)
    assert distla.shard(x, mesh24).sharding == sharding
    import jax

    y = jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx])
    np.testing.assert_array_equal(np.asarray(y), x)


def test_natural_sharding_errors(mesh24):
    from jax.sharding import PartitionSpec as P

    with pytest.raises(ValueError, match="does not divide 18"):
        distla.layout.natural_sharding((30, 18), mesh24, P("x", "y"))
    with pytest.raises(ValueError, match="mesh must be a jax.sharding.Mesh"):
        distla.layout.natural_sharding((30, 20), "mesh")
