"""distla.linalg.qr: TSQR and blocked Householder against LAPACK's test ratios."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import THRESHOLD, eps, has_layout, place, random_matrix
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg
from distla._core.mesh import fitting_spec, grid_of
from distla.linalg import _qr


def _wide(x):
    x = np.asarray(x)
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def qr_ratios(a, q, r):
    """LAPACK's ``‖A − QR‖₁/(max(m,n)‖A‖₁eps)`` and ``‖I − QᴴQ‖₁/(m·eps)``."""
    a64, q64, r64 = _wide(a), _wide(q), _wide(r)
    m, n = a64.shape
    e = eps(np.asarray(q).dtype)
    norm = np.linalg.norm(a64, 1) or 1.0
    resid = np.linalg.norm(a64 - q64 @ r64, 1) / (max(m, n) * norm * e)
    orth = np.linalg.norm(np.eye(q64.shape[1]) - q64.conj().T @ q64, 1) / (m * e)
    return resid, orth


def check(a, q, r, mode="reduced"):
    ref_q, ref_r = jnp.linalg.qr(jnp.asarray(np.asarray(a)), mode=mode)
    assert q.shape == ref_q.shape and r.shape == ref_r.shape
    assert q.dtype == ref_q.dtype and r.dtype == ref_r.dtype
    r_np = np.asarray(r)
    assert np.all(np.tril(r_np, -1) == 0), "R is not exactly upper triangular"
    resid, orth = qr_ratios(a, q, r)
    assert resid <= THRESHOLD and orth <= THRESHOLD, (resid, orth)
    return resid, orth


