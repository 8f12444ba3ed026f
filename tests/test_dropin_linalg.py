"""distla.linalg as a drop-in for jnp.linalg / jax.scipy.linalg.

The cases are those of numpy's ``test_linalg.py``, scipy's ``test_decomp_lu.py``
and ``test_basic.py`` and jax's ``tests/linalg_test.py`` for det, slogdet, inv,
solve, lu, lu_factor and lu_solve, written again here against distla, with
``jax_numpy_dtype_promotion="strict"``: derivatives, dtypes and integer
inputs, zero-size inputs, arguments, layouts and errors. The core cases on
every mesh (2x4, 4x2 and 1-axis, Explicit and Auto, x64 on and off) are in
tests/test_dropin_linalg_meshes.py, a file of its own so that the two halves
can run on the two pytest-xdist workers at once. The reference is always the
one-device jax function (or numpy/scipy where jax agrees with them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import build_mesh
from helpers import close, place, put
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla import linalg

pytestmark = pytest.mark.usefixtures("strict_promotion")


@pytest.fixture
def m24():
    return build_mesh((2, 4), "explicit")


def _second(f, x, e):
    """The gradient of ``sum(grad f * e)``: a row of the Hessian (jax's issue-10 check)."""
    return np.asarray(jax.grad(lambda y: jnp.sum(jax.grad(f)(y) * e))(x))


def test_second_derivatives_of_det_and_slogdet(m24, x64):
    n = 3  # jnp's det takes its closed form at this order, distla its LU
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n))
    A = put(a, m24)
    e = np.zeros((n, n))
    e[0, 0] = 1.0
    with jax.set_mesh(m24):
        for f, ref in [
            (linalg.det, jnp.linalg.det),
            (lambda y: linalg.slogdet(y)[1], lambda y: jnp.linalg.slogdet(y)[1]),
        ]:
            got, want = _second(f, A, put(e, m24)), _second(ref, jnp.asarray(a), e)
            close(got, want, 1e-8 * max(1.0, float(np.abs(want).max())))
        # full Hessian-vector product of det against jax's
        v = rng.standard_normal((n, n))
        hvp = jax.jvp(jax.grad(linalg.det), (A,), (put(v, m24),))[1]
        hvp_ref = jax.jvp(jax.grad(jnp.linalg.det), (jnp.asarray(a),), (jnp.asarray(v),))[1]
        close(hvp, hvp_ref, 1e-8 * float(np.abs(hvp_ref).max()))


def test_det_grad_of_singular_matrices(m24):
    """jax testDetGradOfSingularMatrixCorank1 / Corank2: the adjugate, or zero."""
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 6)).astype(np.float32)
    corank1 = base.copy()
    corank1[-1] = corank1[0] + corank1[1]  # the zero pivot comes last
    corank2 = base.copy()
    corank2[-2:] = corank2[:2]
    with jax.set_mesh(m24):
        g1 = jax.grad(linalg.det)(put(corank1, m24))
        g2 = jax.grad(linalg.det)(put(corank2, m24))
    want1 = jax.grad(jnp.linalg.det)(jnp.asarray(corank1))
    assert np.isfinite(np.asarray(g1)).all()
    close(g1, want1, 2e-3 * float(np.abs(want1).max()))
    np.testing.assert_array_equal(np.asarray(g2), np.zeros((6, 6)))


def test_overflow_and_inf_as_jnp(m24):
    big = (np.eye(6) * 1e9).astype(np.complex64)  # det 1e54 overflows complex64
    big[0, 1] = 1.0
    d = complex(linalg.det(put(big, m24)))
    d_ref = complex(jnp.linalg.det(jnp.asarray(big)))
    assert np.isinf(d.real)
    np.testing.assert_equal(d, d_ref)  # jnp: inf + nan j here (inf * (1 + 0j))
    real_big = (np.eye(6) * 1e9).astype(np.float32)
    with jax.set_mesh(m24):
        g = jax.grad(linalg.det)(put(real_big, m24))
    np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.grad(jnp.linalg.det)(real_big)))
    with_inf = np.eye(6, dtype=np.float32)
    with_inf[2, 3] = np.inf
    sign, logabs = linalg.slogdet(put(with_inf, m24))
    sign_r, logabs_r = jnp.linalg.slogdet(with_inf)
    assert float(sign) == float(sign_r) == 1.0
    np.testing.assert_equal(float(logabs), float(logabs_r))


