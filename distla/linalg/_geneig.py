"""Generalized and partial Hermitian eigenproblems: ``scipy.linalg.eigh``'s forms, sharded.

With ``B = L Lᴴ`` (the distributed Cholesky) each pencil becomes a standard problem
``C y = λ y`` (LAPACK's hegst/hegv reduction, Golub & Van Loan §8.7.2):

    type 1   A x = λ B x    C = L⁻¹ A L⁻ᴴ   x = L⁻ᴴ y    (xᴴ B x = I)
    type 2   A B x = λ x    C = Lᴴ A L      x = L⁻ᴴ y    (xᴴ B x = I)
    type 3   B A x = λ x    C = Lᴴ A L      x = L y      (xᴴ B⁻¹ x = I)

the inverses by the distributed triangular solves, the products by SUMMA.

A subset (by index or by value) of a concrete matrix of padded order
``PARTIAL_MIN`` or more is computed by the blocked divide and conquer of
``distla.linalg._eigh`` pruned to the wanted part: after each QDWH split the
host knows the rank ``r`` of the half below the shift ``σ`` and descends only
into the halves that hold a wanted index (``[0, r)`` or ``[r, size)``) or a
wanted value (below or above ``σ``); the other half's sub-block, its recursion
and its share of the vectors are never formed. Traced calls (``jax.jit``,
``jax.grad``) and smaller matrices solve the whole problem and select from it.

Names: ``sel`` a selection, ``("index", lo, hi)`` (half-open) or
``("value", vl, vu)`` (``vl < λ ≤ vu``), or ``None`` for everything.
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._core.checks import ShapeError, as_array, is_traced, result_dtype
from .._core.eager import one_program
from .._core.matmul import checked_product
from .._core.matrix import block_spec, on_mesh, put, round_up
from .._core.mesh import drop_trivial_sharding, fitting_spec, grid_of, operand_mesh, run_on_mesh
from .._core.one_device import block_layout, choose_plan, on_one_device
from .._core.plan import mesh_of
from .._core.stacked import stack, vmappable
from . import _eigh, _spectral
from ._cholesky import cholesky
from ._spectral import EighResult
from ._triangular import solve_triangular

_HI = lax.Precision.HIGHEST

# below this padded order a subset is selected from the whole solution (the
# blocked divide and conquer starts at the same order: see _eigh.BLOCKED_MIN)
PARTIAL_MIN = _eigh.BLOCKED_MIN


def _ct(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


# ------------------------------------------------------------------ the reduction


def _pencil(a, b, *, kind, sel, vectors, ops):
    """``(w, x)`` (or ``w``) of the Hermitian pencil ``(a, b)`` through ``ops``.

    ``ops`` is ``(cholesky, trsm, mm, standard)``: the one-device (jnp) or the
    distributed implementations; ``trsm(l, y, trans)`` solves with the lower
    triangular ``l``; ``standard(c, sel, vectors)`` solves ``C y = λ y``
    (symmetrizing ``c``)."""
    chol, trsm, mm, standard = ops
    if b is None:
        return standard(a, sel, vectors)
    low = chol(b)
    if kind == 1:
        c = trsm(low, _ct(trsm(low, a, 0)), 0)  # L⁻¹ (L⁻¹ A)ᴴ = L⁻¹ A L⁻ᴴ
    else:
        c = mm(_ct(low), mm(a, low))  # Lᴴ A L
    out = standard(c, sel, vectors)
    if not vectors:
        return out
    w, y = out
    if y.shape[-1] == 0:
        return w, y
    return w, (trsm(low, y, 2) if kind in (1, 2) else mm(low, y))


@functools.partial(jax.jit, static_argnames=("lo", "hi"))
def _columns(v, *, lo, hi):
    """``v[:, lo:hi]`` in the largest even 2D block layout that fits (on an Explicit mesh
    a slice of a sharded dimension the mesh does not divide would not type)."""
    mesh = operand_mesh(v, names=("v",))
    if mesh is None:
        return v[:, lo:hi]
    spec = fitting_spec((v.shape[0], hi - lo), mesh, block_spec(mesh))
    return run_on_mesh(lambda v: v[:, lo:hi], mesh, spec, v)


def _select_index(w, v, lo, hi, *, sharded=True):
    if hi == lo:  # nothing selected: empty results with no mesh, as every zero-size result
        empty = jnp.zeros((0,), w.dtype)  # (an eager empty slice of an Explicit w fails)
        return empty if v is None else (empty, jnp.zeros((v.shape[0], 0), v.dtype))
    if v is None:
        return w[lo:hi]
    return w[lo:hi], (_columns(v, lo=lo, hi=hi) if sharded else v[:, lo:hi])


def _value_range(w, vl, vu, what):
    """``[lo, hi)``: the ascending ``w``'s positions with ``vl < w ≤ vu`` (concrete ``w``)."""
    if is_traced(w):
        raise ValueError(
            f"{what}: subset_by_value gives as many eigenvalues as lie in (vl, vu], a shape "
            "known only from the values; call eigh outside jax.jit/jax.grad for it, or pass "
            "subset_by_index=(lo, hi), whose shape is static"
        )
    wh = np.asarray(w)
    inside = np.nonzero((wh > vl) & (wh <= vu))[0]
    if inside.size == 0:
        return 0, 0
    return int(inside[0]), int(inside[-1]) + 1


