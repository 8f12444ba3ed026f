"""A property-based sweep of the edges: every case compared with jnp on one device.

Each test draws, with hypothesis, one case from the classes below and checks
distla against jnp's function on the same host data (jnp on one device is the
reference for shapes, dtypes, values and where NaN/inf land):

- scale: the matrix times 1e-30, 1 or 1e30 (all inside float32's range);
- non-finite pattern: none, one NaN, one inf, at a drawn position;
- size: 0, 1, a prime (7) and an even size (8);
- mesh: 2x4 Auto, 2x4 Explicit, 1x8, 8x1;
- dtype: float32, complex64, float64 (with x64 on).

Values are compared where the reference is finite, within LAPACK-style
tolerances (``30 · n · eps`` times the condition of the well-conditioned test
matrices, relative to the largest entry); non-finite results must be
non-finite where jnp's are. Where distla differs from jnp on purpose
(docs/caveats.md: NaN in max/min norms of sharded arrays, cholesky's
non-finite pattern) the documented behaviour is asserted. The spectral family
(eigh, svd and what is built on them) compiles several programs per shape; it
is swept at sizes 0 and 1 here and across the range in ``test_edges.py``.

Cheap by construction: small sizes, a fixed set of shapes so that compiled
programs are reused across examples, and a fixed number of examples per test
(``derandomize=True``: the same cases on every run).
"""

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

MESHES = {"2x4-auto": ((2, 4), "auto"), "2x4-explicit": ((2, 4), "explicit"),
          "1x8": ((1, 8), "auto"), "8x1": ((8, 1), "auto")}
SIZES = (0, 1, 7, 8)
SCALES = (1e-30, 1.0, 1e30)
PATTERNS = ("none", "nan", "inf")
DTYPES = ("float32", "complex64", "float64")

SWEEP = settings(max_examples=10, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


@functools.cache
def _mesh(name):
    return build_mesh(*MESHES[name])


def _case(draw, *, sizes=SIZES, square=True, meshes=tuple(MESHES)):
    """(mesh name, n, scale, pattern, dtype, position) drawn from the classes."""
    n = draw(st.sampled_from(sizes))
    pattern = draw(st.sampled_from(PATTERNS)) if n else "none"
    pos = (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))) if n else None
    return dict(mesh=draw(st.sampled_from(meshes)), n=n,
                scale=draw(st.sampled_from(SCALES)), pattern=pattern,
                dtype=draw(st.sampled_from(DTYPES)), pos=pos)


def _matrix(c, *, spd=False, seed=0):
    """The drawn well-conditioned matrix (or Hermitian positive definite one), scaled,
    with its one non-finite entry."""
    n, dtype = c["n"], np.dtype(c["dtype"])
    rng = np.random.default_rng(seed + n)
    x = rng.standard_normal((n, n))
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal((n, n))
    a = x @ x.conj().T / max(n, 1) + np.eye(n) if spd else x / np.sqrt(max(n, 1)) + 3 * np.eye(n)
    a = (a * c["scale"]).astype(dtype)
    if c["pattern"] != "none":
        a[c["pos"]] = np.nan if c["pattern"] == "nan" else np.inf
    return a


def _tol(c, cond=10.0):
    return 30 * max(c["n"], 1) * float(np.finfo(np.dtype(c["dtype"])).eps) * cond