def test_lu_is_differentiable_as_jax(m24):
    rng = np.random.default_rng(4)
    a, da = rng.standard_normal((2, 8, 8)).astype(np.float32)
    with jax.set_mesh(m24):
        _, (_, dl, du) = jax.jvp(linalg.lu, (put(a, m24),), (put(da, m24),))
        g = jax.grad(lambda y: jnp.sum(linalg.lu(y)[2] ** 2))(put(a, m24))
    _, (_, dl_r, du_r) = jax.jvp(jsl.lu, (jnp.asarray(a),), (jnp.asarray(da),))
    g_r = jax.grad(lambda y: jnp.sum(jsl.lu(y)[2] ** 2))(jnp.asarray(a))
    close(dl, dl_r, 2e-3)
    close(du, du_r, 2e-3)
    close(g, g_r, 2e-3 * float(np.abs(g_r).max()))


# ----------------------------------------------------------------- items 3, 5: dtypes


@pytest.mark.parametrize("x64", [False, True], ids=["x32", "x64"])
def test_strict_promotion_and_integer_inputs(m24, x64):
    rng = np.random.default_rng(1)
    with jax.enable_x64(x64):
        a = (rng.standard_normal((16, 16)) + 4 * np.eye(16)).astype(np.float32)
        A = put(a, m24)
        with jax.set_mesh(m24):
            lu_piv = linalg.lu_factor(A)
            for got, want in [
                (linalg.inv(A), jnp.linalg.inv(a)),
                (
                    linalg.solve(A, put(np.ones(16, np.float32), m24)),
                    jnp.linalg.solve(a, np.ones(16, np.float32)),
                ),
                (
                    linalg.lu_solve(lu_piv, put(np.ones((16, 3), np.float32), m24)),
                    jsl.lu_solve(jsl.lu_factor(a), np.ones((16, 3), np.float32)),
                ),
            ]:
                assert got.dtype == want.dtype
                close(got, want, 1e-4)
            if not x64:  # the complex gradient that strict promotion broke
                ca = put(a.astype(np.complex64), m24)
                g = jax.grad(lambda y: linalg.slogdet(y)[1])(ca)
                g_r = jax.grad(lambda y: jnp.linalg.slogdet(y)[1])(jnp.asarray(a, np.complex64))
                close(g, g_r, 1e-4)
        # integers and bools promote as jnp.linalg does (int64 to float64 with x64)
        ints = (np.arange(256).reshape(16, 16) % 7 + 9 * np.eye(16)).astype(np.int32)
        for ints in (ints.astype(np.int64),) if x64 else (ints,):
            got, want = linalg.det(put(ints, m24)), jnp.linalg.det(jnp.asarray(ints))
            assert got.dtype == want.dtype
            close(got, want, 1e-3 * max(1.0, abs(float(want))))
        if not x64:
            small = put(np.array([[1, 2], [3, 4]]), m24)
            assert float(linalg.det(small)) == pytest.approx(-2.0)
            boolean = np.eye(16, dtype=bool)
            got = linalg.inv(put(boolean, m24))
            assert got.dtype == jnp.linalg.inv(boolean).dtype
            close(got, np.eye(16), 1e-6)
        # mixed kinds fail under strict promotion exactly where jnp fails
        with pytest.raises(jax.dtypes.TypePromotionError):
            linalg.solve(A, put(np.ones(16, np.int32), m24))
        with pytest.raises(jax.dtypes.TypePromotionError):
            jnp.linalg.solve(a, np.ones(16, np.int32))


# ----------------------------------------------------------------- zero-size


