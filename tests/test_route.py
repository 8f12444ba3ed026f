"""Every public function goes through the one route (``distla._core.route``).

The public names of the packages in ``PACKAGES`` are listed. Each array
function wears the route's decorator (``route.public``) and, traced on sharded
operands (the tables of ``tests/test_no_empty_operands.py`` and
``tests/test_scipy_no_empty_operands.py``, one row per public function), enters
``route.call``; every other public name is named below with what it is (a result
type, a setting, a communication model, jnp's own function, a wavenumber helper
that reads only its operand's shape and layout, a constructor from a size).
"""

from __future__ import annotations

import importlib

import jax
import jax.numpy as jnp
import pytest
from conftest import build_mesh
from test_no_empty_operands import CASES, _inputs
from test_scipy_no_empty_operands import CASES as SCIPY_CASES
from test_scipy_no_empty_operands import _inputs as _scipy_inputs

import distla
from distla._core import route

# public names that are not array functions of the route, and what they are
NOT_ROUTED = {
    "linalg": {
        # result types
        "EighResult",
        "SVDResult",
        "SlogdetResult",
        "LUResult",
        # communication models
        "cholesky_model_bytes",
        "lu_model_bytes",
        "qr_model_bytes",
        # settings
        "plan_budget",
        "set_plan_budget",
        "shape_buckets",
        "set_shape_buckets",
        # jnp's own: elementwise or batch-only work (docs/namespace.md)
        "cross",
        "diagonal",
        "matrix_transpose",
        "outer",
        "trace",
        "vecdot",
        "vector_norm",
    },
    "fft": {
        "model_bytes",  # the communication model
        # jnp's own: an iota and a roll (docs/namespace.md)
        "fftfreq",
        "rfftfreq",
        "fftshift",
        "ifftshift",
        # jaxdecomp's wavenumbers: host constants laid out like the spectrum, which
        # they read only the shape, dtype and sharding of
        "fftfreq3d",
        "rfftfreq3d",
    },
    "scipy.fft": set(),
    "jaxdecomp": {
        # settings and their constants (jaxdecomp's enums)
        "config",
        "init",
        "finalize",
        "TRANSPOSE_XY",
        "TRANSPOSE_YX",
        "TRANSPOSE_YZ",
        "TRANSPOSE_ZY",
        "SLAB_XY",
        "SLAB_YZ",
        "PENCILS",
        "NO_DECOMP",
        "HALO_COMM_MPI",
        "HALO_COMM_MPI_BLOCKING",
        "HALO_COMM_NCCL",
        "HALO_COMM_NVSHMEM",
        "HALO_COMM_NVSHMEM_BLOCKING",
        "TRANSPOSE_COMM_MPI_A2A",
        "TRANSPOSE_COMM_MPI_P2P",
        "TRANSPOSE_COMM_MPI_P2P_PL",
        "TRANSPOSE_COMM_NCCL",
        "TRANSPOSE_COMM_NCCL_PL",
        "TRANSPOSE_COMM_NVSHMEM",
        "TRANSPOSE_COMM_NVSHMEM_PL",
        # layouts of shardings and specs (no array operand)
        "get_fft_output_sharding",
        "get_output_specs",
        "validate_spec_matches_mesh",
        # the wavenumbers, as distla.fft's
        "fftfreq3d",
        "rfftfreq3d",
    },
    "jaxdecomp.fft": {"fftfreq3d", "rfftfreq3d"},  # the wavenumbers, as distla.fft's
    "scipy.linalg": {
        # constructors from a size and jnp's device= keyword: no array operand, so no
        # mesh to resolve; each builds its blocks in the layout device= names
        "hilbert",
        "invhilbert",
        "pascal",
        "invpascal",
        "helmert",
        "hadamard",
        "dft",
    },
}
L, F = distla.linalg, distla.fft
SLA = importlib.import_module("distla.scipy.linalg")
SF = importlib.import_module("distla.scipy.fft")
J = importlib.import_module("distla.jaxdecomp")
# public functions whose rows in CASES trace another name (a thin alias there), or none
OWN_CASES = {
    "matmul": lambda x: L.matmul(x["a"], x["b"]),
    "eig": lambda x: L.eig(x["a"]),
    "eigvals": lambda x: L.eigvals(x["a"]),
    "tensordot": lambda x: L.tensordot(x["a"], x["b"], axes=1),
    "cho_factor": lambda x: L.cho_factor(x["spd"]),
    "norm": lambda x: L.norm(x["a"]),
    "fft": lambda x: F.fft(x["cvol"], axis=0),
    "ifft": lambda x: F.ifft(x["cvol"], axis=1),
    "rfft": lambda x: F.rfft(x["vol"], axis=0),
    "irfft": lambda x: F.irfft(x["cvol"], axis=0),
    "fft2": lambda x: F.fft2(x["cvol"]),
    "ifft2": lambda x: F.ifft2(x["cvol"]),
    "rfft2": lambda x: F.rfft2(x["vol"]),
    "irfft2": lambda x: F.irfft2(x["cvol"]),
    "pifft3d": lambda x: F.pifft3d(x["cvol"]),
    "hfft": lambda x: F.hfft(x["cvol"], axis=0),
    "ihfft": lambda x: F.ihfft(x["vol"], axis=0),
    "pirfft3d": lambda x: F.pirfft3d(x["cvol"][:, :5, :], s=x["vol"].shape),
    # distla.scipy.fft
    "dct": lambda x: SF.dct(x["cslab"], axis=0),
    "idct": lambda x: SF.idct(x["cslab"], axis=0),
    "idctn": lambda x: SF.idctn(x["vol"]),
    # distla.jaxdecomp
    "transposeXtoY": lambda x: J.transposeXtoY(x["grid"]),
    "transposeYtoX": lambda x: J.transposeYtoX(x["grid"]),
    "transposeYtoZ": lambda x: J.transposeYtoZ(x["grid"]),
    "transposeZtoY": lambda x: J.transposeZtoY(x["grid"]),
    "transposeXtoZ": lambda x: J.transposeXtoZ(x["grid"]),
    "transposeZtoX": lambda x: J.transposeZtoX(x["grid"]),
}


