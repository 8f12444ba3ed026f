"""Structured matrices built where they lie: ``toeplitz``, ``hilbert``, ``dft``, ... (private).

Each of ``scipy.linalg``'s special matrices is a formula of the row and column
indices and of a few short defining vectors. A matrix whose defining vectors are
sharded (on a mesh of more than one device) comes back in distla's natural layout
of their mesh (2D blocks ``P(r, c)``, the largest even layout where the mesh does
not divide its shape); one defined by its size alone is built in the layout of its
``device=`` keyword (jnp's creation keyword: a ``NamedSharding``). Either way each
device evaluates the formula on its own block (``distla.kernels.structured``):
the program's only collective replicates the defining vectors, and no device ever
holds more than its block. Unsharded vectors, stacks of them and empty results are
jax's own functions, whose dtypes and errors every path shares.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.scipy.special import comb, gammaln
from jax.sharding import AbstractMesh, NamedSharding
from jax.sharding import PartitionSpec as P

from distla.kernels.structured import block_of, gram_block

from ..._core import route
from ..._core.checks import onto_mesh
from ..._core.mesh import (
    axes_taken_by_vmap,
    constrain,
    drop_trivial_sharding,
    fitting_spec,
    run_on_mesh,
    shard_map,
    shard_spec,
    spec_groups,
)
from ..._core.plan import Plan
from ._everywhere import result_types

#: Rows of ``L`` per step of the symmetric inverse Pascal matrix's product.
GRAM_CHUNK = 256


# ---------------------------------------------------------------------- entry formulas
# Each takes int32 global indices ``i`` ([mloc, 1]) and ``j`` ([1, nloc]), the
# defining vectors (whole), and static options; it returns the block's entries.


def _at(v, k):
    """``v[k]`` with ``k`` clipped into range (a masked branch reads a valid entry)."""
    return v[jnp.clip(k, 0, v.shape[0] - 1)]


def _toeplitz(i, j, c, r):
    return jnp.where(i >= j, _at(c, i - j), _at(r, j - i))


def _hankel(i, j, c, r):
    s = i + j
    return jnp.where(s < c.shape[0], _at(c, s), _at(r, s - c.shape[0] + 1))


def _circulant(i, j, c):
    n = c.shape[0]
    return _at(c, (i - j + n) % n)


def _leslie(i, j, f, s):
    zero = jnp.zeros((), f.dtype)
    return jnp.where(i == 0, _at(f, j), jnp.where(j == i - 1, _at(s, j), zero))


def _companion(i, j, a):
    first = -_at(a, j + 1) / a[0]
    return jnp.where(i == 0, first, (j == i - 1).astype(first.dtype))


def _fiedler(i, j, a):
    return jnp.abs(_at(a, i) - _at(a, j))


def _fiedler_companion(i, j, a):
    """jax's pentadiagonal layout (``jax.scipy.linalg.fiedler_companion``), entry by entry."""
    n = a.shape[0] - 1
    a = a / a[0]
    one, zero = jnp.ones((), a.dtype), jnp.zeros((), a.dtype)
    even, odd = i % 2 == 0, i % 2 == 1
    conditions = [
        (i == 0) & (j == 0),
        (i == 1) & (j == 0),
        (j == i + 1) & even,
        (j == i + 2) & even,
        (j == i - 1) & even & (i >= 2),
        (j == i - 2) & odd & (i >= 3),
    ]
    choices = [-a[1], one, -_at(a, jnp.minimum(i + 2, n)), one, -_at(a, jnp.minimum(i + 1, n)), one]
    choices = [jnp.broadcast_to(c, jnp.broadcast_shapes(i.shape, j.shape)) for c in choices]
    return jnp.select(conditions, choices, default=zero)


def _hilbert(i, j, *, dtype):
    return 1 / (i + j + 1).astype(dtype)


def _sign(k, dtype):
    """``(-1)**k`` for integer ``k``."""
    return jnp.where(k % 2 == 0, 1, -1).astype(dtype)


def _invhilbert(i, j, *, n, dtype):
    s = i + j
    fi, fj, fs = (x.astype(dtype) for x in (i, j, s))
    return (
        _sign(s, dtype)
        * (fs + 1)
        * comb(n + fi, n - fj - 1)
        * comb(n + fj, n - fi - 1)
        * comb(fs, fi) ** 2
    ).astype(dtype)


def _binom(top, k, dtype):
    """jax's ``_binom`` (``exp`` of ``lgamma``s): zero where ``k > top``."""
    t, kk = top.astype(dtype), k.astype(dtype)
    return jnp.exp(gammaln(t + 1) - gammaln(t - kk + 1) - gammaln(kk + 1))


