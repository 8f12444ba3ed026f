"""Why the Householder bidiagonal reduction leaves rank-deficient matrices' zero singular
values at about 2·eps·σ₁, where LAPACK's unblocked reduction leaves them at 0.7 (float64
analysis of float32 reductions; docs/spectral.md, "SVD"):

    JAX_PLATFORMS=cpu python benchmarks/reduction_backward_error.py

For float32 products ``X Y`` of rank ``r`` (the order-37 rank-9 matrix of the tests, then
twelve random orders 30-130 and four orders 160-400), each reduction's bidiagonal ``B``
is read in float64 and its singular value ``σ_{r+1}`` (zero in exact arithmetic on the
real product) is printed in multiples of ``eps·σ₁``:

- ``exact``: the float32 matrix's own, from a float64 SVD (its entries are rounded);
- ``sgesdd``: LAPACK through ``scipy.linalg.svd`` (jnp's ``svd`` on one device);
- ``sgebrd`` / ``sgebd2``: LAPACK's reduction, blocked (``xLABRD`` panels; LAPACK runs it
  unblocked below its crossover ``NX = 128``) and unblocked, through scipy's Cython
  LAPACK (``scipy.linalg.lapack`` does not expose ``?gebrd``);
- ``emulated nb``: the blocked algorithm (LAPACK's ``xLABRD``, as distla's kernel runs
  it) in numpy float32, panels of ``nb``; ``+f64 products``: the same with the
  corrected products ``Aᴴu − Y(Uᴴu) − V(Xᴴu)`` and ``Av − U(Yᴴv) − X(Vᴴv)`` accumulated
  in float64; ``+f64 column/row``: the corrected column and row instead;
- ``distla B``: ``distla.kernels.bidiagonal``'s ``B`` on a 2x4 mesh (what ``svdvals``
  bisects); ``distla svd``: the values ``distla.linalg.svd`` returns.

The blocked rows sit at about 2, the unblocked ones at 0.7, and the float64 products
bring the blocked one below LAPACK's: the products' cancellation is the cause.
"""

import argparse
import ctypes
import functools
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
import scipy.linalg.cython_lapack as cython_lapack  # noqa: E402
from distla.kernels.bidiagonal import reduce_to_bidiagonal  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402

EPS = float(np.finfo(np.float32).eps)


def lapack_sgebrd(a: np.ndarray, blocked: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(d, e)`` of LAPACK's ``sgebrd`` (``blocked=False``: the minimal workspace, which
    makes it run ``sgebd2`` unblocked)."""
    capsule = cython_lapack.__pyx_capi__["sgebrd"]
    ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
    ctypes.pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
    ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
    ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName(capsule)
    pointer = ctypes.pythonapi.PyCapsule_GetPointer(capsule, name)
    ints, floats = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_float)
    fn = ctypes.CFUNCTYPE(None, ints, ints, floats, ints, *(floats,) * 5, ints, ints)(pointer)
    a = np.asfortranarray(a.astype(np.float32))
    m, n = a.shape
    d, e, tq, tp = (np.zeros(max(n, 1), np.float32) for _ in range(4))
    lwork = (m + n) * 64 if blocked else max(m, n)
    work, info = np.zeros(lwork, np.float32), ctypes.c_int(0)

    def i(v):
        return ctypes.byref(ctypes.c_int(v))

    def f(x):
        return x.ctypes.data_as(floats)

    fn(i(m), i(n), f(a), i(m), f(d), f(e), f(tq), f(tp), f(work), i(lwork), ctypes.byref(info))
    assert info.value == 0, info.value
    return d[:n], e[:n]


def _reflector(x):
    """LAPACK's ``xLARFG`` on ``x`` in float32: ``(v, tau, beta)``, ``v[0] = 1``."""
    alpha = x[0]
    norm = np.float32(np.sqrt(np.sum(x[1:] * x[1:], dtype=np.float32)))
    if norm == 0:
        return np.r_[np.float32(1), np.zeros(len(x) - 1, np.float32)], np.float32(0), alpha
    beta = np.float32(-np.copysign(np.sqrt(alpha * alpha + norm * norm), alpha))
    v = (x / (alpha - beta)).astype(np.float32)
    v[0] = 1
    return v, np.float32((beta - alpha) / beta), beta


def emulated(a: np.ndarray, nb: int, wide_products=False, wide_lines=False):
    """LAPACK's blocked ``xLABRD`` reduction in numpy float32, panels of ``nb``; the
    corrected products (``wide_products``) or column and row (``wide_lines``) in float64."""
    f32 = np.float32
    a = a.astype(f32).copy()
    m, n = a.shape
    d, e = np.zeros(n, f32), np.zeros(n, f32)

    def acc(flag):
        return (lambda x: x.astype(np.float64)) if flag else (lambda x: x)

    lines, prods = acc(wide_lines), acc(wide_products)
    for j0 in range(0, n, nb):
        b = min(nb, n - j0)
        u_p, x_p = np.zeros((m, b), f32), np.zeros((m, b), f32)
        v_p, y_p = np.zeros((n, b), f32), np.zeros((n, b), f32)
        for i in range(b):
            j = j0 + i
            col = lines(a[:, j]) - lines(u_p[:, :i]) @ lines(y_p[j, :i])
            col = (col - lines(x_p[:, :i]) @ lines(v_p[j, :i])).astype(f32)
            u = np.zeros(m, f32)
            u[j:], tau_u, d[j] = _reflector(col[j:])
            ahu = prods(a).T @ prods(u) - prods(y_p[:, :i]) @ (prods(u_p[:, :i]).T @ prods(u))
            ahu = (ahu - prods(v_p[:, :i]) @ (prods(x_p[:, :i]).T @ prods(u))).astype(f32)
            y = (tau_u * ahu).astype(f32)
            y[: j + 1] = 0
            u_p[:, i], y_p[:, i] = u, y
            row = lines(a[j, :]) - lines(y_p[:, : i + 1]) @ lines(u_p[j, : i + 1])
            row = (row - lines(v_p[:, :i]) @ lines(x_p[j, :i])).astype(f32)
            v, tau_v = np.zeros(n, f32), f32(0)
            if j < n - 1:
                v[j + 1 :], tau_v, e[j] = _reflector(row[j + 1 :])
            av = prods(a) @ prods(v) - prods(u_p[:, : i + 1]) @ (
                prods(y_p[:, : i + 1]).T @ prods(v)
            )
            av = (av - prods(x_p[:, :i]) @ (prods(v_p[:, :i]).T @ prods(v))).astype(f32)
            x = (tau_v * av).astype(f32)
            x[: j + 1] = 0
            x_p[:, i], v_p[:, i] = x, v
        a = a - u_p @ y_p.T - x_p @ v_p.T
    return d, e


