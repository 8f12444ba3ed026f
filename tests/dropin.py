"""The drop-in contract as data: every public array function of distla, its operands, its
jnp (or jax.scipy) counterpart, and one runner that compares them (tests/test_dropin_sweep.py).

"Wherever jnp works, distla works": a :class:`Variant` says how a call is made (the
operands' size, stack, dtype and placement, the mesh, x64, the transformation around
the call) and :func:`check` runs the same call through distla and through jnp on the
same host data, then asserts what a user relies on:

- jnp refuses (the operands, the options, the transformation): distla refuses with an
  exception of the same class;
- otherwise every result can be read back (``np.asarray``), with jnp's structure, shapes
  and dtypes, and values within ``tol`` of jnp's (``rtol`` relative to the largest entry
  of the result; non-finite exactly where jnp's is);
- on an ``Explicit`` mesh, where jnp can run on the same sharded operands, distla's
  result has jnp's sharding.

Only the public API is used, so the table holds whatever the modules beneath become.
Functions whose outputs are unique only up to signs or phases (eigenvectors, singular
vectors, QR) are compared, and differentiated, through ``|x|²`` of those outputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import zlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.fft as dfft
import distla.linalg as dl

# ---------------------------------------------------------------- how a call is made

SIZES = (0, 1, 2, 3, 5, 8)  # 8: 2D blocks on the 2x4 mesh; 2, 3, 5: primes it does not divide
BATCHES = ((), (2,), (0,), (3, 2))
DTYPES = ("float32", "complex64", "int32", "float64")
PLACEMENTS = ("numpy", "device", "shard", "spec", "mixed", "mixed_device")
TRANSFORMS = ("eager", "jit", "vmap", "grad", "jacfwd", "vjp_outside", "grad_outside")
MESH_KINDS = ("explicit", "auto")
# Layouts a user may give (``spec`` placement; dimensions the mesh does not divide keep
# that entry None, as distla.shard's own fall-back does), by rank, beside shard's natural one.
LAYOUTS = {
    1: (P(("x", "y")), P("x"), P("y"), P()),
    2: (P("x", "y"), P("y", "x"), P(("x", "y"), None), P(None, ("x", "y")), P("x", None), P()),
    3: (P("x", "y", None), P(("x", "y"), None, None), P(None, "x", "y"), P("x", None, "y"), P()),
    4: (
        P("x", "y", None, None),
        P(None, None, "x", "y"),
        P(
            ("x", "y"),
        ),
        P(),
    ),
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """How one call is made.

    Attributes:
      n: the core size (a matrix is ``n x n``, a signal has ``n`` samples).
      batch: leading stack dimensions (``vmap`` maps over one more, of size 2).
      dtype: of the host operands (ints: promoted as jnp promotes them).
      place: ``numpy``; ``device`` (one device); ``shard`` (distla.shard's layout);
        ``spec`` (``LAYOUTS[ndim][layout]``); ``mixed`` (the first operand sharded, the
        others numpy); ``mixed_device`` (the first sharded, the others on one device).
      layout: which of ``LAYOUTS`` (``spec`` placement).
      transform: ``eager``, ``jit``, ``vmap``; ``grad`` (inside ``jax.set_mesh`` on an
        Explicit mesh); ``jacfwd`` and ``vjp_outside`` (outside it: a cotangent on the
        result's mesh); ``grad_outside`` (outside it: jax 0.10.2's own ``grad`` needs the
        mesh there, so a failure must say ``jax.set_mesh``). Not drawn: ``jit_grad`` and
        ``jit_jacfwd``, the derivative inside ``jax.jit`` (the mesh in context around the
        jit for ``jit_grad`` as for ``grad``).
      mesh: ``explicit`` or ``auto`` (2x4, axes ``x``, ``y``).
      x64: ``jax_enable_x64`` inside the call (switched after import).
      option: which of the function's option sets.
      plan: ``auto`` (the library's default budget: small problems take the one-device
        plan) or ``distributed`` (budget 0).
    """

    n: int = 3
    batch: tuple = ()
    dtype: str = "float32"
    place: str = "shard"
    layout: int = 0
    transform: str = "eager"
    mesh: str = "explicit"
    x64: bool = False
    option: int = 0
    plan: str = "auto"


def draw(sp: Spec, rng: np.random.Generator) -> Variant:
    """One call of ``sp`` drawn uniformly over each of the variant's choices."""

    def pick(options):
        return options[int(rng.integers(len(options)))]

    transforms = TRANSFORMS if sp.differentiable else ("eager", "jit", "vmap")
    dtype = pick(DTYPES)
    return Variant(
        n=pick([n for n in SIZES if n >= sp.min_n]),
        batch=pick(BATCHES) if sp.stacks else (),
        dtype=dtype,
        place=pick(PLACEMENTS),
        layout=int(rng.integers(6)),
        transform=pick(transforms),
        mesh=pick(MESH_KINDS),
        x64=dtype == "float64" or bool(rng.integers(2)),
        option=int(rng.integers(len(sp.options))),
        plan="distributed" if rng.random() < 0.15 else "auto",
    )


def drawn(sp: Spec, count: int, seed: int = 0) -> list[Variant]:
    """``count`` calls of ``sp``, the same on every run for the same ``seed``."""
    rng = _rng("draw", sp.name, seed)
    return [draw(sp, rng) for _ in range(count)]


# ---------------------------------------------------------------- operands


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _dtype(name: str, x64: bool) -> np.dtype:
    dtype = np.dtype(name)
    if not x64 and dtype.itemsize == 8 and dtype.kind in "fc":
        dtype = np.dtype(np.float32 if dtype.kind == "f" else np.complex64)
    return dtype


def _draw(rng, shape, dtype) -> np.ndarray:
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x


def _cast(x, dtype) -> np.ndarray:
    if dtype.kind in "iub":
        return np.rint(np.real(x) * 2).astype(dtype)
    return np.asarray(x).astype(dtype)


def general(rng, shape, dtype):
    """Well-conditioned square (or rectangular) matrices: ``x/sqrt(n) + 3 I``."""
    *_, m, n = shape
    x = _draw(rng, shape, dtype) / np.sqrt(max(n, 1))
    x = x + 3 * np.eye(m, n)
    return _cast(x, dtype)


def hermitian(rng, shape, dtype):
    x = _draw(rng, shape, dtype)
    x = (x + np.conj(np.swapaxes(x, -1, -2))) / 2
    return _cast(x, dtype)


def positive(rng, shape, dtype):
    """Hermitian positive definite: ``x xᴴ/n + I`` (ints: rounded first, then made so)."""
    n = shape[-1]
    x = _draw(rng, shape, dtype)
    if dtype.kind in "iub":
        x = np.rint(x)
        return (x @ np.swapaxes(x, -1, -2) + n * np.eye(n)).astype(dtype)
    x = x @ np.conj(np.swapaxes(x, -1, -2)) / max(n, 1) + np.eye(n)
    return _cast(x, dtype)


def plain(rng, shape, dtype):
    return _cast(_draw(rng, shape, dtype), dtype)


def complex_of(dtype):
    return np.dtype(np.complex128 if dtype.itemsize == 8 else np.complex64)


# ---------------------------------------------------------------- the two libraries


def _pfft3d_ref(x, norm="backward"):
    return jnp.fft.fftn(x, norm=norm).transpose(1, 2, 0)


def _pifft3d_ref(y, norm="backward"):
    return jnp.fft.ifftn(y.transpose(2, 0, 1), norm=norm)


def _prfft3d_ref(x, norm="backward"):
    return jnp.fft.rfftn(x, norm=norm).transpose(1, 2, 0)


def _pirfft3d_ref(y, norm="backward", s=None):
    return jnp.fft.irfftn(y.transpose(2, 0, 1), s=s, norm=norm)


def _freq3d_ref(real):
    def fn(k, d=1.0):
        shape = np.shape(k)
        kdtype = jnp.result_type(k)  # jaxdecomp's rule: real of a complex k, else k's own
        dtype = jnp.finfo(kdtype).dtype if jnp.iscomplexobj(k) else kdtype
        out = []
        for axis in (2, 0, 1):
            freq = jnp.fft.rfftfreq if (real and axis == 1) else jnp.fft.fftfreq
            w = freq(shape[axis], d, dtype=dtype) * 2 * jnp.pi
            s = [1, 1, 1]
            s[axis] = w.size
            out.append(w.reshape(s))
        return tuple(out)

    return fn


def _eigh_ref(a, b=None, *, eigvals_only=False, **kw):
    """jnp's eigh; with ``b``, the eigenvalues of ``L⁻¹ A L⁻ᴴ`` (``B = L Lᴴ``), which jax
    differentiates (jax.scipy's eigh has no generalized form)."""
    if b is None:
        out = jnp.linalg.eigh(a, **kw)
        return out.eigenvalues if eigvals_only else out
    assert eigvals_only, "the reference has the generalized eigenvalues only"
    low = jnp.linalg.cholesky(b)
    x = jsl.solve_triangular(low, a, lower=True)
    return jnp.linalg.eigvalsh(
        jsl.solve_triangular(low, jnp.conj(jnp.swapaxes(x, -1, -2)), lower=True)
    )


REF = types.SimpleNamespace(
    matmul=jnp.matmul,
    linalg=types.SimpleNamespace(
        **{n: getattr(jnp.linalg, n) for n in dir(jnp.linalg) if not n.startswith("_")},
        **{
            n: getattr(jsl, n)
            for n in (
                "cho_factor",
                "cho_solve",
                "lu",
                "lu_factor",
                "lu_solve",
                "solve_triangular",
                "expm",
                "expm_frechet",
                "polar",
            )
        },
    ),
    fft=types.SimpleNamespace(
        **{n: getattr(jnp.fft, n) for n in dir(jnp.fft) if not n.startswith("_")},
        pfft3d=_pfft3d_ref,
        pifft3d=_pifft3d_ref,
        prfft3d=_prfft3d_ref,
        pirfft3d=_pirfft3d_ref,
        fftfreq3d=_freq3d_ref(False),
        rfftfreq3d=_freq3d_ref(True),
    ),
)
REF.linalg.eigh = _eigh_ref
REF.scipy = types.SimpleNamespace(fft=jax.scipy.fft, linalg=jsl)
OURS = types.SimpleNamespace(matmul=distla.matmul, linalg=dl, fft=dfft, scipy=distla.scipy)


# ---------------------------------------------------------------- the table


def _sq(gen=general):
    def make(rng, n, batch, dtype):
        return (gen(rng, batch + (n, n), dtype),)

    return make


def _rect(extra=2):
    def make(rng, n, batch, dtype):
        return (general(rng, batch + (n + extra, n), dtype),)

    return make


def _sq_rhs(gen=general, k=2, vector=False):
    def make(rng, n, batch, dtype):
        b_shape = batch + ((n,) if vector else (n, k))
        return gen(rng, batch + (n, n), dtype), plain(rng, b_shape, dtype)

    return make


def _vectors(count=1, length=None):
    def make(rng, n, batch, dtype):
        return tuple(plain(rng, batch + (length or n,), dtype) for _ in range(count))

    return make


def _pair(gen=general):
    def make(rng, n, batch, dtype):
        return gen(rng, batch + (n, n), dtype), gen(rng, batch + (n, n), dtype)

    return make


def _signal(rank, real=None):
    def make(rng, n, batch, dtype):
        kind = dtype
        if real is True and dtype.kind == "c":
            kind = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)
        if real is False and dtype.kind == "f":
            kind = complex_of(dtype)
        return (plain(rng, batch + (n,) * rank, kind),)

    return make


