"""eigh's generalized and partial problems: ``scipy.linalg.eigh``'s forms (private).

With ``B = L Lᴴ`` (the distributed Cholesky) each pencil becomes a standard problem
``C y = λ y`` (LAPACK's hegst/hegv reduction, Golub & Van Loan §8.7.2):

    type 1   A x = λ B x    C = L⁻¹ A L⁻ᴴ   x = L⁻ᴴ y    (xᴴ B x = I)
    type 2   A B x = λ x    C = Lᴴ A L      x = L⁻ᴴ y    (xᴴ B x = I)
    type 3   B A x = λ x    C = Lᴴ A L      x = L y      (xᴴ B⁻¹ x = I)

the inverses by the distributed triangular solves, the products by SUMMA. On a mesh,
types 1 and 2 with eigenvectors apply ``L⁻ᴴ`` to the standard problem's ``Q``
(``C = Q T Qᴴ``) before ``T``'s eigenvectors ``Z`` exist, ``x = (L⁻ᴴ Q) Z``, with
``L`` factored again from ``B`` for it: no factor is held through the reduction.

A subset (by index or by value) of a concrete matrix of padded order
``PARTIAL_MIN`` or more is computed by the blocked divide and conquer of
``divide`` pruned to the wanted part (`partial_eager`);
traced calls (``jax.jit``, ``jax.grad``) and smaller matrices solve the whole
problem and select from it.

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
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.checks import is_traced
from ..._core.matmul import auto_product
from ..._core.matrix import block_spec, hermitian_from, once, round_up
from ..._core.mesh import fitting_spec, run_on_mesh
from ..._core.one_device import block_layout
from ..._core.plan import Plan
from ..._core.stacked import stack
from .._cholesky import chol_2d
from .._triangular import solve_2d
from . import divide, rules, tridiagonal

_HI = lax.Precision.HIGHEST

# below this padded order a subset is selected from the whole solution (the
# blocked divide and conquer starts at the same order: see divide.BLOCKED_MIN)
PARTIAL_MIN = divide.BLOCKED_MIN


def _ct(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


# ------------------------------------------------------------------ the reduction


def _pencil(a, b, *, kind, sel, vectors, ops, again=None, read=None):
    """``(w, x)`` (or ``w``) of the Hermitian pencil ``(a, b)`` through ``ops``.

    ``ops`` is ``(cholesky, trsm, mm, standard)``: the one-device (jnp) or the
    distributed implementations; ``trsm(l, y, trans)`` solves with the lower
    triangular ``l``; ``standard(c, sel, vectors, back=None)`` solves ``C y = λ y``
    (symmetrizing ``c``) and says whether it applied ``back`` (the map ``y ↦ L⁻ᴴ y``)
    to the eigenvectors: ``(out, done)``. ``again(q)``, when given, factors ``b`` anew
    for ``back`` once ``q`` exists, so that no factor is held through the reduction;
    ``read(a, low)``, when given, makes the matrix of ``a`` that is reduced once ``L``
    exists (it is then not held beside the Cholesky)."""
    chol, trsm, mm, standard = ops
    if b is None:
        return standard(a, sel, vectors)[0]
    low = chol(b)
    if read is not None:
        a = read(a, low)
    if kind == 1:
        c = trsm(low, _ct(trsm(low, a, 0)), 0)  # L⁻¹ (L⁻¹ A)ᴴ = L⁻¹ A L⁻ᴴ
    else:
        c = mm(_ct(low), mm(a, low))  # Lᴴ A L
    # x = L⁻ᴴ y = (L⁻ᴴ Q) Z: a standard problem that reduces C to T = Qᴴ C Q may form
    # L⁻ᴴ Q right after the reduction (then L is gone before T's eigenvectors Z exist)
    back = None
    if kind in (1, 2) and vectors:
        back = lambda q: trsm(low if again is None else again(q), q, 2)  # noqa: E731
    out, done = standard(c, sel, vectors, back)
    if not vectors or done:
        return out
    w, y = out
    if y.shape[-1] == 0:
        return w, y
    return w, (trsm(low, y, 2) if kind in (1, 2) else mm(low, y))


@functools.partial(jax.jit, static_argnames=("lo", "hi", "mesh"))
def _columns(v, *, lo, hi, mesh):
    """``v[:, lo:hi]`` in the largest even 2D block layout that fits (on an Explicit mesh
    a slice of a sharded dimension the mesh does not divide would not type)."""
    spec = fitting_spec((v.shape[0], hi - lo), mesh, block_spec(mesh))
    return run_on_mesh(lambda v: v[:, lo:hi], mesh, spec, v)


def _select_index(w, v, lo, hi, *, mesh=None):
    if hi == lo:  # nothing selected: empty results with no mesh, as every zero-size result
        empty = jnp.zeros((0,), w.dtype)  # (an eager empty slice of an Explicit w fails)
        return empty if v is None else (empty, jnp.zeros((v.shape[0], 0), v.dtype))
    if v is None:
        return w[lo:hi]
    return w[lo:hi], (v[:, lo:hi] if mesh is None else _columns(v, lo=lo, hi=hi, mesh=mesh))


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


def _selected(out, sel, vectors, what, *, mesh=None):
    """A selection of the whole ascending solution ``out`` (on ``mesh``, or unsharded)."""
    w, v = out if vectors else (out, None)
    if sel is None:
        return out
    if sel[0] == "index":
        lo, hi = sel[1], sel[2]
    else:
        lo, hi = _value_range(w, sel[1], sel[2], what)
    return _select_index(w, v, lo, hi, mesh=mesh)


def _dense_standard(c, sel, vectors, back=None):
    del back  # applied by the caller
    c = c / 2 + _ct(c) / 2  # halves first: c + cᴴ overflows near the dtype's largest
    what = "distla.linalg.eigh"
    if not vectors:
        return _selected(jnp.linalg.eigvalsh(c, symmetrize_input=False), sel, False, what), False
    return _selected(tuple(jnp.linalg.eigh(c, symmetrize_input=False)), sel, True, what), False


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
    a = hermitian_from(a, symmetrize=symmetrize, lower=lower)
    if b is not None:
        b = hermitian_from(b, symmetrize=symmetrize, lower=lower)
    return _pencil(a, b, kind=kind, sel=sel, vectors=vectors, ops=_DENSE_OPS)


def _shapes(a, b=None, *, kind, symmetrize, lower, sel, vectors):
    """What `dense` returns, as zeros: the one-device plan's bytes moved back."""
    del b, kind, symmetrize, lower
    n = a.shape[0]
    k = n if sel is None else sel[2] - sel[1]
    w = jnp.zeros((k,), jnp.finfo(a.dtype).dtype)
    return (w, jnp.zeros((n, k), a.dtype)) if vectors else w


