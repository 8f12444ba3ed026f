"""distla.linalg's spectral family as a drop-in for jnp.linalg / jax.scipy.linalg.

eigh on every mesh of the harness, svd and polar on three, at sizes the mesh
does not divide; strict dtype promotion with x64 on and off; integer and bool
inputs; zero-size inputs; ``jax.jit`` and ``jax.vmap``. Every argument jnp
accepts, and the special matrices of numpy's, scipy's and jax's own tests:
tests/test_spectral_arguments.py (a file of its own, so that the two halves
can run on the two pytest-xdist workers at once).

Compiles dominate this file's time: each distributed eigh compiles QDWH and
the divide steps once per shape, dtype, mesh and promotion mode (seconds each).
So every eager call here is float32 at n = 37, the size tests/test_spectral.py
compiles on 2x4 Explicit, 4x2 Auto and 8x1 Explicit (shared steps in one pytest
run), and tests/test_spectral_arguments.py's argument and edge-case tests reuse
2x4 Explicit at that size (through the run's compilation cache);
strict promotion and x64 are checked by tracing (``jax.eval_shape``), which
compiles nothing; ``jax.jit`` compiles one program on one mesh.
"""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from helpers import (
    THRESHOLD,
    check_eigh,
    check_polar,
    check_svd,
    eps,
    has_layout,
    kinds,
    place,
    random_matrix,
    same_kind,
    wide,
)
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg

N = 37  # no mesh divides it


# ------------------------------------------------------------------- references


def sym(rng, n, dtype=np.float32):
    g = random_matrix(rng, (n, n), dtype)
    return ((g + g.conj().T) / 2).astype(dtype)


def most_shards(shape, mesh):
    """The most even shards ``shape`` splits into, each mesh axis on one dimension or none."""
    best = 1
    for dims in itertools.product(range(len(shape) + 1), repeat=len(mesh.axis_names)):
        split = [1] * len(shape)
        for name, d in zip(mesh.axis_names, dims):
            if d < len(shape):
                split[d] *= mesh.shape[name]
        if all(n % k == 0 for n, k in zip(shape, split)):
            best = max(best, math.prod(split))
    return best


def check_layout(x, mesh):
    """``x`` in the largest even layout of ``mesh``: ``P('x', 'y')`` where that divides
    the shape, otherwise a layout with the most even shards."""
    if all(n % mesh.shape[a] == 0 for n, a in zip(x.shape, ("x", "y"))):
        assert has_layout(x, mesh, P("x", "y")), x.sharding
    used = [a for e in x.sharding.spec for a in ((e,) if isinstance(e, str) else (e or ()))]
    assert math.prod(mesh.shape[a] for a in used) == most_shards(x.shape, mesh), x.sharding


def is_explicit(mesh):
    return all(t == AxisType.Explicit for t in mesh.axis_types)


def outcome(fn, *args):
    """``fn``'s result kinds and first result's values, or the exception type it raises."""
    try:
        out = fn(*args)
    except Exception as e:  # compared with jnp's own outcome
        return type(e)
    return kinds(out), np.asarray(jax.tree.leaves(out)[0]).tolist()


# ---------------------------------------------------------------- eigh on every mesh


def test_eigh_every_mesh(mesh):
    # n = 37: the input arrives replicated (1x8 and 8x1: in their size-1 axis) and is
    # padded inside; eigenvalues replicated, vectors in the largest even layout
    rng = np.random.default_rng(1)
    a = sym(rng, N)
    x = place(a, mesh)
    w, v = linalg.eigh(x)
    same_kind((w, v), jnp.linalg.eigh(a))
    check_eigh(a, w, v)
    assert w.sharding.is_fully_replicated
    check_layout(v, mesh)
    if is_explicit(mesh):  # the result's shardings combine with the input's, as jnp's would
        r = x @ v - v * w[None, :]
        e = eps(np.float32)
        assert np.linalg.norm(wide(r), 1) / (N * np.linalg.norm(a, 1) * e) <= THRESHOLD


