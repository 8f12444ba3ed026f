"""One BLAS thread per LAPACK call when simulated CPU devices share a process (private).

jaxlib runs the LAPACK kernels of ``lax.linalg`` (``getrf``, ``trsm``) through
scipy's OpenBLAS. With several CPU devices in one process every device calls
LAPACK from its own thread, and each call would start OpenBLAS's own threads
too: 8 devices x 2 OpenBLAS threads on 2 cores made a 2048 x 2048 LU 8x slower
here. The devices already are the parallelism, so distla sets OpenBLAS to one
thread per call, once, the first time a LAPACK-based kernel is built for such
a process. One-device and multi-process runs (one CPU device per process) are
left alone. This also applies to scipy/numpy BLAS calls made later in the
same process; ``threadpoolctl.threadpool_limits(None)`` restores them.
"""

from __future__ import annotations

import jax

_done = False


def single_thread_lapack_for_cpu_devices() -> None:
    global _done
    if _done:
        return
    _done = True
    if jax.default_backend() != "cpu" or jax.local_device_count() < 2:
        return
    import scipy.linalg.cython_lapack  # noqa: F401  (loads the OpenBLAS jaxlib calls)
    import threadpoolctl

    threadpoolctl.threadpool_limits(1, user_api="blas")
