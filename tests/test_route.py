"""Every public function goes through the one route (``distla._core.route``).

The public names of ``distla.linalg`` and ``distla.fft`` are listed. Each array
function wears the route's decorator (``route.public``) and, traced on sharded
operands (the table of ``tests/test_no_empty_operands.py``, one row per public
function), enters ``route.call``; every other public name is named below with
what it is (a result type, a setting, a communication model, jnp's own
function, a wavenumber helper that reads only its operand's shape and layout).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from conftest import build_mesh
from test_no_empty_operands import CASES, _inputs

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
}
L, F = distla.linalg, distla.fft
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
}


# the packages whose public functions are on the route (the FFT side joins it next)
PACKAGES = ("linalg",)


def public_names():
    for package in PACKAGES:
        module = getattr(distla, package)
        for name in module.__all__:
            yield package, name


ROUTED = [(p, n) for p, n in public_names() if n not in NOT_ROUTED[p]]


def test_every_public_name_is_listed():
    listed = {(p, n) for p, names in NOT_ROUTED.items() if p in PACKAGES for n in names}
    assert listed <= set(public_names()), listed - set(public_names())
    assert len(ROUTED) >= 30, ROUTED  # a floor: the list cannot come out empty


@pytest.mark.parametrize("package, name", ROUTED, ids=[n for _, n in ROUTED])
def test_public_function_wears_the_route(package, name):
    fn = getattr(getattr(distla, package), name)
    assert getattr(fn, "__distla_route__", False), f"distla.{package}.{name} is not route.public"


def _case(name):
    return OWN_CASES[name] if name in OWN_CASES else CASES[name][0]


@pytest.fixture(scope="module")
def sharded():
    mesh = build_mesh((2, 4), "auto", names=("x", "y"))
    return mesh, _inputs(mesh, 8)


@pytest.mark.parametrize("package, name", ROUTED, ids=[n for _, n in ROUTED])
def test_public_function_enters_the_route(package, name, sharded, monkeypatch):
    mesh, x = sharded
    entered = []
    call = route.call

    def spy(op, *args, **kwargs):
        entered.append(op.name)
        return call(op, *args, **kwargs)

    monkeypatch.setattr(route, "call", spy)
    with jax.set_mesh(mesh):
        jax.make_jaxpr(_case(name))(x)
    assert entered, f"distla.{package}.{name} traced without entering route.call"


def test_the_spy_tells_a_routed_call_from_another(sharded, monkeypatch):
    # the check above can fail: a function that skips the route is seen
    mesh, x = sharded
    entered = []
    call = route.call
    monkeypatch.setattr(route, "call", lambda op, *a, **k: entered.append(op) or call(op, *a, **k))
    with jax.set_mesh(mesh):
        jax.make_jaxpr(lambda x: jnp.linalg.inv(x["a"]))(x)
        assert not entered
        jax.make_jaxpr(lambda x: L.inv(x["a"]))(x)
    assert [op.name for op in entered] == ["distla.linalg.inv"]