# ------------------------------------------------------------ the distributed parts


def _distributed_ops(plan: Plan, *, fused: bool = True):
    """``_pencil``'s ops on ``plan``'s mesh: the Cholesky family's factor, the triangular
    solves, SUMMA (``distla.matmul``'s ``"auto"``) and the distributed standard problem
    (with ``fused``, applying ``back`` to ``Q`` between the reduction and ``Z``)."""

    def chol(b):
        return chol_2d(b, call=plan, upper=False, symmetrize=False, read_upper=False)

    def trsm(low, y, trans):
        return solve_2d(low, y, trans=trans, lower=True, unit_diagonal=False, call=plan)

    def mm(x, y):
        return auto_product(x, y, plan.mesh, precision=_HI)

    def standard(c, sel, vectors, back=None):
        return _standard(plan, c, sel, vectors, back if fused else None)

    return chol, trsm, mm, standard


def _standard(plan: Plan, c, sel, vectors, back=None):
    """``(out, done)``: ``C y = λ y`` (selected), and whether ``back`` was applied."""
    what = "distla.linalg.eigh"
    n = c.shape[0]
    if sel is not None and not is_traced(c) and round_up(n, plan.grid.size) >= PARTIAL_MIN:
        h = rules.hermitian(plan, c, symmetrize=True, lower=True)
        return divide.partial_eager(h, mesh=plan.mesh, sel=sel, vectors=vectors), False
    if not vectors:
        out = rules.eigvalsh_2d(plan, c, symmetrize=True, lower=True)
    elif back is not None:
        # the tridiagonal route in two halves, Q transformed between them: y = (back Q) Z.
        # Derivatives take the unfused route (_route_jvp), whose eigh carries jax's rule.
        w, q, d, e, scale = tridiagonal.reduced_2d(c, mesh=plan.mesh, symmetrize=True, lower=True)
        out = tridiagonal.eigh_from_reduced(w, back(q), d, e, scale, mesh=plan.mesh)
    else:
        out = tuple(rules.eigh_2d(plan, c, symmetrize=True, lower=True))
    return _selected(
        tuple(out) if vectors else out, sel, vectors, what, mesh=plan.mesh
    ), back is not None and vectors


