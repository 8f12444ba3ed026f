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


def _case(draw, *, sizes=SIZES, square=True):
    """(mesh name, n, scale, pattern, dtype, position) drawn from the classes."""
    n = draw(st.sampled_from(sizes))
    pattern = draw(st.sampled_from(PATTERNS)) if n else "none"
    pos = (draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))) if n else None
    return dict(mesh=draw(st.sampled_from(tuple(MESHES))), n=n,
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


@SWEEP
@given(st.data())
def test_matrix_functions(data):
    """det, slogdet, inv, norm (every elementwise/max/min order) and solve."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(("det", "slogdet", "inv", "norm", "solve")))
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


@SWEEP
@given(st.data())
def test_cholesky_family(data):
    """cholesky (documented non-finite pattern), cho_factor + cho_solve."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(("cholesky", "cho_solve")))

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


@SWEEP
@given(st.data())
def test_triangular_and_qr(data):
    """solve_triangular (lower/upper) and qr (every mode: shapes, dtypes, Q R = A)."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(("solve_triangular", "qr")))
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


@settings(SWEEP, max_examples=6)
@given(st.data())
def test_spectral_family_small(data):
    """svdvals, svd, eigvalsh, eigh, pinv, matrix_rank, cond, polar at sizes 0 and 1."""
    c = _case(data.draw, sizes=(0, 1))
    name = data.draw(st.sampled_from(("svdvals", "svd", "eigvalsh", "eigh", "pinv",
                                      "matrix_rank", "cond", "polar")))

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


@SWEEP
@given(st.data())
def test_fft_volumes(data):
    """fftn, ifftn, rfftn, irfftn of (n, n, n) volumes in the pencil layout."""
    c = _case(data.draw)
    name = data.draw(st.sampled_from(("fftn", "ifftn", "rfftn", "irfftn")))

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
