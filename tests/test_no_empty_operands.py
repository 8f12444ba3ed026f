"""No zero-size array is ever an operand of a ``shard_map``.

jax 0.11.2's default partitioner (Shardy) crashes the compiler on a ``shard_map``
with a zero-size operand, and constants a body closes over are hoisted into
operands. ``x.at[static slices].set(...)`` makes such a constant (an ``int32[0]``
scatter index). Tracing alone shows it: every public function is traced with
``jax.make_jaxpr`` (no compile) and every ``shard_map`` equation, at any depth
(jit, cond branches, loop bodies, custom derivative rules, nested ``shard_map``),
is checked. Every ``ppermute`` inside them must name its mesh axes in the mesh's
order too: jax 0.11 refuses any other order when it lowers the program (not when it
traces it), so only this walk shows the fault on the jax CI has.

To cover a new public function, add a row to ``CASES`` (traced on every mesh and
size below) or, if it never runs a ``shard_map`` of its own, name it in
``NO_SHARD_MAP``.
"""

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import PartitionSpec as P

import distla
import distla.jaxdecomp
import distla.scipy.fft

L = distla.linalg
F = distla.fft
SF = distla.scipy.fft
J = distla.jaxdecomp


# --- the walker ----------------------------------------------------------------------------


def empty_shard_map_operands(closed) -> list[str]:
    """Every zero-size operand of every ``shard_map`` in ``closed``, at any depth, and every
    ``ppermute`` whose axis names are not in its mesh's order."""
    found = []

    def walk(jaxpr, where, mesh_axes):
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        for eqn in jaxpr.eqns:
            here = f"{where}/{eqn.primitive.name}"
            inner = mesh_axes
            if eqn.primitive.name == "shard_map":
                inner = tuple(eqn.params["mesh"].axis_names)
                found.extend(
                    f"{here} operand {i}: {v.aval.str_short()}"
                    for i, v in enumerate(eqn.invars)
                    if getattr(v.aval, "size", 1) == 0
                )
            if eqn.primitive.name == "ppermute":
                names = eqn.params["axis_name"]
                names = tuple(names) if isinstance(names, (tuple, list)) else (names,)
                if names != tuple(a for a in mesh_axes if a in names):
                    found.append(f"{here} over {names}, not in the mesh's order {mesh_axes}")
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub, here, inner)

    walk(closed, "", ())
    return found


def count_shard_maps(closed) -> int:
    """How many ``shard_map`` equations ``closed`` holds, at any depth."""

    def walk(jaxpr):
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        return sum(
            (eqn.primitive.name == "shard_map")
            + sum(walk(sub) for sub in jcore.jaxprs_in_params(eqn.params))
            for eqn in jaxpr.eqns
        )

    return walk(closed)


def assert_no_empty_operands(fn, *args):
    closed = jax.make_jaxpr(fn)(*args)
    bad = empty_shard_map_operands(closed)
    assert not bad, "zero-size shard_map operands or misordered ppermutes:\n" + "\n".join(bad)
    return closed


def test_walker_finds_a_zero_size_operand():
    """The walker fails a body that closes over an empty constant, or scatters statically,
    at any depth (a cond branch inside jit), and passes the same program written without."""
    mesh = build_mesh((2, 4), "auto")
    empty = jnp.zeros((0,), jnp.int32)
    x = jnp.ones((8, 8), jnp.float32)

    def sm(body):
        return jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))

    closes = sm(lambda b: b + empty.sum().astype(b.dtype))
    # a static slice from 0 in every indexed axis scatters with an int32[0] index constant
    scatter = sm(lambda b: b.at[0:, 0:].set(0.0))
    nested = jax.jit(lambda b: jax.lax.cond(b.sum() > 0, scatter, lambda c: c, b))
    fine = sm(lambda b: jax.lax.dynamic_update_slice(b, jnp.zeros((3, 1), b.dtype), (1, 1)))
    for fn in (closes, scatter, nested):
        bad = empty_shard_map_operands(jax.make_jaxpr(fn)(x))
        assert bad and "[0]" in bad[0], fn
        with pytest.raises(AssertionError, match="zero-size shard_map operands"):
            assert_no_empty_operands(fn, x)
    assert_no_empty_operands(fine, x)
    assert count_shard_maps(jax.make_jaxpr(nested)(x)) == 1