def _compare(got, ref, c, *, cond=10.0, where=""):
    """Shapes and dtypes as jnp's; values where jnp's are finite; non-finite where jnp's are."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (where, got.shape, ref.shape,
                                                               got.dtype, ref.dtype)
    fin = np.isfinite(ref)
    assert not np.isfinite(got[~fin]).any(), f"{where}: finite where jnp's is not"
    if fin.any():
        scale = np.abs(ref[fin]).max()
        err = np.abs(got[fin].astype(np.complex128) - ref[fin]).max()
        tiny = float(np.finfo(ref.dtype).tiny) if np.issubdtype(ref.dtype, np.inexact) else 0.0
        assert err <= _tol(c, cond) * scale + tiny, (where, err, scale)


def _run(c, fn):
    """``fn()`` with x64 on for float64 cases."""
    with jax.enable_x64(c["dtype"] == "float64"):
        return fn()


# ---------------------------------------------------------------- one square matrix


ORDS = (None, "fro", 1, -1, np.inf, -np.inf, "nuc-skip")
MATRIX_FUNCTIONS = ("det", "slogdet", "inv", "norm", "solve")


@SWEEP
@given(st.data())
def test_matrix_functions(data):
    """det, slogdet, inv, norm (every elementwise/max/min order) and solve."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(MATRIX_FUNCTIONS))
    ord_ = data.draw(st.sampled_from(ORDS[:-1]))

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c)
        a = place(a_np, mesh)
        if name == "solve":
            b_np = np.ones((c["n"], 2), a_np.dtype)
            got = dl.solve(a, place(b_np, mesh, P("x", None)))
            ref = jnp.linalg.solve(a_np, b_np)
        elif name == "norm":
            got, ref = dl.norm(a, ord_), jnp.linalg.norm(a_np, ord_)
            if c["pattern"] == "nan":  # documented: NaN kept by every order (jnp's sharded
                assert np.isnan(float(got))  # max/min reductions drop it; one device keeps it)
        else:
            got, ref = getattr(dl, name)(a), getattr(jnp.linalg, name)(a_np)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            _compare(g, r, c, where=f"{name} {c}")

    _run(c, check)


# ---------------------------------------------------------------- Hermitian positive definite

CHOLESKY_FUNCTIONS = ("cholesky", "cho_solve")  # cho_solve's cases factor with cho_factor


@SWEEP
@given(st.data())
def test_cholesky_family(data):
    """cholesky (documented non-finite pattern), cho_factor + cho_solve."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(CHOLESKY_FUNCTIONS))

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c, spd=True)
        a = place(a_np, mesh)
        if name == "cho_solve":
            b_np = np.ones((c["n"], 2), a_np.dtype)
            b = place(b_np, mesh, P("x", None))
            got = dl.cho_solve(dl.cho_factor(a, lower=True), b)
            ref = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a_np, lower=True), b_np)
            if c["pattern"] == "none":
                _compare(got, ref, c, where=f"cho_solve {c}")
            else:
                assert np.isnan(np.asarray(got)).any() == np.isnan(np.asarray(ref)).any()
            return
        got, ref = np.asarray(dl.cholesky(a)), np.asarray(jnp.linalg.cholesky(a_np))
        assert got.shape == ref.shape and got.dtype == ref.dtype
        # docs/caveats.md: the columns before the first one a NaN/inf reaches are jnp's
        bad = ~np.isfinite(ref)
        first = int(np.argmax(bad.any(0))) if bad.any() else c["n"]
        _compare(got[:, :first], ref[:, :first], c, where=f"cholesky {c}")
        assert not np.isfinite(got[:, first:]).all() if first < c["n"] else True

    _run(c, check)


# ---------------------------------------------------------------- triangular and QR

TRIANGULAR_FUNCTIONS = ("solve_triangular", "qr")


@SWEEP
@given(st.data())
def test_triangular_and_qr(data):
    """solve_triangular (lower/upper) and qr (every mode: shapes, dtypes, Q R = A)."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(TRIANGULAR_FUNCTIONS))
    lower = data.draw(st.booleans())

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c)
        a = place(a_np, mesh)
        if name == "solve_triangular":
            t_np = np.tril(a_np) if lower else np.triu(a_np)
            b_np = np.ones((c["n"], 2), a_np.dtype)
            got = dl.solve_triangular(place(t_np, mesh), place(b_np, mesh, P("x", None)),
                                      lower=lower)
            ref = jax.scipy.linalg.solve_triangular(t_np, b_np, lower=lower)
            _compare(got, ref, c, where=f"solve_triangular {c}")
            return
        mode = "complete" if lower else "reduced"
        q, r = dl.qr(a, mode=mode)
        q_ref, r_ref = jnp.linalg.qr(a_np, mode=mode)
        for g, ref in ((q, q_ref), (r, r_ref)):
            assert g.shape == ref.shape and g.dtype == ref.dtype
        if c["pattern"] == "none":
            _compare(np.asarray(q) @ np.asarray(r), a_np, c, where=f"qr {c}")
        else:
            assert not np.isfinite(np.asarray(r)).all()

    _run(c, check)


# ---------------------------------------------------------------- spectral family

SPECTRAL_SMALL = ("svdvals", "svd", "eigvalsh", "eigh", "pinv", "matrix_rank", "cond", "polar")