def kinds(rng, m, n, dtype):
    """Gaussian, ill-conditioned (cond 1/sqrt(eps)), rank-deficient and graded matrices."""
    g = random_matrix(rng, (m, n), dtype)
    k = min(m, n)
    u, _ = np.linalg.qr(random_matrix(rng, (m, k), dtype))
    v, _ = np.linalg.qr(random_matrix(rng, (n, k), dtype))
    s = np.logspace(0, np.log10(np.sqrt(eps(dtype))), k)
    ill = (u * s) @ v.conj().T
    low = random_matrix(rng, (m, k // 3), dtype) @ random_matrix(rng, (k // 3, n), dtype)
    graded = g * np.logspace(0, -6, m)[:, None] * np.logspace(0, -3, n)[None, :]
    return {"gaussian": g, "ill": ill, "rank-deficient": low, "graded": graded}


# --------------------------------------------------------------------------- meshes


def test_every_mesh(mesh):
    # a size no mesh divides; the Householder kernel on every grid shape
    rng = np.random.default_rng(0)
    a = random_matrix(rng, (61, 45), np.float32)
    q, r = linalg.qr(place(a, mesh))
    check(a, q, r)
    for x in (q, r):
        assert x.sharding.mesh.shape == mesh.shape
        assert has_layout(x, mesh, fitting_spec(x.shape, mesh.abstract_mesh, P("x", "y")))


@pytest.mark.parametrize(
    "devices,kind", [(8, "explicit"), (4, "auto")], ids=["8-explicit", "4-auto"]
)
def test_tsqr_on_one_axis_meshes(devices, kind):
    mesh = build_mesh((devices,), kind, names=("x",))
    rng = np.random.default_rng(1)
    a = random_matrix(rng, (1001, 24), np.float32)  # rows the mesh does not divide
    x = jax.device_put(a, NamedSharding(mesh, P(None, None)))
    assert _qr.use_tsqr(*a.shape, devices, "reduced")
    q, r = linalg.qr(x)
    check(a, q, r)
    np.testing.assert_allclose(np.asarray(linalg.qr(x, mode="r")), np.asarray(r), rtol=0, atol=0)
    b = random_matrix(rng, (1024, 16), np.float32)
    q, r = linalg.qr(jax.device_put(b, NamedSharding(mesh, P("x", None))))
    assert has_layout(q, mesh, P("x", None))
    check(b, q, r)


def test_tsqr_on_the_rows_of_a_2d_mesh():
    mesh = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(2)
    a = random_matrix(rng, (512, 20), np.complex64)
    q, r = linalg.qr(place(a, mesh, P("x", None)))
    check(a, q, r)


# --------------------------------------------------------------------------- matrices


@pytest.mark.parametrize(
    "dtype,shape", [(np.float32, (96, 72)), (np.complex64, (40, 88))], ids=["tall-f32", "wide-c64"]
)
def test_hard_matrices(dtype, shape):
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(3)
    for name, a in kinds(rng, *shape, dtype).items():
        q, r = linalg.qr(place(a, mesh), block_size=8)
        try:
            check(a, q, r)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


@pytest.mark.parametrize("dtype", [np.complex128])
def test_double_precision(x64, dtype):
    mesh = build_mesh((4, 2), "auto")
    rng = np.random.default_rng(4)
    a = kinds(rng, 80, 64, dtype)["ill"]
    q, r = linalg.qr(place(a, mesh))
    assert q.dtype == dtype
    check(a, q, r)
    ints = np.arange(80 * 64).reshape(80, 64) % 5 - 2
    q, r = linalg.qr(place(ints, mesh))
    assert q.dtype == jnp.linalg.qr(ints)[0].dtype == np.float64
    check(ints.astype(np.float64), q, r)


@pytest.mark.parametrize(
    "shape,mode",
    [((70, 50), "complete"), ((50, 70), "r"), ((640, 8), "complete"), ((61, 45), "full")],
)
def test_modes_and_shapes(shape, mode):
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(5)
    a = random_matrix(rng, shape, np.float32)
    out = linalg.qr(place(a, mesh), mode=mode)
    ref = jnp.linalg.qr(a, mode=mode)
    if mode == "r":
        assert out.shape == ref.shape and out.dtype == ref.dtype
        np.testing.assert_allclose(np.abs(np.asarray(out)), np.abs(np.asarray(ref)), atol=2e-4)
        return
    assert isinstance(out, tuple) and len(out) == 2
    check(a, *out, mode="complete" if mode == "complete" else "reduced")


def _complete_q_in_place_shapes(mesh):
    """Tall shapes whose complete ``Q`` (``m x m``) has the factored ``h``'s padded shape
    but more columns than the panels reach: ``form_q`` works in place of ``h`` there, and
    the columns past the last panel start as the identity's (``h`` holds zeros)."""
    grid = grid_of(mesh, what="test")
    for m in range(5, 40):
        for n in range(1, m):
            nb, _, n_pad = _qr.blocking(grid, m, n)
            q_pad = -(-m // (nb * grid.pc)) * nb * grid.pc
            if not _qr.use_tsqr(m, n, mesh.size, "complete") and q_pad == n_pad:
                if -(-n // nb) * nb < m:
                    yield m, n


@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("shape", [(2, 4), (4, 2), (1, 8)])  # 2x2 and 8x1 never reach it
def test_complete_q_formed_in_place_has_its_last_columns(shape, kind):
    """The (8, 6) complete QR on 2x4 gave Q's last two columns as zeros (QᴴQ − I = 1)."""
    mesh = build_mesh(shape, kind)
    shapes = list(_complete_q_in_place_shapes(mesh))[:2]
    assert shapes, "no shape reaches form_q's in-place path on this mesh"
    rng = np.random.default_rng(11)
    for m, n in shapes:
        a = random_matrix(rng, (m, n), np.float32)
        check(a, *linalg.qr(place(a, mesh), mode="complete"), mode="complete")


# --------------------------------------------------------------------------- jnp's rules


def test_promotion_empty_and_fallback():
    mesh24 = build_mesh((2, 4), "explicit")
    ints = np.arange(61 * 45).reshape(61, 45) % 7 - 3
    q, r = linalg.qr(place(ints.astype(np.int32), mesh24))
    ref_q, ref_r = jnp.linalg.qr(ints)
    assert q.dtype == ref_q.dtype == r.dtype
    check(ints.astype(np.float32), q, r)
    with jax.numpy_dtype_promotion("strict"):
        flags = place(ints > 0, mesh24)
        assert linalg.qr(flags, mode="full")[1].dtype == jnp.float32
    for shape in [(0, 5), (5, 0), (3, 0, 4)]:
        for mode in ("reduced", "complete", "r"):
            got = linalg.qr(jnp.zeros(shape), mode=mode)
            ref = jnp.linalg.qr(jnp.zeros(shape), mode=mode)
            assert jax.tree.map(jnp.shape, got) == jax.tree.map(jnp.shape, ref)
    one = np.random.default_rng(6).standard_normal((9, 7)).astype(np.float32)
    check(one, *linalg.qr(one))  # unsharded: jnp itself
    raw = linalg.qr(place(one, mesh24), mode="raw")
    np.testing.assert_allclose(
        np.asarray(raw[1]), np.asarray(jnp.linalg.qr(one, "raw")[1]), rtol=1e-5
    )


def test_errors():
    mesh24 = build_mesh((2, 4), "explicit")
    a = place(np.ones((8, 8), np.float32), mesh24)
    with pytest.raises(ValueError, match="unsupported mode 'economic'"):
        linalg.qr(a, mode="economic")
    with pytest.raises(ValueError, match=r"shape \(\.\.\., m, n\); got a of shape \(8,\)"):
        linalg.qr(place(np.ones(8, np.float32), mesh24))
    with pytest.raises(ValueError, match="block_size must be a positive int"):
        linalg.qr(a, block_size=0)


def test_stacks_are_local_and_vmap_batches():
    mesh24 = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(7)
    a = random_matrix(rng, (12, 20, 9), np.float32)  # batch padded to 16 members
    x = place(a, mesh24, P(("x", "y"), None, None))
    q, r = linalg.qr(x)
    q_sharding = q.sharding
    q, r = np.asarray(q), np.asarray(r)
    for i in range(a.shape[0]):
        check(a[i], q[i], r[i])
    # 12 members do not split 8 ways: x arrived replicated, and comes back so, as jnp's
    assert q_sharding.spec == P(None, None, None)
    batch = NamedSharding(mesh24, P(("x", "y"), None, None))  # 16 members split 8 ways
    c = distla.cost(
        lambda x: linalg.qr(x), jax.ShapeDtypeStruct((16, 20, 9), jnp.float32, sharding=batch)
    )
    assert c.total_collective_bytes == 0
    vq, vr = jax.vmap(linalg.qr)(x)
    np.testing.assert_allclose(np.asarray(vr), np.asarray(r), atol=1e-5)
    assert jax.vmap(lambda y: linalg.qr(y, mode="r"))(x).shape == (12, 9, 9)


# --------------------------------------------------------------------------- derivatives


@pytest.mark.parametrize("shape", [(24, 16), (400, 6)], ids=["householder", "tsqr"])
def test_derivatives_match_jnp(shape):
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(8)
    a, da = rng.standard_normal(shape), rng.standard_normal(shape)

    def f(qr):  # invariant under the column signs of Q (TSQR's differ from LAPACK's)
        def g(x):
            q, r = qr(x)
            return jnp.sum(jnp.sin(q * q)) + jnp.sum(jnp.cos(r * r))

        return g

    def derivatives(qr, x, dx):
        tangent = jax.jvp(f(qr), (x,), (dx,))[1]
        grad = jax.grad(f(qr))(x)
        if shape[1] >= 8:
            return tangent, grad
        # second order on the cheaper (TSQR) program
        return tangent, grad, jax.grad(lambda x: jnp.sum(jax.grad(f(qr))(x) * dx))(x)

    with jax.enable_x64(True), jax.set_mesh(mesh):
        got = jax.jit(lambda x, dx: derivatives(linalg.qr, x, dx))(place(a, mesh), place(da, mesh))
        ref = derivatives(jnp.linalg.qr, a, da)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-8, atol=1e-10)
        # wide: jax's rule for m < n (the square block's rule, then dr2 = dqᴴ a2 + qᴴ da2)
        wide = jax.jvp(f(linalg.qr), (place(a.T, mesh),), (place(da.T, mesh),))[1]
        np.testing.assert_allclose(
            wide, jax.jvp(f(jnp.linalg.qr), (a.T,), (da.T,))[1], rtol=1e-8, atol=1e-10
        )
        # a tall matrix's complete QR: jax's rule for the last m - n columns of dq
        full = jax.jvp(
            lambda x: linalg.qr(x, mode="complete"), (place(a, mesh),), (place(da, mesh),)
        )[1]
        want = jax.jvp(lambda x: jnp.linalg.qr(x, mode="complete"), (a,), (da,))[1]
        # the last m - n columns of q are any orthonormal completion: compare dr, and dq
        # through the invariant (q dq)ᴴ-skew identity qᴴ dq + dqᴴ q = 0 on our own q
        np.testing.assert_allclose(full[1], want[1], rtol=1e-8, atol=1e-10)
        q_full = linalg.qr(place(a, mesh), mode="complete")[0]
        skew = np.asarray(q_full).T @ np.asarray(full[0])
        np.testing.assert_allclose(skew + skew.T, 0, atol=1e-9)
        if np.allclose(q_full, jnp.linalg.qr(a, mode="complete")[0], atol=1e-12):  # Householder
            np.testing.assert_allclose(full[0], want[0], rtol=1e-8, atol=1e-10)


# --------------------------------------------------------------------------- cost


def _abstract(mesh, shape, spec, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, spec))


@pytest.mark.parametrize(
    "grid,shape,spec,mode",
    [
        ((2, 4), (768, 768), P("x", "y"), "reduced"),
        ((2, 4), (768, 768), P("x", "y"), "r"),
        ((4, 2), (320, 448), P("x", "y"), "complete"),
        ((8,), (8192, 64), P("x", None), "reduced"),
        ((2, 4), (8192, 64), P(("x", "y"), None), "reduced"),
    ],
    ids=["2x4-reduced", "2x4-r", "4x2-complete", "tsqr-8", "tsqr-2x4"],
)
def test_cost_no_gathers_and_the_model(grid, shape, spec, mode):
    names = ("x", "y")[: len(grid)]
    mesh = build_mesh(grid, "explicit", names=names)
    a = _abstract(mesh, shape, spec)
    nb = 48 if len(grid) == 2 else None  # 768 = 16 blocks: the even all-to-all relayout
    c = distla.cost(lambda a: linalg.qr(a, mode=mode, block_size=nb), a)
    m, n = shape
    whole = m * n * 4
    p = mesh.size
    pr, pc = (grid[0], 1) if len(grid) == 1 else grid
    if _qr.use_tsqr(m, n, p, mode):
        # the R factors, or Q's local block moved to P(r, c) on a 2-axis mesh
        assert c.largest() <= max(p * n * n, m * n / p) * 4
        assert c.peak_memory_bytes <= 6 * whole / p + 4 * p * n * n * 4
    else:
        # the largest: a gathered panel, or a local block in the relayout (twice
        # it with empty slots when the blocks do not split evenly: kernels/cyclic.py)
        _, m_pad, n_pad = _qr.blocking(
            distla._core.mesh.grid_of(mesh.abstract_mesh, what="t"), m, n, nb
        )
        assert c.largest() <= max(m_pad * nb, 2 * m_pad * max(m_pad, n_pad) / p) * 4
        if m * n == m_pad * n_pad:  # about 8 local blocks: A, its working copy, R, Q, relayouts
            assert c.peak_memory_bytes <= (10 * m * n / p + 4 * m * nb) * 4
    assert c.largest() < whole / 2  # no collective carries a whole matrix
    model = linalg.qr_model_bytes(m, n, (pr, pc), np.float32, mode=mode, block_size=nb)
    assert 1 / 1.2 <= c.total_collective_bytes / model <= 1.2, (c.total_collective_bytes, model)


def test_compiled_program_does_not_grow_with_n():
    mesh = build_mesh((2, 4), "explicit")

    def size(n):
        a = _abstract(mesh, (n, n), P("x", "y"))
        return len(jax.jit(linalg.qr).lower(a).as_text())

    small, large = size(6144), size(12288)  # 32 and 64 panels, STAGES stages each
    assert large < 1.05 * small, (small, large)
