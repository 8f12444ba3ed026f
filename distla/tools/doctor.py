"""``python -m distla doctor``: every family on the devices here, checked and timed against jnp.

What to run first on a new machine or cluster. Each family runs once on a mesh
of the devices present (the accelerators when there is at least one, else 8
simulated CPU devices), its result is checked by LAPACK's scaled residual ratio
against a float64 numpy/scipy evaluation (pass at <= 30), and its time is
compared with the jnp/jax.scipy function on the same input. The exit status is
1 when a ratio fails (or a family raises).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .argtypes import positive_int

THRESHOLD = 30.0
DTYPES = ("float32", "float64", "complex64", "complex128")
FAMILIES = (
    "matmul", "solve", "lu_factor", "inv", "slogdet", "cholesky", "solve_triangular", "qr",
    "eigh", "svd", "polar", "lstsq", "batched_solve", "fftn", "rfftn",
)  # fmt: skip


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``python -m distla doctor``."""
    p.add_argument(
        "--sizes",
        type=positive_int,
        nargs="+",
        default=[512],
        metavar="N",
        help="matrix orders n (FFT: n/8 cubed, at least 8)",
    )
    p.add_argument("--dtype", default="float32", choices=DTYPES, help="the operands' dtype")
    p.add_argument(
        "--devices",
        type=positive_int,
        default=None,
        metavar="N",
        help="use the first N devices (default: all)",
    )
    p.add_argument(
        "--only",
        nargs="+",
        choices=FAMILIES,
        default=None,
        metavar="FAMILY",
        help="run only these families: " + ", ".join(FAMILIES) + " (default: all)",
    )
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=3,
        metavar="R",
        help="timed calls per function (the fastest is kept)",
    )


def _best(fn: Callable, args: Sequence[Any], repeat: int) -> float:
    import jax

    jax.block_until_ready(fn(*args))  # compile and warm up
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def _norm1(x):
    return np.abs(x).sum(axis=-2).max() if x.ndim >= 2 else np.abs(x).sum()


class _Ratios:
    """LAPACK's scaled residual ratios of the doctor's families, in the reference
    arithmetic (float64 / complex128), for ``n x n`` operands of ``dtype``."""

    def __init__(self, n: int, dtype: np.dtype):
        self.n, self.eps = n, np.finfo(dtype).eps

    @staticmethod
    def w(x):  # float64 / complex128 for the reference arithmetic
        x = np.asarray(x)
        return x.astype(np.result_type(x.dtype, np.float64))

    def solve(self, x, a, b):
        x, a, b = self.w(x), self.w(a), self.w(b)
        return np.abs(a @ x - b).max() / (
            np.abs(a).sum(-1).max() * np.abs(x).max() * a.shape[-1] * self.eps
        )

    def fact(self, rebuilt, a):
        return _norm1(self.w(rebuilt) - self.w(a)) / (a.shape[-1] * _norm1(self.w(a)) * self.eps)

    def lu(self, out, a):
        n, w = self.n, self.w
        lu, piv = (np.asarray(o) for o in out)
        perm = np.arange(n)
        for i, p in enumerate(piv):
            perm[[i, p]] = perm[[p, i]]
        lo, up = np.tril(w(lu), -1) + np.eye(n), np.triu(w(lu))
        return self.fact(lo @ up, w(a)[perm])

    def fft(self, y, ref):
        err = np.linalg.norm(self.w(y).ravel() - ref.ravel())
        return err / (np.linalg.norm(ref.ravel()) * math.log2(ref.size) * self.eps)

    def eigh(self, out, a):
        n, w, eps = self.n, self.w, self.eps
        lam, v = w(out[0]), w(out[1])
        orth = _norm1(v.conj().T @ v - np.eye(n)) / (n * eps)
        return max(_norm1(w(a) @ v - v * lam) / (n * _norm1(w(a)) * eps), orth)

    def qr(self, out, a):
        q, r = self.w(out[0]), self.w(out[1])
        orth = _norm1(q.conj().T @ q - np.eye(q.shape[1])) / (self.n * self.eps)
        return max(self.fact(q @ r, a), orth)

    def matmul(self, c, x, y):
        w = self.w
        return np.linalg.norm(w(c) - w(x) @ w(y)) / (
            np.linalg.norm(w(x)) * np.linalg.norm(w(y)) * self.n * self.eps
        )

    def inv(self, x, a):
        w = self.w
        return _norm1(w(a) @ w(x) - np.eye(self.n)) / (
            self.n * _norm1(w(a)) * _norm1(w(x)) * self.eps
        )

    def slogdet(self, r, a):
        want = np.linalg.slogdet(self.w(a))[1]
        return abs(float(r[1]) - want) / (self.n * self.eps * max(1.0, abs(want)))

    def lstsq(self, x, a, y):
        w = self.w
        return np.abs(w(a).conj().T @ (w(a) @ w(x) - w(y))).max() / (
            _norm1(w(a)) ** 2 * max(np.abs(w(x)).max(), 1) * a.shape[0] * self.eps
        )