@settings(SWEEP, max_examples=6)
@given(st.data())
def test_spectral_family_small(data):
    """svdvals, svd, eigvalsh, eigh, pinv, matrix_rank, cond, polar at sizes 0 and 1."""
    c = _case(data.draw, sizes=(0, 1))
    name = data.draw(st.sampled_from(SPECTRAL_SMALL))

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c, spd=name.startswith("eig"))
        a = place(a_np, mesh)
        mod = jax.scipy.linalg if name == "polar" else jnp.linalg
        try:
            ref = getattr(mod, name)(a_np)
        except ValueError as e:  # jnp refuses (cond, matrix_rank of 0x0): so does distla
            with pytest.raises(ValueError):
                getattr(dl, name)(a)
            assert e.args
            return
        got = getattr(dl, name)(a)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            if name in ("svd", "eigh", "polar") and c["pattern"] == "none":
                g, r = np.abs(np.asarray(g)), np.abs(np.asarray(r))  # signs of vectors
            _compare(g, r, c, where=f"{name} {c}")

    _run(c, check)


# ---------------------------------------------------------------- FFTs of volumes

FFT_VOLUMES = ("fftn", "ifftn", "rfftn", "irfftn")


@SWEEP
@given(st.data())
def test_fft_volumes(data):
    """fftn, ifftn, rfftn, irfftn of (n, n, n) volumes in the pencil layout."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(FFT_VOLUMES))

    def check():
        mesh = _mesh(c["mesh"])
        n = c["n"]
        rng = np.random.default_rng(n)
        dtype = np.dtype(c["dtype"])
        real = name == "rfftn"
        v = rng.standard_normal((n, n, n)) * c["scale"]
        if not real and dtype.kind == "c":
            v = v + 1j * rng.standard_normal((n, n, n)) * c["scale"]
        v = v.astype(np.float64 if dtype == np.float64 else np.float32) if real else v.astype(
            dtype)
        if c["pattern"] != "none":
            v[c["pos"] + (0,)] = np.nan if c["pattern"] == "nan" else np.inf
        x = place(v, mesh, P(*mesh.axis_names, None))
        if n == 0 and name == "rfftn":  # docs/caveats.md: raises as numpy (jnp fails in XLA)
            with pytest.raises(ValueError, match="Invalid number of FFT data points"):
                np.fft.rfftn(v)
            with pytest.raises(ValueError, match="Invalid number of FFT data points"):
                dfft.rfftn(x)
            return
        ref = getattr(jnp.fft, name)(v)
        got = getattr(dfft, name)(x)
        if c["pattern"] == "none":
            _compare(got, ref, c, cond=np.log2(max(n, 2)) ** 2, where=f"{name} {c}")
        else:  # every output mixes the bad entry in: non-finite where jnp's is
            got, ref = np.asarray(got), np.asarray(ref)
            assert got.shape == ref.shape and got.dtype == ref.dtype
            assert not np.isfinite(got[~np.isfinite(ref)]).any()

    _run(c, check)


# ---------------------------------------------------------------- swept by name
#
# The tests below take the function's name as a pytest parameter, so every
# name is swept; hypothesis draws the case. The derandomized draws are the same
# for every name of one test, so the names share their cases' meshes, sizes and
# dtypes (and the compiled programs that they share).

FEW = settings(SWEEP, max_examples=3)
# hypothesis's first derandomized draw is the simplest (each choice's first value):
# a prime size there, so that every name meets a padded sharded matrix
SIZES_PRIME_FIRST = (7, 0, 8, 1)


def _rhs(c, mesh, k=2):
    b_np = (np.arange(c["n"] * k).reshape(c["n"], k) % 3 + 1).astype(c["dtype"])
    return b_np, place(b_np, mesh, P("x", None))


LU_FUNCTIONS = ("lu", "lu_factor", "lu_solve", "tensorinv", "tensorsolve")


@pytest.mark.parametrize("name", LU_FUNCTIONS)
@FEW
@given(st.data())
def test_lu_family(name, data):
    """lu (p, l, u), lu_factor (lu, piv), lu_solve, tensorinv and tensorsolve."""
    c = _case(data.draw, sizes=SIZES_PRIME_FIRST)

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c)
        a = place(a_np, mesh)
        b_np, b = _rhs(c, mesh)
        if name == "lu_solve":
            got = dl.lu_solve(dl.lu_factor(a), b)
            ref = jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(a_np), b_np)
        elif name == "tensorinv":
            got, ref = dl.tensorinv(a, ind=1), jnp.linalg.tensorinv(a_np, ind=1)
        elif name == "tensorsolve":
            got, ref = dl.tensorsolve(a, b[:, 0]), jnp.linalg.tensorsolve(a_np, b_np[:, 0])
        else:
            got, ref = getattr(dl, name)(a), getattr(jax.scipy.linalg, name)(a_np)
        got, ref = jax.tree.leaves(got), jax.tree.leaves(ref)
        if name in ("lu", "lu_factor") and c["pattern"] != "none":
            # where a NaN/inf lands depends on the pivots that it disturbs: the
            # factors are non-finite where jnp's are, somewhere
            for g, r in zip(got, ref):
                g, r = np.asarray(g), np.asarray(r)
                assert g.shape == r.shape and g.dtype == r.dtype
                assert np.isfinite(g).all() == np.isfinite(r).all(), (name, c)
            return
        for g, r in zip(got, ref):
            _compare(g, r, c, where=f"{name} {c}")

    _run(c, check)


PRODUCTS = ("distla.matmul", "matmul", "multi_dot", "tensordot", "matrix_power", "matrix_norm")


@pytest.mark.parametrize("name", PRODUCTS)
@FEW
@given(st.data())
def test_products(name, data):
    """distla.matmul and distla.linalg's products and matrix_norm against jnp's."""
    c = _case(data.draw, sizes=SIZES_PRIME_FIRST)
    option = data.draw(st.integers(0, 2))

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c)
        a = place(a_np, mesh)
        b_np = _matrix(c, seed=1)
        b = place(b_np, mesh)
        if name == "distla.matmul":
            got, ref = distla.matmul(a, b), jnp.matmul(a_np, b_np)
        elif name == "matmul":
            got, ref = dl.matmul(a, b), jnp.matmul(a_np, b_np)
        elif name == "multi_dot":
            got, ref = dl.multi_dot([a, b, a]), jnp.linalg.multi_dot([a_np, b_np, a_np])
        elif name == "tensordot":
            axes = option % 2 + 1
            got = dl.tensordot(a, b, axes=axes)
            ref = jnp.linalg.tensordot(a_np, b_np, axes=axes)
        elif name == "matrix_power":
            k = (0, 3, -2)[option]
            got, ref = dl.matrix_power(a, k), jnp.linalg.matrix_power(a_np, k)
        else:
            ord_ = ("fro", 1, -np.inf)[option]
            got, ref = dl.matrix_norm(a, ord=ord_), jnp.linalg.matrix_norm(a_np, ord=ord_)
            if c["pattern"] == "nan":  # docs/caveats.md: NaN kept by every order
                assert np.isnan(float(got))
        _compare(got, ref, c, cond=30.0, where=f"{name} {c}")

    _run(c, check)


NON_HERMITIAN = ("expm", "expm_frechet", "eig", "eigvals")


@pytest.mark.parametrize("name", NON_HERMITIAN)
@FEW
@given(st.data())
def test_expm_and_eig(name, data):
    """expm, expm_frechet (both results), eig and eigvals (jnp's, gathered)."""
    c = _case(data.draw, sizes=SIZES_PRIME_FIRST)

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c) / 3
        a = place(a_np, mesh)
        if name in ("eig", "eigvals"):
            got, ref = getattr(dl, name)(a), getattr(jnp.linalg, name)(a_np)
            w, w_ref = (got[0], ref[0]) if name == "eig" else (got, ref)
            order, order_ref = np.argsort(np.asarray(w)), np.argsort(np.asarray(w_ref))
            _compare(np.asarray(w)[order], np.asarray(w_ref)[order_ref], c, where=f"{name} {c}")
            if name == "eig":  # vectors: jnp's own function, so jnp's exactly
                _compare(got[1], ref[1], c, where=f"{name} vectors {c}")
            return
        if name == "expm":
            got, ref = dl.expm(a), jax.scipy.linalg.expm(a_np)
        else:
            e_np = _matrix(c, seed=1) / 3
            got = dl.expm_frechet(a, place(e_np, mesh))
            ref = jax.scipy.linalg.expm_frechet(a_np, e_np)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            _compare(g, r, c, cond=100.0, where=f"{name} {c}")

    _run(c, check)


