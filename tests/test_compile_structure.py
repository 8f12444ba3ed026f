"""The first call's compile cost, pinned by the program's structure (not timed).

XLA's CPU compile time grows with the number of loop bodies and kernels it
compiles, so the lowered programs of ``solve``, ``cholesky`` and ``qr`` on a
2x4 mesh keep a pinned number of ``while`` loops and about the same size
whatever n: the block loops run in a fixed number of phases (segments,
stages), which n = 4096 already fills, so n = 16384 adds nothing; n = 512
has fewer. Lowering only (no XLA compile), so the whole file stays cheap.
"""

import functools
import re

import jax
import jax.numpy as jnp
import pytest
from conftest import build_mesh
from distla.kernels import lu as lu_kernel
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla

# (op, while loops in the lowered program):
# today's loop counts (4 LU phases + 1 loop per substitution + the pivot
# helpers'; 4 cholesky segments; 4 QR stages for R and again for Q + helpers;
# eigvalsh's and svdvals' 4 reduction phases of a panel loop and a column loop
# each, and the bisection's halvings around its Sturm recurrence; eigh's
# reduction also forms each panel's block reflector, then inverse iteration and
# the Cholesky QR (factor and solve loops) that repairs clusters across devices),
# and a ceiling of 1.15x the StableHLO operations measured at n = 4096 on the jax
# in use. Operations, not characters, and measured per jax release: 0.11.2 lowers
# the same programs to 3-29% more operations than 0.10.2 and prints them in about
# 1.2x the text (each ``jnp.where`` its own function, Shardy's shardings on every
# argument). One loop per block column would be 32 to 128 loops.
CASES = [
    pytest.param("solve", 12, id="solve"),
    pytest.param("cholesky", 4, id="cholesky"),
    pytest.param("qr", 12, id="qr"),
    pytest.param("eigvalsh", 10, id="eigvalsh"),
    pytest.param("svdvals", 10, id="svdvals"),
    pytest.param("eigh", 26, id="eigh"),
]
# (jax major, minor) -> operations at n = 4096 on 2x4; a newer release uses the last row
OPERATIONS = {
    (0, 10): {
        "solve": 2317,
        "cholesky": 1442,
        "qr": 1949,
        "eigvalsh": 1735,
        "svdvals": 2386,
        "eigh": 5193,
    },
    (0, 11): {
        "solve": 2394,
        "cholesky": 1484,
        "qr": 2010,
        "eigvalsh": 2236,
        "svdvals": 2899,
        "eigh": 5775,
    },
}


def operations(text: str) -> int:
    """How many StableHLO operations a lowered program's text holds."""
    return len(re.findall(r"\bstablehlo\.[a-z_]+", text))


def operations_ceiling(op: str) -> float:
    release = tuple(int(p) for p in jax.__version_info__[:2])
    known = [r for r in sorted(OPERATIONS) if r <= release] or [min(OPERATIONS)]
    return 1.15 * OPERATIONS[known[-1]][op]


def _lowered(op: str, n: int) -> str:
    mesh = build_mesh((2, 4), "explicit")

    def arg(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    args = [arg((n, n), P("x", "y"))]
    if op == "solve":
        args.append(arg((n,), P("x")))
    fn = getattr(distla.linalg, op)
    if op in ("eigvalsh", "svdvals", "eigh"):  # the reductions, whatever the one-device budget
        fn = functools.partial(fn, plan="distributed")
    return jax.jit(fn).lower(*args).as_text()


@pytest.mark.parametrize("op, loops", CASES)
def test_program_is_bounded_whatever_n(op, loops):
    # 4, about 24..32 and about 88..128 block columns
    texts = {n: _lowered(op, n) for n in (512, 4096, 16384)}
    count = {n: t.count("stablehlo.while") for n, t in texts.items()}
    assert count[512] <= count[4096] == count[16384] == loops, (op, count)
    size = {n: operations(t) for n, t in texts.items()}
    assert size[4096] <= operations_ceiling(op), (op, size)
    assert size[16384] <= 1.15 * size[4096], (op, size)


def test_lu_loops_are_few():
    # the factorisation's block columns run in MAX_PHASES loops at most
    assert lu_kernel.MAX_PHASES <= 4
    assert len(lu_kernel.phases(88, 2, 4)) == lu_kernel.MAX_PHASES


def test_eager_svd_compiles_each_step_once(monkeypatch):
    # svd's eager polar calls its compiled QDWH steps once per iteration: every call
    # after the first must find the first's program (same operand shardings), or the
    # first svd compiles its largest step twice. The steps are cached per mesh and
    # layout, so an earlier test in this process may have compiled them for other
    # shapes: each step's programs are cleared the first time this call meets it, and
    # so are those of the tridiagonal eigh of H (one program, and no repair program
    # for this matrix, whose singular values are apart).
    from distla.linalg import _qdwh as _polar
    from distla.linalg._eigh import tridiagonal as _tridiagonal

    steps, on_mesh = {}, _polar.on_mesh

    def spy(fn, *args):
        step = on_mesh(fn, *args)
        if step not in steps:
            step.clear_cache()
            steps[step] = fn.__name__
        return step

    monkeypatch.setattr(_polar, "on_mesh", spy)
    _tridiagonal._eigh_unrepaired.clear_cache()
    _tridiagonal._eigh_repair.clear_cache()
    mesh = build_mesh((2, 4), "auto")
    a = jax.random.normal(jax.random.key(0), (40, 40))
    distla.linalg.svd(jax.device_put(a, NamedSharding(mesh, P("x", "y"))), plan="distributed")
    assert {"qdwh_qr_step", "polar_finish"} <= set(steps.values())
    sizes = [(name, step._cache_size()) for step, name in steps.items()]
    sizes.append(("eigh_2d", _tridiagonal._eigh_unrepaired._cache_size()))
    assert _tridiagonal._eigh_repair._cache_size() == 0
    assert all(size == 1 for _, size in sizes), sizes