def test_walker_finds_a_misordered_ppermute():
    """A ``ppermute`` over ``("y", "x")`` on an ``("x", "y")`` mesh is found (jax 0.11 raises
    when it lowers one); the same shift over ``("x", "y")`` passes."""
    mesh = build_mesh((2, 4), "auto")
    x = jnp.ones((8, 8), jnp.float32)
    shift = [(i, (i + 1) % 8) for i in range(8)]

    def sm(names):
        body = lambda b: jax.lax.ppermute(b, names, shift)  # noqa: E731
        return jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))

    bad = empty_shard_map_operands(jax.make_jaxpr(jax.jit(sm(("y", "x"))))(x))
    assert len(bad) == 1 and "not in the mesh's order" in bad[0], bad
    assert_no_empty_operands(sm(("x", "y")), x)


# --- the public functions ------------------------------------------------------------------


def _rng():
    return np.random.default_rng(0)


def _inputs(mesh, n):
    """Host operands for one mesh and size, placed in distla's layout for that mesh."""
    rng = _rng()
    a = rng.standard_normal((n, n)).astype(np.float32) + n * np.eye(n, dtype=np.float32)
    spd = (a @ a.T / n).astype(np.float32)
    sym = ((a + a.T) / 2).astype(np.float32)
    tall = rng.standard_normal((n + 3, n)).astype(np.float32)
    b = rng.standard_normal((n, 3)).astype(np.float32)
    tall_b = rng.standard_normal((n + 3, 2)).astype(np.float32)
    stack = rng.standard_normal((8, 6, 6)).astype(np.float32) + 6 * np.eye(6, dtype=np.float32)
    vol = rng.standard_normal((n, n, n)).astype(np.float32)
    # a volume with ghost cells whose blocks hold two of them along each split axis
    grid = rng.standard_normal((16, 8, 4)).astype(np.float32)
    d = {"a": a, "spd": spd, "sym": sym, "tall": tall, "b": b, "tall_b": tall_b, "vol": vol}
    d["grid"] = grid
    out = {k: distla.shard(v, mesh) for k, v in d.items()}
    out["cvol"] = distla.shard(vol.astype(np.complex64), mesh)
    out["low"] = distla.shard(np.tril(a), mesh)
    batch_axis = mesh.axis_names if len(mesh.axis_names) == 1 else (mesh.axis_names,)
    out["stack"] = distla.shard(stack, mesh, P(*batch_axis, None, None))
    out["stack_b"] = distla.shard(stack[..., :2], mesh, P(*batch_axis, None, None))
    # 8 along the split axis whatever n: the general FFT route pads the others
    slab = rng.standard_normal((8, n, n)).astype(np.complex64)
    out["cslab"] = distla.shard(slab, mesh, P(*batch_axis, None, None))
    return out


def _lu_solve(x):
    return L.lu_solve(L.lu_factor(x["a"]), x["b"])


def _cho_solve(x):
    return L.cho_solve(L.cho_factor(x["spd"]), x["b"])


