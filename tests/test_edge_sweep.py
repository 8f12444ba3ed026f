"""Every public function at the edges, each case compared with jnp on one device.

Each public function of ``distla``, ``distla.linalg`` and ``distla.fft`` meets
every class of edge (``test_every_public_function_is_swept`` keeps the list
whole):

- size: 7, a prime that the 2x4 mesh does not divide (padded inside, the
  largest even layout outside), 1 (with the library's default plan, as a
  user gets it: one device) and 0;
- scale: the matrix times 1e-30, 1 or 1e30 (all inside float32's range);
- non-finite: one NaN below the diagonal, one inf on it; and, drawn by
  hypothesis, a NaN or inf anywhere for the functions whose answer depends on
  where it lands.

The reference is jnp's (or jax.scipy's) function on one device, on the same
host data: shapes and dtypes as jnp's, values within LAPACK-style tolerances
(``30 · n · eps`` times the condition of the well-conditioned test matrices,
relative to the largest entry) where jnp's are finite, non-finite where jnp's
are. Where distla differs from jnp on purpose (docs/caveats.md) the documented
behaviour is asserted, and jnp's own where it is the point.

Other meshes, dtypes and sizes are the families' own test files' (and
``test_edges.py``'s): this sweep stays cheap on purpose. One mesh (2x4,
``Explicit``: where jnp refuses most), float32, and the same shapes for every
case, so that a function compiles its programs once per size and each further
case of that size runs them again.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from helpers import place
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax.sharding import PartitionSpec as P

import distla
import distla.fft as dfft
import distla.linalg as dl

DTYPE = np.float32
PRIME = 7


@dataclasses.dataclass(frozen=True)
class Case:
    """One edge: the size ``n``, the scale, and a non-finite entry ``bad`` at ``pos``."""

    n: int
    scale: float = 1.0
    bad: str = "none"  # "none", "nan" or "inf"
    pos: tuple = ()


CASES = {
    "prime": Case(PRIME),
    "prime-1e-30": Case(PRIME, scale=1e-30),
    "prime-1e30": Case(PRIME, scale=1e30),
    "prime-nan": Case(PRIME, bad="nan", pos=(5, 3)),  # below the diagonal
    "prime-inf": Case(PRIME, bad="inf", pos=(1, 1)),  # on it
    "one": Case(1),
    "one-nan": Case(1, bad="nan", pos=(0, 0)),
    "zero": Case(0),
}


@pytest.fixture(scope="module")
def mesh():
    """The sweep's one mesh: 2x4, Explicit axes."""
    return build_mesh((2, 4), "explicit")


def _bad_value(c):
    return np.nan if c.bad == "nan" else np.inf


def _matrix(c, *, spd=False, seed=0, dtype=DTYPE):
    """The case's well-conditioned matrix (or Hermitian positive definite one),
    scaled, with its non-finite entry."""
    n = c.n
    x = np.random.default_rng(seed + n).standard_normal((n, n))
    if spd:
        a = x @ x.T / max(n, 1) + np.eye(n)
    else:
        a = x / np.sqrt(max(n, 1)) + 3 * np.eye(n)
    a = (a * c.scale).astype(dtype)
    if c.bad != "none":
        a[c.pos] = _bad_value(c)
    return a


def _rhs(c, mesh, k=2):
    """An (n, k) right-hand side of small integers, rows split where they divide."""
    b_np = (np.arange(c.n * k).reshape(c.n, k) % 3 + 1).astype(DTYPE)
    return b_np, place(b_np, mesh, P("x", None))


def _tol(c, cond):
    return 30 * max(c.n, 1) * float(np.finfo(DTYPE).eps) * cond


