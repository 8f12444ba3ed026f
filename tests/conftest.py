"""Test harness: 8 simulated CPU devices and the meshes every test runs on.

The devices are asked for through jax's own switch, ``jax_num_cpu_devices``,
before anything starts jax's backend (pytest imports conftest before any test
module). Subprocesses that the tests start inherit ``JAX_NUM_CPU_DEVICES``.
"""

import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

SIMULATED_DEVICES = 8
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_NUM_CPU_DEVICES", str(SIMULATED_DEVICES))
# The suites of the distributed algorithms test those algorithms: plan="auto"
# stays distributed unless a test sets the one-device budget itself (test_plans).
os.environ.setdefault("DISTLA_PLAN_BUDGET", "0")


def _with_flags(flags: str, *more: str) -> str:
    """``XLA_FLAGS`` text ``flags`` with ``more`` appended."""
    return " ".join([flags, *more]).strip()


def _xla_accepts(*flags: str) -> bool:
    """Whether this jaxlib's XLA starts with ``flags`` in ``XLA_FLAGS``."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["XLA_FLAGS"] = _with_flags(env.get("XLA_FLAGS", ""), *flags)
    probe = "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
    try:
        run = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, timeout=120
        )
    except subprocess.TimeoutExpired:  # never seen; the suite then keeps XLA's defaults
        return False
    return run.returncode == 0


# The suite's programs are small and compile-bound (eigh at n = 64 on 2x4: 14 CPU s to
# compile at XLA's defaults, 0.2 s to run), so the suite has XLA's CPU backend compile
# them quickly rather than make them fast; what they compute is the same. The docs
# pages run at XLA's defaults, as readers run them (tests/test_docs.py), and so do the
# benchmarks. Subprocesses inherit the flags.
#
# LLVM optimisation level 0, on by default again (DISTLA_TESTS_FAST_COMPILE=0 keeps
# XLA's level). It halves the CPU time of compiling (solve, eigh and eigh's derivative
# at n = 64 on 2x4: 15.7 -> 7.9 CPU s). History: on 2026-11-28 two fresh-clone runs in
# a row at level 0 each lost a worker to a segmentation fault inside XLA (a compile,
# and jaxlib's executable.serialize()), and it was made opt-in. Those crashes fit the
# exhaustion of vm.max_map_count that _release_compiled_programs (below) now prevents;
# since then two whole-suite runs at level 0 on fresh clones, both under heavy load,
# had no crash (2026-11-29, 3866 passed and one start deadline missed, since widened;
# 2026-11-30, 3902 passed: docs/benchmarks-log.md, "The suite's time"). Level 0 also
# made a hang of jaxlib's batched LAPACK calls likelier, which
# distla._core.lapack_batch now prevents at any level.
LLVM_LEVEL = "--xla_backend_optimization_level"
# Fusions through XLA's older elemental emitter, not the MLIR fusion emitters (on by
# default since 2025; DISTLA_TESTS_FUSION_EMITTERS=1 keeps them): the same programs,
# compiled in about two thirds of the time (eager eigh at n = 37 on 2x4: 5.8-6.7 ->
# 4.0-4.8 s of compile).
FUSION_EMITTERS = "--xla_cpu_use_fusion_emitters"
# An XLA that does not know a flag aborts the process at start (jaxlib 0.11.2's has no
# FUSION_EMITTERS), so a child process tries the flags first, once: the first process
# sets DISTLA_TESTS_XLA_FLAGS_CHECKED and the workers inherit its outcome.
_CHECKED = "DISTLA_TESTS_XLA_FLAGS_CHECKED"
if os.environ.get(_CHECKED) != "1":
    _have = os.environ.get("XLA_FLAGS", "")
    _wanted = [
        flag
        for flag, on in (
            (f"{LLVM_LEVEL}=0", os.environ.get("DISTLA_TESTS_FAST_COMPILE") != "0"),
            (f"{FUSION_EMITTERS}=false", os.environ.get("DISTLA_TESTS_FUSION_EMITTERS") != "1"),
        )
        if on and flag.split("=")[0] not in _have
    ]
    if _wanted and not _xla_accepts(*_wanted):
        _wanted = [flag for flag in _wanted if _xla_accepts(flag)]
    os.environ["XLA_FLAGS"] = _with_flags(_have, *_wanted)
    os.environ[_CHECKED] = "1"

import jax  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType  # noqa: E402

# Tracing and lowering make many short-lived objects; collecting them less often saves
# about 5% of a worker's time (tests/test_spectral_dropin.py's eigh and svd cases: 48.8
# -> 46.3 s) at the same peak memory.
gc.set_threshold(50_000, 20, 100)

jax.config.update("jax_num_cpu_devices", SIMULATED_DEVICES)
jax.config.update("jax_numpy_rank_promotion", "raise")

# One XLA compile per program for the whole run. Compiles are most of the suite's
# time, and jax's in-memory cache is per process and per Python function: the two
# pytest-xdist workers compile the programs their files share (the LU, eigh and
# QDWH steps at the same sizes) once each, and a function traced anew (a jitted
# lambda made per call) compiles again an identical program. jax's persistent
# cache, keyed by the compiled program itself, serves both; it lives in a
# directory of this run only (made by the first process, inherited by the
# workers, removed at the end), so no run reads another's programs. A size limit
# turns on jax's file lock, which the workers need to share the directory.
# (Without the filelock package, a test extra, each process compiles on its own.)
CACHE_ENV = "DISTLA_TESTS_XLA_CACHE"
# Opt-in since 2026-11-29 (DISTLA_TESTS_SHARED_CACHE=1): a CI worker aborted inside
# jax's cache write (compilation_cache.put_executable_and_time, "Fatal Python error:
# Aborted") with two workers sharing the directory.
_OWN_CACHE = (
    os.environ.get("DISTLA_TESTS_SHARED_CACHE") == "1"
    and CACHE_ENV not in os.environ
    and importlib.util.find_spec("filelock") is not None
)
if _OWN_CACHE:
    os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="distla-tests-xla-")
# jax's settings for that cache (subprocesses get them as JAX_* variables: test_docs)
CACHE_SETTINGS = (
    {
        "jax_compilation_cache_dir": os.environ[CACHE_ENV],
        "jax_compilation_cache_max_size": 4 * 2**30,
        "jax_persistent_cache_min_compile_time_secs": 0.1,
    }
    if os.environ.get(CACHE_ENV)
    else {}
)
for _name, _value in CACHE_SETTINGS.items():
    jax.config.update(_name, _value)


# The slowest files first (seconds of one worker at the flags above, largest first: 125,
# 117, 87, 85, 68, 66, 63, 56, 45; the rest take 35 s or less). `--dist loadfile` hands
# the workers whole files in collection order, so a slow file collected last kept one
# worker busy for a minute or more after the other had finished.
SLOWEST_FILES = (
    # compile-only peaks of seven families at n = 2048 and 4096 (svd, eigh, polar: 80,
    # 50, 20 s of CPU)
    "test_memory.py",
    "test_collective_order.py",  # every family compiled (131 s of CPU)
    "test_docstrings.py",
    "test_dropin_sweep.py",
    # the FFT side's (seconds of one worker under load: 280, 200, 190)
    "test_dct.py",
    "test_jaxdecomp.py",
    "test_particle_mesh.py",
    "test_edges.py",
    "test_linalg.py",
    "test_docs.py",
    "test_spectral_dropin.py",
    "test_dropin_linalg.py",
    "test_spectral.py",
    "test_geneig.py",
    "test_edge_sweep.py",
    "test_batched.py",
)


def pytest_collection_modifyitems(items):
    first = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: files stay whole


def pytest_sessionfinish(session):
    if _OWN_CACHE and not hasattr(session.config, "workerinput"):
        shutil.rmtree(os.environ[CACHE_ENV], ignore_errors=True)


MESH_SHAPES = [(2, 4), (4, 2), (2, 2), (1, 8), (8, 1)]
AXIS_TYPES = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}


def build_mesh(shape, kind, names=("x", "y")):
    """A mesh of ``shape`` (on the first prod(shape) devices), or skip."""
    need = 1
    for s in shape:
        need *= s
    if jax.device_count() < need:
        pytest.skip(f"needs {need} devices, have {jax.device_count()}")
    types = (AXIS_TYPES[kind],) * len(shape)
    return jax.make_mesh(shape, names[: len(shape)], axis_types=types, devices=jax.devices()[:need])


def _mesh_params():
    return [
        pytest.param((shape, kind), id=f"{shape[0]}x{shape[1]}-{kind}")
        for shape in MESH_SHAPES
        for kind in AXIS_TYPES
    ]


@pytest.fixture(params=_mesh_params())
def mesh(request):
    """Every mesh of the harness: 2x4, 4x2, 2x2, 1x8, 8x1; Auto and Explicit."""
    shape, kind = request.param
    return build_mesh(shape, kind)


@pytest.fixture(params=list(AXIS_TYPES))
def mesh24(request):
    """The 2x4 mesh, Auto and Explicit."""
    return build_mesh((2, 4), request.param)


@pytest.fixture
def x64():
    """Run the test with 64-bit types enabled."""
    with jax.enable_x64(True):
        yield


@pytest.fixture
def strict_promotion():
    """Run the test under ``jax_numpy_dtype_promotion="strict"``."""
    with jax.numpy_dtype_promotion("strict"):
        yield


@pytest.fixture(params=[True, False], ids=["shardy", "gspmd"])
def partitioner(request):
    """Run the test under both of jax's partitioners (``jax_use_shardy_partitioner``).

    jax releases differ in which one is the default and which one they stress;
    tests of the compiled program (collectives, bytes, layouts) run under both.
    Compiled programs are cached per setting, so the caches are cleared around it.
    """
    before = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", request.param)
    jax.clear_caches()
    try:
        yield request.param
    finally:
        jax.config.update("jax_use_shardy_partitioner", before)
        jax.clear_caches()


# XLA's CPU backend maps about 3.5 memory regions into the process for each executable
# it loads and keeps them while jax's caches hold the executable. A worker that runs
# half the suite's files loads tens of thousands of programs: one reached 23 000 maps
# by 46 % of a run, and past Linux's vm.max_map_count (65 530 by default) LLVM's next
# mapping fails inside a compile and the worker dies of a segmentation fault
# (backend_compile_and_load; CI on 2026-11-29, twice at 97 % of the run), after which
# pytest-xdist's controller waited for ever. So between files, a worker whose maps
# pass MAX_MAPS drops jax's compiled programs; distla's own caches keep only jitted
# functions, which compile again when called. (The earlier crashes in compiles and in
# the cache write, blamed above on LLVM level 0 and on the shared cache, may have had
# this cause; those settings stay opt-in, not retried.)
MAX_MAPS = 20_000


def _maps() -> int | None:
    """How many memory maps this process holds (Linux), or None."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return None


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """After each file: clear jax's caches when the process nears the map limit."""
    yield
    held = _maps()
    if held is None or held > MAX_MAPS:
        jax.clear_caches()
        gc.collect()