# The spectral family at one size the meshes do not divide, on two meshes.
SPECTRAL = ("eigh", "eigvalsh", "svd", "svdvals", "polar", "pinv", "matrix_rank", "cond",
            "norm", "lstsq")


@pytest.mark.parametrize("name", SPECTRAL)
@FEW
@given(st.data())
def test_spectral_family(name, data):
    """eigh, eigvalsh, svd, svdvals, polar, pinv, matrix_rank, cond, norm (2, -2,
    "nuc") and lstsq of a 7x7 matrix on 2x4 Explicit and 1x8."""
    c = _case(data.draw, sizes=(7,), meshes=("2x4-explicit", "1x8"))
    ord_ = data.draw(st.sampled_from((2, -2, "nuc")))

    def check():
        mesh = _mesh(c["mesh"])
        a_np = _matrix(c, spd=name.startswith("eig"))
        a = place(a_np, mesh)
        if name == "lstsq":
            b_np, b = _rhs(c, mesh)
            got, ref = dl.lstsq(a, b), jnp.linalg.lstsq(a_np, b_np)
        elif name == "norm":
            got, ref = dl.norm(a, ord_), jnp.linalg.norm(a_np, ord_)
        else:
            mod = jax.scipy.linalg if name == "polar" else jnp.linalg
            got, ref = getattr(dl, name)(a), getattr(mod, name)(a_np)
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            if name in ("svd", "eigh") and c["pattern"] == "none":
                g, r = np.abs(np.asarray(g)), np.abs(np.asarray(r))  # phases of vectors
            _compare(g, r, c, cond=30.0, where=f"{name} {c}")

    _run(c, check)