def _lstsq(rng, n, batch, dtype):
    return general(rng, batch + (n + 2, n), dtype), plain(rng, batch + (n + 2, 2), dtype)


def _tensor(rng, n, batch, dtype):
    """tensorsolve's ``a`` of shape ``(2, n, 2, n)`` (an invertible ``2n x 2n``) and ``b``."""
    a = general(rng, batch + (2 * n, 2 * n), dtype).reshape(batch + (2, n, 2, n))
    return a, plain(rng, batch + (2, n), dtype)


def _tensorinv(rng, n, batch, dtype):
    return (general(rng, (2 * n, 2 * n), dtype).reshape(2, n, 2 * n),)


def _multi(rng, n, batch, dtype):
    return (
        general(rng, (n, n + 1), dtype),
        general(rng, (n + 1, n), dtype),
        general(rng, (n, 2), dtype),
    )


def _frechet(rng, n, batch, dtype):
    return general(rng, batch + (n, n), dtype) / 3, plain(rng, batch + (n, n), dtype)


def _generalized(rng, n, batch, dtype):
    return hermitian(rng, (n, n), dtype), positive(rng, (n, n), dtype)


def _abs2(x):
    return x * jnp.conj(x) if jnp.iscomplexobj(x) else x * x


def _abs2_all(out):
    return jax.tree.map(lambda x: _abs2(x) if jnp.issubdtype(x.dtype, jnp.inexact) else x, out)


