"""Simulated CPU devices for the command-line tools: one way to ask for them.

jax's own switch, ``jax.config.update("jax_num_cpu_devices", n)`` (the
environment variable ``JAX_NUM_CPU_DEVICES``), works until the first backend
starts. The tools ask for devices before that; only where a backend is
already up without enough devices (one accelerator, say) does the command
start again in a fresh interpreter on CPU devices.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# A mesh of more devices than this is refused rather than simulated.
MAX_SIMULATED_DEVICES = 64
ENV = "JAX_NUM_CPU_DEVICES"
_REEXEC_MARK = "DISTLA_SIMULATED_DEVICES"


class DeviceError(Exception):
    """Not enough devices, and none can be simulated: one line for the user."""


def request_cpu_devices(n: int) -> bool:
    """Ask jax for ``n`` CPU devices; False when its backend has already started."""
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:
        return False
    return True


def ensure_devices(need: int, argv: Sequence[str], *, simulate: int | None = None) -> None:
    """At least ``need`` devices: the real ones, else ``simulate`` (default ``need``) CPU devices.

    Call it before anything else starts jax's backend. ``argv`` is the command
    line after ``python -m distla``, run again in a fresh interpreter when the
    backend is already up.

    Raises:
      DeviceError: more than ``MAX_SIMULATED_DEVICES`` would be needed, or a
        fresh interpreter did not get them either.
    """
    import jax

    want = max(need, simulate or need)
    if need > MAX_SIMULATED_DEVICES and jax.device_count() < need:
        raise DeviceError(
            f"a mesh of {need} devices is bigger than the {jax.device_count()} "
            f"{jax.default_backend()} devices here, and distla simulates at most "
            f"{MAX_SIMULATED_DEVICES} CPU devices"
        )
    asked = jax.config.jax_num_cpu_devices < need and request_cpu_devices(want)
    have, kind = jax.device_count(), jax.default_backend()
    if have >= need:
        if asked and kind == "cpu":
            _say(f"running on {have} simulated CPU devices (they share this machine's cores).")
        return
    if os.environ.get(_REEXEC_MARK):
        raise DeviceError(f"asked for {want} CPU devices and got {have} {kind} devices")
    env = dict(os.environ, JAX_PLATFORMS="cpu", **{ENV: str(want), _REEXEC_MARK: str(want)})
    _say(
        f"{have} {kind} device(s) found; running on {want} simulated CPU devices "
        "(they share this machine's cores)."
    )
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "distla", *argv], env)


def _say(text: str) -> None:
    print(f"[distla] {text}", file=sys.stderr, flush=True)