@functools.cache
def _distla_reduction(shape):
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    kernel = functools.partial(
        reduce_to_bidiagonal, steps=shape[1], nb=16, row_axis="x", col_axis="y"
    )
    run = jax.jit(
        jax.shard_map(
            kernel, mesh=mesh, in_specs=P("x", "y"), out_specs=(P("x", "y"), P(), P()),
            check_vma=False,
        )
    )  # fmt: skip
    return mesh, run


def distla_b(a: np.ndarray):
    """distla's bidiagonal ``B`` of ``a`` on 2x4 (zero-padded to multiples of 16)."""
    m, n = a.shape
    pad = -(-max(m, n) // 16) * 16
    x = np.zeros((pad, pad), np.float32)
    x[:m, :n] = a
    mesh, run = _distla_reduction((pad, pad))
    _, d, e = run(jax.device_put(x, NamedSharding(mesh, P("x", "y"))))
    return np.asarray(d)[:n], np.asarray(e)[:n]


def distla_svd(a: np.ndarray):
    mesh = distla.make_mesh((2, 4))
    return np.asarray(distla.linalg.svd(distla.shard(a, mesh), plan="distributed")[1])


def bidiagonal_values(d, e):
    n = len(d)
    b = np.diag(np.asarray(d, np.float64)) + np.diag(np.asarray(e[: n - 1], np.float64), 1)
    return np.linalg.svd(b, compute_uv=False)


def rank_deficient(rng, n, r):
    """A float32 product of rank ``r`` (computed in float32, as the tests' matrices are)."""
    x = rng.standard_normal((n, r)).astype(np.float32)
    return x @ rng.standard_normal((r, n)).astype(np.float32)


def cases(count: int):
    rng = np.random.default_rng(50)
    rng.standard_normal((37, 37))  # tests/test_spectral_arguments.py's matrix comes second
    x, y = rng.standard_normal((37, 9)), rng.standard_normal((9, 37))
    yield "tests' 37, r 9", (x.astype(np.float32) @ y.astype(np.float32)), 9
    rng = np.random.default_rng(123)
    for _ in range(count):
        n = int(rng.integers(30, 130))
        r = int(rng.integers(3, n // 3))
        yield f"{n}, r {r}", rank_deficient(rng, n, r), r
    rng = np.random.default_rng(7)
    for n, r in ((160, 20), (256, 30), (300, 9), (400, 50)):
        yield f"{n}, r {r}", rank_deficient(rng, n, r), r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=12, help="random orders 30-130")
    parser.add_argument("--no-distla", action="store_true", help="LAPACK and numpy only")
    args = parser.parse_args()
    methods = {
        "exact": lambda a: np.linalg.svd(a.astype(np.float64), compute_uv=False),
        "sgesdd": lambda a: scipy.linalg.svd(a, compute_uv=False, lapack_driver="gesdd"),
        "sgebrd": lambda a: bidiagonal_values(*lapack_sgebrd(a, blocked=True)),
        "sgebd2": lambda a: bidiagonal_values(*lapack_sgebrd(a, blocked=False)),
        "emulated nb=1": lambda a: bidiagonal_values(*emulated(a, 1)),
        "emulated nb=16": lambda a: bidiagonal_values(*emulated(a, 16)),
        "+f64 products": lambda a: bidiagonal_values(*emulated(a, 16, wide_products=True)),
        "+f64 column/row": lambda a: bidiagonal_values(*emulated(a, 16, wide_lines=True)),
    }
    if not args.no_distla:
        methods["distla B"] = lambda a: bidiagonal_values(*distla_b(a))
        methods["distla svd"] = distla_svd
    print("σ_{r+1} / (eps·σ₁)")
    print("| matrix | " + " | ".join(methods) + " |")
    print("|---|" + "---|" * len(methods))
    table = {name: [] for name in methods}
    for label, a, r in cases(args.count):
        s1 = np.linalg.svd(a.astype(np.float64), compute_uv=False)[0]
        row = []
        for name, method in methods.items():
            value = float(np.asarray(method(a), np.float64)[r]) / (EPS * s1)
            table[name].append(value)
            row.append(f"{value:.2f}")
        print(f"| {label} | " + " | ".join(row) + " |", flush=True)
    print("| median | " + " | ".join(f"{np.median(v):.2f}" for v in table.values()) + " |")


if __name__ == "__main__":
    main()