def _eig_inv(out):
    """Eigenvalues in a fixed order (by real part, then imaginary) and |v|² alongside."""
    w, v = out if isinstance(out, tuple) else (out, None)
    order = jnp.lexsort((jnp.imag(w), jnp.real(w)), axis=-1)
    w = jnp.take_along_axis(w, order, axis=-1)
    if v is None:
        return w
    return w, jnp.take_along_axis(_abs2(v), order[..., None, :], axis=-1)


def _vectors_abs2(out):
    """eigh/svd/qr/polar results: vectors as |x|², values as they are."""
    leaves = list(out) if isinstance(out, tuple) else [out]
    return tuple(
        _abs2(x) if (x.ndim >= 2 and jnp.issubdtype(x.dtype, jnp.inexact)) else x for x in leaves
    )


@dataclasses.dataclass(frozen=True)
class Spec:
    """One public function: how to call it, on what, and what of its result to compare.

    Attributes:
      name: ``"linalg.solve"``, ``"fft.fft"``, ``"distla.matmul"``.
      call: ``call(lib, *operands, **options)`` with ``lib`` distla's or jnp's namespace.
      make: ``make(rng, n, batch, dtype)`` -> the host operands.
      options: option sets (``Variant.option`` picks one).
      stacks: leading batch dimensions allowed (else the variants keep ``batch=()``).
      invariant: the part of the result that is unique (compared and differentiated).
      rtol: tolerance relative to the largest entry, in units of the dtype's eps · 100.
      differentiable: jnp differentiates it (else ``grad``-like variants are skipped).
      min_n: smallest core size that makes sense (tensors of size 0 ...).
      layout: ``"jnp"``: where jnp runs on the same sharded operands, distla's results
        have its shardings; ``"documented"``: the docstring states the layout (the FFTs'
        transposed pencils, the products' 2D blocks), not compared.
    """

    name: str
    call: Callable[..., Any]
    make: Callable[..., tuple]
    options: tuple = ({},)
    stacks: bool = True
    invariant: Callable[[Any], Any] = staticmethod(lambda out: out)
    rtol: float = 1.0
    differentiable: bool = True
    min_n: int = 0
    layout: str = "jnp"


def _lin(name, **kw):
    return lambda lib, *ops, **o: getattr(lib.linalg, name)(*ops, **{**kw, **o})


def _fft(name, **kw):
    return lambda lib, *ops, **o: getattr(lib.fft, name)(*ops, **{**kw, **o})


SPECS: dict[str, Spec] = {}
# distributed transforms and products whose docstrings state the result's layout
DOCUMENTED_LAYOUTS = (
    "fft.",
    "scipy.fft.",
    "distla.matmul",
    "linalg.matmul",
    "linalg.multi_dot",
    "linalg.tensordot",
)
JNP_OWN_FFT = ("fft.fftshift", "fft.ifftshift", "fft.fftfreq", "fft.rfftfreq")


def spec(name, call, make, **kw):
    if name.startswith(DOCUMENTED_LAYOUTS) and name not in JNP_OWN_FFT:
        kw.setdefault("layout", "documented")
    SPECS[name] = Spec(name, call, make, **kw)