def _selected(out, sel, vectors, what, *, sharded=True):
    """A selection of the whole ascending solution ``out`` (``sharded``: on a mesh)."""
    w, v = out if vectors else (out, None)
    if sel is None:
        return out
    if sel[0] == "index":
        lo, hi = sel[1], sel[2]
    else:
        lo, hi = _value_range(w, sel[1], sel[2], what)
    return _select_index(w, v, lo, hi, sharded=sharded)


def _dense_standard(c, sel, vectors):
    c = (c + _ct(c)) / 2
    what = "distla.linalg.eigh"
    if not vectors:
        return _selected(jnp.linalg.eigvalsh(c), sel, False, what, sharded=False)
    return _selected(tuple(jnp.linalg.eigh(c)), sel, True, what, sharded=False)


def _dense_trsm(low, y, trans):
    return jsl.solve_triangular(low, y, trans=trans, lower=True)


def _dense_mm(x, y):
    return jnp.matmul(x, y, precision=_HI)


_DENSE_OPS = (
    functools.partial(jnp.linalg.cholesky, symmetrize_input=False),
    _dense_trsm,
    _dense_mm,
    _dense_standard,
)


def dense(a, b=None, *, kind=1, symmetrize=True, lower=True, sel=None, vectors=True):
    """The one-device solution with jnp's functions (unsharded operands, one-device plan)."""
    a = _eigh.hermitian_from(a, symmetrize=symmetrize, lower=lower)
    if b is not None:
        b = _eigh.hermitian_from(b, symmetrize=symmetrize, lower=lower)
    return _pencil(a, b, kind=kind, sel=sel, vectors=vectors, ops=_DENSE_OPS)


def _shapes(a, b=None, *, kind, symmetrize, lower, sel, vectors):
    """What :func:`dense` returns, as zeros: the one-device plan's bytes moved back."""
    del b, kind, symmetrize, lower
    n = a.shape[0]
    k = n if sel is None else sel[2] - sel[1]
    w = jnp.zeros((k,), jnp.finfo(a.dtype).dtype)
    return (w, jnp.zeros((n, k), a.dtype)) if vectors else w


# ------------------------------------------------------------ the distributed parts


def _dist_trsm(low, y, trans):
    return solve_triangular(low, y, trans=trans, lower=True, plan="distributed")


def _dist_mm(x, y):
    return checked_product(x, y, precision=_HI)


def _dist_chol(b):
    return cholesky(b, symmetrize_input=False, plan="distributed")


def _dist_standard(c, sel, vectors):
    what = "distla.linalg.eigh"
    mesh = operand_mesh(c, names=("a",))
    n = c.shape[0]
    p = grid_of(mesh, what=what).size
    if sel is not None and not is_traced(c) and round_up(n, p) >= PARTIAL_MIN:
        h = _spectral._hermitian(c, symmetrize=True, lower=True)
        return partial_eager(h, mesh=mesh, sel=sel, vectors=vectors)
    if not vectors:
        out = _spectral.eigvalsh(c, plan="distributed")
    else:
        out = tuple(_spectral.eigh(c, plan="distributed"))
    return _selected(out, sel, vectors, what)


_DIST_OPS = (_dist_chol, _dist_trsm, _dist_mm, _dist_standard)


# ------------------------------------------------- partial: the pruned divide and conquer


def _shift_and_rank(b, start, u):
    """Block 0's shift ``σ`` (as ``level_prep`` chose it) and ``trace((I − sign)/2)``."""
    spec = block_spec(jax.sharding.get_abstract_mesh())
    ordinal, size = _eigh._blocks(start)
    d = _eigh._diag(b, spec)
    sigma = _eigh._shifts(d, start, ordinal, size)[0]
    du = _eigh._diag(u, spec)
    below = jnp.sum(jnp.where(ordinal == 0, (1 - du) / 2, 0))
    return sigma, below