def test_eigh_under_jit():
    # one program under jax.jit (lax.while_loops) on a mesh whose input arrives in a
    # partial layout (18 rows over x = 2, not over y = 4): jnp's kinds, LAPACK's ratios
    mesh = build_mesh((2, 4), "explicit")
    a = sym(np.random.default_rng(2), 18)
    x = place(a, mesh)
    assert has_layout(x, mesh, P("x", None))
    w, v = jax.jit(linalg.eigh)(x)
    same_kind((w, v), jnp.linalg.eigh(a))
    check_eigh(a, w, v)
    assert w.sharding.is_fully_replicated
    assert has_layout(v, mesh, P("x", None))
    r = x @ v - v * w[None, :]
    assert np.linalg.norm(wide(r), 1) / (18 * np.linalg.norm(a, 1) * eps(np.float32)) <= THRESHOLD


# ------------------------------------------------------- svd and polar on three meshes

SUBSET = [
    pytest.param(((4, 2), "explicit"), id="4x2-explicit"),
    pytest.param(((1, 8), "auto"), id="1x8-auto"),
    pytest.param(((8, 1), "explicit"), id="8x1-explicit"),
]
TALL = (40, N)  # rows divide some meshes, columns none; wide is its transpose (the same QDWH)


@pytest.mark.parametrize("grid", SUBSET)
def test_svd_polar_tallwide(grid):
    # svd of the wide matrix and polar of both run QDWH on the same tall shape: one chain
    mesh = build_mesh(*grid)
    rng = np.random.default_rng(20)
    e = eps(np.float32)
    for shape, full in ((TALL, True), (TALL[::-1], False)):
        a = random_matrix(rng, shape, np.float32)
        x = place(a, mesh)
        u, s, vh = linalg.svd(x, full_matrices=full)
        same_kind((u, s, vh), jnp.linalg.svd(a, full_matrices=full))
        check_svd(a, u, s, vh)
        assert s.sharding.is_fully_replicated
        check_layout(u, mesh)
        check_layout(vh, mesh)
        side = "right" if shape[0] >= shape[1] else "left"  # the sides jax's qdwh takes
        up, p = linalg.polar(x, side)
        same_kind((up, p), jax.scipy.linalg.polar(a, side))
        check_polar(a, up, p, side)
        if is_explicit(mesh):  # u in the input's layout, so that u @ p - a combines
            assert up.sharding.is_equivalent_to(x.sharding, 2), (up.sharding, x.sharding)
        else:
            check_layout(up, mesh)
        check_layout(p, mesh)
        if is_explicit(mesh):  # results combine with the input in distla's layouts
            bound = THRESHOLD * max(shape) * e * float(s[0])
            if not full:
                r = distla.matmul(x, jnp.conj(vh.T)) - u * s[None, :]
                assert np.abs(np.asarray(r)).max() <= bound


def test_polar_result_combines_with_input_explicit():
    mesh = build_mesh((4, 2), "explicit")  # compiled steps shared with the test above
    a = random_matrix(np.random.default_rng(22), TALL, np.float32)
    x = place(a, mesh)
    u, p = linalg.polar(x)
    r = u @ p - x  # jnp's @, as a user of the drop-in writes it
    assert np.abs(np.asarray(r)).max() <= THRESHOLD * max(TALL) * eps(np.float32) * np.abs(a).max()


# ----------------------------------------------- strict promotion, x64 on and off (traced)


def _traced_cases():
    return [
        ("eigh", lambda f, a, b: f.eigh(a)),
        ("eigvalsh", lambda f, a, b: f.eigvalsh(a)),
        ("svd", lambda f, a, b: f.svd(a)),
        ("svd-reduced", lambda f, a, b: f.svd(a, full_matrices=False)),
        ("svdvals", lambda f, a, b: f.svdvals(a)),
        ("pinv", lambda f, a, b: f.pinv(a)),
        ("lstsq", lambda f, a, b: f.lstsq(a, b)),
        ("matrix_rank", lambda f, a, b: f.matrix_rank(a)),
        ("cond", lambda f, a, b: f.cond(a)),
        ("norm-2", lambda f, a, b: f.norm(a, 2)),
        ("norm-nuc", lambda f, a, b: f.norm(a, "nuc")),
    ]