def test_zero_size_inputs_give_what_jnp_gives(m24):
    empty = put(np.zeros((0, 0), np.float32), m24)
    assert float(linalg.det(empty)) == 1.0
    assert tuple(map(float, linalg.slogdet(empty))) == (1.0, 0.0)
    assert linalg.inv(empty).shape == (0, 0)
    assert linalg.solve(empty, put(np.zeros((0,), np.float32), m24)).shape == (0,)
    assert [x.shape for x in linalg.lu(empty)] == [(0, 0)] * 3
    assert [x.shape for x in linalg.lu_factor(empty)] == [(0, 0), (0,)]
    stack = put(np.zeros((3, 0, 0), np.float32), m24)
    np.testing.assert_array_equal(np.asarray(linalg.det(stack)), np.ones(3))
    a = put(np.eye(8, dtype=np.float32), m24)
    assert linalg.solve(a, put(np.zeros((8, 0), np.float32), m24)).shape == (8, 0)
    assert linalg.lu_solve(linalg.lu_factor(a), put(np.zeros((8, 0)), m24)).shape == (8, 0)
    c = distla.matmul(put(np.zeros((8, 0), np.float32), m24), put(np.zeros((0, 8)), m24))
    np.testing.assert_array_equal(np.asarray(c), np.zeros((8, 8)))
    x = linalg.solve(
        put(np.zeros((8, 0, 0), np.float32), m24), put(np.zeros((8, 0, 2), np.float32), m24)
    )
    assert x.shape == (8, 0, 2) and np.asarray(x).size == 0


# ----------------------------------------------------------------- items 6, 7: arguments


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_zero_size_stacks_come_back_where_jnp_puts_them(kind):
    # an empty stack split over its batch axis: the results in jnp's layout (on an
    # Explicit mesh the type jax gives, on an Auto mesh replicated on the mesh), so that
    # `a @ x - b` works after distla's solve as after jnp's, eagerly and under jit
    mesh = build_mesh((2, 4), kind)
    a, b = (
        jax.device_put(np.zeros(shape, np.float32), NamedSharding(mesh, P("x")))
        for shape in ((0, 5, 5), (0, 5, 2))
    )
    calls = {
        "solve": (linalg.solve, jnp.linalg.solve, (a, b)),
        "solve_triangular": (linalg.solve_triangular, jsl.solve_triangular, (a, b)),
        "det": (linalg.det, jnp.linalg.det, (a,)),
        "cholesky": (linalg.cholesky, jnp.linalg.cholesky, (a,)),
        "pinv": (linalg.pinv, jnp.linalg.pinv, (a,)),
    }
    for name, (fn, ref, args) in calls.items():
        got, want = fn(*args), ref(*args)
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert got.sharding == want.sharding, (name, got.sharding, want.sharding)
    (a @ linalg.solve(a, b) - b).block_until_ready()
    jax.jit(lambda a, b: a @ linalg.solve(a, b) - b)(a, b).block_until_ready()
    for name, (fn, ref, args) in calls.items():  # traced, with no mesh in context (on an
        # Auto mesh a traced empty result stays unsharded: nothing in its type says where)
        got, want = jax.jit(fn)(*args), jax.jit(ref)(*args)
        assert got.shape == want.shape, name
        if kind == "explicit":
            assert got.sharding.is_equivalent_to(want.sharding, got.ndim), name


def test_lu_solve_broadcasts_as_jax(m24):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((8, 8)) + 3 * np.eye(8)).astype(np.float32)
    b = rng.standard_normal((3, 8, 2)).astype(np.float32)
    with jax.set_mesh(m24), jax.numpy_rank_promotion("allow"):  # jax broadcasts only so
        got = linalg.lu_solve(linalg.lu_factor(put(a, m24)), put(b, m24))
        close(got, jsl.lu_solve(jsl.lu_factor(a), b), 1e-4)
    stack = (rng.standard_normal((4, 8, 8)) + 3 * np.eye(8)).astype(np.float32)
    sa = place(stack, m24, P("x"))
    with jax.numpy_rank_promotion("allow"):
        got = linalg.lu_solve(linalg.lu_factor(sa), put(b[0, :, 0], m24))
        close(got, jsl.lu_solve(jsl.lu_factor(stack), b[0, :, 0]), 1e-4)