def _compare(got, ref, c, *, cond=10.0, where=""):
    """Shapes and dtypes as jnp's; values where jnp's are finite; non-finite where jnp's are."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (
        where,
        got.shape,
        ref.shape,
        got.dtype,
        ref.dtype,
    )
    fin = np.isfinite(ref)
    assert not np.isfinite(got[~fin]).any(), f"{where}: finite where jnp's is not"
    if fin.any():
        scale = np.abs(ref[fin]).max()
        err = np.abs(got[fin].astype(np.complex128) - ref[fin]).max()
        tiny = float(np.finfo(ref.dtype).tiny) if np.issubdtype(ref.dtype, np.inexact) else 0.0
        assert err <= _tol(c, cond) * scale + tiny, (where, err, scale)


def _compare_leaves(got, ref, c, *, cond=10.0, where=""):
    got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got) == len(ref), where
    for g, r in zip(got, ref):
        _compare(g, r, c, cond=cond, where=where)


# Every swept public name, as "module.name", with the check that sweeps it:
# ``check(name, case, mesh)``.
CHECKS = {}


def sweeps(*names):
    def register(check):
        for name in names:
            assert name not in CHECKS, name
            CHECKS[name] = check
        return check

    return register


# ---------------------------------------------------------------- the LU family


@sweeps(
    "linalg.det",
    "linalg.slogdet",
    "linalg.inv",
    "linalg.solve",
    "linalg.lu_solve",
    "linalg.tensorinv",
    "linalg.tensorsolve",
    "linalg.matrix_power",
)
def _lu_values(name, c, mesh):
    a_np = _matrix(c)
    a = place(a_np, mesh)
    b_np, b = _rhs(c, mesh)
    fn = name.split(".")[1]
    if fn == "solve":
        got, ref = dl.solve(a, b), jnp.linalg.solve(a_np, b_np)
    elif fn == "lu_solve":
        got = dl.lu_solve(dl.lu_factor(a), b)
        ref = jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(a_np), b_np)
    elif fn == "tensorinv":
        got, ref = dl.tensorinv(a, ind=1), jnp.linalg.tensorinv(a_np, ind=1)
    elif fn == "tensorsolve":
        v = place(b_np[:, 0], mesh, P("x"))
        got, ref = dl.tensorsolve(a, v), jnp.linalg.tensorsolve(a_np, b_np[:, 0])
    elif fn == "matrix_power":
        for k in (0, 3, -2):
            _compare(
                dl.matrix_power(a, k),
                jnp.linalg.matrix_power(a_np, k),
                c,
                cond=30.0,
                where=f"{name}({k}) {c}",
            )
        return
    else:
        got, ref = getattr(dl, fn)(a), getattr(jnp.linalg, fn)(a_np)
    _compare_leaves(got, ref, c, where=f"{name} {c}")


@sweeps("linalg.lu", "linalg.lu_factor")
def _lu_factors(name, c, mesh):
    a_np = _matrix(c)
    fn = name.split(".")[1]
    got = jax.tree.leaves(getattr(dl, fn)(place(a_np, mesh)))
    ref = jax.tree.leaves(getattr(jax.scipy.linalg, fn)(a_np))
    assert len(got) == len(ref)
    if c.bad == "none":
        for g, r in zip(got, ref):
            _compare(g, r, c, where=f"{name} {c}")
        return
    # where a NaN/inf lands depends on the pivots that it disturbs: the
    # factors are non-finite where jnp's are, somewhere
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (name, c)
        assert np.isfinite(g).all() == np.isfinite(r).all(), (name, c)


# ---------------------------------------------------------------- Cholesky


@sweeps("linalg.cholesky")
def _cholesky(name, c, mesh):
    a_np = _matrix(c, spd=True)
    got, ref = np.asarray(dl.cholesky(place(a_np, mesh))), np.asarray(jnp.linalg.cholesky(a_np))
    assert got.shape == ref.shape and got.dtype == ref.dtype
    # docs/caveats.md: the columns before the first one a NaN/inf reaches are
    # jnp's, and from that one on the triangle is not finite
    bad = ~np.isfinite(ref)
    first = int(np.argmax(bad.any(0))) if bad.any() else c.n
    _compare(got[:, :first], ref[:, :first], c, where=f"{name} {c}")
    if first < c.n:
        assert not np.isfinite(got[first:, first]).all(), (name, c)


@sweeps("linalg.cho_factor", "linalg.cho_solve")
def _cho(name, c, mesh):
    a_np = _matrix(c, spd=True)
    a = place(a_np, mesh)
    b_np, b = _rhs(c, mesh)
    factor, low = dl.cho_factor(a, lower=True)
    factor_ref, _ = jax.scipy.linalg.cho_factor(a_np, lower=True)
    assert low is True
    if name.endswith("cho_solve"):
        got = dl.cho_solve((factor, low), b)
        ref = jax.scipy.linalg.cho_solve((factor_ref, True), b_np)
    else:  # the lower triangle is the factor; the other one is left alone
        got, ref = np.tril(np.asarray(factor)), np.tril(np.asarray(factor_ref))
    if c.bad == "none":
        _compare(got, ref, c, where=f"{name} {c}")
    else:  # docs/caveats.md: NaN/inf reach the result, not always where jnp's do
        got, ref = np.asarray(got), np.asarray(ref)
        assert got.shape == ref.shape and got.dtype == ref.dtype
        assert np.isfinite(got).all() == np.isfinite(ref).all(), (name, c)


# ---------------------------------------------------------------- triangular, QR


@sweeps("linalg.solve_triangular")
def _solve_triangular(name, c, mesh):
    # the whole matrix goes in: only the named triangle is read (the NaN below the
    # diagonal reaches the lower solve only)
    a_np = _matrix(c)
    b_np, b = _rhs(c, mesh)
    a = place(a_np, mesh)
    for lower in (True, False):
        got = dl.solve_triangular(a, b, lower=lower)
        ref = jax.scipy.linalg.solve_triangular(a_np, b_np, lower=lower)
        _compare(got, ref, c, where=f"{name} lower={lower} {c}")


@sweeps("linalg.qr")
def _qr(name, c, mesh):
    a_np = _matrix(c)
    a = place(a_np, mesh)
    for mode in ("reduced", "complete", "r", "raw"):
        got, ref = dl.qr(a, mode=mode), jnp.linalg.qr(a_np, mode=mode)
        where = f"{name} mode={mode} {c}"
        if mode == "raw":  # LAPACK's Householder form: jax's own geqrf, gathered
            _compare_leaves(got, ref, c, where=where)
            continue
        got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
        r, r_ref = np.asarray(got[-1]), np.asarray(ref[-1])
        assert r.shape == r_ref.shape and r.dtype == r_ref.dtype, where
        # docs/caveats.md: R's columns before the first one a NaN/inf reaches are
        # jnp's, and from that one on R is not finite
        bad = ~np.isfinite(r_ref)
        first = int(np.argmax(bad.any(0))) if bad.any() else r.shape[1]
        # R's rows are unique up to sign (Q's columns with them): |R| is jnp's
        _compare(np.abs(r[:, :first]), np.abs(r_ref[:, :first]), c, where=where)
        if first < r.shape[1]:
            assert not np.isfinite(r[:, first]).all(), where
        if mode != "r" and c.bad == "none":
            q = np.asarray(got[0])
            assert q.shape == ref[0].shape and q.dtype == ref[0].dtype, where
            _compare(q @ r, a_np, c, where=where)


# ---------------------------------------------------------------- products and norms


@sweeps("distla.matmul", "linalg.matmul", "linalg.multi_dot", "linalg.tensordot")
def _products(name, c, mesh):
    a_np, b_np = _matrix(c), _matrix(c, seed=1)
    a, b = place(a_np, mesh), place(b_np, mesh)
    if name == "distla.matmul":
        pairs = [(distla.matmul(a, b), jnp.matmul(a_np, b_np))]
    elif name == "linalg.matmul":
        pairs = [(dl.matmul(a, b), jnp.matmul(a_np, b_np))]
    elif name == "linalg.multi_dot":
        pairs = [(dl.multi_dot([a, b, a]), jnp.linalg.multi_dot([a_np, b_np, a_np]))]
    else:
        pairs = [
            (dl.tensordot(a, b, axes=k), jnp.linalg.tensordot(a_np, b_np, axes=k)) for k in (1, 2)
        ]
    for got, ref in pairs:
        _compare(got, ref, c, cond=30.0, where=f"{name} {c}")


def _tall(c, seed=0):
    """An ``(8, n)`` matrix of the case's entries (its matrix repeated, scale and non-finite
    entry kept), whose rows the mesh splits whatever ``n``."""
    return np.resize(_matrix(c, seed=seed), (8, c.n))


@sweeps("linalg.diagonal", "linalg.outer", "linalg.vecdot", "linalg.cross")
def _jnps_forms(name, c, mesh):
    """distla's forms of jnp's diagonal, outer, vecdot and cross (distla/linalg/_explicit.py),
    in layouts where jax's rules refuse jnp's own (rows, columns, both split) and beside a
    numpy operand (cross: and beside one on one device, which jnp's refuses)."""
    tall, tall2 = _tall(c), _tall(c, seed=1)
    u_np, v_np = tall.sum(axis=1), _matrix(c, seed=1).sum(axis=0)  # lengths 8 and n
    for spec in (P(("x", "y")), P("x", "y"), P("x"), P(None, "y")):
        a, b = place(tall, mesh, spec), place(tall2, mesh, spec)
        where = f"{name} {spec} {c}"
        if name == "linalg.diagonal":
            pairs = [
                (dl.diagonal(x, offset=k), jnp.linalg.diagonal(h, offset=k))
                for x, h in ((a, tall), (a.T, tall.T))
                for k in (0, 1, -2)
            ]
        elif name == "linalg.vecdot":
            pairs = [
                (dl.vecdot(x, y, axis=k), jnp.linalg.vecdot(tall, tall2, axis=k))
                for x, y in ((a, b), (a, tall2))
                for k in (-1, 0)
            ]
        elif name == "linalg.cross":  # 3-vectors of the case's entries (zeros when empty)
            u_np, w_np = np.resize(tall, (8, 3)), np.resize(tall2, (8, 3))
            u, w = place(u_np, mesh, spec), place(w_np, mesh, spec)
            one = jax.device_put(w_np, jax.devices()[0])
            ref = jnp.linalg.cross(u_np, w_np)
            pairs = [(dl.cross(u, y), ref) for y in (w, w_np, one)]
            pairs.append((dl.cross(u.T, one.T, axis=0), ref.T))
        else:
            u, u2 = place(u_np, mesh, spec), place(u_np[::-1].copy(), mesh, spec)
            v = place(v_np, mesh, P(*tuple(spec)[1:]))
            pairs = [
                (dl.outer(u, v), jnp.linalg.outer(u_np, v_np)),
                (dl.outer(v, u), jnp.linalg.outer(v_np, u_np)),
                (dl.outer(u, u2), jnp.linalg.outer(u_np, u_np[::-1])),  # both split alike
            ]
        for got, ref in pairs:
            _compare(got, ref, c, cond=30.0, where=where)


NORM_ORDS = (None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf)


@sweeps("linalg.norm", "linalg.matrix_norm")
def _norms(name, c, mesh):
    a_np = _matrix(c)
    a = place(a_np, mesh)
    for ord_ in NORM_ORDS:
        if name.endswith("matrix_norm"):
            ord_ = "fro" if ord_ is None else ord_
            ours, theirs = (
                functools.partial(dl.matrix_norm, ord=ord_),
                functools.partial(jnp.linalg.matrix_norm, ord=ord_),
            )
        else:
            ours, theirs = (
                functools.partial(dl.norm, ord=ord_),
                functools.partial(jnp.linalg.norm, ord=ord_),
            )
        try:
            ref = theirs(a_np)
        except ValueError:  # a min over no entries (ord -1, -2, -inf of 0x0): jnp refuses
            with pytest.raises(ValueError):
                ours(a)
            continue
        got = ours(a)
        if c.bad == "nan":  # docs/caveats.md: every order keeps the NaN (jnp's sharded
            assert np.isnan(float(got)), (name, ord_)  # max/min reductions drop it)
        _compare(got, ref, c, cond=30.0, where=f"{name}({ord_}) {c}")


# ---------------------------------------------------------------- expm, eig


@sweeps("linalg.expm", "linalg.expm_frechet", "linalg.eig", "linalg.eigvals")
def _non_hermitian(name, c, mesh):
    a_np = _matrix(c) / 3
    a = place(a_np, mesh)
    fn = name.split(".")[1]
    if fn in ("eig", "eigvals"):
        got, ref = getattr(dl, fn)(a), getattr(jnp.linalg, fn)(a_np)
        w, w_ref = (got[0], ref[0]) if fn == "eig" else (got, ref)
        w, w_ref = np.asarray(w), np.asarray(w_ref)
        _compare(w[np.argsort(w)], w_ref[np.argsort(w_ref)], c, where=f"{name} {c}")
        if fn == "eig":  # the vectors: jnp's own function, so jnp's exactly
            _compare(got[1], ref[1], c, where=f"{name} vectors {c}")
        return
    if fn == "expm":
        got, ref = dl.expm(a), jax.scipy.linalg.expm(a_np)
    else:
        e_np = _matrix(c, seed=1) / 3
        got = dl.expm_frechet(a, place(e_np, mesh))
        ref = jax.scipy.linalg.expm_frechet(a_np, e_np)
    _compare_leaves(got, ref, c, cond=100.0, where=f"{name} {c}")


# ---------------------------------------------------------------- the spectral family


@sweeps("linalg.eigh", "linalg.eigvalsh")
def _eigh(name, c, mesh):
    a_np = _matrix(c, spd=True)
    fn = name.split(".")[1]
    got, ref = getattr(dl, fn)(place(a_np, mesh)), getattr(jnp.linalg, fn)(a_np)
    got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
    if c.bad != "none" and c.n > 1:
        # docs/caveats.md: NaN everywhere; jnp returns what LAPACK's syevd leaves
        # (NaN eigenvalues, and for an inf the identity as eigenvectors)
        for g, r in zip(got, ref):
            g = np.asarray(g)
            assert g.shape == r.shape and g.dtype == r.dtype and np.isnan(g).all(), (name, c)
        assert np.isnan(np.asarray(ref[0])).all()
        if fn == "eigh" and c.bad == "inf":
            np.testing.assert_array_equal(np.asarray(ref[1]), np.eye(c.n, dtype=DTYPE))
        return
    if fn == "eigh" and c.bad == "none":
        got, ref = [np.abs(np.asarray(x)) for x in got], [np.abs(np.asarray(x)) for x in ref]
    for g, r in zip(got, ref):  # |vectors|: their signs are free
        _compare(g, r, c, cond=30.0, where=f"{name} {c}")


@sweeps(
    "linalg.svd",
    "linalg.svdvals",
    "linalg.polar",
    "linalg.pinv",
    "linalg.matrix_rank",
    "linalg.cond",
    "linalg.lstsq",
)
def _spectral(name, c, mesh):
    a_np = _matrix(c)
    a = place(a_np, mesh)
    fn = name.split(".")[1]
    if fn == "lstsq":
        b_np, b = _rhs(c, mesh)
        pairs = [(dl.lstsq(a, b), jnp.linalg.lstsq(a_np, b_np))]
    elif fn == "cond":
        pairs = []
        for p in (None, 1):
            try:
                ref = jnp.linalg.cond(a_np, p)
            except ValueError:  # jnp refuses an empty matrix: so does distla
                with pytest.raises(ValueError):
                    dl.cond(a, p)
                continue
            pairs.append((dl.cond(a, p), ref))
    else:
        mod = jax.scipy.linalg if fn == "polar" else jnp.linalg
        try:
            ref = getattr(mod, fn)(a_np)
        except ValueError:  # jnp refuses (matrix_rank of 0x0): so does distla
            with pytest.raises(ValueError):
                getattr(dl, fn)(a)
            return
        pairs = [(getattr(dl, fn)(a), ref)]
    if fn in ("svd", "pinv", "lstsq") and c.bad != "none" and c.n > 1:
        # docs/caveats.md: NaN in every float result; jnp returns what LAPACK's gesdd
        # leaves (NaN singular values, and for an inf permutations as vectors), so
        # its pinv is 0 and its lstsq solution 0
        ((got, ref),) = pairs
        got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
        for g, r in zip(got, ref):
            g, r = np.asarray(g), np.asarray(r)
            assert g.shape == r.shape and g.dtype == r.dtype, (name, c)
            if np.issubdtype(g.dtype, np.inexact):
                assert np.isnan(g).all(), (name, c)
            else:  # lstsq's rank
                np.testing.assert_array_equal(g, r)
        if c.bad == "inf":
            if fn == "svd":
                assert np.isnan(ref[1]).all() and np.isfinite(ref[0]).all()
                assert np.isfinite(ref[2]).all()
            else:
                assert not np.asarray(ref[0]).any()  # pinv, lstsq's solution: 0
        return
    for got, ref in pairs:
        if fn == "lstsq":  # the residuals: sums of squares that cancel, to |b|² · eps
            b_scale = float(np.sum(np.abs(b_np) ** 2, axis=0).max()) if c.n else 0.0
            res, res_ref = np.asarray(got[1]), np.asarray(ref[1])
            fin = np.isfinite(res_ref)
            assert res.shape == res_ref.shape and res.dtype == res_ref.dtype
            assert not np.isfinite(res[~fin]).any(), (name, c)
            assert (np.abs(res[fin] - res_ref[fin]) <= _tol(c, 30.0) * b_scale).all(), (
                name,
                c,
                res,
                res_ref,
            )
            got, ref = (got[0], got[2], got[3]), (ref[0], ref[2], ref[3])
        if fn in ("svd", "polar") and c.bad == "none":  # signs of the vectors are free
            got = [np.abs(np.asarray(x)) for x in jax.tree.leaves(got)]
            ref = [np.abs(np.asarray(x)) for x in jax.tree.leaves(ref)]
        _compare_leaves(got, ref, c, cond=30.0, where=f"{name} {c}")


# ---------------------------------------------------------------- FFTs


def _signal(c, shape, *, real):
    """The case's signal (real or complex float32), scaled, with its bad entry."""
    rng = np.random.default_rng(sum(shape))
    v = rng.standard_normal(shape) * c.scale
    if not real:
        v = v + 1j * rng.standard_normal(shape) * c.scale
    v = v.astype(DTYPE if real else np.complex64)
    if c.bad != "none":
        v[c.pos + (0,) * (len(shape) - 2)] = _bad_value(c)
    return v


def _compare_fft(got, ref, c, where):
    if c.bad == "none":
        _compare(got, ref, c, cond=np.log2(max(c.n, 2)) ** 2, where=where)
    else:  # the bad entry is mixed into whole transformed lines: non-finite where jnp's is
        got, ref = np.asarray(got), np.asarray(ref)
        assert got.shape == ref.shape and got.dtype == ref.dtype, where
        assert not np.isfinite(got[~np.isfinite(ref)]).any(), where
        assert np.isfinite(got[np.isfinite(ref)]).all(), where


FFT_AXES = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2")
FFT_VOLUMES = ("fftn", "ifftn", "rfftn", "irfftn")
REAL_INPUT = ("rfft", "rfft2", "ihfft", "rfftn")


@sweeps(*(f"fft.{n}" for n in FFT_AXES + FFT_VOLUMES))
def _fft(name, c, mesh):
    fn = name.split(".")[1]
    volume = fn in FFT_VOLUMES
    v = _signal(c, (c.n,) * (3 if volume else 2), real=fn in REAL_INPUT)
    x = place(v, mesh, P(*mesh.axis_names, None) if volume else P("x", "y"))
    try:
        ref = getattr(jnp.fft, fn)(v)
    except ValueError:  # docs/caveats.md: a zero length raises as numpy (jnp: in XLA)
        with pytest.raises(ValueError, match="Invalid number of FFT data points"):
            getattr(np.fft, fn)(v)
        with pytest.raises(ValueError, match="Invalid number of FFT data points"):
            getattr(dfft, fn)(x)
        return
    _compare_fft(getattr(dfft, fn)(x), ref, c, where=f"{name} {c}")


@sweeps("fft.pfft3d", "fft.pifft3d", "fft.fftfreq3d", "fft.rfftfreq3d")
def _pencil(name, c, mesh):
    """jaxdecomp's drop-ins: pfft3d is fftn in (Y, Z, X) order, pifft3d its inverse,
    fftfreq3d / rfftfreq3d the angular wavenumbers of each axis."""
    n = c.n
    v = _signal(c, (n, n, n), real=False)
    x = place(v, mesh, P(*mesh.axis_names, None))
    fn = name.split(".")[1]
    if fn == "pfft3d":
        _compare_fft(dfft.pfft3d(x), jnp.fft.fftn(v).transpose(1, 2, 0), c, name)
    elif fn == "pifft3d":
        _compare_fft(dfft.pifft3d(x), jnp.fft.ifftn(v.transpose(2, 0, 1)), c, name)
    else:
        k2, k0, k1 = getattr(dfft, fn)(x, 0.5)
        for got, axis in ((k0, 0), (k1, 1), (k2, 2)):
            freq = jnp.fft.rfftfreq if (fn == "rfftfreq3d" and axis == 1) else jnp.fft.fftfreq
            want = 2 * np.pi * np.asarray(freq(n, 0.5))
            shape = [1, 1, 1]
            shape[axis] = want.size
            _compare(got, want.reshape(shape).astype(DTYPE), c, where=f"{name} axis {axis} {c}")


# ---------------------------------------------------------------- the sweep


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("name", sorted(CHECKS))
def test_edge(mesh, name, case):
    """Each public function, each class of edge, against jnp."""
    c = CASES[case]
    if c.n != 1:
        CHECKS[name](name, c, mesh)
        return
    # size one: the default plan, as a user gets it (one device: moving one entry
    # beats any distributed step); the prime size keeps the suite's distributed one
    previous = dl.set_plan_budget(512 * 2**20)  # the library's default
    try:
        CHECKS[name](name, c, mesh)
    finally:
        dl.set_plan_budget(previous)


# Where a NaN or inf lands matters to these (which columns of a factor, which
# norm order): hypothesis draws the position, the compiled programs of the
# prime size are the sweep's.
POSITIONAL = (
    "linalg.norm",
    "linalg.cholesky",
    "linalg.solve",
    "linalg.solve_triangular",
    "linalg.eigvalsh",
    "fft.fft2",
)


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_non_finite_anywhere(mesh, data):
    """A NaN or inf at any position of a matrix of the prime size."""
    name = data.draw(st.sampled_from(POSITIONAL))
    pos = (data.draw(st.integers(0, PRIME - 1)), data.draw(st.integers(0, PRIME - 1)))
    c = Case(PRIME, bad=data.draw(st.sampled_from(("nan", "inf"))), pos=pos)
    CHECKS[name](name, c, mesh)


# ---------------------------------------------------------------- every public function swept

_JNP_OWN = "jnp's own function object, re-exported (docs/namespace.md)"
_TYPE = "a result type (NamedTuple), checked through the functions returning it"
_MODEL = "a memory model: arithmetic on shapes, takes no array"
# Public names that are not swept, each with the reason.
NOT_SWEPT = {
    "distla": {
        "Cost": "the result type of distla.cost",
        "ShapeError": "an exception type (the errors it is raised for are swept)",
        "cost": "reads a compiled program",
        "fft": "a package, swept name by name",
        "linalg": "a package, swept name by name",
        "scipy": "a package: distla.scipy.linalg and distla.scipy.fft in the drop-in sweep "
        "(tests/dropin.py)",
        "init_distributed": "starts jax's multi-process runtime",
        "limit_cpu_blas": "sets OpenBLAS's thread count",
        "make_mesh": "builds a mesh (used by every test)",
        "shard": "places an array (helpers.place does the same for the tests)",
        "__version__": "a string",
    },
    "linalg": {
        **{
            n: _JNP_OWN
            for n in (
                "matrix_transpose",
                "trace",
                "vector_norm",
            )
        },
        **{n: _TYPE for n in ("EighResult", "SVDResult", "LUResult", "SlogdetResult")},
        **{n: _MODEL for n in ("cholesky_model_bytes", "lu_model_bytes", "qr_model_bytes")},
        "plan_budget": "reads the one-device plan's budget",
        "set_plan_budget": "sets the one-device plan's budget",
        "shape_buckets": "reads the shape-bucket setting",
        "set_shape_buckets": "sets the shape buckets of eager factorisations",
    },
    "fft": {
        **{n: _JNP_OWN for n in ("fftfreq", "rfftfreq")},
        **{
            n: "distla's roll of split axes (distla/fft/_shift.py): the drop-in sweep "
            "(tests/dropin.py) and tests/test_namespace.py"
            for n in ("fftshift", "ifftshift")
        },
        **{
            n: "jaxdecomp's half-spectrum pair: tests/test_jaxdecomp.py, on every mesh "
            "shape and odd Z, against the half of pfft3d"
            for n in ("prfft3d", "pirfft3d")
        },
        "model_bytes": _MODEL,
    },
}


@pytest.mark.parametrize("module", sorted(NOT_SWEPT))
def test_every_public_function_is_swept(module):
    """A public name is swept above or named, with a reason, in NOT_SWEPT; the
    reasons hold (jnp's own functions are jnp's objects, types are types)."""
    mod = {"distla": distla, "linalg": dl, "fft": dfft}[module]
    public = set(mod.__all__)
    swept = {name.split(".")[1] for name in CHECKS if name.split(".")[0] == module}
    not_swept = NOT_SWEPT[module]
    assert not swept & set(not_swept), sorted(swept & set(not_swept))
    assert not public - swept - set(not_swept), (
        f"{module}: {sorted(public - swept - set(not_swept))} neither swept in "
        "tests/test_edge_sweep.py nor listed in NOT_SWEPT with a reason"
    )
    assert not (swept | set(not_swept)) - public, sorted((swept | set(not_swept)) - public)
    jnp_mod = jnp.fft if module == "fft" else jnp.linalg
    for name, why in not_swept.items():
        if why == _JNP_OWN:
            assert getattr(mod, name) is getattr(jnp_mod, name), name
        if why == _TYPE:
            assert isinstance(getattr(mod, name), type), name