def _zeros(x):
    return jnp.zeros_like(x)


class _Pruned(_eigh._Blocked):
    """The blocked eager eigh, descending only into the halves with wanted eigenvalues."""

    def __init__(self, mesh, big, vectors, window):
        super().__init__(mesh, big, vectors)
        self.window = window  # (vl, vu] in the scaled units, or None
        self.stats = on_mesh(_shift_and_rank, mesh, (P(), P()))
        self.zeros = on_mesh(_zeros, mesh, self.spec)
        self.tol = 0.0

    def skipped(self, like, width, below):
        """A half not descended into: eigenvalues ``-inf`` (below) or ``+inf``, no vectors."""
        rep = NamedSharding(like.sharding.mesh, P())
        real = jnp.finfo(like.dtype).dtype
        w = jax.device_put(np.full(width, -np.inf if below else np.inf, real), rep)
        return w

    def solve(self, b, size, lo=0, hi=None):
        """As ``_Blocked.solve`` for the eigenvalues ``[lo, hi)`` of ``b[:size, :size]``
        (and those in the value window): the others are ``∓inf`` with zero vectors."""
        hi = size if hi is None else hi
        s = b.shape[0]
        if size <= self.leaf:
            return self.base(b, size)
        q, r, start, u = self.divide(b, size)
        want = [lo < r, hi > r]  # the halves [0, r) and [r, size) hold wanted indices
        if self.window is not None:
            sigma, below = (float(x) for x in self.stats(b, start, u))
            if 0.5 < below < size - 0.5:  # a true split: half 0 below σ, half 1 above
                want[0] = want[0] and self.window[0] < sigma + self.tol
                want[1] = want[1] and self.window[1] >= sigma - self.tol
        parts = ((0, r, lo, min(hi, r)), (r, size - r, max(lo - r, 0), hi - r))
        common = round_up(max(part for _, part, _, _ in parts), self.grain)
        halves = []
        for k, (off, part, plo, phi) in enumerate(parts):
            width = min(round_up(part, self.grain) if part <= self.leaf else common, s)
            qk = self.take(q, off, part, width)
            if want[k]:
                out = self.solve(self.sub(b, qk), part, plo, phi)
                halves.append((out, qk))
            else:
                w = self.skipped(b, width, below=k == 0)
                halves.append(((w, None) if self.vectors else w, qk))
        (o0, q0), (o1, q1) = halves
        if not self.vectors:
            return self.join(s, o0, o1, self.int(b, r), self.int(b, size))
        y0 = self.times(q0, o0[1]) if o0[1] is not None else self.zeros(q0)
        y1 = self.times(q1, o1[1]) if o1[1] is not None else self.zeros(q1)
        return self.join(s, o0[0], o1[0], self.int(b, r), self.int(b, size), y0, y1)


def _pick(w, z=None, idx=None, *, rows):
    """``w[idx]`` and, with ``z``, its columns ``idx`` (a local gather in row slabs)."""
    if z is None:
        return w[idx]
    return w[idx], jnp.take(put(z, rows), idx, axis=1)


def partial_eager(h, *, mesh, sel, vectors):
    """The selected eigenpairs of a concrete Hermitian ``h`` by the pruned recursion.

    Returns ``w`` (``[k]``, ascending, replicated) and, with ``vectors``, ``[n, k]``
    eigenvectors in the largest even 2D block layout of the mesh that fits."""
    spec = block_spec(mesh)
    n = h.shape[0]
    h, s = on_mesh(_eigh.unit_scaled, mesh, (fitting_spec((n, n), mesh, spec), P()))(h)
    scale = float(s)
    big, _, _ = _eigh._sizes(n, mesh)
    window = None
    lo, hi = 0, n
    if sel[0] == "index":
        lo, hi = sel[1], sel[2]
    else:
        window = (sel[1] * scale, sel[2] * scale)
    run = _Pruned(mesh, big, vectors, window)
    real = jnp.finfo(h.dtype).dtype
    run.tol = float(64 * n * jnp.finfo(real).eps)  # ‖h‖ ≤ n after the scaling
    b = on_mesh(_eigh.blocked_prep, mesh, run.spec, (("big", big),))(h)
    out = run.solve(b, n, lo, hi)
    w = out[0] if vectors else out
    wh = np.asarray(w)
    order = np.argsort(wh, kind="stable")[:n]
    if window is None:
        idx = order[lo:hi]
    else:  # the skipped halves are ±inf: outside any finite window
        vals = wh[order]
        idx = order[(vals > window[0]) & (vals <= window[1])]
    k = int(idx.size)
    if k == 0:
        w0 = jnp.zeros((0,), real)
        return (w0, jnp.zeros((n, 0), h.dtype)) if vectors else w0
    rep = NamedSharding(w.sharding.mesh, P())
    idx = jax.device_put(idx.astype(np.int32), rep)
    rows = run.rows
    if not vectors:
        got = on_mesh(_pick, mesh, P(), (("rows", rows),))(w, None, idx)
        return on_mesh(_eigh.unscaled, mesh, P())(got, s)
    specs = (P(), fitting_spec((n, k), mesh, spec))
    wk, zk = on_mesh(_pick_rows, mesh, specs, (("rows", rows), ("n", n)))(w, out[1], idx)
    return on_mesh(_eigh.unscaled, mesh, P())(wk, s), zk