# the LU family
spec("linalg.det", _lin("det"), _sq())
spec("linalg.slogdet", _lin("slogdet"), _sq())
spec("linalg.inv", _lin("inv"), _sq())
spec(
    "linalg.solve",
    _lin("solve"),
    _sq_rhs(),
    options=({}, {"__b_vector": True}),
)
spec(
    "linalg.lu_factor",
    _lin("lu_factor"),
    _sq(),
    stacks=True,
)
spec("linalg.lu", _lin("lu"), _sq(), options=({}, {"permute_l": True}))
spec(
    "linalg.lu_solve",
    lambda lib, a, b, **o: lib.linalg.lu_solve(lib.linalg.lu_factor(a), b, **o),
    _sq_rhs(),
    options=({}, {"trans": 1}, {"trans": 2}),
    stacks=False,
)
spec(
    "linalg.tensorsolve",
    _lin("tensorsolve"),
    _tensor,
    stacks=False,
    min_n=1,
)
spec("linalg.tensorinv", _lin("tensorinv", ind=2), _tensorinv, stacks=False, min_n=1)
spec("linalg.matrix_power", _lin("matrix_power"), _sq(), options=({"n": 3}, {"n": -2}, {"n": 0}))
# Cholesky, triangular
spec("linalg.cholesky", _lin("cholesky"), _sq(positive), options=({}, {"upper": True}))
spec(
    "linalg.cho_factor",
    lambda lib, a, **o: jnp.tril(lib.linalg.cho_factor(a, lower=True, **o)[0]),
    _sq(positive),
)
spec(
    "linalg.cho_solve",
    lambda lib, a, b, **o: lib.linalg.cho_solve(lib.linalg.cho_factor(a, **o), b),
    _sq_rhs(positive),
    options=({}, {"lower": True}),
)
spec(
    "linalg.solve_triangular",
    _lin("solve_triangular"),
    _sq_rhs(),
    options=({}, {"lower": True}, {"trans": 1, "unit_diagonal": True}),
)
# QR and the spectral family
spec(
    "linalg.qr",
    _lin("qr"),
    _rect(),
    options=({}, {"mode": "r"}, {"mode": "complete"}),
    invariant=_vectors_abs2,
)
spec(
    "linalg.eigh",
    _lin("eigh"),
    _sq(hermitian),
    options=({}, {"UPLO": "U"}),
    invariant=_vectors_abs2,
)
spec(
    "linalg.eigh_generalized",
    lambda lib, a, b, **o: lib.linalg.eigh(a, b, eigvals_only=True, **o),
    _generalized,
    stacks=False,
    rtol=10.0,
)
spec("linalg.eigvalsh", _lin("eigvalsh"), _sq(hermitian))
spec(
    "linalg.svd",
    _lin("svd"),
    _rect(),
    options=({"full_matrices": False}, {}, {"compute_uv": False}),
    invariant=_vectors_abs2,
)
spec("linalg.svdvals", _lin("svdvals"), _rect())
spec(
    "linalg.polar",
    _lin("polar"),
    _sq(),
    options=({}, {"side": "left"}),
    stacks=False,
    rtol=10.0,
)
spec("linalg.pinv", _lin("pinv"), _rect(), options=({}, {"hermitian": True}))
spec(
    "linalg.lstsq",
    _lin("lstsq"),
    _lstsq,
    stacks=False,
    rtol=10.0,
)
spec(
    "linalg.matrix_rank",
    _lin("matrix_rank"),
    _rect(),
    options=({}, {"hermitian": True}),
    differentiable=False,
)
spec("linalg.cond", _lin("cond"), _sq(), options=({}, {"p": 1}, {"p": "fro"}), min_n=1)
spec(
    "linalg.norm",
    _lin("norm"),
    _sq(),
    options=(
        {},
        {"ord": 2, "axis": (-2, -1)},
        {"ord": "nuc", "axis": (-2, -1)},
        {"ord": -2, "axis": (-2, -1)},
        {"ord": 1, "axis": (-2, -1)},
    ),
)
spec(
    "linalg.matrix_norm",
    _lin("matrix_norm"),
    _sq(),
    options=({}, {"ord": 2}, {"ord": "nuc"}, {"ord": np.inf}),
)
spec("linalg.eig", _lin("eig"), _sq(), invariant=_eig_inv, differentiable=False)
spec("linalg.eigvals", _lin("eigvals"), _sq(), invariant=_eig_inv, differentiable=False)
spec("linalg.expm", _lin("expm"), _sq(), rtol=10.0)
spec("linalg.expm_frechet", _lin("expm_frechet"), _frechet, stacks=False, rtol=10.0)
# products
spec("linalg.matmul", _lin("matmul"), _pair())
spec("distla.matmul", lambda lib, a, b, **o: lib.matmul(a, b, **o), _pair(), stacks=False)
spec(
    "linalg.multi_dot",
    lambda lib, *ops, **o: lib.linalg.multi_dot(list(ops), **o),
    _multi,
    stacks=False,
)
spec(
    "linalg.tensordot", _lin("tensordot"), _pair(), options=({"axes": 1}, {"axes": 2}), stacks=False
)
# jnp's own names (re-exported or wrapped)
spec("linalg.cross", _lin("cross"), _vectors(2, length=3))
spec("linalg.outer", _lin("outer"), _vectors(2), stacks=False)
spec("linalg.vecdot", _lin("vecdot"), _vectors(2))
spec(
    "linalg.vector_norm",
    _lin("vector_norm"),
    _vectors(1),
    options=({}, {"ord": 1}, {"ord": np.inf}),
)
spec("linalg.diagonal", _lin("diagonal"), _sq(), options=({}, {"offset": 1}))
spec("linalg.trace", _lin("trace"), _sq(), options=({}, {"offset": -1}))
spec("linalg.matrix_transpose", _lin("matrix_transpose"), _sq())
# FFTs
for _name in ("fft", "ifft"):
    spec(f"fft.{_name}", _fft(_name), _signal(1), options=({}, {"norm": "ortho"}, {"n": 4}))
spec("fft.rfft", _fft("rfft"), _signal(1, real=True), options=({}, {"norm": "forward"}))
spec("fft.irfft", _fft("irfft"), _signal(1, real=False), options=({}, {"n": 4}), min_n=1)
spec("fft.hfft", _fft("hfft"), _signal(1, real=False), min_n=1)
spec("fft.ihfft", _fft("ihfft"), _signal(1, real=True))
for _name in ("fft2", "ifft2"):
    spec(f"fft.{_name}", _fft(_name), _signal(2), options=({}, {"axes": (0, 1)}))
spec("fft.rfft2", _fft("rfft2"), _signal(2, real=True))
spec("fft.irfft2", _fft("irfft2"), _signal(2, real=False), min_n=1)
for _name in ("fftn", "ifftn"):
    spec(f"fft.{_name}", _fft(_name), _signal(3), options=({}, {"axes": (-2, -1)}))
spec("fft.rfftn", _fft("rfftn"), _signal(3, real=True))
spec("fft.irfftn", _fft("irfftn"), _signal(3, real=False), min_n=1)
spec("fft.pfft3d", _fft("pfft3d"), _signal(3, real=False), stacks=False)
spec("fft.pifft3d", _fft("pifft3d"), _signal(3, real=False), stacks=False)
spec("fft.prfft3d", _fft("prfft3d"), _signal(3, real=True), stacks=False, min_n=1)
spec(
    "fft.pirfft3d",
    # s = the volume's shape (without it, an odd or unit Z is not the inverse's length)
    lambda lib, x, **o: lib.fft.pirfft3d(lib.fft.prfft3d(x), s=x.shape, **o),
    _signal(3, real=True),
    options=({}, {"norm": "ortho"}),
    stacks=False,
    min_n=1,
)
spec("fft.fftfreq3d", _fft("fftfreq3d"), _signal(3, real=False), stacks=False, differentiable=False)
spec(
    "fft.rfftfreq3d", _fft("rfftfreq3d"), _signal(3, real=False), stacks=False, differentiable=False
)
spec("fft.fftshift", _fft("fftshift"), _signal(2), options=({}, {"axes": -1}))
spec("fft.ifftshift", _fft("ifftshift"), _signal(2), options=({}, {"axes": 0}))
spec(
    "fft.fftfreq",
    lambda lib, x, **o: lib.fft.fftfreq(x.shape[-1], **o),
    _signal(1),
    options=({}, {"d": 0.5}),
    stacks=False,
    differentiable=False,
)
spec(
    "fft.rfftfreq",
    lambda lib, x, **o: lib.fft.rfftfreq(x.shape[-1], **o),
    _signal(1),
    stacks=False,
    differentiable=False,
)
# jax.scipy.fft's DCTs (distla.scipy.fft); jax has type 2 only (tests/test_dct.py compares
# types 1-4 with scipy)
for _name in ("dct", "idct"):
    spec(
        f"scipy.fft.{_name}",
        lambda lib, x, _n=_name, **o: getattr(lib.scipy.fft, _n)(x, **o),
        _signal(2, real=True),
        options=({}, {"norm": "ortho", "axis": 0}, {"n": 4}),
        min_n=2,
    )
