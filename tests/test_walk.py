"""One pass down and one up: the path a call takes through distla's modules.

``jax.eval_shape`` traces ``solve``, ``eigh`` and ``fftn`` on one sharded
operand (no compile) while ``sys.setprofile`` records every call of a
function defined in distla (kernels included), with the distla module that
made it (the nearest distla frame on the stack; jax frames in between, such
as ``shard_map`` calling a body back, are skipped, and so is the decorator
that wraps each public function). From that record:

- ``mesh``: calls into ``distla._core.mesh``;
- ``operand_mesh``: reads of the operands' mesh (``operand_mesh``); the
  public entry reads it once and hands the resolved plan down;
- ``climbs``: calls from a module to one above it: across the layers of
  docs/architecture.md (kernels < the floor < algorithm modules < public
  modules), and among the algorithm modules, from one to another it does
  not import (the order of the import graph). A body handed to
  ``run_on_mesh`` and called back from the floor is one climb.

Comprehensions and resumed generators are not calls of the library's
functions and are not counted. The figures are pinned as upper bounds:
a change that makes a call read the mesh again, or come back up more
often, fails here.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from test_architecture import import_graph, layer

import distla
from distla._core import eager

PACKAGE = Path(distla.__file__).resolve().parent
KERNELS = Path(distla.kernels.__file__).resolve().parent
CO_GENERATOR = 0x20


@functools.cache
def module_of(filename: str) -> str | None:
    path = Path(filename)
    for root, prefix in ((KERNELS, "distla.kernels"), (PACKAGE, "distla")):
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        if root == PACKAGE and rel.parts[:1] == ("kernels",):
            rel = rel.relative_to("kernels")
            prefix = "distla.kernels"
        return ".".join((prefix, *rel.with_suffix("").parts)).removesuffix(".__init__")
    return None


@functools.cache
def rank() -> dict[str, float]:
    """Layer, and for algorithm modules their height in the import graph."""
    graph = {m: {t for t, _, _ in ts if t != m} for m, ts in import_graph().items()}
    height: dict[str, int] = {}

    def h(m):
        if m not in height:
            below = [t for t in graph.get(m, ()) if t in graph and layer(t) == layer(m)]
            height[m] = 1 + max((h(t) for t in below), default=0)
        return height[m]

    return {m: layer(m) + (h(m) / 100 if layer(m) == 2 else 0) for m in graph}


# The decorator every public function wears (one compiled program per eager call on one
# device) calls the function it wraps: seen through, as jax's frames are.
TRANSPARENT = {eager.one_program(lambda: None).__code__, eager._Program._trace.__code__}


def walk(fn, *args):
    """``[(caller module, callee module, function name)]`` while tracing ``fn(*args)``."""
    jax.clear_caches()
    calls = []

    def profile(frame, event, arg):
        if event != "call":
            return
        callee = module_of(frame.f_code.co_filename)
        if callee is None:
            return
        code = frame.f_code
        if code.co_name.startswith("<") and code.co_name != "<lambda>":
            return  # a comprehension or generator expression
        if code.co_flags & CO_GENERATOR and frame.f_lasti > 0:
            return  # a generator resumed, not called
        if code in TRANSPARENT:
            return
        caller, back = None, frame.f_back
        while back is not None and caller is None:
            if back.f_code not in TRANSPARENT:
                caller = module_of(back.f_code.co_filename)
            back = back.f_back
        calls.append((caller, callee, code.co_name))

    sys.setprofile(profile)
    try:
        jax.eval_shape(fn, *args)
    finally:
        sys.setprofile(None)
    return calls


def figures(calls):
    ranks = rank()
    mesh = [c for c in calls if c[1] == "distla._core.mesh"]
    # within the kernels, the floor and the public modules every rank is the layer's
    climbs = [c for c in calls if c[0] is not None and ranks[c[1]] > ranks[c[0]]]
    return {
        "mesh": len(mesh),
        "operand_mesh": sum(1 for c in mesh if c[2] == "operand_mesh"),
        "climbs": len(climbs),
        "modules": len({c[1] for c in calls}),
    }, climbs


@pytest.fixture(scope="module")
def mesh():
    return build_mesh((2, 4), "auto")


def _put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def _cases(mesh):
    n = 64
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    a = _put(a @ a.T + n * np.eye(n, dtype=np.float32), mesh, P("x", "y"))
    b = _put(rng.standard_normal((n, 4)).astype(np.float32), mesh, P("x", "y"))
    vol = _put(jnp.ones((16, 16, 16), jnp.complex64), mesh, P("x", "y", None))
    return {
        "solve": (lambda a, b: distla.linalg.solve(a, b, plan="distributed"), (a, b)),
        "eigh": (lambda a: distla.linalg.eigh(a, plan="distributed"), (a,)),
        "fftn": (distla.fft.fftn, (vol,)),
    }


# As measured by this test on jax 0.10.2 (upper bounds). Every call reads the operands'
# mesh once, in the route. fftn climbs back up twice (the route running its op's driver,
# the body run_on_mesh calls back), eigh six times (its own body, then the bodies of the QR,
# Cholesky and two triangular solves that QDWH and the subspace split run inside it).
# fftn's 22: eval_shape traces on an Auto mesh, where the volume's layout is not visible
# and fftn asks the mesh module for distla.shard's (is_explicit, shard_spec, which calls
# natural_spec and fitting_spec).
PINNED = {
    "solve": {"operand_mesh": 1, "climbs": 9, "mesh": 18},
    "eigh": {"operand_mesh": 1, "climbs": 6, "mesh": 183},
    "fftn": {"operand_mesh": 1, "climbs": 2, "mesh": 22},
}


def test_module_of_names_library_and_kernel_files():
    assert module_of(distla.linalg.__file__) == "distla.linalg"
    assert module_of(distla._core.mesh.__file__) == "distla._core.mesh"
    assert module_of(distla.kernels.lu.__file__) == "distla.kernels.lu"
    assert module_of(jax.__file__) is None
    ranks = rank()
    programs, solve = "distla.linalg._lu.programs", "distla.linalg._lu.solve"
    assert ranks["distla.kernels.lu"] < ranks["distla._core.mesh"] < ranks[programs]
    assert ranks[programs] < ranks[solve] < ranks["distla.linalg"]


@pytest.mark.parametrize("name", ["solve", "eigh", "fftn"])
def test_one_pass_down_and_one_up(mesh, name):
    fn, args = _cases(mesh)[name]
    got, climbs = figures(walk(fn, *args))
    print(name, got)
    limits = PINNED[name]
    assert got["operand_mesh"] <= limits["operand_mesh"], (name, got)
    assert got["climbs"] <= limits["climbs"], (name, got, climbs)
    assert got["mesh"] <= limits["mesh"], (name, got)