def _pick_rows(w, z, idx, *, rows, n):
    wk, zk = _pick(w, z, idx, rows=rows)
    return wk, zk[:n]


# ------------------------------------------------------------------------ public


def _check_subsets(what, n, subset_by_index, subset_by_value):
    """``sel`` from scipy's arguments (``subset_by_index`` inclusive), or a ValueError."""
    if subset_by_index is not None and subset_by_value is not None:
        raise ValueError(f"{what}: pass either subset_by_index or subset_by_value, not both")
    if subset_by_index is not None:
        try:
            lo, hi = (operator.index(i) for i in subset_by_index)
        except (TypeError, ValueError):
            raise ValueError(
                f"{what}: subset_by_index must be two integers (lo, hi), 0 <= lo <= hi <= "
                f"n - 1 (inclusive, as scipy); got {subset_by_index!r}"
            ) from None
        if not 0 <= lo <= hi <= n - 1:
            raise ValueError(
                f"{what}: subset_by_index={subset_by_index!r} is not within [0, {n - 1}] for a "
                f"of shape ({n}, {n}): pass (lo, hi) with 0 <= lo <= hi <= {n - 1}"
            )
        return ("index", lo, hi + 1)
    if subset_by_value is not None:
        try:
            vl, vu = (float(v) for v in subset_by_value)
        except (TypeError, ValueError):
            raise ValueError(
                f"{what}: subset_by_value must be two numbers (vl, vu) with vl < vu (the "
                f"eigenvalues in (vl, vu], as scipy); got {subset_by_value!r}"
            ) from None
        if not vl < vu:
            raise ValueError(
                f"{what}: subset_by_value={subset_by_value!r} needs vl < vu (the half-open "
                "interval (vl, vu], as scipy)"
            )
        return ("value", vl, vu)
    return None


def _jnp_positional(b, uplo, symmetrize_input):
    """jnp's ``eigh(a, UPLO, symmetrize_input)`` called positionally lands on ``b`` and
    ``UPLO``: a string ``b`` is ``UPLO``, a bool ``UPLO`` is ``symmetrize_input``."""
    if isinstance(b, str):
        if uplo is not None and not isinstance(uplo, (bool, np.bool_)):
            raise TypeError(
                "distla.linalg.eigh: with UPLO given positionally, the third "
                f"argument is symmetrize_input (a bool); got {uplo!r}"
            )
        return None, b, bool(uplo) if uplo is not None else symmetrize_input
    if isinstance(uplo, (bool, np.bool_)):
        return b, None, bool(uplo)
    return b, uplo, symmetrize_input


def _real_dtype(dtype):
    return np.dtype(jnp.finfo(dtype).dtype)