# ---------------------------------------------------------------- FFTs of one and two axes


FFT_AXES = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2")


def _signal(c, shape, real):
    """The drawn signal: real (float32/float64) or complex, scaled, with its bad entry."""
    rng = np.random.default_rng(sum(shape))
    dtype = np.dtype(c["dtype"])
    v = rng.standard_normal(shape) * c["scale"]
    if not real and dtype.kind == "c":
        v = v + 1j * rng.standard_normal(shape) * c["scale"]
    v = v.astype(np.float64 if dtype == np.float64 else np.float32) if real else v.astype(dtype)
    if c["pattern"] != "none":
        v[c["pos"] + (0,) * (len(shape) - 2)] = np.nan if c["pattern"] == "nan" else np.inf
    return v


def _compare_fft(got, ref, c, where):
    if c["pattern"] == "none":
        _compare(got, ref, c, cond=np.log2(max(c["n"], 2)) ** 2, where=where)
    else:  # the bad entry is mixed into whole transformed lines: non-finite where jnp's is
        got, ref = np.asarray(got), np.asarray(ref)
        assert got.shape == ref.shape and got.dtype == ref.dtype, where
        assert not np.isfinite(got[~np.isfinite(ref)]).any(), where


@pytest.mark.parametrize("name", FFT_AXES)
@FEW
@given(st.data())
def test_fft_axes(name, data):
    """The one- and two-axis transforms of an (n, n) matrix in 2D blocks (the last
    axis, or both)."""
    c = _case(data.draw, sizes=SIZES_PRIME_FIRST)

    def check():
        mesh = _mesh(c["mesh"])
        v = _signal(c, (c["n"], c["n"]), real=name in ("rfft", "rfft2", "ihfft"))
        x = place(v, mesh)
        try:
            ref = getattr(jnp.fft, name)(v)
        except ValueError:  # docs/caveats.md: a zero length raises as numpy (jnp: in XLA)
            with pytest.raises(ValueError, match="Invalid number of FFT data points"):
                getattr(np.fft, name)(v)
            with pytest.raises(ValueError, match="Invalid number of FFT data points"):
                getattr(dfft, name)(x)
            return
        _compare_fft(getattr(dfft, name)(x), ref, c, where=f"{name} {c}")

    _run(c, check)


PENCIL_FFTS = ("pfft3d", "pifft3d", "fftfreq3d", "rfftfreq3d")