def _operands(n: int, dtype: np.dtype, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The doctor's host operands for size ``n``."""
    cplx = np.issubdtype(dtype, np.complexfloating)

    def rand(*shape):
        x = rng.standard_normal(shape)
        if cplx:
            x = x + 1j * rng.standard_normal(shape)
        return x.astype(dtype)

    a = rand(n, n)
    b = rand(n, 4)
    m = max(8, n // 8)
    return {
        "a": a,
        "b": b,
        "spd": (a @ a.conj().T / n + np.eye(n)).astype(dtype),
        "her": ((a + a.conj().T) / 2).astype(dtype),
        "low": (np.tril(a) + n * np.eye(n)).astype(dtype),
        "tall": rand(2 * n, n // 2),
        "vol": rand(m, m, m),
        "stack": (rand(16, 32, 32) + 32 * np.eye(32)).astype(dtype),
        "sb": rand(16, 32, 2),
    }


def _cases(n: int, dtype: np.dtype, rng: np.random.Generator) -> dict[str, tuple]:
    """family -> (host operands, distla function, jnp function, ratio of (result, operands))."""
    import jax.numpy as jnp
    import jax.scipy.linalg as jsl

    import distla

    L = distla.linalg
    x = _operands(n, dtype, rng)
    a, b, tall, vol = x["a"], x["b"], x["tall"], x["vol"]
    r = _Ratios(n, dtype)
    return {
        "matmul": ((a, a), distla.matmul, jnp.matmul, r.matmul),
        "solve": ((a, b), L.solve, jnp.linalg.solve, r.solve),
        "lu_factor": ((a,), L.lu_factor, jsl.lu_factor, r.lu),
        "inv": ((a,), L.inv, jnp.linalg.inv, r.inv),
        "slogdet": ((a,), L.slogdet, jnp.linalg.slogdet, r.slogdet),
        "cholesky": (
            (x["spd"],),
            L.cholesky,
            jnp.linalg.cholesky,
            lambda c, a: r.fact(r.w(c) @ r.w(c).conj().T, a),
        ),
        "solve_triangular": (
            (x["low"], b),
            lambda t, y: L.solve_triangular(t, y, lower=True),
            lambda t, y: jsl.solve_triangular(t, y, lower=True),
            r.solve,
        ),
        "qr": ((a,), L.qr, jnp.linalg.qr, r.qr),
        "eigh": ((x["her"],), L.eigh, jnp.linalg.eigh, r.eigh),
        "svd": (
            (a,),
            lambda x: L.svd(x, full_matrices=False),
            lambda x: jnp.linalg.svd(x, full_matrices=False),
            lambda o, a: r.fact((r.w(o[0]) * r.w(o[1])) @ r.w(o[2]), a),
        ),
        "polar": ((a,), L.polar, jsl.polar, lambda o, a: r.fact(r.w(o[0]) @ r.w(o[1]), a)),
        "lstsq": (
            (tall, tall[:, :2]),
            lambda x, y: L.lstsq(x, y)[0],
            lambda x, y: jnp.linalg.lstsq(x, y)[0],
            r.lstsq,
        ),
        "batched_solve": ((x["stack"], x["sb"]), L.solve, jnp.linalg.solve, r.solve),
        "fftn": (
            (vol,),
            distla.fft.fftn,
            jnp.fft.fftn,
            lambda y, v: r.fft(y, np.fft.fftn(r.w(v))),
        ),
        "rfftn": (
            (vol.real.copy(),),
            distla.fft.rfftn,
            jnp.fft.rfftn,
            lambda y, v: r.fft(y, np.fft.rfftn(np.asarray(v, np.float64))),
        ),
    }


def run(
    mesh, sizes: Sequence[int], dtype: str, *, only=None, repeat: int = 3
) -> list[dict[str, Any]]:
    """One row per (family, size): the residual ratio, distla's and jnp's best time."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import distla

    rows = []
    for n in sizes:
        cases = _cases(n, np.dtype(dtype), np.random.default_rng(n))
        for name, (host, ours, theirs, ratio) in cases.items():
            if only and name not in only:
                continue
            row = {
                "family": name,
                "n": n,
                "mesh": "x".join(map(str, mesh.devices.shape)),
                "dtype": dtype,
            }
            try:
                if name == "batched_solve":
                    spec = P(tuple(mesh.axis_names))
                    args = [jax.device_put(h, NamedSharding(mesh, spec)) for h in host]
                else:
                    args = [distla.shard(h, mesh) for h in host]
                with jax.set_mesh(mesh):
                    out = ours(*args)
                    row["ratio"] = float(ratio(out, *host))
                    row["distla_s"] = _best(ours, args, repeat)
                    row["jnp_s"] = _best(jax.jit(theirs), args, repeat)
                row["vs_jnp"] = row["distla_s"] / row["jnp_s"]
                row["ok"] = bool(row["ratio"] <= THRESHOLD)
            except Exception as e:  # a family that raises is a failed row, the others still run
                row.update(ok=False, error=f"{type(e).__name__}: {str(e)[:200]}")
            rows.append(row)
    return rows


def _cells(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = []
    for r in rows:
        if "error" in r:
            out.append(
                (r["family"], str(r["n"]), r["mesh"], r["dtype"], "-", "-", "-", "-", "ERROR")
            )
            continue
        out.append((
            r["family"], str(r["n"]), r["mesh"], r["dtype"], f"{r['ratio']:.2f}",
            f"{r['distla_s'] * 1e3:.2f}", f"{r['jnp_s'] * 1e3:.2f}", f"{r['vs_jnp']:.2f}x",
            "ok" if r["ok"] else "FAIL",
        ))  # fmt: skip
    return out


HEAD = ("family", "n", "mesh", "dtype", "ratio", "distla ms", "jnp ms", "vs jnp", "check")


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as plain text, then one line per family that raised."""
    lines = [HEAD, *_cells(rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEAD))]
    out = ["  ".join(c.ljust(wd) for c, wd in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * wd for wd in widths))
    return "\n".join(out + _errors(rows))


def _errors(rows: list[dict[str, Any]]) -> list[str]:
    return [f"{r['family']} n={r['n']}: {r['error']}" for r in rows if "error" in r]


def _print(rows: list[dict[str, Any]]) -> None:
    """A rich table when rich is installed (the scaling extra), else plain text."""
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(table(rows))
        return
    t = Table(*HEAD)
    for cells in _cells(rows):
        t.add_row(*cells)
    Console().print(t)
    for line in _errors(rows):
        print(line)


def main(args: argparse.Namespace, *, devices: bool = False) -> int:
    """``python -m distla doctor``: the exit status (1 when a ratio fails or a family raises)."""
    from .devices import ensure_devices

    if devices:
        import jax

        if jax.default_backend() == "cpu":  # no accelerator: 8 simulated CPU devices
            ensure_devices(8, ["doctor", *args.argv], simulate=8)
    import jax

    import distla

    devs = jax.devices()[: args.devices] if args.devices else jax.devices()
    # Auto axes: the jnp functions it is timed against run on the same sharded inputs there
    mesh = distla.make_mesh(None, devices=devs, axis_types=jax.sharding.AxisType.Auto)
    print(
        f"distla doctor: {len(devs)} {devs[0].platform} device(s) ({devs[0].device_kind}), mesh "
        f"{'x'.join(map(str, mesh.devices.shape))}, jax {jax.__version__}, {args.dtype}; ratios "
        f"pass at <= {THRESHOLD:g}; 'vs jnp': distla's time / the jnp function's on the same "
        "input (lower is better; 0.50x is twice as fast).",
        flush=True,
    )
    rows = run(mesh, args.sizes, args.dtype, only=args.only, repeat=args.repeat)
    _print(rows)
    return 0 if all(r["ok"] for r in rows) else 1
