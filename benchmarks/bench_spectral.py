"""Distributed eigh and SVD against one device and against XLA's partitioning.

float32, n x n on a 2x4 mesh (``P(rows, cols)``, Explicit), one session:

- distla ``linalg.eigh`` / ``linalg.svd`` (the first call compiles every step;
  the timed call reuses them);
- ``jnp.linalg.eigh`` / ``svd`` on one device, ``scipy.linalg.eigh`` /
  ``scipy.linalg.svd`` (``gesdd``) with every core to its BLAS;
- ``jnp.linalg.eigh`` / ``svd`` on the same sharded input (XLA gathers; about
  40 s / 130 s at n = 2048 here, so measured at the sizes in ``XLA_SIZES``).

Flops executed, from ``distla.cost`` summed over devices: eigh's one program
(the tridiagonal route, its repair under ``lax.cond`` left out: it runs only
when the probe fires); for svd, QDWH's step times the iterations the library's
step counter saw, the same eigh program at order n and the step that forms the
singular values and ``U = U_p V``. Against LAPACK's count (syevd with vectors
≈ 9n³, gesdd with vectors ≈ 22n³).

    python benchmarks/bench_spectral.py [n ...] > docs/data/spectral.json
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg
from distla.linalg import _eigh, _svd
from distla.linalg import _qdwh as _polar

MESH = (2, 4)
SIZES = [1024, 2048]
XLA_SIZES = [1024]
LAPACK_FLOPS = {"eigh": 9.0, "svd": 22.0}  # x n³, with vectors


def _timed(fn, *args, repeat=2):
    out = fn(*args)
    jax.block_until_ready(out)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t)
    return best


def _first(fn, *args):
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t


def _flops(mesh, n, p):
    """Flops summed over devices at order ``n`` (padded to a multiple of ``p`` for QDWH):
    one QDWH step, eigh's program without its conditional repair, and svd's step
    that forms ``S`` and ``U``."""
    amesh = mesh.abstract_mesh
    spec = P("rows", "cols")
    big = -(-n // p) * p

    def mat(r, c):
        return jax.ShapeDtypeStruct((r, c), jnp.float32, sharding=NamedSharding(mesh, spec))

    rep = NamedSharding(mesh, P())
    sc = jax.ShapeDtypeStruct((), jnp.float32, sharding=rep)
    index = jax.ShapeDtypeStruct((), jnp.int32, sharding=rep)
    vec = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=rep)
    qdwh = distla.cost(
        _polar.on_mesh(_polar.qdwh_qr_step, amesh, (P(), spec, P(), P()), (("spec", spec),)),
        (index, mat(big, big), sc, sc),
    )
    tridiagonal = _eigh.tridiagonal
    eigh = distla.cost(
        functools.partial(tridiagonal.eigh_2d, mesh=amesh, symmetrize=True, lower=True), mat(n, n)
    )
    svd = distla.cost(
        _polar.on_mesh(_svd._svd_vectors, amesh, (spec, P(), spec, P())),
        mat(n, n),
        mat(n, n),
        vec,
        mat(n, n),
    )
    return {
        "qdwh": qdwh.flops * p,
        "eigh": (eigh.flops - eigh.conditional_flops) * p,
        "svd_vectors": svd.flops * p,
    }


def _executed(op, steps, flops):
    """Flops of one call: eigh's program; svd's QDWH steps, eigh of ``H`` and its last step."""
    if op == "eigh":
        return flops["eigh"]
    return steps.get("qdwh", 0) * flops["qdwh"] + flops["eigh"] + flops["svd_vectors"]


def run(n, mesh):
    rng = np.random.default_rng(n)
    g = rng.standard_normal((n, n), dtype=np.float32)
    h = (g + g.T) / 2
    p = mesh.size
    rows = []
    for op, mat, dist, one, sp in [
        (
            "eigh",
            h,
            linalg.eigh,
            jax.jit(jnp.linalg.eigh),
            lambda x: scipy.linalg.eigh(x, driver="evd"),
        ),
        (
            "svd",
            g,
            linalg.svd,
            jax.jit(jnp.linalg.svd),
            lambda x: scipy.linalg.svd(x, lapack_driver="gesdd"),
        ),
    ]:
        x = jax.device_put(mat, NamedSharding(mesh, P("rows", "cols")))
        _polar.STEPS.clear()
        compile_and_run = _first(dist, x)
        _polar.STEPS.clear()
        t0 = time.perf_counter()
        jax.block_until_ready(dist(x))
        t_dist = time.perf_counter() - t0
        steps = dict(_polar.STEPS)
        print(
            json.dumps(dict(op=op, n=n, distla_s=t_dist, first=compile_and_run, steps=steps)),
            file=sys.stderr,
            flush=True,
        )
        row = dict(
            op=op,
            n=n,
            dtype="float32",
            mesh="x".join(map(str, MESH)),
            jax=jax.__version__,
            devices=jax.device_count(),
            distla_s=t_dist,
            distla_first_call_s=compile_and_run,
            steps=steps,
        )
        x1 = jax.device_put(mat, jax.devices()[0])
        row["jnp_one_device_s"] = _timed(one, x1)
        row["scipy_s"] = _timed(sp, mat, repeat=1)
        if n in XLA_SIZES:  # jnp's symmetrization fails on Explicit meshes: Auto axes
            auto = distla.make_mesh(MESH, ("rows", "cols"), axis_types=AxisType.Auto)
            xa = jax.device_put(mat, NamedSharding(auto, P("rows", "cols")))
            row["jnp_sharded_s"] = _first(jax.jit(getattr(jnp.linalg, op)), xa)
        rows.append(row)
    # after the timed calls: distla.cost compiles the programs again
    flops = _flops(mesh, n, p)
    for row in rows:
        executed = _executed(row["op"], row["steps"], flops)
        row["flops_executed"] = executed
        row["flops_lapack"] = LAPACK_FLOPS[row["op"]] * n**3
        row["flops_ratio"] = executed / row["flops_lapack"]
        print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def main(argv):
    sizes = [int(a) for a in argv] or SIZES
    mesh = distla.make_mesh(MESH, ("rows", "cols"), axis_types=AxisType.Explicit)
    out = []
    for n in sizes:
        out += run(n, mesh)
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
    jax.config.update("jax_num_cpu_devices", 8)
    main(sys.argv[1:])
