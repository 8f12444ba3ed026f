"""distla.scipy.linalg against jax.scipy.linalg on the same sharded input.

float32 ``n x n`` on a 2x4 mesh (``P(rows, cols)``, ``AxisType.Auto``: jax's
Hessenberg, Schur and QR refuse split matrix dimensions on Explicit meshes), every
function called eagerly and waited for:

- ``hessenberg`` (with ``Q``): distla's distributed reduction, distla's one-device
  plan, ``plan="auto"`` (the one-device plan up to ``CROSSOVER["hessenberg"]``), jax
  (XLA gathers the matrix onto every device, LAPACK's ``gehrd`` on each);
- ``sqrtm`` and ``funm`` (``exp``) of a Hermitian positive definite matrix: the
  eigen route on the distributed eigh (``plan="distributed"``) and on the
  one-device eigh (``plan="auto"``), jax's Schur method / Schur–Parlett;
- ``sqrtm`` of a general matrix: the Denman–Beavers iteration;
- ``schur`` (one-device ``gees``), ``qr_multiply`` (``c`` of 64 rows),
  ``eigh_tridiagonal`` (values), ``toeplitz`` from sharded vectors, ``hilbert``
  with ``device=``.

As a script it times each function's cases in turn, round after round
(``benchmarks/interleaved.py``: the shared machine's load falls on every case
alike), and prints medians and ratios to jax as JSON; the first call of each case
(compile and run) is reported apart. jax's calls that would take minutes (its Schur
method and Schur–Parlett are scalar loops of ``O(n³)`` steps) run only up to
``JAX_MAX_N``.

    python benchmarks/bench_scipy_linalg.py [n ...] > docs/data/bench-scipy-linalg.json

Under pytest the same cases run at n = 256 through pytest-benchmark:
``pytest benchmarks/bench_scipy_linalg.py --benchmark-json=out/scipy-linalg.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as sla

MESH = (2, 4)
SIZES = [1024, 4096]
ROUNDS = int(os.environ.get("DISTLA_BENCH_ROUNDS", "3"))
#: Largest n at which each jax call is timed (beyond: minutes per call here).
JAX_MAX_N = {"sqrtm": 1024, "funm": 1024, "sqrtm_general": 1024, "schur": 1024}
#: Largest n at which the one-device plans are timed beside the distributed ones.
ONE_DEVICE_MAX_N = 1024


def _mesh():
    return distla.make_mesh(MESH, ("rows", "cols"), axis_types=AxisType.Auto)


def cases(n: int, mesh) -> dict[str, dict]:
    """For each function: its input and the callables to time (``distla...``, ``jax``)."""
    rng = np.random.default_rng(n)
    spec = NamedSharding(mesh, P("rows", "cols"))
    g = rng.standard_normal((n, n), dtype=np.float32)
    spd = (g @ g.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)
    shifted = (g + 2 * np.sqrt(n) * np.eye(n, dtype=np.float32)).astype(np.float32)
    a, h, s = (jax.device_put(x, spec) for x in (g, spd, shifted))
    c = jax.device_put(rng.standard_normal((64, n), dtype=np.float32), spec)
    vec = NamedSharding(mesh, P(("rows", "cols")))
    d = jax.device_put(rng.standard_normal(n, dtype=np.float32), vec)
    e = jax.device_put(rng.standard_normal(n - 1, dtype=np.float32), NamedSharding(mesh, P()))
    return {
        "hessenberg": {
            "distla": lambda: sla.hessenberg(a, calc_q=True, plan="distributed"),
            "distla_one_device": lambda: sla.hessenberg(a, calc_q=True, plan="one_device"),
            "distla_auto": lambda: sla.hessenberg(a, calc_q=True),
            "jax": lambda: jsl.hessenberg(a, calc_q=True),
        },
        "sqrtm": {
            "distla": lambda: sla.sqrtm(h, plan="distributed"),
            "distla_auto": lambda: sla.sqrtm(h),
            "jax": lambda: jsl.sqrtm(h),
        },
        "funm": {
            "distla": lambda: sla.funm(h, jnp.exp, plan="distributed"),
            "distla_auto": lambda: sla.funm(h, jnp.exp),
            "jax": lambda: jsl.funm(h, jnp.exp),
        },
        "sqrtm_general": {
            "distla": lambda: sla.sqrtm(s, hermitian=False),
            "jax": lambda: jsl.sqrtm(s),
        },
        "schur": {"distla": lambda: sla.schur(a), "jax": lambda: jsl.schur(a)},
        "qr_multiply": {
            "distla": lambda: sla.qr_multiply(a, c),
            "jax": lambda: jsl.qr_multiply(a, c),
        },
        "eigh_tridiagonal": {
            "distla": lambda: sla.eigh_tridiagonal(d, e, eigvals_only=True),
            "jax": lambda: jsl.eigh_tridiagonal(d, e, eigvals_only=True),
        },
        "toeplitz": {"distla": lambda: sla.toeplitz(d, d), "jax": lambda: jsl.toeplitz(d, d)},
        "hilbert": {
            "distla": lambda: sla.hilbert(n, device=spec),
            "jax": jax.jit(lambda: jsl.hilbert(n), out_shardings=spec),
        },
    }


def _waited(fn) -> float:
    t = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t


def measure(n: int, names=None) -> list[dict]:
    """Interleaved medians (``ROUNDS`` rounds after one warm-up) of each function's cases."""
    from interleaved import medians

    mesh = _mesh()
    rows = []
    for name, impls in cases(n, mesh).items():
        if names and name not in names:
            continue
        if n > JAX_MAX_N.get(name, n):
            impls = {k: f for k, f in impls.items() if k != "jax"}
        if n > ONE_DEVICE_MAX_N:  # the one-device plans: measured at the smaller sizes
            impls = {k: f for k, f in impls.items() if k in ("distla", "jax")}
        first = {k: _waited(f) for k, f in impls.items()}  # compile and run
        times = medians(impls, ROUNDS, warmups=0)
        row = dict(
            function=name,
            n=n,
            dtype="float32",
            mesh="x".join(map(str, MESH)),
            jax=jax.__version__,
            rounds=ROUNDS,
            seconds=times,
            first_call_seconds=first,
        )
        if "jax" in times:
            row["ratio_to_jax"] = {k: t / times["jax"] for k, t in times.items() if k != "jax"}
        print(json.dumps(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv):
    sizes = [int(x) for x in argv if x.isdigit()] or SIZES
    names = [x for x in argv if not x.isdigit()] or None
    out = []
    for n in sizes:
        out += measure(n, names)
    json.dump(out, sys.stdout, indent=1)


# --------------------------------------------------------------------------- pytest


FUNCTIONS = (
    "hessenberg",
    "sqrtm",
    "funm",
    "sqrtm_general",
    "schur",
    "qr_multiply",
    "eigh_tridiagonal",
    "toeplitz",
    "hilbert",
)


if "pytest" in sys.modules:
    import pytest

    @pytest.mark.parametrize("impl", ["distla", "jax"])
    @pytest.mark.parametrize("name", FUNCTIONS)
    def test_scipy_linalg(run, name, impl):
        n = 256
        fn = cases(n, _mesh())[name][impl]
        run(lambda: fn(), (), function=name, impl=impl, n=n, mesh="x".join(map(str, MESH)))


if __name__ == "__main__":
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
    jax.config.update("jax_num_cpu_devices", 8)
    sys.path.insert(0, os.path.dirname(__file__))
    main(sys.argv[1:])
