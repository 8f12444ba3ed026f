"""One BLAS thread per LAPACK call when simulated CPU devices share a process.

jaxlib runs the LAPACK kernels of ``lax.linalg`` (``getrf``, ``potrf``,
``trsm``, ``geqrf``) through scipy's OpenBLAS. With several CPU devices in one
process every device calls LAPACK from its own thread, and each call would
start OpenBLAS's own threads too: 8 devices x 2 OpenBLAS threads on 2 cores
made a 2048 x 2048 LU 8x slower (docs/caveats.md). The devices already are the
parallelism, so the first LAPACK-based distla kernel built in such a process
sets OpenBLAS to one thread per call, and says so on the ``distla`` logger.
That limit is process-wide (it reaches the caller's own scipy/numpy calls), so
it can be turned off: :func:`limit_cpu_blas` with ``False``, or the
environment variable ``DISTLA_LIMIT_CPU_BLAS=0`` before the first call.
One-device and multi-process runs (one CPU device per process) are left alone.
While one device computes alone (the one-device plan, called eagerly: the other
devices wait), :func:`every_blas_thread` gives the threads back for that call,
except to a function marked :func:`keeps_one_blas_thread` (LAPACK routines bound by
BLAS-2 calls, whose threads meet at a barrier per column).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import jax

_log = logging.getLogger("distla")
ENV_VAR = "DISTLA_LIMIT_CPU_BLAS"

_enabled: bool | None = None  # None: not decided yet (read the environment on first use)
_limiter: Any = None  # the threadpoolctl limiter while distla's limit is in place
_controller: Any = None  # threadpoolctl's view of the loaded BLAS libraries (read once)
_lift_lock = threading.Lock()
_lifts = 0  # every_blas_thread blocks open now, in any thread
_lifted: Any = None  # the limiter that gave the threads back while _lifts > 0


def _wanted() -> bool:
    global _enabled
    if _enabled is None:
        _enabled = os.environ.get(ENV_VAR, "1").strip().lower() not in {"0", "false", "no", "off"}
    return _enabled


def limit_cpu_blas(enabled: bool = True) -> None:
    """Let distla limit OpenBLAS to one thread per call under simulated CPU devices, or not.

    With several CPU devices in one process (``--xla_force_host_platform_device_count``
    or ``jax_num_cpu_devices``), every device runs its LAPACK calls on its own
    thread; OpenBLAS's own threads on top of them oversubscribe the cores
    (8x slower at n = 2048 on 2 cores). So, by default, the first distla call
    that builds a LAPACK-based kernel in such a process sets OpenBLAS to one
    thread per call with ``threadpoolctl`` and logs it at INFO level on the
    ``"distla"`` logger. The limit is process-wide: the caller's own scipy and
    numpy BLAS calls get one thread too.

    Args:
      enabled: ``False`` lifts a limit distla has set (the previous limits come
        back) and keeps distla from setting it again; ``True`` (the default
        behaviour) lets distla set it on its next LAPACK-based call. The
        environment variable ``DISTLA_LIMIT_CPU_BLAS=0`` is the same as
        ``limit_cpu_blas(False)`` before the first call.

    Examples:
      >>> import distla
      >>> distla.limit_cpu_blas(False)   # keep every BLAS thread for my own scipy code
      >>> distla.limit_cpu_blas(True)    # back to distla's default
    """
    global _enabled, _limiter
    _enabled = bool(enabled)
    if _enabled:
        single_thread_lapack_for_cpu_devices()
    elif _limiter is not None:
        _limiter.restore_original_limits()
        _limiter = None
        _log.info("distla: the OpenBLAS thread limit is lifted")


def single_thread_lapack_for_cpu_devices() -> None:
    """Apply the limit of :func:`limit_cpu_blas` if it is wanted and not applied yet."""
    global _limiter
    if _limiter is not None or not _wanted():
        return
    if jax.default_backend() != "cpu" or jax.local_device_count() < 2:
        return
    import scipy.linalg.cython_lapack  # noqa: F401  (loads the OpenBLAS jaxlib calls)
    import threadpoolctl

    _limiter = threadpoolctl.threadpool_limits(1, user_api="blas")
    _log.info(
        "distla: %d CPU devices share this process, so OpenBLAS runs one thread per "
        "call; distla.limit_cpu_blas(False) or %s=0 turns this off",
        jax.local_device_count(),
        ENV_VAR,
    )


@contextlib.contextmanager
def every_blas_thread() -> Iterator[None]:
    """Inside the block, OpenBLAS has back the threads that distla's limit took.

    The limit is there because every simulated CPU device calls LAPACK from its
    own thread at once; one device computing alone (the one-device plan, while
    the mesh's other devices wait) can use every core: a 4096 x 4096 solve took
    0.59 s with one thread and 0.38 s with two on the 2-core test bed. Wait for
    the call's result inside the block. Nested and concurrent blocks share one
    lift, and the limit returns when the last of them ends (unless
    :func:`limit_cpu_blas` lifted it meanwhile). A no-op where distla has set
    no limit.
    """
    global _lifts, _lifted, _controller
    with _lift_lock:
        if _lifts == 0 and _limiter is not None:
            import threadpoolctl

            _controller = _controller or threadpoolctl.ThreadpoolController()
            threads = _limiter.get_original_num_threads().get("blas") or os.cpu_count()
            _lifted = _controller.limit(limits=threads, user_api="blas")
        _lifts += 1
    try:
        yield
    finally:
        with _lift_lock:
            _lifts -= 1
            if _lifts == 0 and _lifted is not None:
                if _limiter is not None:  # distla's limit is still wanted: back to it
                    _lifted.restore_original_limits()
                _lifted = None


def keeps_one_blas_thread(fn: Any) -> Any:
    """Mark a one-device function whose LAPACK call keeps distla's one-thread limit.

    For routines bound by BLAS-2 calls: ``gehrd``'s panel (``xLAHR2``) makes one
    matrix-vector product over the trailing matrix per column, each a barrier of
    OpenBLAS's threads, and on cores shared with other work a barrier can cost a
    scheduler slice. With two threads the 1024 x 1024 ``hessenberg`` (with ``Q``)
    took 7-42 s on the loaded 2-core test bed, against 0.6-0.8 s with one
    (docs/scipy-linalg-timings.md). Returns ``fn``.
    """
    fn.__distla_one_blas_thread__ = True
    return fn


def lifts_blas_threads(fn: Any) -> bool:
    """Whether the one-device plan of ``fn`` runs inside :func:`every_blas_thread`."""
    return not getattr(fn, "__distla_one_blas_thread__", False)