def _pascal(i, j, *, kind):
    f32 = jnp.float32  # jax's pascal is float32 whatever x64 says
    if kind == "lower":
        return jnp.where(j <= i, _binom(i, j, f32), 0).astype(f32)
    if kind == "upper":
        return jnp.where(i <= j, _binom(j, i, f32), 0).astype(f32)
    return _binom(i + j, i, f32)  # (L Lᵀ)_ij = C(i + j, i) (Vandermonde's identity)


def _inv_pascal_lower(k, i, *, n, dtype):
    """``L⁻¹[k, i] = (-1)^(k-i) C(k, i)`` (zero above the diagonal and for rows ``k >= n``)."""
    keep = (i <= k) & (k < n)
    return jnp.where(keep, _sign(k - i, dtype) * _binom(k, i, dtype), 0).astype(dtype)


def _invpascal(i, j, *, n, kind, dtype):
    if kind == "lower":
        return _inv_pascal_lower(i, j, n=n, dtype=dtype)
    return _inv_pascal_lower(j, i, n=n, dtype=dtype)  # upper: the transpose


def _helmert(i, j, *, n, full, dtype):
    r = i - 1 if full else i  # the contrast row
    k = (r + 1).astype(dtype)
    denom = jnp.sqrt(k * (k + 1))
    contrast = jnp.where(j <= r, 1 / denom, jnp.where(j == r + 1, -k / denom, 0))
    if full:
        contrast = jnp.where(i == 0, 1 / jnp.sqrt(jnp.asarray(n, dtype)), contrast)
    return contrast.astype(dtype)


def _hadamard(i, j, *, dtype):
    # Sylvester's construction: H[i, j] = (-1)^popcount(i & j)
    odd = lax.population_count(i & j) % 2 == 1
    return jnp.where(odd, -1, 1).astype(dtype)


def _dft(i, j, *, n, scale, dtype):
    real = jnp.finfo(dtype).dtype
    if n <= 46340:  # i·j fits in int32: the phase exactly, reduced mod n
        phase = ((i * j) % n).astype(real) / n
    else:
        phase = (i.astype(real) * j.astype(real) / n) % 1
    angle = -2 * np.pi * phase
    w = lax.complex(jnp.cos(angle), jnp.sin(angle)).astype(dtype)
    if scale == "sqrtn":
        return w / jnp.sqrt(jnp.asarray(n, real)).astype(dtype)
    if scale == "n":
        return w / jnp.asarray(n, dtype)
    return w


# ---------------------------------------------------------------------- the programs