def _distributed(plan: Plan, a, b=None, *, kind, symmetrize, lower, vectors, sel, fused=True):
    """The distributed route: one Hermitian matrix per operand, then the reduction (with
    ``fused``, ``L⁻ᴴ`` applied to the reduction's ``Q``; see `_pencil`)."""
    given, again, read = b, None, None
    if b is None:
        a = rules.hermitian(plan, a, symmetrize=symmetrize, lower=lower)
    else:
        b = rules.hermitian(plan, b, symmetrize=symmetrize, lower=lower)

        # A's Hermitian matrix once L exists: XLA made it first and held it through the
        # Cholesky
        def read(a, low):
            return rules.hermitian(plan, once(a, low), symmetrize=symmetrize, lower=lower)

    ops = _distributed_ops(plan, fused=fused)
    if fused and b is not None:
        # L again from the operand once the reduction's Q exists (n³/3 flops beside eigh's
        # 4n³/3 and more), where L or b's Hermitian copy was held through the reduction;
        # its transpose a chunk at a time (XLA's whole all-to-all sat beside Q's copy)
        def again(q):
            h = rules.hermitian(
                plan, once(given, q), symmetrize=symmetrize, lower=lower, chunked=True
            )
            return ops[0](h)

    out = _pencil(a, b, kind=kind, sel=sel, vectors=vectors, ops=ops, again=again, read=read)
    return tuple(out) if vectors else out


def _members(plan: Plan, *xs, sel, vectors, **flags):
    """Under ``jax.vmap`` each device solves the members it holds with jnp's functions
    (`dense`): no collective when the stack is sharded along its batch, where the
    route's one-matrix layouts, batched, would move every member across the mesh."""

    present = [x is not None for x in xs]  # None: no b (a standard problem)
    given = [x for x in xs if x is not None]

    def fn(*ys):  # eigenvalues with a unit core dimension: stack's cores are 2-D
        it = iter(ys)
        full = [next(it) if p else None for p in present]
        out = jax.vmap(functools.partial(dense, sel=sel, vectors=vectors, **flags))(*full)
        return (out[0][..., None, :], out[1]) if vectors else out[..., None, :]

    out = stack(fn, given, (2,) * len(given), 2, mesh=plan.mesh)
    return (out[0][..., 0, :], out[1]) if vectors else out[..., 0, :]


def _route_jvp(fn, plan: Plan, primals, tangents, **options):
    # the derivatives are the route's own (jax differentiates its steps; eigh's carries
    # jax's rule, so the back-transformation is not fused into it)
    fn = functools.partial(_distributed, plan, fused=False, **options)
    return jax.jvp(fn, primals, tangents)


def _static(sel=None, **options):
    """The one-device plan's options: a selection by value is made after it (its shape
    depends on the values)."""
    return dict(options, sel=None if sel is not None and sel[0] == "value" else sel)


def _select_after(run, plan: Plan, *operands, sel, vectors, **options):
    out = run(*operands)
    out = out if not vectors else tuple(out)
    value = sel if sel is not None and sel[0] == "value" else None
    return _selected(out, value, vectors, "distla.linalg.eigh", mesh=plan.mesh)


def _layouts(plan: Plan, *operands, results, vectors, **options):
    ins = tuple(block_layout(x.shape, plan.mesh) for x in operands)
    outs = (P(),) if not vectors else (P(), block_layout(results[1].shape, plan.mesh))
    return ins, outs


# scipy.linalg.eigh's forms of one matrix (or a pencil) on a mesh: options kind, symmetrize,
# lower, vectors, sel. jax.vmap of it is one stacked call (each device its own members);
# its derivatives are the route's own.
GENERALIZED = route.Op(
    "distla.linalg.eigh",
    operands=("a", "b"),
    one_device=dense,
    sizes=_shapes,
    family="eigh",
    layouts=_layouts,
    planned=route.Planned(options=_static, finish=_select_after),
    distributed=_distributed,
    vmap=route.by_stacks(_members),
    jvp=_route_jvp,
    on_mesh=False,
)


# ------------------------------------------------------------------ arguments


def check_subsets(what, n, subset_by_index, subset_by_value):
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


def _real_dtype(dtype):
    return np.dtype(jnp.finfo(dtype).dtype)