# distla.scipy.linalg's functions whose rows in SCIPY_CASES trace another name, or none
SCIPY_OWN_CASES = {
    "qr": lambda x, m: SLA.qr(x["a"]),
    "qr_pivoting": lambda x, m: SLA.qr(x["a"], pivoting=True),
    "svd_gesvd": lambda x, m: SLA.svd(x["a"], lapack_driver="gesvd"),
}

# the packages whose public functions are on the route
PACKAGES = ("linalg", "fft", "scipy.fft", "jaxdecomp", "jaxdecomp.fft", "scipy.linalg")


def module_of(package):
    return importlib.import_module(f"distla.{package}")


def public_names():
    for package in PACKAGES:
        for name in module_of(package).__all__:
            yield package, name


ROUTED = [(p, n) for p, n in public_names() if n not in NOT_ROUTED[p]]


def test_every_public_name_is_listed():
    listed = {(p, n) for p, names in NOT_ROUTED.items() if p in PACKAGES for n in names}
    assert listed <= set(public_names()), listed - set(public_names())
    assert len(ROUTED) >= 30, ROUTED  # a floor: the list cannot come out empty


@pytest.mark.parametrize("package, name", ROUTED, ids=[f"{p}.{n}" for p, n in ROUTED])
def test_public_function_wears_the_route(package, name):
    fn = getattr(module_of(package), name)
    assert getattr(fn, "__distla_route__", False), f"distla.{package}.{name} is not route.public"


def _case(package, name, mesh):
    """The traced call of ``distla.<package>.<name>`` and the inputs it takes."""
    shared = package == "scipy.linalg" and getattr(L, name, None) is getattr(SLA, name, 0)
    if package != "scipy.linalg" or shared:
        return OWN_CASES[name] if name in OWN_CASES else CASES[name][0], "linalg"
    row = SCIPY_OWN_CASES.get(name) or SCIPY_CASES[name]
    return (lambda x: row(x, mesh)), "scipy"


@pytest.fixture(scope="module")
def sharded():
    mesh = build_mesh((2, 4), "auto", names=("x", "y"))
    return mesh, {"linalg": _inputs(mesh, 8), "scipy": _scipy_inputs(mesh, 8)}


CALLS = ROUTED + [("scipy.linalg", n) for n in ("qr_pivoting", "svd_gesvd")]


@pytest.mark.parametrize("package, name", CALLS, ids=[f"{p}.{n}" for p, n in CALLS])
def test_public_function_enters_the_route(package, name, sharded, monkeypatch):
    mesh, inputs = sharded
    fn, kind = _case(package, name, mesh)
    x = inputs[kind]
    entered = []
    call = route.call

    def spy(op, *args, **kwargs):
        entered.append(op.name)
        return call(op, *args, **kwargs)

    monkeypatch.setattr(route, "call", spy)
    with jax.set_mesh(mesh):
        jax.make_jaxpr(lambda x: fn(x))(x)  # a new function: no trace cached for it
    assert entered, f"distla.{package}.{name} traced without entering route.call"


def test_the_spy_tells_a_routed_call_from_another(sharded, monkeypatch):
    # the check above can fail: a function that skips the route is seen
    mesh, inputs = sharded
    x = inputs["linalg"]
    entered = []
    call = route.call
    monkeypatch.setattr(route, "call", lambda op, *a, **k: entered.append(op) or call(op, *a, **k))
    with jax.set_mesh(mesh):
        jax.make_jaxpr(lambda x: jnp.linalg.inv(x["a"]))(x)
        assert not entered
        jax.make_jaxpr(lambda x: L.inv(x["a"]))(x)
    assert [op.name for op in entered] == ["distla.linalg.inv"]