def _traced_kinds(name, fn, dtype):
    """Kinds of distla's and jnp's results, traced (no compile) on a sharded 2x4 input."""
    mesh = build_mesh((2, 4), "explicit")
    x = jax.ShapeDtypeStruct((16, 16), dtype, sharding=NamedSharding(mesh, P("x", "y")))
    b = jax.ShapeDtypeStruct((16, 2), dtype, sharding=NamedSharding(mesh, P("x", None)))
    got = jax.eval_shape(lambda x, b: fn(linalg, x, b), x, b)
    ref = jax.eval_shape(
        lambda x, b: fn(jnp.linalg, x, b),
        jax.ShapeDtypeStruct(x.shape, dtype),
        jax.ShapeDtypeStruct(b.shape, dtype),
    )
    return kinds(got), kinds(ref)


# under strict promotion and x64 on, every case with an eigh inside fails in the leaf
# solve (int32 against int64 in a comparison); without eigh: polar (below)
_STRICT_X64_BROKEN = (
    "eigh",
    "eigvalsh",
    "svd",
    "svd-reduced",
    "svdvals",
    "pinv",
    "lstsq",
    "matrix_rank",
    "cond",
    "norm-2",
    "norm-nuc",
)


@pytest.mark.parametrize(
    "dtype,x64_on",
    [
        (d, x)
        for x in (False, True)
        for d in ("float32", "int32", "bool", "complex64", "float64")
        if x or d != "float64"
    ],
    ids=lambda v: {False: "x64-off", True: "x64-on"}.get(v, v),
)
def test_strict_promotion_kinds(dtype, x64_on):
    with jax.enable_x64(x64_on), jax.numpy_dtype_promotion("strict"):
        for name, fn in _traced_cases():
            if x64_on and name in _STRICT_X64_BROKEN:
                continue  # test_strict_x64_eigh
            got, ref = _traced_kinds(name, fn, np.dtype(dtype))
            assert got == ref, (name, dtype)
        if dtype in ("float32", "float64", "complex64"):  # jax's polar takes no integers
            mesh = build_mesh((2, 4), "explicit")
            x = jax.ShapeDtypeStruct((16, 8), dtype, sharding=NamedSharding(mesh, P("x", "y")))
            got = jax.eval_shape(linalg.polar, x)
            assert kinds(got) == kinds(
                jax.eval_shape(jax.scipy.linalg.polar, jax.ShapeDtypeStruct(x.shape, dtype))
            )


@pytest.mark.parametrize("name", _STRICT_X64_BROKEN)
def test_strict_x64_eigh(name):
    fn = dict(_traced_cases())[name]
    with jax.enable_x64(True), jax.numpy_dtype_promotion("strict"):
        got, ref = _traced_kinds(name, fn, np.dtype("float64"))
    assert got == ref


def test_matrix_rank_dtype_x64(x64):
    got, ref = _traced_kinds("matrix_rank", lambda f, a, b: f.matrix_rank(a), np.dtype("float64"))
    assert got == ref


# ------------------------------------------------------------- int and bool inputs


def test_int_and_bool_promote_as_jnp():
    # eager path on 2x4 Explicit at n = 37: after promotion, the float32 steps that the
    # mesh sweep (and tests/test_spectral.py) compile
    mesh24 = build_mesh((2, 4), "explicit")
    ints = (np.arange(N * N).reshape(N, N) % 7 - 3).astype(np.int32)
    ints = ints + ints.T
    bools = np.random.default_rng(32).random((N, N)) < 0.3
    ri = jnp.linalg.eigh(ints)
    wi, vi = linalg.eigh(place(ints, mesh24))
    same_kind((wi, vi), ri)
    check_eigh(ints.astype(np.float32), wi, vi)
    sb = linalg.svdvals(place(bools, mesh24))
    rb = jnp.linalg.svdvals(bools)
    same_kind(sb, rb)
    np.testing.assert_allclose(
        np.asarray(sb),
        scipy.linalg.svdvals(bools.astype(np.float64)),
        atol=THRESHOLD * N * eps(np.float32) * float(rb[0]),
    )
    rank = linalg.matrix_rank(place(bools, mesh24))
    same_kind(rank, jnp.linalg.matrix_rank(bools))
    assert int(rank) == int(jnp.linalg.matrix_rank(bools))