def _kernel(entries, options, shape, spec, mesh, dtype, gram, vectors, prepare=None):
    """``shard_map`` of the block formula over ``mesh``: the matrix laid out as ``spec``.

    ``prepare(*vectors, dtype=dtype)`` maps the replicated vectors to the formula's
    operands first (casts, ``convolution_matrix``'s first column and row).
    """
    axes = spec_groups(spec, 2, dict(mesh.shape))
    local = tuple(s // math.prod(mesh.shape[a] for a in g) for s, g in zip(shape, axes))
    fn = functools.partial(entries, **dict(options))

    def kernel(*vecs):
        if gram:  # Lᴴ L with L's rows from 0 to the chunk multiple past n
            rows = -(-shape[0] // GRAM_CHUNK) * GRAM_CHUNK
            chunk = min(GRAM_CHUNK, rows)
            return gram_block(fn, rows, local, axes, chunk=chunk, dtype=dtype)
        return block_of(fn, local, axes, *vecs).astype(dtype)

    vectors = [constrain(v, P()) for v in vectors]  # the one collective: a short vector each
    if prepare is not None:
        vectors = prepare(*vectors, dtype=dtype)
    return shard_map(kernel, in_specs=(P(),) * len(vectors), out_specs=spec, check_vma=False)(
        *vectors
    )


@functools.partial(
    jax.jit, static_argnames=("entries", "options", "shape", "dtype", "mesh", "spec", "prepare")
)
def _from_vectors(*vectors, entries, options, shape, dtype, mesh, spec, prepare):
    def body(*vectors):
        return _kernel(entries, options, shape, spec, mesh, dtype, False, vectors, prepare)

    return run_on_mesh(body, mesh, spec, *vectors)


@functools.lru_cache(maxsize=128)
def _sized_program(entries, options, shape, dtype, sharding: NamedSharding, gram: bool):
    """The program that builds a size-defined matrix in ``sharding`` (cached per call site)."""
    mesh = sharding.mesh.abstract_mesh
    spec = sharding.spec

    def build():
        def body():
            return _kernel(entries, options, shape, spec, mesh, dtype, gram, ())

        return run_on_mesh(body, mesh, spec)

    return jax.jit(build, out_shardings=sharding)


def _jax_function(*vectors, jax_fn, out, entries, options, prepare):
    """jax's own function of the vectors (the one-device function of the structured ops)."""
    del out, entries, options, prepare
    return jax_fn(*vectors)


def _jax_dtype(what, *vectors, out, **options):
    """The result's dtype: jax's promotion of the vectors, read off jax's result ``out``."""
    del what, vectors, options
    return np.dtype(out.dtype)


def _not_built(*vectors, out, **options):
    """jax's function takes the call: an empty result, a stack, or not a matrix."""
    del options
    return out.ndim != 2 or 0 in out.shape or any(v.ndim != 1 for v in vectors)


def _built(plan: Plan, *vectors, jax_fn, out, entries, options, prepare):
    """The matrix built on ``plan``'s mesh, each device its block (`_from_vectors`)."""
    del jax_fn
    return _from_vectors(
        *vectors,
        entries=entries,
        options=tuple(options),
        shape=tuple(out.shape),
        dtype=np.dtype(out.dtype),
        mesh=plan.mesh,
        spec=shard_spec(out.shape, plan.mesh),
        prepare=prepare,
    )


def _structured(name: str, operands: tuple[str, ...]) -> route.Op:
    """The op of a matrix built from ``operands``, short defining vectors."""
    return route.Op(
        f"distla.scipy.linalg.{name}",
        operands=operands,
        one_device=_jax_function,
        distributed=_built,
        promote=_jax_dtype,
        cast=route.as_given,
        empty=_not_built,
    )


TOEPLITZ = _structured("toeplitz", ("c", "r"))
HANKEL = _structured("hankel", ("c", "r"))
CIRCULANT = _structured("circulant", ("c",))
LESLIE = _structured("leslie", ("f", "s"))
COMPANION = _structured("companion", ("a",))
FIEDLER = _structured("fiedler", ("a",))
FIEDLER_COMPANION = _structured("fiedler_companion", ("a",))
CONVOLUTION_MATRIX = _structured("convolution_matrix", ("a",))


def _vector_matrix(op, jax_fn, entries, vectors, *, options=(), prepare=None):
    """``jax_fn(*vectors)`` by ``op``'s route: built on the vectors' mesh when they are
    sharded there (`_built`), jax's function otherwise (`_not_built`).

    ``prepare`` (module level, or a `_Static`: part of the program's key) maps
    the replicated vectors to the formula's operands inside the program. jax's result
    types (``out``) are traced once, here.
    """
    out = result_types(jax_fn, *vectors)
    options = dict(entries=entries, options=tuple(options), prepare=prepare)
    return route.call(op, *vectors, jax_fn=jax_fn, out=out, **options)


def _cast(*vectors, dtype):
    """The vectors in the result's dtype (jax's promotion of them, read off its result)."""
    return [v.astype(dtype) for v in vectors]


def _sized_matrix(jax_fn, entries, device, *, options=(), gram=False):
    """``jax_fn()`` (a matrix defined by sizes), built in ``device``'s layout.

    ``device`` as jnp's creation functions take it: ``None`` (jax's default
    device), a ``Device`` or a ``Sharding``. A ``NamedSharding`` over more than one
    device builds each device's block where it lies, in the largest even layout of
    its mesh that fits the shape (its own spec where that divides the shape).
    """
    out = result_types(jax_fn)
    if device is None:
        return jax_fn()
    if isinstance(device, jax.Device):
        device = jax.sharding.SingleDeviceSharding(device)
    if not isinstance(device, jax.sharding.Sharding):
        raise TypeError(
            f"device must be None, a jax.Device or a jax.sharding.Sharding (jnp's creation "
            f"keyword); got {device!r}"
        )
    if (
        not isinstance(device, NamedSharding)
        or device.mesh.size <= 1
        or 0 in out.shape
        or not isinstance(device.mesh, jax.sharding.Mesh)
    ):
        return jax.jit(jax_fn, out_shardings=device)()
    mesh = device.mesh
    spec = fitting_spec(out.shape, mesh.abstract_mesh, device.spec)
    program = _sized_program(
        entries,
        tuple(options),
        tuple(out.shape),
        np.dtype(out.dtype),
        NamedSharding(mesh, spec),
        gram,
    )
    return program()


def _vector(x: Any, name: str) -> jax.Array:
    return x if isinstance(x, jax.Array) else jnp.asarray(x)


def _size(n: Any, name: str = "n") -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"{name} must be an int (a static size); got {n!r}") from None


# ---------------------------------------------------------------------- from vectors


@route.public
def toeplitz(c: jax.typing.ArrayLike, r: jax.typing.ArrayLike | None = None) -> jax.Array:
    """Toeplitz matrix ``T[i, j] = c[i - j]`` (``i >= j``), ``r[j - i]`` (``i < j``),
    as ``jax.scipy.linalg.toeplitz``.

    Args:
      c: first column, ``[N]``, sharded on a mesh (any layout) or not; a stack
        ``[..., N]`` is jax's.
      r: first row, ``[M]`` (``r[0]`` ignored); ``None``: ``conj(c)``.

    Returns:
      ``[N, M]``; for sharded ``c``/``r`` built in the natural layout of their mesh
      (2D blocks ``P(r, c)``, the largest even layout that fits), each device its
      own block, the vectors replicated first (the only collective).

    See also: ``jax.scipy.linalg.toeplitz``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> c = distla.shard(jnp.arange(1.0, 257.0), mesh)
      >>> m = sla.toeplitz(c)
      >>> m.shape, m.sharding.spec
      ((256, 256), P('rows', 'cols'))
      >>> float(np.asarray(m)[5, 2])
      4.0
    """
    c = _vector(c, "c")
    if r is None:
        r = jnp.conjugate(c)
    # onto the mesh first: jnp.atleast_1d of a one-device r fails inside jax.set_mesh
    c, r = onto_mesh(c, _vector(r, "r"))
    c1, r1 = jnp.atleast_1d(c), jnp.atleast_1d(r)
    return _vector_matrix(TOEPLITZ, jsl.toeplitz, _toeplitz, (c1, r1), prepare=_cast)


@route.public
def hankel(c: jax.typing.ArrayLike, r: jax.typing.ArrayLike | None = None) -> jax.Array:
    """Hankel matrix ``H[i, j] = v[i + j]``, ``v = [c, r[1:]]``, as ``jax.scipy.linalg.hankel``.

    Args:
      c: first column ``[N]`` (sharded or not).
      r: last row ``[M]`` (``r[0]`` ignored); ``None``: zeros.

    Returns:
      ``[N, M]``, built where it lies as [`toeplitz`][distla.scipy.linalg.toeplitz].

    Raises:
      ValueError: ``c`` or ``r`` is a scalar.

    See also: ``jax.scipy.linalg.hankel``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> c = distla.shard(jnp.arange(1.0, 257.0), mesh)
      >>> m = sla.hankel(c)
      >>> m.shape, float(np.asarray(m)[1, 0]), float(np.asarray(m)[255, 1])
      ((256, 256), 2.0, 0.0)
    """
    c = _vector(c, "c")
    r = jnp.zeros_like(c) if r is None else _vector(r, "r")
    if c.ndim == 0 or r.ndim == 0:
        return jsl.hankel(c, r)  # jax's error
    return _vector_matrix(HANKEL, jsl.hankel, _hankel, (c, r), prepare=_cast)


@route.public
def circulant(c: jax.typing.ArrayLike) -> jax.Array:
    """Circulant matrix ``C[i, j] = c[(i - j) mod N]``, as ``jax.scipy.linalg.circulant``.

    Args:
      c: first column ``[N]`` (sharded or not).

    Returns:
      ``[N, N]``, built where it lies as [`toeplitz`][distla.scipy.linalg.toeplitz].

    See also: ``jax.scipy.linalg.circulant``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> c = distla.shard(jnp.arange(1.0, 257.0), mesh)
      >>> m = sla.circulant(c)
      >>> m.shape, m.sharding.spec
      ((256, 256), P('rows', 'cols'))
      >>> float(np.asarray(m)[1, 0]), float(np.asarray(m)[0, 1])
      (2.0, 256.0)
    """
    c = jnp.atleast_1d(_vector(c, "c"))
    return _vector_matrix(CIRCULANT, jsl.circulant, _circulant, (c,))


@route.public
def leslie(f: jax.typing.ArrayLike, s: jax.typing.ArrayLike) -> jax.Array:
    """Leslie matrix: ``f`` on the first row, ``s`` on the first subdiagonal, as
    ``jax.scipy.linalg.leslie``.

    Args:
      f: fecundities ``[N]``, ``N >= 2`` (sharded or not).
      s: survivals ``[N - 1]``.

    Returns:
      ``[N, N]``, built where it lies as [`toeplitz`][distla.scipy.linalg.toeplitz].

    Raises:
      ValueError: the lengths do not fit, as jax.

    See also: ``jax.scipy.linalg.leslie``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> f = distla.shard(jnp.array([0.1, 2.0, 1.0]), mesh)
      >>> s = distla.shard(jnp.array([0.2, 0.8]), mesh)
      >>> np.asarray(sla.leslie(f, s))
      array([[0.1, 2. , 1. ],
             [0.2, 0. , 0. ],
             [0. , 0.8, 0. ]], dtype=float32)
    """
    f, s = jnp.atleast_1d(_vector(f, "f")), jnp.atleast_1d(_vector(s, "s"))
    if f.shape[-1] < 2 or s.shape[-1] != f.shape[-1] - 1:
        return jsl.leslie(f, s)  # jax's error
    return _vector_matrix(LESLIE, jsl.leslie, _leslie, (f, s), prepare=_cast)


@route.public
def companion(a: jax.typing.ArrayLike) -> jax.Array:
    """Companion matrix of the polynomial ``a`` (leading coefficient first), as
    ``jax.scipy.linalg.companion``.

    Args:
      a: ``[N]`` coefficients, ``N >= 2`` (sharded or not); ints promote to the
        default float.

    Returns:
      ``[N - 1, N - 1]``: first row ``-a[1:]/a[0]``, ones on the first subdiagonal;
      built where it lies as [`toeplitz`][distla.scipy.linalg.toeplitz].

    Raises:
      ValueError: ``N < 2``, as jax.

    See also: ``jax.scipy.linalg.companion``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([1.0, -3.0, 2.0]), mesh)
      >>> m = sla.companion(a)
      >>> np.asarray(m)
      array([[ 3., -2.],
             [ 1.,  0.]], dtype=float32)
    """
    a = jnp.atleast_1d(_vector(a, "a"))
    if a.shape[-1] < 2:
        return jsl.companion(a)  # jax's error
    return _vector_matrix(COMPANION, _jax_companion, _companion, (a,), prepare=_cast)


def _jax_companion(a):
    """``jax.scipy.linalg.companion``; inside a ``jax.vmap`` over a batch on ``Explicit``
    mesh axes the same matrix without jax's scatter of the first row into the identity's
    shift (which sharding-in-types cannot type: a batched row into an unbatched matrix)."""
    if not axes_taken_by_vmap():
        return jsl.companion(a)
    dtype = jax.eval_shape(jsl.companion, jax.ShapeDtypeStruct(a.shape, a.dtype)).dtype
    a = a.astype(dtype)
    first_row = -a[..., 1:] / a[..., :1]
    m = a.shape[-1] - 1
    shift = jnp.eye(m, m, k=-1, dtype=dtype)
    return jnp.where((jnp.arange(m) == 0)[:, None], first_row[..., None, :], shift)


@route.public
def fiedler(a: jax.typing.ArrayLike) -> jax.Array:
    """Fiedler matrix ``F[i, j] = |a[i] - a[j]|``, as ``jax.scipy.linalg.fiedler``.

    Args:
      a: ``[N]`` (sharded or not).

    Returns:
      ``[N, N]``, built where it lies as [`toeplitz`][distla.scipy.linalg.toeplitz].

    See also: ``jax.scipy.linalg.fiedler``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([1.0, 4.0, 12.0]), mesh)
      >>> np.asarray(sla.fiedler(a))
      array([[ 0.,  3., 11.],
             [ 3.,  0.,  8.],
             [11.,  8.,  0.]], dtype=float32)
    """
    a = jnp.atleast_1d(_vector(a, "a"))
    return _vector_matrix(FIEDLER, jsl.fiedler, _fiedler, (a,))


@route.public
def fiedler_companion(a: jax.typing.ArrayLike) -> jax.Array:
    """Fiedler companion matrix (pentadiagonal, the roots of ``a`` as eigenvalues), as
    ``jax.scipy.linalg.fiedler_companion``.

    Args:
      a: ``[N]`` coefficients (sharded or not); ints promote to the default float.

    Returns:
      ``[N - 1, N - 1]``, built where it lies as
      [`toeplitz`][distla.scipy.linalg.toeplitz] (``N <= 2``: jax's).

    Raises:
      ValueError: ``a`` is empty, as jax.

    See also: ``jax.scipy.linalg.fiedler_companion``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([1.0, -3.0, 2.0]), mesh)
      >>> np.asarray(sla.fiedler_companion(a))
      array([[ 3., -2.],
             [ 1.,  0.]], dtype=float32)
    """
    a = jnp.atleast_1d(_vector(a, "a"))
    if a.shape[-1] <= 2:
        return jsl.fiedler_companion(drop_trivial_sharding(a))
    return _vector_matrix(
        FIEDLER_COMPANION, jsl.fiedler_companion, _fiedler_companion, (a,), prepare=_cast
    )


def _convolution_vectors(a, *, n, mode, dtype):
    """jax's first column and row of the convolution matrix (``convolution_matrix``)."""
    a = a.astype(dtype)
    m = a.shape[0]
    az = jnp.pad(a, (0, n - 1))
    raz = jnp.pad(jnp.flip(a), (0, n - 1))
    length = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        tb, te = trim // 2, trim - trim // 2
    elif mode == "valid":
        tb = te = min(n, m) - 1
    else:
        tb = te = 0
    return az[tb : length - te], raz[length - n - tb : length - tb]


@route.public
def convolution_matrix(a: jax.typing.ArrayLike, n: int, mode: str = "full") -> jax.Array:
    """Convolution matrix ``A`` with ``A @ v == jnp.convolve(a, v, mode)``, as
    ``jax.scipy.linalg.convolution_matrix``.

    Args:
      a: ``[m]`` (sharded or not).
      n: columns, a positive int.
      mode: ``"full"``, ``"same"`` or ``"valid"``.

    Returns:
      ``[k, n]`` (``k`` by ``mode``, as jax), a Toeplitz matrix built where it lies
      as [`toeplitz`][distla.scipy.linalg.toeplitz].

    Raises:
      ValueError: a bad ``n``, ``mode`` or ``a``, as jax.

    See also: ``jax.scipy.linalg.convolution_matrix``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([1.0, 2.0, 3.0]), mesh)
      >>> m = sla.convolution_matrix(a, 4)
      >>> m.shape
      (6, 4)
    """
    a = _vector(a, "a")
    n = operator.index(n)
    if n <= 0 or a.ndim == 0 or a.shape[-1] < 1 or mode not in ("full", "valid", "same"):
        return jsl.convolution_matrix(a, n, mode)  # jax's errors
    ref = functools.partial(jsl.convolution_matrix, n=n, mode=mode)
    prepare = functools.partial(_convolution_vectors, n=n, mode=mode)
    return _vector_matrix(CONVOLUTION_MATRIX, ref, _toeplitz, (a,), prepare=_Static(prepare))


class _Static:
    """A hashable ``functools.partial`` (its function and keywords compare by value)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, _Static) and (
            self.fn.func,
            self.fn.args,
            self.fn.keywords,
        ) == (other.fn.func, other.fn.args, other.fn.keywords)

    def __hash__(self):
        return hash((self.fn.func, self.fn.args, tuple(sorted(self.fn.keywords.items()))))


# ---------------------------------------------------------------------- from sizes


def hilbert(n: int, *, device: Any = None) -> jax.Array:
    """Hilbert matrix ``H[i, j] = 1/(i + j + 1)``, as ``jax.scipy.linalg.hilbert``.

    Args:
      n: the order.
      device: jnp's creation keyword (a distla extension here): ``None`` (jax's
        default device), a ``Device`` or a ``Sharding``. A ``NamedSharding`` over a
        mesh builds the matrix in its layout (the largest even layout of its mesh
        that fits when it does not divide ``n``), each device its own block.

    Returns:
      ``[n, n]`` of the default float dtype.

    See also: ``jax.scipy.linalg.hilbert``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> m = sla.hilbert(256, device=NamedSharding(mesh, P('rows', 'cols')))
      >>> m.sharding.spec, float(np.asarray(m)[1, 1])
      (P('rows', 'cols'), 0.3333333432674408)
    """
    n = _size(n)
    ref = functools.partial(jsl.hilbert, n)
    dtype = np.dtype(result_types(ref).dtype)
    return _sized_matrix(ref, _hilbert, device, options=(("dtype", dtype),))


def invhilbert(n: int, *, device: Any = None) -> jax.Array:
    """Inverse of the Hilbert matrix (its closed form), as ``jax.scipy.linalg.invhilbert``.

    Args:
      n: the order.
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n, n]`` of the default float dtype (no ``exact=True``, as jax).

    See also: ``jax.scipy.linalg.invhilbert``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> np.round(np.asarray(sla.invhilbert(3))).astype(int)
      array([[   9,  -36,   30],
             [ -36,  192, -180],
             [  30, -180,  180]])
    """
    n = _size(n)
    ref = functools.partial(jsl.invhilbert, n)
    dtype = np.dtype(result_types(ref).dtype)
    return _sized_matrix(ref, _invhilbert, device, options=(("n", n), ("dtype", dtype)))


def _check_kind(kind):
    if kind is None:
        return "symmetric"
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"Expected kind to be one of: ['symmetric', 'lower', 'upper']; got {kind}")
    return kind


def pascal(n: int, kind: str | None = None, *, device: Any = None) -> jax.Array:
    """Pascal matrix (binomial coefficients), as ``jax.scipy.linalg.pascal``.

    The symmetric one from its closed form ``C(i + j, i)`` (jax multiplies the
    triangular ones), in float32 as jax's.

    Args:
      n: the order.
      kind: ``"symmetric"`` (``None``), ``"lower"`` or ``"upper"``.
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n, n]`` float32.

    Raises:
      ValueError: an unknown ``kind``.

    See also: ``jax.scipy.linalg.pascal``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> np.round(np.asarray(sla.pascal(4))).astype(int)
      array([[ 1,  1,  1,  1],
             [ 1,  2,  3,  4],
             [ 1,  3,  6, 10],
             [ 1,  4, 10, 20]])
    """
    n = _size(n)
    kind = _check_kind(kind)
    ref = functools.partial(jsl.pascal, n, kind)
    return _sized_matrix(ref, _pascal, device, options=(("kind", kind),))


def invpascal(n: int, kind: str | None = None, *, device: Any = None) -> jax.Array:
    """Inverse of the Pascal matrix, as ``jax.scipy.linalg.invpascal``.

    The triangular ones from ``(-1)^(i-j) C(i, j)``; the symmetric one is
    ``L⁻ᵀ L⁻¹``, each device forming its block as a local product of the slices of
    ``L⁻¹`` it generates (``GRAM_CHUNK`` rows at a time): no communication.

    Args:
      n: the order.
      kind: ``"symmetric"`` (``None``), ``"lower"`` or ``"upper"``.
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n, n]`` of the default float dtype.

    Raises:
      ValueError: an unknown ``kind``.

    See also: ``jax.scipy.linalg.invpascal``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> np.round(np.asarray(sla.invpascal(3))).astype(int)
      array([[ 3, -3,  1],
             [-3,  5, -2],
             [ 1, -2,  1]])
    """
    n = _size(n)
    kind = _check_kind(kind)
    ref = functools.partial(jsl.invpascal, n, kind)
    dtype = np.dtype(result_types(ref).dtype)
    if kind == "symmetric":
        factor = _Static(functools.partial(_inv_pascal_lower, n=n, dtype=dtype))
        return _sized_matrix(ref, factor, device, gram=True)
    options = (("n", n), ("kind", kind), ("dtype", dtype))
    return _sized_matrix(ref, _invpascal, device, options=options)


def helmert(n: int, full: bool = False, *, device: Any = None) -> jax.Array:
    """Helmert matrix (orthonormal contrasts), as ``jax.scipy.linalg.helmert``.

    Args:
      n: the columns, a positive int.
      full: prepend the row ``1/sqrt(n)`` (``[n, n]``; else ``[n - 1, n]``).
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n - 1, n]`` or ``[n, n]`` of the default float dtype.

    Raises:
      ValueError: ``n < 1``, as jax.

    See also: ``jax.scipy.linalg.helmert``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> m = sla.helmert(256, device=NamedSharding(mesh, P('rows', 'cols')))
      >>> m.shape, np.allclose(np.asarray(m) @ np.asarray(m).T, np.eye(255), atol=1e-5)
      ((255, 256), True)
    """
    n = _size(n)
    if n < 1:
        raise ValueError(f"n must be a positive integer; got {n}.")
    ref = functools.partial(jsl.helmert, n, bool(full))
    dtype = np.dtype(result_types(ref).dtype)
    options = (("n", n), ("full", bool(full)), ("dtype", dtype))
    return _sized_matrix(ref, _helmert, device, options=options)


def hadamard(n: int, dtype: jax.typing.DTypeLike = int, *, device: Any = None) -> jax.Array:
    """Hadamard matrix of order ``n`` (a power of 2), as ``jax.scipy.linalg.hadamard``.

    Sylvester's construction in closed form, ``H[i, j] = (-1)^popcount(i & j)``.

    Args:
      n: the order, a positive power of 2.
      dtype: the result's dtype (``int``: the default int, as jax).
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n, n]`` of ``dtype``.

    Raises:
      ValueError: ``n`` is not a positive power of 2, as jax.

    See also: ``jax.scipy.linalg.hadamard``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> m = sla.hadamard(256, device=NamedSharding(mesh, P('rows', 'cols')))
      >>> m.shape, m.sharding.spec
      ((256, 256), P('rows', 'cols'))
      >>> int(np.asarray(m)[1, 1])
      -1
    """
    n = _size(n)
    if n < 1 or not math.log2(n).is_integer():
        raise ValueError(f"n must be a positive power of 2; got {n}.")
    ref = functools.partial(jsl.hadamard, n, dtype)
    out_dtype = np.dtype(result_types(ref).dtype)
    return _sized_matrix(ref, _hadamard, device, options=(("dtype", out_dtype),))


def dft(
    n: int,
    scale: str | None = None,
    *,
    dtype: jax.typing.DTypeLike | None = None,
    device: Any = None,
) -> jax.Array:
    """Discrete Fourier transform matrix ``W[i, j] = ω^(ij)``, ``ω = e^(-2πi/n)``, as
    ``jax.scipy.linalg.dft``.

    The phase is reduced mod ``n`` in integers before the exponential (jax
    multiplies ``i·j`` in floating point), so entries are accurate to rounding for
    every ``n`` up to 46340.

    Args:
      n: the order.
      scale: ``None``, ``"sqrtn"`` (unitary) or ``"n"``.
      dtype: a complex dtype (``None``: the default complex).
      device: as [`hilbert`][distla.scipy.linalg.hilbert]'s.

    Returns:
      ``[n, n]`` complex.

    Raises:
      ValueError: a bad ``scale`` or ``dtype``, as jax.

    See also: ``jax.scipy.linalg.dft``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> from jax.sharding import NamedSharding, PartitionSpec as P
      >>> m = sla.dft(256, device=NamedSharding(mesh, P('rows', 'cols')))
      >>> m.shape, m.dtype, m.sharding.spec
      ((256, 256), dtype('complex64'), P('rows', 'cols'))
    """
    n = _size(n)
    ref = functools.partial(jsl.dft, n, scale, dtype=dtype)
    out_dtype = np.dtype(result_types(ref).dtype)  # jax's checks of scale and dtype
    options = (("n", n), ("scale", scale), ("dtype", out_dtype))
    return _sized_matrix(ref, _dft, device, options=options)


# ---------------------------------------------------------------------- block_diag


def _block_diag_body(*arrs, rows, cols):
    """The blocks padded to their column band and stacked (each piece to its owner)."""
    bands, c0 = [], 0
    for a in arrs:
        bands.append(jnp.pad(a, ((0, 0), (c0, cols - c0 - a.shape[1]))))
        c0 += a.shape[1]
    return jnp.concatenate(bands, axis=0)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _block_diag_on(*arrs, mesh: AbstractMesh):
    rows = sum(a.shape[0] for a in arrs)
    cols = sum(a.shape[1] for a in arrs)
    spec = shard_spec((rows, cols), mesh)
    body = functools.partial(_block_diag_body, rows=rows, cols=cols)
    return run_on_mesh(body, mesh, spec, *arrs)


def _blocks(dtype, *arrs):
    """The blocks as 2-D matrices of the result's dtype."""
    return tuple(jnp.atleast_2d(a).astype(dtype) for a in arrs)