for _name in ("dctn", "idctn"):
    spec(
        f"scipy.fft.{_name}",
        lambda lib, x, _n=_name, **o: getattr(lib.scipy.fft, _n)(x, **o),
        _signal(3, real=True),
        options=({}, {"axes": (0, 2)}, {"norm": "ortho"}),
        stacks=False,
        min_n=2,
    )

# jax.scipy.linalg's names (distla.scipy.linalg) that are not distla.linalg's own functions
# (those are swept as linalg.*); scipy's conventions (cholesky's upper factor, qr's "full")


def _sla(name, **kw):
    return lambda lib, *ops, **o: getattr(lib.scipy.linalg, name)(*ops, **{**kw, **o})


def _sylvester(rng, n, batch, dtype):
    a = general(rng, (n, n), dtype)
    return a, general(rng, (n, n), dtype), plain(rng, (n, n), dtype)


def _tridiagonal(rng, n, batch, dtype):
    return plain(rng, (n,), dtype), plain(rng, (max(n - 1, 0),), dtype)


spec("scipy.linalg.cholesky", _sla("cholesky"), _sq(positive), options=({}, {"lower": True}))
spec(
    "scipy.linalg.eigh",
    _sla("eigh"),
    _sq(hermitian),
    options=({}, {"eigvals_only": True}, {"lower": False}),
    invariant=_vectors_abs2,
)
spec(
    "scipy.linalg.qr",
    _sla("qr"),
    _rect(),
    options=({}, {"mode": "economic"}, {"mode": "r"}),
    invariant=_vectors_abs2,
    stacks=False,
)
spec(
    "scipy.linalg.svd",
    _sla("svd"),
    _rect(),
    options=({"full_matrices": False}, {"compute_uv": False}),
    invariant=_vectors_abs2,
)
spec(
    "scipy.linalg.sqrtm",
    _sla("sqrtm"),
    _sq(positive),
    stacks=False,
    rtol=100.0,
    differentiable=False,
)
spec(
    "scipy.linalg.solve_sylvester",
    _sla("solve_sylvester"),
    _sylvester,
    stacks=False,
    rtol=100.0,
    differentiable=False,
)
spec(
    "scipy.linalg.eigh_tridiagonal",
    _sla("eigh_tridiagonal", eigvals_only=True),
    _tridiagonal,
    stacks=False,
    differentiable=False,
    min_n=1,
)
for _name, _make in (
    ("toeplitz", _vectors(2)),
    ("hankel", _vectors(2)),
    ("circulant", _vectors(1)),
    ("companion", _vectors(1)),
    ("fiedler", _vectors(1)),
    ("fiedler_companion", _vectors(1)),
    ("block_diag", _pair()),
):
    # a matrix of O(n^2) from vectors: distla lays it out over the mesh (its docstring)
    spec(f"scipy.linalg.{_name}", _sla(_name), _make, stacks=False, min_n=2, layout="documented")

# Public names that take no arrays to compare with jnp, and what covers them.
NOT_ARRAY_FUNCTIONS = {
    "distla": {
        "Cost": "the result type of distla.cost",
        "ShapeError": "an exception type (raised where jnp raises ValueError/TypeError)",
        "cost": "reads a compiled program (tests/test_cost.py)",
        "fft": "a package, swept name by name",
        "linalg": "a package, swept name by name",
        "scipy": "a package (distla.scipy.fft swept name by name)",
        "init_distributed": "starts jax's multi-process runtime (tests/test_multiprocess.py)",
        "limit_cpu_blas": "sets OpenBLAS's thread count",
        "make_mesh": "builds the meshes of every variant",
        "shard": "places the operands of every variant (placement 'shard')",
        "__version__": "a string",
    },
    "linalg": {
        "EighResult": "a result type, compared through eigh",
        "SVDResult": "a result type, compared through svd",
        "LUResult": "a result type, compared through lu",
        "SlogdetResult": "a result type, compared through slogdet",
        "cholesky_model_bytes": "a memory model: arithmetic on shapes",
        "lu_model_bytes": "a memory model: arithmetic on shapes",
        "qr_model_bytes": "a memory model: arithmetic on shapes",
        "plan_budget": "reads the one-device plan's budget (Variant.plan sets it)",
        "set_plan_budget": "sets the one-device plan's budget (Variant.plan sets it)",
        "shape_buckets": "reads the shape-bucket setting",
        "set_shape_buckets": "sets the shape buckets of eager factorisations",
    },
    "fft": {"model_bytes": "a memory model: arithmetic on shapes"},
    "scipy.fft": {},
    "scipy.linalg": {
        **{
            n: "builds a matrix from a size: no operand to place"
            for n in ("dft", "hadamard", "helmert", "hilbert", "invhilbert", "invpascal", "pascal")
        },
        "hessenberg": "unique up to a unitary similarity (tests/test_scipy_hessenberg.py)",
        "schur": "unique up to a unitary similarity (tests/test_scipy_schur.py)",
        "rsf2csf": "of a Schur form (tests/test_scipy_schur.py)",
        "qr_multiply": "Q's signs are the factorisation's (tests/test_scipy_schur.py)",
        "funm": "takes a Python function (tests/test_scipy_matfuncs.py)",
        "leslie": "of two vectors of different lengths (tests/test_scipy_special.py)",
        "convolution_matrix": "of a vector and a size (tests/test_scipy_special.py)",
    },
}


# ---------------------------------------------------------------- placing the operands


@functools.cache
def mesh_of(kind: str) -> jax.sharding.Mesh:
    axis_type = AxisType.Explicit if kind == "explicit" else AxisType.Auto
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(axis_type,) * 2)


def fitting(spec_: P, shape, mesh) -> P:
    """``spec_`` with the entries the mesh does not divide dropped (jax refuses them)."""
    out = []
    for dim, entry in enumerate((tuple(spec_) + (None,) * len(shape))[: len(shape)]):
        axes = (entry,) if isinstance(entry, str) else tuple(entry or ())
        parts = int(np.prod([mesh.shape[a] for a in axes])) if axes else 1
        out.append(entry if shape[dim] % parts == 0 else None)
    return P(*out)