# -------------------------------------------------------------- zero-size inputs

EMPTY = [(0, 0), (0, 3), (3, 0)]


def _zero_size_cases(shape):
    m, n = shape
    cases = [
        ("svd", lambda f, a: f.svd(a)),
        ("svd-reduced", lambda f, a: f.svd(a, full_matrices=False)),
        ("svd-values", lambda f, a: f.svd(a, compute_uv=False)),
        ("svdvals", lambda f, a: f.svdvals(a)),
        ("pinv", lambda f, a: f.pinv(a)),
        ("matrix_rank", lambda f, a: f.matrix_rank(a)),
        ("norm-2", lambda f, a: f.norm(a, 2)),
        ("norm-nuc", lambda f, a: f.norm(a, "nuc")),
        ("norm-fro", lambda f, a: f.norm(a)),
        ("lstsq", lambda f, a: f.lstsq(a, jnp.ones((m, 2), a.dtype))),
    ]
    if m == n:
        cases += [("eigh", lambda f, a: f.eigh(a)), ("eigvalsh", lambda f, a: f.eigvalsh(a))]
    return cases


@pytest.mark.parametrize(
    "kind,x64_on",
    [("explicit", False), ("explicit", True), ("auto", False)],
    ids=["explicit", "explicit-x64", "auto"],
)
@pytest.mark.parametrize("shape", EMPTY, ids=lambda s: f"{s[0]}x{s[1]}")
def test_zero_size_as_jnp(shape, kind, x64_on):
    # what jnp gives (shapes, dtypes, values, or the error it raises)
    mesh24 = build_mesh((2, 4), kind)
    m, _ = shape
    with jax.enable_x64(x64_on):
        for dtype in (np.float32, np.int32, np.bool_):
            a = np.zeros(shape, dtype)
            x = place(a, mesh24)
            for name, fn in _zero_size_cases(shape):
                if is_explicit(mesh24) and name in ("norm-2", "norm-nuc"):
                    continue  # test_zero_size_norm_explicit
                assert outcome(fn, linalg, x) == outcome(fn, jnp.linalg, jnp.asarray(a)), (
                    name,
                    dtype,
                )
            assert outcome(linalg.cond, x) is ValueError  # jnp refuses empty input
            assert outcome(jnp.linalg.cond, a) is ValueError
            b = place(np.zeros((m, 0), dtype), mesh24)  # no right-hand sides
            assert outcome(linalg.lstsq, x, b) == outcome(jnp.linalg.lstsq, a, np.asarray(b))
            if dtype == np.float32:  # jax.scipy.linalg.polar takes no integers
                for side in ("right", "left"):
                    got = outcome(lambda y: linalg.polar(y, side), x)
                    assert got == outcome(lambda y: jax.scipy.linalg.polar(y, side), a), side


@pytest.mark.parametrize("ord_", [2, "nuc"], ids=str)
def test_zero_size_norm_explicit(ord_):
    mesh = build_mesh((2, 4), "explicit")
    x = place(np.zeros((0, 3), np.float32), mesh)
    assert outcome(linalg.norm, x, ord_) == outcome(jnp.linalg.norm, np.zeros((0, 3)), ord_)


# -------------------------------------------------------- vmap over a batch-sharded stack


