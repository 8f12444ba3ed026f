"""Cold first-call compile time of distla's public functions, one fresh process per case.

Each case runs in its own subprocess (no in-memory or persistent cache shared
with an earlier case) on a 2x4 mesh of 8 simulated CPU devices:

- jittable functions (solve, lu_factor, cholesky, qr, matmul, fftn, eigvalsh, svdvals):
  ``jax.jit(f).lower(*ShapeDtypeStructs with NamedShardings).compile()``, so no
  ``n x n`` data is allocated even at n = 16384; the lower and compile phases
  are timed apart.
- eager functions (eigh, svd, polar of a concrete matrix: they run several
  compiled steps, each compiled on first use): the first call on a random
  matrix, timed to ``block_until_ready``, minus a second call on the same
  matrix (the run time), is the first-call compile overhead. Both calls are
  reported. ``svd@jit:1024`` (and ``eigh@jit``, ``polar@jit``) times the same
  function under ``jax.jit`` instead: lower and compile, as the jittable ones.

Every time is given as wall seconds and as the process's CPU seconds
(``time.process_time``: all threads of the compiling process), since a loaded
machine stretches wall time but not much CPU time. For compiled programs the
HLO size (characters of the optimized module), its ``while`` loops and its
number of computations are printed as well.

Usage::

    python benchmarks/compile_times.py                       # the default sweep
    python benchmarks/compile_times.py solve:2048 eigh:512   # chosen cases
    python benchmarks/compile_times.py --json out.json solve:1024

The persistent compilation cache is switched off in the children
(``jax_enable_compilation_cache=False``) so that every figure is cold.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SWEEP = {
    "solve": (1024, 2048, 4096, 8192, 16384),
    "lu_factor": (1024, 2048, 4096, 8192, 16384),
    "cholesky": (1024, 2048, 4096, 8192, 16384),
    "qr": (1024, 2048, 4096, 8192, 16384),
    "matmul": (1024, 2048, 4096, 8192, 16384),
    "fftn": (64, 128, 256),
    "eigvalsh": (1024, 2048, 4096, 8192, 16384),
    "svdvals": (1024, 2048, 4096, 8192),
    "eigh": (512, 1024, 2048),
    "svd": (512, 1024, 2048),
    "polar": (512, 1024, 2048),
}
EAGER = ("eigh", "svd", "polar")


def _child(op: str, n: int) -> dict:
    import jax

    jax.config.update("jax_num_cpu_devices", 8)
    jax.config.update("jax_enable_compilation_cache", False)
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import distla

    mesh = distla.make_mesh((2, 4), ("x", "y"))
    out = {"op": op, "n": n, "mesh": "2x4", "dtype": "float32", "jax": jax.__version__}

    def sds(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    if op.endswith("@jit"):  # an eager function's lower and compile under jax.jit
        op = op[: -len("@jit")]
        out["op"] = f"{op}@jit"
    elif op in EAGER:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, n)).astype(np.float32)
        if op == "eigh":
            x = x + x.T
        a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
        f = {"eigh": distla.linalg.eigh, "svd": distla.linalg.svd, "polar": distla.linalg.polar}[op]
        times = []
        for _ in range(2):
            w0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(f(a))
            times.append((time.perf_counter() - w0, time.process_time() - c0))
        (w1, c1), (w2, c2) = times
        out.update(
            first_wall=w1,
            first_cpu=c1,
            second_wall=w2,
            second_cpu=c2,
            compile_wall=w1 - w2,
            compile_cpu=c1 - c2,
        )
        return out

    if op == "fftn":
        args = [sds((n, n, n), P("x", "y", None))]
        f = distla.fft.fftn
        shape = (n, n, n)
    else:
        mat = sds((n, n), P("x", "y"))
        args = {"solve": [mat, sds((n,), P("x"))], "matmul": [mat, mat]}.get(op, [mat])
        f = distla.matmul if op == "matmul" else getattr(distla.linalg, op)
        shape = (n, n)
    out["shape"] = list(shape)
    w0, c0 = time.perf_counter(), time.process_time()
    lowered = jax.jit(f).lower(*args)
    w1, c1 = time.perf_counter(), time.process_time()
    compiled = lowered.compile()
    w2, c2 = time.perf_counter(), time.process_time()
    text = compiled.as_text()
    out.update(
        lower_wall=w1 - w0,
        lower_cpu=c1 - c0,
        compile_wall=w2 - w1,
        compile_cpu=c2 - c1,
        first_wall=w2 - w0,
        first_cpu=c2 - c0,
        hlo_chars=len(text),
        hlo_while=text.count(" while("),
        hlo_computations=sum(
            1
            for line in text.splitlines()
            if line and not line[0].isspace() and line.rstrip().endswith("{")
        ),
    )
    return out


def _run(op: str, n: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="8")
    proc = subprocess.run(
        [sys.executable, __file__, "--child", f"{op}:{n}"], capture_output=True, text=True, env=env
    )
    if proc.returncode:
        return {"op": op, "n": n, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(r: dict) -> str:
    if "error" in r:
        return f"{r['op']:>9} {r['n']:>6}  error: {r['error']}"
    if r["op"] in EAGER:  # (an "@jit" case prints as the jittable ones)
        return (
            f"{r['op']:>9} {r['n']:>6}  first call {r['first_wall']:7.1f} s wall "
            f"{r['first_cpu']:7.1f} s cpu; second {r['second_wall']:6.1f} s wall "
            f"{r['second_cpu']:6.1f} s cpu; compile ~{r['compile_wall']:6.1f} s wall "
            f"{r['compile_cpu']:6.1f} s cpu"
        )
    return (
        f"{r['op']:>9} {r['n']:>6}  lower {r['lower_wall']:6.2f} s wall {r['lower_cpu']:6.2f} "
        f"cpu  compile {r['compile_wall']:6.2f} s wall {r['compile_cpu']:6.2f} cpu  "
        f"HLO {r['hlo_chars']:>8} chars {r['hlo_while']:>3} while "
        f"{r['hlo_computations']:>4} computations"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="op:n (default: the whole sweep)")
    ap.add_argument("--json", help="write the results here as a JSON list")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        op, n = args.child.split(":")
        print(json.dumps(_child(op, int(n))))
        return
    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases] or [
        (op, n) for op, ns in SWEEP.items() for n in ns
    ]
    results = []
    for op, n in cases:
        r = _run(op, n)
        results.append(r)
        print(_row(r), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
