"""Every public function against jnp on the same sharded input and against one device.

For each function, size and mesh (2x4, ``Auto`` and ``Explicit``) one run
times, after a warm-up call (compile apart):

- ``distla``: the public function with its defaults (``plan="auto"``), eager,
  as users call it; the plan it chose is read with ``distla.cost``;
- ``dist``: the distributed plan (``plan="distributed"``), where ``--dist``
  asks for it (the distributed eigensolver compiles for about a minute);
- ``jnp``: ``jax.jit`` of the jnp/jax.scipy function on the same sharded
  input (XLA's own partitioning, which gathers the operand onto every
  device). On ``Explicit`` meshes jnp refuses most sharded linear algebra
  (``ShardingTypeError``); there it runs under ``jax.sharding.auto_axes``,
  which is what a user has to write;
- ``1dev``: the jnp function on one device, with every BLAS thread (distla's
  one-thread limit lifted for it, as a one-device user has it).

Prints a table of ratios and writes JSON (every time, tagged with mesh,
shape, dtype, plan and jax version)::

    JAX_PLATFORMS=cpu python benchmarks/bench_vs_jnp.py --sizes 256 1024 2048 \\
        --json out/vs_jnp.json

``--only eigh svd`` restricts the functions. Times are the best of
``--repeat`` calls; on a shared machine read the ratios, not the times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

jax.config.update("jax_num_cpu_devices", int(os.environ.get("DISTLA_BENCH_DEVICES", "8")))

import jax.numpy as jnp  # noqa: E402
import jax.scipy.linalg as jsl  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402


def _general(n, rng):
    return (rng.standard_normal((n, n)) + n**0.5 * np.eye(n)).astype(np.float32)


def _spd(n, rng):
    x = rng.standard_normal((n, n)).astype(np.float32)
    return (x @ x.T / n + np.eye(n, dtype=np.float32)).astype(np.float32)


def _sym(n, rng):
    x = rng.standard_normal((n, n)).astype(np.float32)
    return ((x + x.T) / 2).astype(np.float32)


def _norm10(n, rng):
    """1-norm 10: expm's degree-13 Padé with a few squarings (float64: 1, float32's degree 7: 2)."""
    x = rng.standard_normal((n, n))
    return (x * (10.0 / np.abs(x).sum(axis=0).max())).astype(np.float32)


def _upper(n, rng):
    return np.triu(_general(n, rng))


def _lower_chol(n, rng):
    return np.linalg.cholesky(_spd(n, rng).astype(np.float64)).astype(np.float32)


L, JL = distla.linalg, jnp.linalg

# name: (distla function, jnp function, operand makers, has plan=)
CASES = {
    "matmul": (distla.matmul, jnp.matmul, (_general, _general), False),
    "solve": (distla.linalg.solve, jnp.linalg.solve, (_general, _general), True),
    "lu_factor": (distla.linalg.lu_factor, jsl.lu_factor, (_general,), False),
    "cholesky": (distla.linalg.cholesky, jnp.linalg.cholesky, (_spd,), True),
    "qr": (distla.linalg.qr, jnp.linalg.qr, (_general,), False),
    "inv": (distla.linalg.inv, jnp.linalg.inv, (_general,), False),
    "slogdet": (distla.linalg.slogdet, jnp.linalg.slogdet, (_general,), False),
    "eigh": (distla.linalg.eigh, jnp.linalg.eigh, (_sym,), True),
    "eigvalsh": (distla.linalg.eigvalsh, jnp.linalg.eigvalsh, (_sym,), True),
    "svd": (distla.linalg.svd, jnp.linalg.svd, (_general,), True),
    "svdvals": (distla.linalg.svdvals, jnp.linalg.svdvals, (_general,), True),
    "polar": (distla.linalg.polar, jsl.polar, (_general,), True),
    "fftn": (distla.fft.fftn, jnp.fft.fftn, ("volume",), False),
    "ifftn": (distla.fft.ifftn, jnp.fft.ifftn, ("volume",), False),
    "rfftn": (distla.fft.rfftn, jnp.fft.rfftn, ("real volume",), False),
    "irfftn": (distla.fft.irfftn, jnp.fft.irfftn, ("volume",), False),
    "fft": (distla.fft.fft, jnp.fft.fft, ("volume",), False),
    "ifft": (distla.fft.ifft, jnp.fft.ifft, ("volume",), False),
    "rfft": (distla.fft.rfft, jnp.fft.rfft, ("real volume",), False),
    "irfft": (distla.fft.irfft, jnp.fft.irfft, ("volume",), False),
    "hfft": (distla.fft.hfft, jnp.fft.hfft, ("volume",), False),
    "ihfft": (distla.fft.ihfft, jnp.fft.ihfft, ("real volume",), False),
    "fft2": (distla.fft.fft2, jnp.fft.fft2, ("volume",), False),
    "ifft2": (distla.fft.ifft2, jnp.fft.ifft2, ("volume",), False),
    "rfft2": (distla.fft.rfft2, jnp.fft.rfft2, ("real volume",), False),
    "irfft2": (distla.fft.irfft2, jnp.fft.irfft2, ("volume",), False),
    "expm": (distla.linalg.expm, jsl.expm, (_norm10,), True),
    "eig": (distla.linalg.eig, jnp.linalg.eig, (_general,), True),
    "eigvals": (distla.linalg.eigvals, jnp.linalg.eigvals, (_general,), True),
    # the rest of the namespace, on the families above
    "det": (L.det, JL.det, (_general,), True),
    "qr_raw": (lambda a: L.qr(a, mode="raw"), lambda a: JL.qr(a, mode="raw"), (_general,), False),
    "lu": (L.lu, jsl.lu, (_general,), False),
    "lu_solve": (
        lambda a, b: L.lu_solve(L.lu_factor(a), b),
        lambda a, b: jsl.lu_solve(jsl.lu_factor(a), b),
        (_general, _general),
        False,
    ),
    "cho_solve": (
        lambda c, b: L.cho_solve((c, True), b),
        lambda c, b: jsl.cho_solve((c, True), b),
        (_lower_chol, _general),
        False,
    ),
    "solve_triangular": (L.solve_triangular, jsl.solve_triangular, (_upper, _general), False),
    "lstsq": (
        lambda a, b: L.lstsq(a, b)[0],
        lambda a, b: JL.lstsq(a, b)[0],
        (_general, _general),
        False,
    ),
    "pinv": (L.pinv, JL.pinv, (_general,), False),
    "matrix_rank": (L.matrix_rank, JL.matrix_rank, (_general,), False),
    "cond": (L.cond, JL.cond, (_general,), False),
    "norm2": (lambda a: L.norm(a, 2), lambda a: JL.norm(a, 2), (_general,), False),
    "matrix_power": (
        lambda a: L.matrix_power(a, 3),
        lambda a: JL.matrix_power(a, 3),
        (_norm10,),
        False,
    ),
    "multi_dot": (
        lambda a, b, c: L.multi_dot([a, b, c]),
        lambda a, b, c: JL.multi_dot([a, b, c]),
        (_general,) * 3,
        False,
    ),
    "tensorinv": (
        lambda a: L.tensorinv(a, ind=1),
        lambda a: JL.tensorinv(a, ind=1),
        (_general,),
        False,
    ),
    "expm_frechet": (
        lambda a, e: L.expm_frechet(a, e, compute_expm=False),
        lambda a, e: jsl.expm_frechet(a, e, compute_expm=False),
        (_norm10, _general),
        False,
    ),
}
FFT_SIZE = {256: 64, 1024: 128, 2048: 256, 4096: 256}


def _best(fn, args, repeat):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return min(times), first


VOLUMES = {"volume": np.complex64, "real volume": np.float32}  # (k, k, k), FFT_SIZE[n]


def _operands(name, makers, n, mesh, rng):
    if makers[0] in VOLUMES:
        k = FFT_SIZE[n]
        x = rng.standard_normal((k, k, k))
        if makers[0] == "volume":
            x = x + 1j * rng.standard_normal((k, k, k))
        host = [x.astype(VOLUMES[makers[0]])]
        spec = P(*mesh.axis_names, None)
    else:
        host = [m(n, rng) for m in makers]
        spec = P(*mesh.axis_names)
    return host, [jax.device_put(h, NamedSharding(mesh, spec)) for h in host]


def _jnp_sharded(ref, mesh, explicit):
    if not explicit:
        return jax.jit(ref)

    def under_auto(*xs):  # what a user writes to run jnp on an Explicit mesh
        # auto_axes needs the results' layout: replicated, as XLA's gather leaves them
        shapes = jax.eval_shape(ref, *(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs))
        out = jax.tree.map(lambda _: P(), shapes)
        return jax.sharding.auto_axes(ref, out_sharding=out)(*xs)

    return jax.jit(under_auto)


def run(names, sizes, repeat, dist, kinds):
    rows = []
    rng = np.random.default_rng(0)
    dev0 = jax.devices()[0]
    for kind in kinds:
        at = AxisType.Explicit if kind == "Explicit" else AxisType.Auto
        mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(at, at))
        for name in names:
            fn, ref, makers, has_plan = CASES[name]
            for n in sizes:
                host, xs = _operands(name, makers, n, mesh, rng)
                row = {
                    "function": name,
                    "n": FFT_SIZE[n] if makers[0] in VOLUMES else n,
                    "mesh": f"2x4 {kind}",
                    "dtype": str(host[0].dtype),
                    "jax": jax.__version__,
                }
                try:
                    row["plan"] = distla.cost(fn, *xs).plan or "distributed"
                except Exception as e:  # noqa: BLE001 (reported in the table)
                    row["plan"] = f"? {type(e).__name__}"
                row["distla"], row["distla_first"] = _best(fn, xs, repeat)
                if dist and has_plan:
                    row["dist"], _ = _best(lambda *a: fn(*a, plan="distributed"), xs, repeat)
                try:
                    with jax.set_mesh(mesh) if kind == "Explicit" else _null():
                        row["jnp"], _ = _best(
                            _jnp_sharded(ref, mesh, kind == "Explicit"), xs, repeat
                        )
                except Exception as e:  # noqa: BLE001
                    row["jnp_error"] = f"{type(e).__name__}: {str(e)[:80]}"
                ones = [jax.device_put(h, dev0) for h in host]
                distla.limit_cpu_blas(False)  # one device alone: every BLAS thread
                try:
                    row["1dev"], _ = _best(jax.jit(ref), ones, repeat)
                finally:
                    distla.limit_cpu_blas(True)
                rows.append(row)
                print(_line(row), flush=True)
    return rows


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _line(r):
    def ratio(a, b):
        return f"{r[a] / r[b]:6.2f}x" if a in r and b in r else "     -"

    dist = f"{r['dist'] * 1e3:9.1f}" if "dist" in r else "        -"
    jn = f"{r['jnp'] * 1e3:9.1f}" if "jnp" in r else "      err"
    return (
        f"| {r['function']:<9} | {r['n']:>5} | {r['mesh']:<13} | {r['plan']:<11} | "
        f"{r['distla'] * 1e3:9.1f} | {dist} | {jn} | {r['1dev'] * 1e3:9.1f} | "
        f"{ratio('distla', 'jnp')} | {ratio('distla', '1dev')} | {ratio('dist', 'jnp')} |"
    )


HEADER = (
    "| function  |     n | mesh          | plan        | distla ms |   dist ms |"
    "    jnp ms |   1dev ms | vs jnp  | vs 1dev | dist vs jnp |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(CASES))
    parser.add_argument("--sizes", nargs="*", type=int, default=[256, 1024, 2048])
    parser.add_argument("--meshes", nargs="*", default=["Auto", "Explicit"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dist", action="store_true", help="also time plan='distributed'")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    print(HEADER, flush=True)
    rows = run(args.only, args.sizes, args.repeat, args.dist, args.meshes)
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": platform.node(),
                    "cpus": os.cpu_count(),
                    "budget": distla.linalg.plan_budget(),
                    "rows": rows,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