def test_scipy_and_numpy_arguments_are_accepted(m24):
    """scipy test_basic TestSolve (assume_a, lower), jax testSlogdet(method=)."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((8, 8)).astype(np.float32)
    spd = (a @ a.T + 8 * np.eye(8)).astype(np.float32)
    b = rng.standard_normal((8, 2)).astype(np.float32)
    A, B = put(spd, m24), put(b, m24)
    for assume_a in ("gen", "sym", "her", "pos"):
        for lower in (False, True):
            # only the triangle named by lower is read with "pos", as in jax.scipy
            given = np.tril(spd) if (assume_a == "pos" and lower) else spd
            got = linalg.solve(
                put(given, m24),
                B,
                assume_a=assume_a,
                lower=lower,
                overwrite_a=True,
                overwrite_b=True,
                check_finite=False,
            )
            close(got, jsl.solve(given, b, assume_a=assume_a, lower=lower), 1e-4)
    with pytest.raises(ValueError, match="assume_a must be one of"):
        linalg.solve(A, B, assume_a="banded")
    # scipy's positional order, and scipy's flags on inv and det
    close(
        linalg.solve(put(np.tril(spd), m24), B, True, False, False, False, True, "pos"),
        jsl.solve(np.tril(spd), b, True, assume_a="pos"),
        1e-4,
    )
    close(linalg.inv(A, False, True), jsl.inv(spd, False, True), 1e-4)
    close(linalg.det(A, overwrite_a=True, check_finite=False), jsl.det(spd), 1e-3)
    # a stack of vectors for the Cholesky path, as jax.scipy reads it
    stack = np.stack([spd, 2 * spd]).astype(np.float32)
    vectors = rng.standard_normal((2, 8)).astype(np.float32)
    got = linalg.solve(place(stack, m24, P("x")), place(vectors, m24, P("x")), assume_a="pos")
    want = np.linalg.solve(stack.astype(np.float64), vectors[..., None].astype(np.float64))
    close(got, want[..., 0], 1e-4)
    # rectangular stacks: jax's own lu_factor, where they lie
    tall = rng.standard_normal((2, 8, 4)).astype(np.float32)
    lu, piv = linalg.lu_factor(place(tall, m24, P("x")))
    want_lu, want_piv = jsl.lu_factor(tall)
    close(lu, want_lu, 1e-5)
    np.testing.assert_array_equal(np.asarray(piv), np.asarray(want_piv))
    for method in (None, "lu", "qr"):
        close(linalg.slogdet(A, method=method)[1], jnp.linalg.slogdet(spd)[1], 1e-4)
    with pytest.raises(ValueError, match="unknown method 'svd'"):
        linalg.slogdet(A, method="svd")


# ----------------------------------------------------------------- items 8, 10: layouts, vmap


def test_batched_results_in_the_callers_layout():
    mesh = build_mesh((4, 2), "explicit", names=("rows", "cols"))
    rng = np.random.default_rng(9)
    a = (rng.standard_normal((8, 6, 6)) + 6 * np.eye(6)).astype(np.float32)
    b = rng.standard_normal((8, 6, 2)).astype(np.float32)
    row = NamedSharding(mesh, P("rows"))
    A, B = jax.device_put(a, row), jax.device_put(b, row)
    x = linalg.solve(A, B)
    assert x.sharding.spec == P("rows", None, None)
    with jax.set_mesh(mesh):
        residual = jnp.matmul(A, x) - B  # the first thing a user does with x
        assert float(jnp.abs(residual).max()) < 1e-4
        assert jax.typeof(residual).sharding.spec == jax.typeof(B).sharding.spec
        inv = jax.vmap(linalg.inv)(A)
    close(inv, np.linalg.inv(a), 1e-4)
    assert inv.sharding.spec == P("rows", None, None)
    assert linalg.det(A).sharding.spec == P("rows")
    # the stacked Cholesky, eigvalsh and QR compute on every device, and return the
    # caller's layout too
    spd = jax.device_put(a @ np.swapaxes(a, -1, -2), row)
    c = linalg.cholesky(spd)
    w = linalg.eigvalsh(spd)
    q = linalg.qr(A)[0]
    assert c.sharding.spec == q.sharding.spec == P("rows", None, None)
    assert w.sharding.spec == P("rows", None)
    close(c - spd, np.linalg.cholesky(np.asarray(spd)) - np.asarray(spd), 1e-4)
    replicated = jax.device_put(a @ np.swapaxes(a, -1, -2), NamedSharding(mesh, P()))
    assert linalg.cholesky(replicated).sharding.spec == P(None, None, None)


def test_tensorinv_of_a_higher_rank_array_on_an_explicit_mesh(m24):
    """The matrix's inverse is reshaped back by XLA (no sharding rule splits its blocks)."""
    rng = np.random.default_rng(10)
    a = (rng.standard_normal((8, 8)) + 8 * np.eye(8)).astype(np.float32)
    for shape, ind in (((2, 4, 2, 4), 2), ((8, 2, 4), 1)):
        got = linalg.tensorinv(put(a.reshape(shape), m24), ind=ind)
        close(got, jnp.linalg.tensorinv(a.reshape(shape), ind=ind), 1e-4)