@pytest.mark.parametrize("name", PENCIL_FFTS)
@FEW
@given(st.data())
def test_pencil_ffts(name, data):
    """jaxdecomp's drop-ins: pfft3d is fftn in (Y, Z, X) order, pifft3d its inverse,
    fftfreq3d / rfftfreq3d the angular wavenumbers of each axis."""
    c = _case(data.draw, sizes=SIZES_PRIME_FIRST)

    def check():
        mesh = _mesh(c["mesh"])
        n = c["n"]
        v = _signal(c, (n, n, n), real=False)
        x = place(v, mesh, P(*mesh.axis_names, None))
        if name == "pfft3d":
            _compare_fft(dfft.pfft3d(x), jnp.fft.fftn(v).transpose(1, 2, 0), c, name)
        elif name == "pifft3d":
            ref = jnp.fft.ifftn(v.transpose(2, 0, 1))
            _compare_fft(dfft.pifft3d(x), ref, c, name)
        else:
            freq = np.fft.rfftfreq if name == "rfftfreq3d" else np.fft.fftfreq
            k2, k0, k1 = getattr(dfft, name)(x, 0.5)
            real = np.finfo(v.dtype).dtype
            for got, axis in ((k0, 0), (k1, 1), (k2, 2)):
                f = freq if axis == 1 else np.fft.fftfreq
                want = 2 * np.pi * (f(n, 0.5) if n else np.zeros(0))
                shape = [1, 1, 1]
                shape[axis] = want.size
                ref = want.reshape(shape).astype(real)
                _compare(got, ref, c, where=f"{name} axis {axis} {c}")

    _run(c, check)


# ---------------------------------------------------------------- every public function swept

# Names swept above, by the tuple each test draws from or is parametrized by.
SWEPT = {
    "distla": {"matmul"},
    "distla.linalg": {
        *MATRIX_FUNCTIONS, *CHOLESKY_FUNCTIONS, "cho_factor", *TRIANGULAR_FUNCTIONS,
        *SPECTRAL_SMALL, *LU_FUNCTIONS, *(p for p in PRODUCTS if "." not in p),
        *NON_HERMITIAN, *SPECTRAL,
    },
    "distla.fft": {*FFT_VOLUMES, *FFT_AXES, *PENCIL_FFTS},
}
_JNP_OWN = "jnp's own function object, re-exported (docs/namespace.md)"
_TYPE = "a result type (NamedTuple), checked through the functions returning it"
_MODEL = "a memory model: arithmetic on shapes, takes no array"
# Public names that are not swept, each with the reason.
NOT_SWEPT = {
    "distla": {
        "Cost": "the result type of distla.cost", "cost": "reads a compiled program",
        "fft": "a package, swept name by name", "linalg": "a package, swept name by name",
        "init_distributed": "starts jax's multi-process runtime",
        "limit_cpu_blas": "sets OpenBLAS's thread count",
        "make_mesh": "builds a mesh (used by every test)",
        "shard": "places an array (helpers.place does the same for the tests)",
        "__version__": "a string",
    },
    "distla.linalg": {
        **{n: _JNP_OWN for n in ("cross", "diagonal", "matrix_transpose", "outer", "trace",
                                 "vecdot", "vector_norm")},
        **{n: _TYPE for n in ("EighResult", "SVDResult", "LUResult", "SlogdetResult")},
        **{n: _MODEL for n in ("cholesky_model_bytes", "lu_model_bytes", "qr_model_bytes")},
        "plan_budget": "reads the one-device plan's budget",
        "set_plan_budget": "sets the one-device plan's budget",
    },
    "distla.fft": {
        **{n: _JNP_OWN for n in ("fftfreq", "rfftfreq", "fftshift", "ifftshift")},
        "model_bytes": _MODEL,
    },
}


@pytest.mark.parametrize("module", sorted(SWEPT))
def test_every_public_function_is_swept(module):
    """A public name is swept above or named, with a reason, in NOT_SWEPT; the
    reasons hold (jnp's own functions are jnp's objects, types are types)."""
    mod = {"distla": distla, "distla.linalg": dl, "distla.fft": dfft}[module]
    public = set(mod.__all__)
    swept, not_swept = SWEPT[module], NOT_SWEPT[module]
    assert not swept & set(not_swept), sorted(swept & set(not_swept))
    assert not public - swept - set(not_swept), (
        f"{module}: {sorted(public - swept - set(not_swept))} neither swept in "
        "tests/test_edge_sweep.py nor listed in NOT_SWEPT with a reason")
    assert not (swept | set(not_swept)) - public, sorted((swept | set(not_swept)) - public)
    jnp_mod = jnp.fft if module == "distla.fft" else jnp.linalg
    for name, why in not_swept.items():
        if why == _JNP_OWN:
            assert getattr(mod, name) is getattr(jnp_mod, name), name
        if why == _TYPE:
            assert isinstance(getattr(mod, name), type), name