@one_program
def eigh(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike | None = None,
    UPLO: str | None = None,
    symmetrize_input: bool = True,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    type: int = 1,  # noqa: A002  (scipy's name)
    check_finite: bool = True,
    subset_by_index: tuple[int, int] | None = None,
    subset_by_value: tuple[float, float] | None = None,
    driver: str | None = None,
    turbo: bool = True,
    eigvals: tuple[int, int] | None = None,
    plan: str = "auto",
) -> EighResult | tuple[jax.Array, jax.Array] | jax.Array:
    """Hermitian eigenproblems, as ``jnp.linalg.eigh`` and ``scipy.linalg.eigh``.

    ``eigh(a)``, ``eigh(a, UPLO)`` and ``eigh(a, UPLO, symmetrize_input)`` are
    ``jnp.linalg.eigh`` (see :func:`eigvalsh`; the divide and conquer of
    docs/spectral.md). With ``b``, ``type``, a subset or ``eigvals_only`` the
    call is ``scipy.linalg.eigh``'s: ``b = L Lᴴ`` by the distributed Cholesky,
    the pencil reduced to ``C y = λ y`` (type 1: ``C = L⁻¹ a L⁻ᴴ``, types 2
    and 3: ``C = Lᴴ a L``) by the distributed triangular solves and SUMMA,
    and the eigenvectors transformed back (``x = L⁻ᴴ y``, type 3 ``x = L y``).
    No device holds a whole matrix. A subset of a concrete matrix of order
    256 or more descends only into the halves of the divide and conquer
    that hold wanted eigenvalues, so it costs less than the whole spectrum;
    under ``jax.jit``/``jax.grad`` (and below that order) the whole problem
    is solved and the subset selected.

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh (any
        layout); the jnp form also takes a ``[..., n, n]`` stack. Integers
        and bools promote to the default float (with ``b``: ``a`` and ``b``
        promote together, as jnp promotes them).
      b: ``[n, n]`` Hermitian positive definite matrix on the same mesh
        (any layout), or ``None`` (the standard problem). Not positive
        definite: NaN, as the distributed Cholesky gives (scipy raises).
      UPLO: ``None``/``"L"`` or ``"U"`` as in jnp: the triangle of ``a`` (and
        ``b``) read when ``symmetrize_input`` is False; ``None`` defers to
        ``lower``.
      symmetrize_input: use ``(a + aᴴ)/2`` and ``(b + bᴴ)/2`` (jnp's
        default). False reads one triangle only, as scipy does.
      lower: scipy's choice of triangle (``UPLO`` wins when given).
      eigvals_only: return the eigenvalues only.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      type: 1 ``a x = λ b x``, 2 ``a b x = λ x``, 3 ``b a x = λ x``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      subset_by_index: ``(lo, hi)``, the eigenvalues ``lo..hi`` (0-based,
        inclusive, ascending), as scipy.
      subset_by_value: ``(vl, vu)``, the eigenvalues in ``(vl, vu]``, as
        scipy. The count is known only from the values, so this form needs
        concrete operands (not under ``jax.jit``).
      driver: accepted and ignored (LAPACK's driver; distla has one route).
      turbo: accepted and ignored, as in ``jax.scipy``.
      eigvals: scipy's older name of ``subset_by_index`` (``jax.scipy`` takes
        only ``None``).
      plan: ``"auto"`` (below the one-device budget the whole problem runs
        with jnp's functions on one device and comes back in the same
        layouts), ``"distributed"`` or ``"one_device"``.

    Returns:
      ``EighResult(eigenvalues, eigenvectors)`` for the jnp form;
      ``(w, x)`` or ``w`` (``eigvals_only``) for scipy's: ``w`` ``[k]``
      ascending, real, replicated; ``x`` ``[n, k]`` in the mesh's 2D block
      layout (the largest even layout that fits), normalised as scipy's:
      ``xᴴ b x = I`` for types 1 and 2, ``xᴴ b⁻¹ x = I`` for type 3.
      Differentiable (forward and reverse) for the whole spectrum and for
      ``subset_by_index`` (the derivative solves the whole problem).

    Raises:
      ValueError: ``a`` or ``b`` not square, shapes that differ, a stack with
        scipy's arguments, ``type`` not 1, 2 or 3, a bad subset, an unknown
        ``UPLO`` or ``plan``, or ``subset_by_value`` under ``jax.jit``.
      TypeError: dtypes jnp would not promote.

    See also: ``scipy.linalg.eigh``, ``jnp.linalg.eigh``, :func:`eigvalsh`.
    """
    what = "distla.linalg.eigh"
    if eigvals is not None:
        if subset_by_index is not None:
            raise ValueError(f"{what}: give subset_by_index or eigvals (its older name), not both")
        subset_by_index = eigvals
    b, UPLO, symmetrize_input = _jnp_positional(b, UPLO, symmetrize_input)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{what}: UPLO must be one of None, 'L', or 'U'; got {UPLO!r}")
    if UPLO is None and not lower:
        UPLO = "U"
    scipy_form = (
        b is not None
        or type != 1
        or eigvals_only
        or subset_by_index is not None
        or subset_by_value is not None
    )
    if not scipy_form:
        return _spectral.eigh(a, UPLO, symmetrize_input, plan=plan)
    if type not in (1, 2, 3):
        raise ValueError(
            f"{what}: type must be 1 (a x = λ b x), 2 (a b x = λ x) or 3 "
            f"(b a x = λ x), as scipy; got {type!r}"
        )
    a = as_array(a, "a", what)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ShapeError(
            f"{what}: with b, type, a subset or eigvals_only a must be one square matrix "
            f"(n, n), as scipy.linalg.eigh; got a of shape {a.shape} (for a stack, call eigh "
            "on each matrix)"
        )
    n = a.shape[0]
    if b is not None:
        b = as_array(b, "b", what)
        if b.shape != a.shape:
            raise ShapeError(f"{what}: b must have a's shape {a.shape}; got b of shape {b.shape}")
    sel = _check_subsets(what, n, subset_by_index, subset_by_value)
    dtype = result_dtype(what, a) if b is None else result_dtype(what, a, b)
    a = a.astype(dtype)
    b = None if b is None else b.astype(dtype)
    flags = dict(
        kind=int(type),
        symmetrize=bool(symmetrize_input),
        lower=UPLO in (None, "L"),
        vectors=not eigvals_only,
    )
    operands = (a,) if b is None else (a, b)
    if n == 0:
        w = jnp.zeros((0,), _real_dtype(dtype))
        return w if eigvals_only else (w, jnp.zeros((0, 0), dtype))
    mesh = mesh_of(*operands, names=("a", "b")[: len(operands)])
    if mesh is None:  # unsharded, or on a one-device mesh: jnp's functions as they are
        return dense(*(drop_trivial_sharding(x) for x in operands), sel=sel, **flags)
    value_sel = sel if sel is not None and sel[0] == "value" else None
    static_sel = None if value_sel else sel
    options = tuple(sorted(flags.items())) + (("sel", static_sel),)
    if choose_plan("eigh", plan, _shapes, *operands, what=what, options=options) == "one_device":
        k = n if static_sel is None else static_sel[2] - static_sel[1]
        layouts = tuple(block_layout(x.shape, mesh) for x in operands)
        outs = (P(),) if eigvals_only else (P(), block_layout((n, k), mesh))
        out = on_one_device(
            dense, *operands, mesh=mesh, in_specs=layouts, out_specs=outs, options=options
        )
        out = out if eigvals_only else tuple(out)
        return _selected(out, value_sel, not eigvals_only, what)
    if is_traced(*operands):  # concrete calls keep the eager steps of the pruned solver
        return _vmappable_distributed(operands, mesh=mesh, sel=sel, **flags)
    return _distributed(*operands, sel=sel, **flags)


