"""No zero-size shard_map operand, and every ppermute in mesh order, in distla.scipy.linalg.

``tests/test_no_empty_operands.py``'s walker (trace only, no compile) over the
functions that distla.scipy.linalg adds, on 2x4 Auto and Explicit meshes at n = 7
and 8 and on a 1-axis mesh. The one-device budget is 0 here (tests/conftest.py),
so the functions with no distributed algorithm run jax's own call (no shard_map);
``plan="distributed"`` and ``hermitian=`` select the distributed routes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from test_no_empty_operands import assert_no_empty_operands, count_shard_maps

import distla
import distla.linalg
import distla.scipy.linalg as sla


def _inputs(mesh, n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32)
    out = {
        "a": a,
        "spd": (a @ a.T / n).astype(np.float32),
        "c": rng.standard_normal((3, n)).astype(np.float32),
        "v": rng.standard_normal(n).astype(np.float32),
        "w": rng.standard_normal(n - 1).astype(np.float32),
    }
    return {k: distla.shard(x, mesh) for k, x in out.items()}


def _device(mesh):
    return NamedSharding(mesh, P(*mesh.axis_names))


CASES = {
    "cholesky": lambda x, m: sla.cholesky(x["spd"]),
    "qr_r": lambda x, m: sla.qr(x["a"], mode="r"),
    "svd": lambda x, m: sla.svd(x["a"], plan="distributed"),
    "eigh": lambda x, m: sla.eigh(x["spd"], plan="distributed"),
    "hessenberg": lambda x, m: sla.hessenberg(x["a"], calc_q=True, plan="distributed"),
    "sqrtm_hermitian": lambda x, m: sla.sqrtm(x["spd"], hermitian=True, plan="distributed"),
    "sqrtm_general": lambda x, m: sla.sqrtm(x["a"], hermitian=False),
    "sqrtm": lambda x, m: sla.sqrtm(x["a"], plan="distributed"),
    "funm": lambda x, m: sla.funm(x["spd"], jnp.exp, plan="distributed"),
    "schur": lambda x, m: sla.schur(x["a"], plan="distributed"),
    "rsf2csf": lambda x, m: sla.rsf2csf(x["a"], x["spd"]),
    "solve_sylvester": lambda x, m: sla.solve_sylvester(x["a"], x["spd"], x["a"]),
    "qr_multiply": lambda x, m: sla.qr_multiply(x["a"], x["c"]),
    "eigh_tridiagonal": lambda x, m: sla.eigh_tridiagonal(x["v"], x["w"]),
    "toeplitz": lambda x, m: sla.toeplitz(x["v"], x["v"]),
    "hankel": lambda x, m: sla.hankel(x["v"]),
    "circulant": lambda x, m: sla.circulant(x["v"]),
    "leslie": lambda x, m: sla.leslie(x["v"], x["w"]),
    "companion": lambda x, m: sla.companion(x["v"]),
    "fiedler": lambda x, m: sla.fiedler(x["v"]),
    "fiedler_companion": lambda x, m: sla.fiedler_companion(x["v"]),
    "convolution_matrix": lambda x, m: sla.convolution_matrix(x["v"], 5),
    "block_diag": lambda x, m: sla.block_diag(x["a"], x["c"]),
    "hilbert": lambda x, m: sla.hilbert(8, device=_device(m)),
    "invpascal": lambda x, m: sla.invpascal(8, device=_device(m)),
    "dft": lambda x, m: sla.dft(8, device=_device(m)),
}
# names that run no shard_map of their own here: XLA's partitioning (block_diag), or
# jax's call (the budget is 0)
NO_SHARD_MAP = {"block_diag"}

SETUPS = {
    "2x4-auto-n8": ((2, 4), "auto", 8),
    "2x4-explicit-n7": ((2, 4), "explicit", 7),
    "8-explicit-n8": ((8,), "explicit", 8),
}


@pytest.fixture(scope="module", params=list(SETUPS))
def inputs(request):
    shape, kind, n = SETUPS[request.param]
    mesh = build_mesh(shape, kind, names=("x", "y"))
    return mesh, _inputs(mesh, n)


@pytest.mark.parametrize("name", list(CASES))
def test_function(name, inputs):
    mesh, x = inputs
    with jax.set_mesh(mesh):
        closed = assert_no_empty_operands(lambda x: CASES[name](x, mesh), x)
    assert count_shard_maps(closed) >= 1 or name in NO_SHARD_MAP, name


def test_every_new_name_is_covered():
    shared = {n for n in sla.__all__ if getattr(distla.linalg, n, None) is getattr(sla, n)}
    covered = set(CASES) | {"qr", "invhilbert", "pascal", "helmert", "hadamard"}
    missing = sorted(set(sla.__all__) - shared - covered)
    assert not missing, missing