def _block_diag_dtype(what, *arrs):
    del what
    return np.dtype(jnp.result_type(*arrs)) if arrs else np.dtype(jnp.float32)


def _block_diag_not_built(*arrs):
    """jax's function takes the call: no blocks, a block of more than 2 dimensions, or
    an empty result."""
    if not arrs or any(a.ndim > 2 for a in arrs):
        return True
    shapes = [(1,) * (2 - a.ndim) + a.shape for a in arrs]  # jnp.atleast_2d's
    return 0 in (sum(s[0] for s in shapes), sum(s[1] for s in shapes))


def _block_diag_built(plan: Plan, *arrs):
    return _block_diag_on(*_blocks(plan.dtype, *arrs), mesh=plan.mesh)


def _block_diag_of(*arrs):
    return jsl.block_diag(*arrs)


BLOCK_DIAG = route.Op(
    "distla.scipy.linalg.block_diag",
    operands=("arrs*",),
    one_device=_block_diag_of,
    distributed=_block_diag_built,
    promote=_block_diag_dtype,
    cast=route.as_given,  # the blocks are cast where they are made 2-D
    empty=_block_diag_not_built,
)


@route.public
def block_diag(*arrs: jax.typing.ArrayLike) -> jax.Array:
    """Block-diagonal matrix of the given blocks, as ``jax.scipy.linalg.block_diag``.

    Blocks on a mesh come back in the natural layout of that mesh (2D blocks
    ``P(r, c)``, the largest even layout that fits): each block's pieces move to the
    devices that own their place (XLA's partitioning of the padded bands,
    collective-permutes and all-to-alls of the blocks' pieces, never a whole
    block on every device); the zeros are made where they lie.

    Args:
      *arrs: arrays of at most 2 dimensions (scalars and vectors are ``[1, k]``).

    Returns:
      ``[sum of rows, sum of columns]`` of the blocks' promoted dtype.

    Raises:
      ValueError: a block with more than 2 dimensions, as jax.

    See also: ``jax.scipy.linalg.block_diag``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.ones((128, 128)), mesh)
      >>> b = distla.shard(2 * jnp.ones((128, 128)), mesh)
      >>> m = sla.block_diag(a, b)
      >>> m.shape, float(np.asarray(m)[200, 200])
      ((256, 256), 2.0)
    """
    return route.call(BLOCK_DIAG, *(_vector(a, "arrs") for a in arrs))