# name -> (function of the inputs, and for differentiable names a scalar function of one input
# for jax.grad: of ``a`` (``spd`` for cholesky, ``sym`` for eigh, ``vol`` for FFTs), or None).
# Every row is also traced under jax.vmap over a leading axis of 2 (FFTs: batch axes are theirs).
CASES = {
    "matmul": (lambda x: distla.matmul(x["a"], x["b"]), lambda a: distla.matmul(a, a).sum()),
    "lu_factor": (lambda x: L.lu_factor(x["a"]), None),
    "lu_solve": (_lu_solve, None),
    "lu": (lambda x: L.lu(x["a"]), lambda a: L.lu(a)[2].sum()),
    "solve": (lambda x: L.solve(x["a"], x["b"]), lambda a: L.solve(a, a).sum()),
    "solve_pos": (lambda x: L.solve(x["spd"], x["b"], assume_a="pos"), None),
    "det": (lambda x: L.det(x["a"]), lambda a: L.det(a)),
    "slogdet": (lambda x: L.slogdet(x["a"]), lambda a: L.slogdet(a)[1]),
    "inv": (lambda x: L.inv(x["a"]), lambda a: L.inv(a).sum()),
    "cholesky": (lambda x: L.cholesky(x["spd"]), lambda a: L.cholesky(a).sum()),
    "cho_solve": (_cho_solve, None),
    "solve_triangular": (
        lambda x: L.solve_triangular(x["low"], x["b"], lower=True),
        lambda a: L.solve_triangular(a, a, lower=True).sum(),
    ),
    "qr": (lambda x: L.qr(x["a"]), lambda a: L.qr(a)[1].sum()),
    "qr_tall": (lambda x: L.qr(x["tall"]), None),
    "polar": (lambda x: L.polar(x["a"]), lambda a: L.polar(a)[0].sum()),
    "eigh": (lambda x: L.eigh(x["sym"]), lambda a: L.eigh(a)[0].sum()),
    "eigvalsh": (lambda x: L.eigvalsh(x["sym"]), None),
    "eigh_pencil": (
        lambda x: L.eigh(x["sym"], x["spd"], type=1, plan="distributed"),
        lambda b: L.eigh(b, b, eigvals_only=True, plan="distributed").sum(),
    ),
    "eigh_pencil_3": (
        lambda x: L.eigh(x["sym"], x["spd"], type=3, subset_by_index=(0, 2), plan="distributed"),
        None,
    ),
    "eigh_subset": (lambda x: L.eigh(x["sym"], subset_by_index=(1, 3), plan="distributed"), None),
    "svd": (lambda x: L.svd(x["a"]), lambda a: L.svd(a, full_matrices=False)[1].sum()),
    "svdvals": (lambda x: L.svdvals(x["a"]), None),
    "pinv": (lambda x: L.pinv(x["a"]), None),
    "lstsq": (lambda x: L.lstsq(x["tall"], x["tall_b"]), None),
    "matrix_rank": (lambda x: L.matrix_rank(x["a"]), None),
    "cond": (lambda x: L.cond(x["a"]), None),
    "norm2": (lambda x: L.norm(x["a"], 2), None),
    "norm_nuc": (lambda x: L.norm(x["a"], "nuc"), None),
    "matrix_power": (lambda x: L.matrix_power(x["a"], 3), None),
    "multi_dot": (lambda x: L.multi_dot([x["a"], x["a"], x["b"]]), None),
    "tensorsolve": (lambda x: L.tensorsolve(x["a"], x["b"][:, 0]), None),
    "tensorinv": (lambda x: L.tensorinv(x["a"], ind=1), None),
    "matrix_norm": (lambda x: L.matrix_norm(x["a"], ord=2), None),
    "expm": (lambda x: L.expm(x["a"]), lambda a: L.expm(a).sum()),
    "expm_upper": (lambda x: L.expm(x["low"].T, upper_triangular=True), None),
    "expm_frechet": (lambda x: L.expm_frechet(x["a"], x["sym"]), None),
    "batched_solve": (lambda x: L.solve(x["stack"], x["stack_b"]), None),
    "batched_cholesky": (lambda x: L.cholesky(x["stack"] @ jnp.swapaxes(x["stack"], -1, -2)), None),
    "fftn": (lambda x: F.fftn(x["cvol"]), lambda v: jnp.abs(F.fftn(v)).sum()),
    "ifftn": (lambda x: F.ifftn(x["cvol"]), None),
    "rfftn": (lambda x: F.rfftn(x["vol"]), lambda v: jnp.abs(F.rfftn(v)).sum()),
    "irfftn": (lambda x: F.irfftn(F.rfftn(x["vol"])), None),
    "fftn_axes": (lambda x: F.fftn(x["cvol"], axes=(0, 2)), None),
    "pfft3d": (lambda x: F.pifft3d(F.pfft3d(x["cvol"])), None),
    "hfft": (lambda x: F.ihfft(F.hfft(x["cvol"], axis=0), axis=0), None),
    "fftn_slab_axes": (lambda x: F.ifftn(F.fftn(x["cslab"], axes=(0, 2)), axes=(0, 2)), None),
    "prfft3d": (
        lambda x: F.pirfft3d(F.prfft3d(x["vol"]), s=x["vol"].shape),
        lambda v: jnp.abs(F.prfft3d(v)).sum(),
    ),
    "dctn": (lambda x: SF.idctn(SF.dctn(x["vol"], type=3)), lambda v: SF.dctn(v).sum()),
    "dct_axis": (lambda x: SF.idct(SF.dct(x["cslab"], type=1, axis=0), type=1, axis=0), None),
    "halo_exchange": (
        lambda x: J.halo_exchange(x["grid"], (1, 1), (True, False)),
        lambda v: J.halo_exchange(v, (1, 1), (True, True)).sum(),
    ),
    "transposes": (lambda x: J.transposeZtoX(J.transposeXtoZ(x["grid"])), None),
}
# stacks sharded on the batch axis are solved per device with no shard_map
ONE_DEVICE_PER_STACK = {"batched_solve", "batched_cholesky", "matrix_rank"}
GRAD_ARG = {"cholesky": "spd", "eigh": "sym", "eigh_pencil": "spd", "fftn": "vol", "rfftn": "vol"}
GRAD_ARG.update(prfft3d="vol", dctn="vol", halo_exchange="grid")
FFT = {"hfft", "fftn", "ifftn", "rfftn", "irfftn", "fftn_axes", "fftn_slab_axes", "pfft3d"}
FFT |= {"prfft3d", "dctn", "dct_axis", "halo_exchange", "transposes"}
# Functions that never run a shard_map of their own: elementwise or batch-only work,
# or a thin alias of a name in CASES (what they call is traced there).
NO_SHARD_MAP = {
    "linalg": {
        "EighResult",
        "SVDResult",
        "SlogdetResult",
        "LUResult",
        "QRResult",
        "model_bytes",
        "cholesky_model_bytes",
        "lu_model_bytes",
        "qr_model_bytes",
        "plan_budget",
        "set_plan_budget",
        "shape_buckets",
        "set_shape_buckets",  # settings
        # jnp's own (elementwise, batch-only or small reductions); eig/eigvals gather to jnp
        "cross",
        "diagonal",
        "eig",
        "eigvals",
        "matrix_transpose",
        "outer",
        "tensordot",
        "trace",
        "vecdot",
        "vector_norm",
    },
    "fft": {
        "fftfreq3d",
        "rfftfreq3d",
        "model_bytes",
        "fftfreq",
        "rfftfreq",
        "fftshift",
        "ifftshift",
    },
}
# Public names covered by a row of CASES under another id.
COVERED_BY = {
    "cho_factor": "cho_solve",
    "fft": "fftn_axes",
    "ifft": "fftn_axes",
    "fft2": "fftn_axes",
    "ifft2": "fftn_axes",
    "rfft": "rfftn",
    "irfft": "irfftn",
    "rfft2": "rfftn",
    "irfft2": "irfftn",
    "pifft3d": "pfft3d",
    "pirfft3d": "prfft3d",
    "norm": "norm2",
    "ihfft": "hfft",
}