# ----------------------------------------------------------------- errors


def test_errors_say_what_was_received_and_the_fix(m24):
    a = put(np.eye(8, dtype=np.float32), m24)
    with pytest.raises(ValueError, match="precision must be .*got 'bogus'"):
        distla.matmul(a, a, precision="bogus")
    assert distla.shard(np.ones((8, 8)), m24, ("x", "y")).sharding.spec == P("x", "y")
    with pytest.raises(ValueError, match="got the string 'x'.*PartitionSpec"):
        distla.shard(np.ones((8, 8)), m24, "x")
    for bad, kind, match in [
        ((-2, -4), ValueError, "positive int.*-2"),
        (8, TypeError, r"got the int 8.*\(8,\)"),
        ((2.5, 4), ValueError, r"positive int.*2\.5"),
    ]:
        with pytest.raises(kind, match=match):
            distla.make_mesh(bad)
    with pytest.raises(ValueError, match="devices is empty"):
        distla.make_mesh(None, devices=[])
    with pytest.raises(ValueError, match="a device twice"):
        distla.make_mesh((2, 4), devices=jax.devices()[:4] * 2)
    # an array of devices, as a mesh holds them: row-major
    grid = distla.make_mesh((2, 4)).devices
    assert distla.make_mesh((4, 2), devices=grid).devices.flat[3] == grid.flat[3]
    with pytest.raises(ValueError, match="axis_names must differ"):
        distla.make_mesh((2, 4), ("a", "a"))
    with pytest.raises(ValueError, match="needs 16 devices; 8 given. Start jax with more"):
        distla.make_mesh((2, 8))
    lu_, piv = linalg.lu_factor(a)
    with pytest.raises(TypeError, match=r"pair \(lu, piv\).*lu_solve\(lu_factor\(a\), b\)"):
        linalg.lu_solve(lu_, a)
    # a one-device right-hand side is moved onto the mesh, as jnp does
    one = jax.device_put(np.ones(8, np.float32), jax.devices()[0])
    close(linalg.solve(a, one), np.ones(8), 1e-6)
    close(linalg.lu_solve((lu_, piv), one), np.ones(8), 1e-6)
    close(
        distla.matmul(a, jax.device_put(np.ones((8, 8), np.float32), jax.devices()[0])),
        np.ones((8, 8)),
        1e-6,
    )