def _stack_cases():
    return [
        ("eigh", lambda f, a, b: f.eigh(a)),
        ("eigvalsh", lambda f, a, b: f.eigvalsh(a)),
        ("svd", lambda f, a, b: f.svd(a, full_matrices=False)),
        ("svdvals", lambda f, a, b: f.svdvals(a)),
        ("pinv", lambda f, a, b: f.pinv(a)),
        ("matrix_rank", lambda f, a, b: f.matrix_rank(a)),
        ("cond", lambda f, a, b: f.cond(a)),
        ("norm-2", lambda f, a, b: f.norm(a, 2)),
        ("norm-nuc", lambda f, a, b: f.norm(a, "nuc")),
        ("lstsq", lambda f, a, b: f.lstsq(a, b)[:3]),
    ]


def _batch_sharded(mesh, stack):
    return jax.device_put(stack, NamedSharding(mesh, P(("x", "y"))))


def test_vmap_batch_sharded_stack():
    # a stack sharded along its batch: every member is local, so the values and the
    # shardings are jnp's own, under jax.vmap and jax.jit(jax.vmap) alike
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(40)
    stack = np.stack([sym(rng, 6) for _ in range(8)])
    xs = _batch_sharded(mesh, stack)
    bs = _batch_sharded(mesh, random_matrix(rng, (8, 6), np.float32))
    for name, fn in _stack_cases():
        ref = jax.vmap(lambda a, b: fn(jnp.linalg, a, b))(xs, bs)
        for wrap in (jax.vmap, lambda f: jax.jit(jax.vmap(f))):
            got = wrap(lambda a, b: fn(linalg, a, b))(xs, bs)
            same_kind(got, ref, name)
            for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
                assert g.sharding.is_equivalent_to(r.sharding, g.ndim), name
                if name not in ("eigh", "svd"):  # vectors: up to sign
                    np.testing.assert_allclose(
                        np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-4, err_msg=name
                    )
    w, v = jax.vmap(linalg.eigh)(xs)
    r = xs @ v - v * w[:, None, :]  # Explicit: the shardings combine
    w, v = np.asarray(w), np.asarray(v)
    for i in range(8):
        check_eigh(stack[i], w[i], v[i])
    assert np.abs(np.asarray(r)).max() <= THRESHOLD * 6 * eps(np.float32) * np.abs(stack).max()


def test_vmap_batch_sharded_stack_auto_sharding():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(43)
    xs = _batch_sharded(mesh, np.stack([sym(rng, 6) for _ in range(8)]))
    got, ref = jax.vmap(linalg.eigh)(xs), jax.vmap(jnp.linalg.eigh)(xs)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref[0]), atol=1e-4)
    for g, r in zip(got, ref):
        assert g.sharding.is_equivalent_to(r.sharding, g.ndim)


def test_vmap_polar_batch_sharded_auto():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(41)
    stack = random_matrix(rng, (8, 6, 6), np.float32)
    xs = jax.device_put(stack, NamedSharding(mesh, P(("x", "y"))))
    u, p = jax.vmap(linalg.polar)(xs)
    ru, rp = jax.vmap(jax.scipy.linalg.polar)(xs)
    np.testing.assert_allclose(np.asarray(u), np.asarray(ru), atol=1e-5)
    np.testing.assert_allclose(np.asarray(p), np.asarray(rp), atol=1e-5)
    for i in range(8):
        check_polar(stack[i], u[i], p[i], "right")


def test_vmap_polar_batch_sharded_explicit():
    mesh = build_mesh((2, 4), "explicit")
    stack = random_matrix(np.random.default_rng(42), (8, 6, 6), np.float32)
    xs = jax.device_put(stack, NamedSharding(mesh, P(("x", "y"))))
    u, p = jax.vmap(linalg.polar)(xs)
    for r in (u, p):  # batch-sharded as the stack (jax's polar raises here)
        assert r.sharding.is_equivalent_to(xs.sharding, 3), r.sharding
    u, p = np.asarray(u), np.asarray(p)  # Explicit batch-sharded arrays refuse u[i]
    for i in range(8):
        check_polar(stack[i], u[i], p[i], "right")