# (mesh, n): both sizes on the 2-axis meshes; on the 1-axis meshes one size each
# (Explicit uneven, Auto even), to stay cheap
SETUPS = {
    "2x4-auto-n8": ((2, 4), "auto", 8),
    "2x4-auto-n7": ((2, 4), "auto", 7),
    "2x4-explicit-n8": ((2, 4), "explicit", 8),
    "2x4-explicit-n7": ((2, 4), "explicit", 7),
    "8-explicit-n7": ((8,), "explicit", 7),
    "8-auto-n8": ((8,), "auto", 8),
}
# grad and vmap are traced at one size per 2-axis mesh (the sizes alternate)
TRANSFORMED = ["2x4-auto-n8", "2x4-explicit-n7", "8-explicit-n7", "8-auto-n8"]


def _setup(key):
    shape, kind, n = SETUPS[key]
    mesh = build_mesh(shape, kind, names=("x", "y"))
    return mesh, _inputs(mesh, n)


@pytest.fixture(scope="module", params=list(SETUPS))
def inputs(request):
    return _setup(request.param)


@pytest.fixture(scope="module", params=TRANSFORMED)
def transformed(request):
    return _setup(request.param)


@pytest.mark.parametrize("name", list(CASES))
def test_public_function(name, inputs):
    mesh, x = inputs
    fn, _ = CASES[name]
    with jax.set_mesh(mesh):
        closed = assert_no_empty_operands(fn, x)
    # the check must have something to see: every distributed path runs a shard_map
    assert count_shard_maps(closed) >= 1 or name in ONE_DEVICE_PER_STACK, name


@pytest.mark.parametrize("name", [k for k, (_, g) in CASES.items() if g is not None])
def test_under_grad(name, transformed):
    mesh, x = transformed
    _, g = CASES[name]
    with jax.set_mesh(mesh):
        assert_no_empty_operands(jax.grad(g), x[GRAD_ARG.get(name, "a")])


@pytest.mark.parametrize("name", [k for k in CASES if k not in FFT])
def test_under_vmap(name, transformed):
    mesh, x = transformed
    fn, _ = CASES[name]
    pair = {k: jnp.stack([v, v]) for k, v in x.items() if k not in ("vol", "cvol")}
    with jax.set_mesh(mesh):
        assert_no_empty_operands(jax.vmap(fn), pair)


def test_every_public_name_is_covered():
    """A new public name must be traced here (a row of CASES) or listed as running no shard_map."""
    covered = set(CASES) | set(COVERED_BY)
    for module, key in ((L, "linalg"), (F, "fft")):
        missing = sorted(set(module.__all__) - covered - NO_SHARD_MAP[key])
        assert not missing, f"distla.{key} names with no row in CASES: {missing}"


def test_mixed_precision_solve(x64):
    """``solve(..., factor_dtype=float32)`` of a float64 system: LU in float32, refined."""
    for shape in ((2, 4), (8,)):
        mesh = build_mesh(shape, "explicit")
        for n in (8, 7):
            rng = _rng()
            a = rng.standard_normal((n, n)) + n * np.eye(n)
            a, b = distla.shard(a, mesh), distla.shard(rng.standard_normal((n, 2)), mesh)
            with jax.set_mesh(mesh):
                assert_no_empty_operands(lambda a, b: L.solve(a, b, factor_dtype=jnp.float32), a, b)