def test_bad_shapes_raise_what_jnp_raises(m24):
    """A wrong shape raises a ValueError naming it, which is also a TypeError: jnp raises
    one or the other for the same shapes, and either ``except`` must catch distla's."""
    sq, rect, vec, b5 = (
        put(np.asarray(x, np.float32), m24)
        for x in (np.eye(8) + 1, np.ones((4, 6)), np.ones(8), np.ones((5, 2)))
    )
    b4 = put(np.ones(4, np.float32), m24)
    cases = [
        (name, x)
        for name in (
            "cholesky",
            "eigh",
            "eigvalsh",
            "det",
            "slogdet",
            "inv",
            "svd",
            "svdvals",
            "qr",
            "pinv",
            "cond",
        )
        for x in (rect, vec)
        if not (name in ("svd", "svdvals", "qr", "pinv", "cond") and x is rect)
    ]
    calls = [(f"{n}{x.shape}", getattr(jnp.linalg, n), getattr(linalg, n), (x,)) for n, x in cases]
    calls += [
        ("solve", jnp.linalg.solve, linalg.solve, (sq, b5)),
        ("solve rect", jnp.linalg.solve, linalg.solve, (rect, b4)),
        ("lstsq", jnp.linalg.lstsq, linalg.lstsq, (sq, b5)),
        ("matmul", jnp.linalg.matmul, linalg.matmul, (sq, b5)),
        ("distla.matmul", jnp.matmul, distla.matmul, (sq, b5)),
        ("multi_dot", jnp.linalg.multi_dot, linalg.multi_dot, ([sq, b5],)),
        ("solve_triangular", jsl.solve_triangular, linalg.solve_triangular, (sq, b5)),
        ("lu_factor", jsl.lu_factor, linalg.lu_factor, (vec,)),
        ("lu", jsl.lu, linalg.lu, (vec,)),
        ("cho_factor", jsl.cho_factor, linalg.cho_factor, (rect,)),
        ("expm", jsl.expm, linalg.expm, (rect,)),
        ("polar", jsl.polar, linalg.polar, (vec,)),
    ]
    for name, ref, fn, args in calls:
        with pytest.raises((ValueError, TypeError)) as want:
            ref(*args)
        with pytest.raises(want.type, match=r"shape|dimension") as got:
            fn(*args)
        # a ValueError as documented, and a TypeError, whatever jnp raised
        assert isinstance(got.value, ValueError) and isinstance(got.value, TypeError), name


def test_matmul_dtypes_as_jnp(m24):
    """numpy's matmul tests: integer products stay integer, bool products are and/or."""
    rng = np.random.default_rng(8)
    ints = rng.integers(-5, 5, (8, 8)).astype(np.int32)
    c = distla.matmul(put(ints, m24), put(ints, m24))
    assert c.dtype == jnp.matmul(ints, ints).dtype
    np.testing.assert_array_equal(np.asarray(c), ints @ ints)
    bools = ints > 0
    c = distla.matmul(put(bools, m24), put(~bools, m24))
    assert c.dtype == np.dtype(bool)
    np.testing.assert_array_equal(np.asarray(c), bools @ ~bools)
    with pytest.raises(jax.dtypes.TypePromotionError):
        distla.matmul(put(ints, m24), put(ints.astype(np.float32), m24))


def test_new_paths_gather_no_whole_matrix(m24):
    """Rectangular lu_factor and lu_solve of a stack of right-hand sides stay distributed."""
    n = 256

    def abstract(shape):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(m24, P("x", "y")))

    cost = distla.cost(linalg.lu_factor, abstract((n, n // 2)))
    whole = n * n // 2 * 4
    # it runs as the padded n x n LU: no collective moves as much as the matrix
    assert cost.largest() < whole, cost
    assert cost.peak_memory_bytes < 4 * (n * n * 4 / 8 + n * 128 * 4), cost
    lu_ = abstract((n, n))
    piv = jax.ShapeDtypeStruct((n,), jnp.int32, sharding=NamedSharding(m24, P()))
    b = jax.ShapeDtypeStruct((4, n, 8), jnp.float32, sharding=NamedSharding(m24, P(None, "x")))
    cost = distla.cost(lambda lu_, piv, b: linalg.lu_solve((lu_, piv), b), lu_, piv, b)
    assert cost.largest() < n * n * 4 / 2, cost
