"""distla.linalg's spectral family as a drop-in for jnp.linalg / jax.scipy.linalg.

eigh on every mesh of the harness, svd and polar on three, at sizes the mesh
does not divide; strict dtype promotion with x64 on and off; integer and bool
inputs; zero-size inputs; ``jax.jit`` and ``jax.vmap``; every argument jnp
accepts; and cases ported from numpy's ``test_linalg``, scipy's
``test_decomp`` and jax's ``linalg_test`` (identity, zero and tiny-norm
matrices, one triangle read).

Compiles dominate this file's time: each distributed eigh compiles QDWH and
the divide steps once per shape, dtype, mesh and promotion mode (seconds each).
So every eager call here is float32 at n = 37, the size tests/test_spectral.py
compiles on 2x4 Explicit, 4x2 Auto and 8x1 Explicit (shared steps in one pytest
run), and the argument and edge-case tests reuse 2x4 Explicit at that size;
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
    check_svd,
    eps,
    has_layout,
    place,
    random_matrix,
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


def check_polar(a, u, p, side):
    """LAPACK-style polar ratios: ‖A − UP‖₁/(max(m,n)‖A‖₁eps), ‖I − UᴴU‖₁/(max(m,n)eps)."""
    a64, u64, p64 = wide(a), wide(u), wide(p)
    m, n = a64.shape
    e = eps(np.asarray(u).dtype)
    assert u.shape == (m, n) and p.shape == ((n, n) if side == "right" else (m, m))
    rec = u64 @ p64 if side == "right" else p64 @ u64
    resid = np.linalg.norm(a64 - rec, 1) / (max(m, n) * np.linalg.norm(a64, 1) * e)
    gram = u64.conj().T @ u64 if m >= n else u64 @ u64.conj().T
    orth = np.linalg.norm(np.eye(min(m, n)) - gram, 1) / (max(m, n) * e)
    assert resid <= THRESHOLD and orth <= THRESHOLD, (side, resid, orth)
    np.testing.assert_allclose(p64, p64.conj().T, atol=30 * e * np.abs(p64).max())
    assert np.linalg.eigvalsh(p64).min() >= -30 * e * np.linalg.norm(a64, 2)


def kinds(tree):
    return [(x.shape, np.dtype(x.dtype)) for x in jax.tree.leaves(tree)]


def same_kind(got, ref, what=""):
    """Shapes and dtypes of ``got`` equal those of ``ref`` (trees of arrays)."""
    assert kinds(got) == kinds(ref), what


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
    ref = jax.eval_shape(lambda x, b: fn(jnp.linalg, x, b), jax.ShapeDtypeStruct(x.shape, dtype),
                         jax.ShapeDtypeStruct(b.shape, dtype))
    return kinds(got), kinds(ref)


# under strict promotion and x64 on, every case with an eigh inside fails in the leaf
# solve (int32 against int64 in a comparison); without eigh: polar (below)
_STRICT_X64_BROKEN = ("eigh", "eigvalsh", "svd", "svd-reduced", "svdvals", "pinv", "lstsq",
                      "matrix_rank", "cond", "norm-2", "norm-nuc")


@pytest.mark.parametrize("dtype,x64_on", [
    (d, x) for x in (False, True) for d in ("float32", "int32", "bool", "complex64", "float64")
    if x or d != "float64"], ids=lambda v: {False: "x64-off", True: "x64-on"}.get(v, v))
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
            assert kinds(got) == kinds(jax.eval_shape(jax.scipy.linalg.polar,
                                                      jax.ShapeDtypeStruct(x.shape, dtype)))


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
    np.testing.assert_allclose(np.asarray(sb), scipy.linalg.svdvals(bools.astype(np.float64)),
                               atol=THRESHOLD * N * eps(np.float32) * float(rb[0]))
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


@pytest.mark.parametrize("kind,x64_on", [("explicit", False), ("explicit", True),
                                          ("auto", False)], ids=["explicit", "explicit-x64",
                                                                 "auto"])
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
                    name, dtype)
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
                    np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4,
                                               atol=1e-4, err_msg=name)
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


# ------------------------------------------------------------ every argument jnp takes


@pytest.fixture(scope="module")
def square():
    """n = 37 on 2x4 Explicit: a general matrix, its Hermitian part, rank-9 product."""
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(50)
    a = random_matrix(rng, (N, N), np.float32)
    low = random_matrix(rng, (N, 9), np.float32) @ random_matrix(rng, (9, N), np.float32)
    return mesh, a, (a + a.T) / 2, low


def test_eigh_uplo_and_symmetrize(square):
    # jnp reads one triangle when symmetrize_input=False: junk in the other changes nothing
    mesh, _, h, _ = square
    junk = 100 * np.triu(random_matrix(np.random.default_rng(51), (N, N), np.float32), 1)
    tol = THRESHOLD * N * eps(np.float32) * np.linalg.norm(h, 2)
    ref = scipy.linalg.eigvalsh(h.astype(np.float64))
    for uplo, bad in ((None, junk), ("L", junk), ("U", junk.T)):
        lower = np.tril(h) if uplo != "U" else np.triu(h)
        x = place(lower + bad, mesh)
        w, v = linalg.eigh(x, UPLO=uplo, symmetrize_input=False)
        check_eigh(h, w, v)
        w2 = linalg.eigvalsh(x, uplo or "L", symmetrize_input=False)
        np.testing.assert_allclose(np.asarray(w2), ref, atol=tol, rtol=0)
    # symmetrize_input=True (the default) uses (a + aᴴ)/2, whatever UPLO says
    g = square[1]
    for uplo in (None, "L", "U"):
        w = linalg.eigvalsh(place(g, mesh), uplo or "L")
        np.testing.assert_allclose(np.asarray(w), ref, atol=tol, rtol=0)


def test_svd_arguments(square):
    mesh, a, h, _ = square
    x, xh = place(a, mesh), place(h, mesh)
    s_ref = scipy.linalg.svdvals(a.astype(np.float64))
    tol = THRESHOLD * N * eps(np.float32) * s_ref[0]
    s = linalg.svd(x, compute_uv=False)
    same_kind(s, jnp.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(np.asarray(s), s_ref, atol=tol, rtol=0)
    s = linalg.svd(x, False, False)  # positional full_matrices, compute_uv
    np.testing.assert_allclose(np.asarray(s), s_ref, atol=tol, rtol=0)
    # hermitian=True: jnp's values (|eigenvalues|, descending) and a valid factorisation
    u, s, vh = linalg.svd(xh, full_matrices=False, hermitian=True)
    same_kind((u, s, vh), jnp.linalg.svd(h, full_matrices=False, hermitian=True))
    check_svd(h, u, s, vh)
    np.testing.assert_allclose(np.asarray(linalg.svd(xh, compute_uv=False, hermitian=True)),
                               np.asarray(jnp.linalg.svd(h, compute_uv=False, hermitian=True)),
                               atol=tol, rtol=0)


def test_pinv_lstsq_rank_cond_norm_arguments(square):
    mesh, a, h, low = square
    e = eps(np.float32)
    x, xh, xl = place(a, mesh), place(h, mesh), place(low, mesh)
    s_low = scipy.linalg.svdvals(low.astype(np.float64))
    # rtol / rcond / tol / hermitian: the cut-off jnp applies, at a value that is not borderline
    cut = float(np.sqrt(s_low[8] * s_low[9]))  # between the 9 real values and the noise
    for kw in ({}, {"rtol": cut / s_low[0]}, {"rcond": cut / s_low[0]}):
        got = np.asarray(linalg.pinv(xl, **kw), np.float64)
        ref = np.asarray(jnp.linalg.pinv(jnp.asarray(low, jnp.float32), **kw), np.float64)
        assert np.linalg.norm(got - ref, 1) <= 1e-3 * np.linalg.norm(ref, 1), kw
    got = np.asarray(linalg.pinv(xh, hermitian=True), np.float64)
    ref = np.linalg.pinv(h.astype(np.float64), hermitian=True)
    assert np.linalg.norm(got - ref, 1) <= THRESHOLD * N * e * np.linalg.cond(h) * np.linalg.norm(
        ref, 1)
    assert int(linalg.matrix_rank(xl)) == 9 == int(jnp.linalg.matrix_rank(low))
    for kw in ({"rtol": cut}, {"tol": cut}, {"rtol": cut, "hermitian": False}):
        assert int(linalg.matrix_rank(xl, **kw)) == int(jnp.linalg.matrix_rank(low, **kw)), kw
    assert int(linalg.matrix_rank(xh, hermitian=True)) == N
    with pytest.raises(ValueError, match="only one of"):
        linalg.matrix_rank(xl, rtol=1.0, tol=1.0)
    with pytest.raises(ValueError, match="only one of"):
        linalg.pinv(xl, rtol=1.0, rcond=1.0)
    # lstsq: rcond (None, explicit, negative = eps), numpy_resid; b a vector or a matrix
    rng = np.random.default_rng(52)
    b = random_matrix(rng, (N, 3), np.float32)
    for rcond in (None, cut / s_low[0], -1.0):
        for numpy_resid in (False, True):
            got = linalg.lstsq(xl, place(b, mesh), rcond, numpy_resid=numpy_resid)
            ref = jnp.linalg.lstsq(low, b, rcond, numpy_resid=numpy_resid)
            same_kind(got, ref, (rcond, numpy_resid))
            assert int(got[2]) == int(ref[2]), (rcond, numpy_resid)
    got = linalg.lstsq(x, place(b[:, 0], mesh))
    ref = jnp.linalg.lstsq(a, b[:, 0])
    same_kind(got, ref)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref[0]),
                               atol=1e-3 * np.abs(np.asarray(ref[0])).max())
    # cond for every p jnp takes; norm for every ord / axis / keepdims. jnp's
    # references come from one jitted program (one compile, not one per case), and
    # so do distla's norms that are jnp's own reductions; the singular-value ones
    # (2, -2, "nuc") run eagerly, through the distributed svdvals
    a64 = a.astype(np.float64)
    ps = (None, 2, -2, 1, -1, np.inf, -np.inf, "fro")
    conds = jax.jit(lambda a: [jnp.linalg.cond(a, p) for p in ps])(a)
    for p, ref in zip(ps, conds):
        got = linalg.cond(x, p)
        same_kind(got, ref, p)
        np.testing.assert_allclose(float(got), np.linalg.cond(a64, p), rtol=2e-3, err_msg=str(p))
    cases = [(ord_, axis, keepdims)
             for ord_ in (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)
             for axis in (None, (0, 1), (1, 0), (-1, -2))
             for keepdims in (False, True)
             if not (axis is None and ord_ is not None and keepdims)]
    refs = jax.jit(lambda a: [jnp.linalg.norm(a, *case) for case in cases])(a)
    plain = [case for case in cases if case[0] not in (2, -2, "nuc")]
    in_jit = dict(zip(plain, jax.jit(lambda x: [linalg.norm(x, *case) for case in plain])(x)))
    for case, ref in zip(cases, refs):
        got = in_jit[case] if case in in_jit else linalg.norm(x, *case)
        same_kind(got, ref, case)
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-4, err_msg=str(case))
    for ord_ in (None, 0, 1, 2, -1, np.inf, 3.5):  # vector norms along one axis
        got = linalg.norm(x, ord_, axis=1)
        np.testing.assert_allclose(np.asarray(got), np.asarray(jnp.linalg.norm(a, ord_, axis=1)),
                                   rtol=1e-5, err_msg=str(ord_))


def test_polar_arguments(square):
    # every argument jax.scipy.linalg.polar takes; jax's own qdwh raises on eps (a static
    # argument it then traces) and on side="left" for square input, so the reference
    # is its method="svd"
    mesh, a, _, _ = square
    x = place(a, mesh)
    for kw in ({"method": "qdwh", "eps": 1e-6, "max_iterations": 20}, {"method": "svd"},
               {"max_iterations": 12}, {}):
        for side in ("right", "left"):
            u, p = linalg.polar(x, side, **kw)
            ru, rp = jax.scipy.linalg.polar(a, side, method="svd")
            same_kind((u, p), (ru, rp), (kw, side))
            check_polar(a, u, p, side)
            np.testing.assert_allclose(np.asarray(u), np.asarray(ru), atol=1e-4,
                                       err_msg=str((kw, side)))
    with pytest.raises(ValueError, match="side"):
        linalg.polar(x, "up")
    with pytest.raises(ValueError, match="method"):
        linalg.polar(x, method="newton")


# ------------------------------------------ cases from numpy, scipy and jax's own tests


def _special(a, h):
    eye = np.eye(N, dtype=np.float32)
    return {"identity": eye, "zeros": 0 * eye, "zero-diagonal": h - np.diag(np.diag(h)),
            "rank-one": np.outer(a[:, 0], a[0]), "tiny": 1e-30 * a, "huge": 1e30 * a}


@pytest.mark.parametrize("name", ["identity", "zeros", "zero-diagonal", "rank-one", "tiny",
                                  "huge"])
def test_eigh_special_matrices(square, name):
    # jax's linalg_test / scipy's test_decomp: identity (one eigenvalue n times), zero
    # matrix, zero diagonal, rank one; a scaled matrix meets the same (scale-free) ratios
    mesh, a, h, _ = square
    m = _special(a, h)[name]
    m = (m + m.T) / 2
    w, v = linalg.eigh(place(m, mesh))
    assert np.all(np.isfinite(np.asarray(v)))
    check_eigh(m, w, v)


@pytest.mark.parametrize("name", ["identity", "zero-diagonal", "zeros", "rank-one", "tiny"])
def test_svd_special_matrices(square, name):
    # numpy's test_linalg / scipy's test_decomp: zero, identity, rank one, tiny norm;
    # matrix_rank as jnp's
    mesh, a, h, _ = square
    m = _special(a, h)[name]
    x = place(m, mesh)
    u, s, vh = linalg.svd(x, full_matrices=False)
    assert np.all(np.isfinite(np.asarray(u))) and np.all(np.isfinite(np.asarray(vh)))
    check_svd(m, u, s, vh)
    assert int(linalg.matrix_rank(x)) == int(jnp.linalg.matrix_rank(m))


def test_pinv_of_zero_is_zero(square):
    mesh = square[0]
    zeros = place(np.zeros((N, N), np.float32), mesh)
    np.testing.assert_array_equal(np.asarray(linalg.pinv(zeros)), np.zeros((N, N)))
    assert int(linalg.matrix_rank(zeros)) == 0 == int(jnp.linalg.matrix_rank(np.zeros((N, N))))