def _vmappable_distributed(operands, *, mesh, sel, **flags):
    """The distributed route, whose ``jax.vmap`` is one stacked call and whose
    derivatives are the route's own.

    Under ``jax.vmap`` each device solves the members it holds with jnp's
    functions (:func:`dense` through ``distla._core.stacked.stack``): no
    collective when the stack is sharded along its batch, where the route's
    one-matrix layouts, batched, would move every member across the mesh.
    """
    vectors = flags["vectors"]

    def route(*ops):
        return _distributed(*ops, sel=sel, **flags)

    def stacked(*ops):
        def members(*xs):  # eigenvalues with a unit core dimension: stack's cores are 2-D
            out = jax.vmap(functools.partial(dense, sel=sel, **flags))(*xs)
            return (out[0][..., None, :], out[1]) if vectors else out[..., None, :]

        out = stack(members, ops, (2,) * len(ops), 2, mesh=mesh)
        return (out[0][..., 0, :], out[1]) if vectors else out[..., 0, :]

    fn = jax.custom_jvp(vmappable(route, stacked))
    fn.defjvp(lambda primals, tangents: jax.jvp(route, primals, tangents))
    return fn(*operands)


def _distributed(a, b=None, *, kind, symmetrize, lower, vectors, sel):
    """The distributed route: one Hermitian matrix per operand, then the reduction."""
    a = _spectral._hermitian(a, symmetrize=symmetrize, lower=lower)
    if b is not None:
        b = _spectral._hermitian(b, symmetrize=symmetrize, lower=lower)
    out = _pencil(a, b, kind=kind, sel=sel, vectors=vectors, ops=_DIST_OPS)
    return tuple(out) if vectors else out


__all__ = ["EighResult", "eigh"]