def place(ops, v: Variant, mesh):
    def one(x, how):
        if how == "numpy" or x.ndim == 0:
            return x
        if how == "device":
            return jax.device_put(x, jax.devices()[0])
        if how == "shard":
            return distla.shard(x, mesh)
        layouts = LAYOUTS.get(x.ndim, (P(),))
        return jax.device_put(
            x, NamedSharding(mesh, fitting(layouts[v.layout % len(layouts)], x.shape, mesh))
        )

    if v.place in ("mixed", "mixed_device"):
        rest = "numpy" if v.place == "mixed" else "device"
        return tuple(one(x, "shard" if i == 0 else rest) for i, x in enumerate(ops))
    return tuple(one(x, v.place) for x in ops)


# ---------------------------------------------------------------- transformations


def _weights(out, seed=7):
    """Fixed host weights for each inexact leaf of ``out`` (the derivative's cotangent)."""
    rng = np.random.default_rng(seed)
    ws = []
    for x in jax.tree.leaves(out):
        if jnp.issubdtype(x.dtype, jnp.inexact):
            w = rng.standard_normal(x.shape)
            if jnp.issubdtype(x.dtype, jnp.complexfloating):
                w = w + 1j * rng.standard_normal(x.shape)
            ws.append(w.astype(x.dtype))
        else:
            ws.append(None)
    return ws


def _loss(out, ws):
    total = 0.0
    for x, w in zip(jax.tree.leaves(out), ws):
        if w is not None:
            total = total + jnp.real(jnp.sum(x * w))
    return total


def _inexact_only(out):
    return [x for x in jax.tree.leaves(out) if jnp.issubdtype(x.dtype, jnp.inexact)]


@contextlib.contextmanager
def _maybe_mesh(mesh, on: bool):
    if on:
        with jax.set_mesh(mesh):
            yield
    else:
        yield


def apply(transform: str, f, ops, mesh, explicit_ctx: bool):
    """``transform`` of ``f`` at ``ops``; derivatives are taken in the first operand.

    ``explicit_ctx``: the mesh goes in context for ``grad`` (jax 0.10.2 needs it for any
    reverse-mode derivative of an Explicit-sharded array, jnp's own included).
    """
    if transform == "eager":
        return f(*ops)
    if transform == "jit":
        return jax.jit(f)(*ops)
    if transform == "vmap":
        return jax.vmap(f)(*ops)
    if transform in ("jit_grad", "jit_jacfwd"):
        derivative = transform.removeprefix("jit_")
        with _maybe_mesh(mesh, explicit_ctx and derivative == "grad"):
            return jax.jit(lambda *o: apply(derivative, f, o, mesh, False))(*ops)
    rest = ops[1:]

    def g(x):
        return f(x, *rest)

    if transform in ("grad", "grad_outside"):
        probe = jax.eval_shape(g, ops[0])
        ws = _weights(probe)
        with _maybe_mesh(mesh, explicit_ctx and transform == "grad"):
            return jax.grad(lambda x: _loss(g(x), ws))(ops[0])
    if transform == "jacfwd":
        return jax.jacfwd(lambda x: _inexact_only(g(x)))(ops[0])
    if transform == "vjp_outside":
        out, pullback = jax.vjp(lambda x: _inexact_only(g(x)), ops[0])
        cts = []
        for o, w in zip(out, _weights(out)):
            sharding = getattr(o, "sharding", None)
            cts.append(jax.device_put(w, sharding) if sharding is not None else w)
        return out, pullback(cts)
    raise ValueError(transform)


# ---------------------------------------------------------------- comparing


def _eps(dtype) -> float:
    dtype = np.dtype(dtype)
    return float(np.finfo(dtype).eps) if dtype.kind in "fc" else float(np.finfo(np.float32).eps)


def _spec_of(x):
    s = getattr(jax.typeof(x), "sharding", None)
    spec_ = tuple(getattr(s, "spec", ()) or ())
    while spec_ and spec_[-1] is None:
        spec_ = spec_[:-1]
    return spec_


def compare(got, ref, *, rtol_units: float, where: str) -> None:
    got_leaves, ref_leaves = jax.tree.leaves(got), jax.tree.leaves(ref)
    assert len(got_leaves) == len(ref_leaves), (where, len(got_leaves), len(ref_leaves))
    for i, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        g_np, r_np = np.asarray(g), np.asarray(r)  # every result can be read back
        at = f"{where} [result {i}]"
        assert g_np.shape == r_np.shape, (at, g_np.shape, r_np.shape)
        assert g_np.dtype == r_np.dtype, (at, g_np.dtype, r_np.dtype)
        if r_np.size == 0:
            continue
        if r_np.dtype.kind not in "fc":
            np.testing.assert_array_equal(g_np, r_np, err_msg=at)
            continue
        fin = np.isfinite(r_np)
        assert not np.isfinite(g_np[~fin]).any(), f"{at}: finite where jnp's is not"
        if fin.any():
            scale = float(np.abs(r_np[fin]).max())
            tol = 100 * rtol_units * _eps(r_np.dtype) * max(scale, 1e-30)
            err = float(np.abs(g_np[fin].astype(np.complex128) - r_np[fin]).max())
            assert np.isfinite(g_np[fin]).all() and err <= tol, (at, err, tol)


def _run(fn):
    try:
        return fn(), None
    except Exception as e:  # compared by class below
        return None, e


SET_MESH = "set_mesh"
# How jnp refuses bad input; other exceptions of jnp's (NotImplementedError: polar of a
# 1x1 matrix with side="left"; an IndexError inside a rule) are its own limits.
REFUSALS = (ValueError, TypeError)


def check(sp: Spec, v: Variant) -> None:
    """Run ``v`` of ``sp`` through distla and jnp and assert the drop-in contract."""
    mesh = mesh_of(v.mesh)
    explicit = v.mesh == "explicit"
    where = f"{sp.name} {v}"
    if v.transform not in ("eager", "jit", "vmap") and not sp.differentiable:
        return
    options = dict(sp.options[v.option % len(sp.options)])
    b_vector = options.pop("__b_vector", False)
    with jax.enable_x64(v.x64):
        dtype = _dtype(v.dtype, v.x64)
        batch = ((2,) if v.transform == "vmap" else ()) + (v.batch if sp.stacks else ())
        ops = sp.make(_rng(sp.name, v.n, batch, str(dtype)), v.n, batch, dtype)
        if b_vector:
            ops = (ops[0], ops[1][..., 0])
        placed = place(ops, v, mesh)

        def ours(*o):
            return sp.invariant(sp.call(OURS, *o, **options))

        def theirs(*o):
            return sp.invariant(sp.call(REF, *o, **options))

        ref, ref_err = _run(lambda: apply(v.transform, theirs, ops, mesh, False))
        previous = dl.set_plan_budget(0 if v.plan == "distributed" else 512 * 2**20)
        try:
            # the mesh in context for grad where an operand is on it, as a user has it
            on_mesh = explicit and v.place not in ("numpy", "device")
            got, got_err = _run(lambda: apply(v.transform, ours, placed, mesh, on_mesh))
        finally:
            dl.set_plan_budget(previous)
        if ref_err is not None:
            if not isinstance(ref_err, REFUSALS):
                return  # jax's own failure or limitation: distla may do better
            if v.transform != "eager" and _run(lambda: theirs(*ops))[1] is None:
                return  # jax's rule for the transformation fails, not the input
            assert got_err is not None, f"{where}: jnp raises {ref_err!r}; distla returned"
            assert isinstance(got_err, type(ref_err)), (
                f"{where}: jnp raises {type(ref_err).__name__}, distla {got_err!r}"
            )
            return
        if v.transform == "grad_outside" and explicit and got_err is not None:
            # jax 0.10.2's own grad of any Explicit-sharded scalar needs the mesh in context
            assert SET_MESH in str(got_err), (where, got_err)
            return
        if got_err is not None:
            raise AssertionError(f"{where}: jnp works, distla raises {got_err!r}") from got_err
        compare(got, ref, rtol_units=sp.rtol, where=where)
        if (
            explicit
            and sp.layout == "jnp"
            and v.transform == "eager"
            and v.place in ("shard", "spec")
        ):
            same, same_err = _run(lambda: theirs(*placed))
            if same_err is None:  # jnp runs on the same sharded operands: the same layouts
                for i, (g, s) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(same))):
                    assert _spec_of(g) == _spec_of(s), (where, i, _spec_of(g), _spec_of(s))


# ---------------------------------------------------------------- bad input

_F = np.float32


def _m(*shape, dtype=_F):
    return (np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 5 + 1).astype(dtype)


# (label, operands, call): jnp refuses each; distla must refuse with the same class.
BAD_CALLS = [
    ("det of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.det(a)),
    ("det of a vector", (_m(4),), lambda L, a: L.linalg.det(a)),
    ("slogdet of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.slogdet(a)),
    ("inv of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.inv(a)),
    ("solve with a mismatched b", (_m(4, 4), _m(6)), lambda L, a, b: L.linalg.solve(a, b)),
    ("solve of a non-square a", (_m(4, 6), _m(4)), lambda L, a, b: L.linalg.solve(a, b)),
    ("cholesky of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.cholesky(a)),
    ("cholesky of a vector", (_m(4),), lambda L, a: L.linalg.cholesky(a)),
    ("eigh of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.eigh(a)),
    ("eigh with a bad UPLO", (_m(4, 4),), lambda L, a: L.linalg.eigh(a, UPLO="X")),
    ("eigvalsh of a vector", (_m(4),), lambda L, a: L.linalg.eigvalsh(a)),
    ("svd of a vector", (_m(4),), lambda L, a: L.linalg.svd(a)),
    ("svdvals of a vector", (_m(4),), lambda L, a: L.linalg.svdvals(a)),
    ("qr with a bad mode", (_m(4, 4),), lambda L, a: L.linalg.qr(a, mode="bogus")),
    ("qr of a vector", (_m(4),), lambda L, a: L.linalg.qr(a)),
    ("pinv of a vector", (_m(4),), lambda L, a: L.linalg.pinv(a)),
    ("pinv with rtol and rcond", (_m(4, 4),), lambda L, a: L.linalg.pinv(a, 0.1, rcond=0.1)),
    (
        "matrix_rank with rtol and tol",
        (_m(4, 4),),
        lambda L, a: L.linalg.matrix_rank(a, 0.1, tol=0.1),
    ),
    ("lstsq of a 3-D a", (_m(2, 4, 4), _m(4)), lambda L, a, b: L.linalg.lstsq(a, b)),
    ("lstsq with a mismatched b", (_m(4, 3), _m(5)), lambda L, a, b: L.linalg.lstsq(a, b)),
    ("cond of a vector", (_m(4),), lambda L, a: L.linalg.cond(a)),
    ("cond of an empty matrix", (_m(0, 0),), lambda L, a: L.linalg.cond(a)),
    ("norm with a bad order", (_m(4, 4),), lambda L, a: L.linalg.norm(a, ord="bogus")),
    ("norm of a 3-D array without axis", (_m(2, 4, 4),), lambda L, a: L.linalg.norm(a, ord=2)),
    ("matrix_norm of a vector", (_m(4),), lambda L, a: L.linalg.matrix_norm(a)),
    ("matrix_norm with a bad order", (_m(4, 4),), lambda L, a: L.linalg.matrix_norm(a, ord=3)),
    ("matrix_power of a non-square", (_m(4, 6),), lambda L, a: L.linalg.matrix_power(a, 2)),
    ("matrix_power with a float power", (_m(4, 4),), lambda L, a: L.linalg.matrix_power(a, 1.5)),
    (
        "tensorsolve with axes out of range",
        (_m(2, 3, 6), _m(2, 3)),
        lambda L, a, b: L.linalg.tensorsolve(a, b, axes=(5,)),
    ),
    (
        "tensorsolve of mismatched sizes",
        (_m(2, 3, 5), _m(2, 3)),
        lambda L, a, b: L.linalg.tensorsolve(a, b),
    ),
    ("tensorinv with ind 0", (_m(4, 4),), lambda L, a: L.linalg.tensorinv(a, ind=0)),
    ("tensorinv of a non-square split", (_m(2, 3, 5),), lambda L, a: L.linalg.tensorinv(a, ind=1)),
    ("matmul of mismatched shapes", (_m(4, 3), _m(4, 3)), lambda L, a, b: L.linalg.matmul(a, b)),
    ("matmul of a scalar", (_m(4, 4), np.float32(2)), lambda L, a, b: L.linalg.matmul(a, b)),
    ("multi_dot of one matrix", (_m(4, 4),), lambda L, a: L.linalg.multi_dot([a])),
    (
        "multi_dot of mismatched shapes",
        (_m(4, 3), _m(4, 3)),
        lambda L, a, b: L.linalg.multi_dot([a, b]),
    ),
    (
        "tensordot of mismatched axes",
        (_m(4, 3), _m(4, 3)),
        lambda L, a, b: L.linalg.tensordot(a, b, axes=1),
    ),
    ("cross of 4-vectors", (_m(4), _m(4)), lambda L, a, b: L.linalg.cross(a, b)),
    ("outer of matrices", (_m(4, 4), _m(4)), lambda L, a, b: L.linalg.outer(a, b)),
    ("vecdot of mismatched vectors", (_m(4), _m(5)), lambda L, a, b: L.linalg.vecdot(a, b)),
    ("diagonal of a vector", (_m(4),), lambda L, a: L.linalg.diagonal(a)),
    ("trace of a vector", (_m(4),), lambda L, a: L.linalg.trace(a)),
    ("matrix_transpose of a vector", (_m(4),), lambda L, a: L.linalg.matrix_transpose(a)),
    ("lu_factor of a vector", (_m(4),), lambda L, a: L.linalg.lu_factor(a)),
    ("lu of a vector", (_m(4),), lambda L, a: L.linalg.lu(a)),
    (
        "lu_solve with a bad trans",
        (_m(4, 4), _m(4)),
        lambda L, a, b: L.linalg.lu_solve(L.linalg.lu_factor(a), b, trans=5),
    ),
    (
        "lu_solve with a mismatched b",
        (_m(4, 4), _m(5)),
        lambda L, a, b: L.linalg.lu_solve(L.linalg.lu_factor(a), b),
    ),
    (
        "cho_solve with a mismatched b",
        (_m(4, 4), _m(5)),
        lambda L, a, b: L.linalg.cho_solve((a, True), b),
    ),
    (
        "solve_triangular with a mismatched b",
        (_m(4, 4), _m(5)),
        lambda L, a, b: L.linalg.solve_triangular(a, b),
    ),
    (
        "solve_triangular with a bad trans",
        (_m(4, 4), _m(4)),
        lambda L, a, b: L.linalg.solve_triangular(a, b, trans=7),
    ),
    ("expm of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.expm(a)),
    (
        "expm_frechet of mismatched shapes",
        (_m(4, 4), _m(3, 3)),
        lambda L, a, e: L.linalg.expm_frechet(a, e),
    ),
    ("polar with a bad side", (_m(4, 4),), lambda L, a: L.linalg.polar(a, side="up")),
    ("polar with a bad method", (_m(4, 4),), lambda L, a: L.linalg.polar(a, method="bogus")),
    ("eig of a non-square matrix", (_m(4, 6),), lambda L, a: L.linalg.eig(a)),
    ("eigvals of a vector", (_m(4),), lambda L, a: L.linalg.eigvals(a)),
    ("vector_norm with a bad order", (_m(4),), lambda L, a: L.linalg.vector_norm(a, ord="fro")),
    ("fft with n = 0", (_m(8),), lambda L, a: L.fft.fft(a, n=0)),
    ("fft with a bad norm", (_m(8),), lambda L, a: L.fft.fft(a, norm="bogus")),
    ("fft with an axis out of range", (_m(8),), lambda L, a: L.fft.fft(a, axis=3)),
    ("rfft of complex input", (_m(8, dtype=np.complex64),), lambda L, a: L.fft.rfft(a)),
    ("ihfft of complex input", (_m(8, dtype=np.complex64),), lambda L, a: L.fft.ihfft(a)),
    ("irfft with n = 0", (_m(8),), lambda L, a: L.fft.irfft(a, n=0)),
    ("fft2 of a vector", (_m(8),), lambda L, a: L.fft.fft2(a)),
    (
        "fftn with s and axes of different lengths",
        (_m(4, 4, 4),),
        lambda L, a: L.fft.fftn(a, s=(4, 4), axes=(0,)),
    ),
    ("fftn with repeated axes", (_m(4, 4, 4),), lambda L, a: L.fft.fftn(a, axes=(0, 0))),
    ("rfftn of complex input", (_m(4, 4, 4, dtype=np.complex64),), lambda L, a: L.fft.rfftn(a)),
    ("irfftn with a bad norm", (_m(4, 4, 4),), lambda L, a: L.fft.irfftn(a, norm="bogus")),
    ("pfft3d of a matrix", (_m(4, 4),), lambda L, a: L.fft.pfft3d(a)),
    ("pifft3d of a matrix", (_m(4, 4),), lambda L, a: L.fft.pifft3d(a)),
    ("fftshift with an axis out of range", (_m(8),), lambda L, a: L.fft.fftshift(a, axes=3)),
    ("distla.matmul of mismatched shapes", (_m(4, 3), _m(4, 3)), lambda L, a, b: L.matmul(a, b)),
    ("eigh of a string", ("abc",), lambda L, a: L.linalg.eigh(a)),
    ("det of a list of strings", (["a", "b"],), lambda L, a: L.linalg.det(a)),
]


def check_bad(label: str, ops, call, mesh_kind: str = "explicit") -> None:
    """jnp refuses ``call`` on the host ``ops``; distla refuses it on sharded ones with the
    same exception class (and names what it received: the message is not empty)."""
    mesh = mesh_of(mesh_kind)
    _, ref_err = _run(lambda: call(REF, *ops))
    assert ref_err is not None, f"{label}: jnp accepts it; the case is not bad input"
    placed = tuple(
        distla.shard(x, mesh) if isinstance(x, np.ndarray) and x.ndim and x.dtype.kind != "U" else x
        for x in ops
    )
    for args in (placed, ops):
        _, got_err = _run(lambda: call(OURS, *args))
        kind = "sharded" if args is placed else "host"
        assert got_err is not None, f"{label} ({kind}): jnp raises {ref_err!r}; distla returned"
        assert isinstance(got_err, type(ref_err)), (
            f"{label} ({kind}): jnp raises {type(ref_err).__name__}: {ref_err}; distla {got_err!r}"
        )
        assert str(got_err), label
