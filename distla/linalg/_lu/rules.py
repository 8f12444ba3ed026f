"""The LU family's one-matrix computations with their batching and derivative rules (private).

Each is declared once as a ``distla._core.route.Op`` and run by
``route.distributed`` on the call's resolved plan: called eagerly it is the
program of ``programs`` itself; under a transformation, ``jax.vmap`` of it is
one batched call (``stacks.vmap_rule``) and its derivatives reuse the
factorisation: solves are ``lax.custom_linear_solve``, whose transpose is the
solve with ``trans=1``, as ``jnp.linalg.solve``'s is; ``det``, ``slogdet``,
``inv`` and ``lu`` carry jnp's JVP rules written with distla's solves and matmul.
The last section hands the LU to mixed-precision refinement (``_refine``).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.block_cyclic import result_spec
from ..._core.buckets import on_bucket
from ..._core.checks import empty_or_one_device
from ..._core.matmul import matvec, product
from ..._core.matrix import like, natural, tril, triu
from ..._core.mesh import fitting_spec
from ..._core.plan import Plan
from .._refine import Factorisation
from . import programs, stacks

# --------------------------------------------------------------------- factors


def _factor_2d(plan: Plan, a):
    """``(lu, piv)`` of one matrix; a square one called eagerly on the shape bucket's order."""

    def factor(a):
        return tuple(programs.lu_factor(a, call=plan))

    m, n = a.shape
    if m != n:
        return factor(a)
    return on_bucket(
        factor,
        a,
        call=plan,
        results=lambda: (
            ((n, n), (n,)),
            (fitting_spec((n, n), plan.mesh, plan.grid.block_spec), P()),
        ),
    )


# the factorisation, whose jax.vmap is one batched call (no derivative: see LU_FACTOR)
_FACTOR = route.Op(
    "distla.linalg.lu_factor",
    one_device=jsl.lu_factor,
    distributed=_factor_2d,
    vmap=functools.partial(stacks.vmap_rule, "lu_factor"),
)


def _lu_tangent(p, l, u, da, plan: Plan):
    """``(dl, du)`` of ``a = p l u`` (square): jax's rule ``X = l^-1 p^T da u^-1``,
    ``dl = l tril(X, -1)``, ``du = triu(X) u``, with distla's inv and matmul."""
    mesh = plan.mesh
    pda = product(like(jnp.transpose(p), da), da, mesh)
    x = product(product(inv_2d(l, call=plan), pda, mesh), inv_2d(u, call=plan), mesh)
    dl = product(l, tril(x, -1), mesh)
    du = product(triu(x), u, mesh)
    return dl, du


def _square_only(a, what):
    if a.shape[0] != a.shape[1]:
        raise NotImplementedError(
            f"distla.linalg.{what} of a rectangular matrix is not differentiable in distla "
            f"(got a of shape {a.shape}); jax.scipy.linalg.lu is. Differentiate a square "
            "matrix, or solve/lu_solve."
        )


def _lu_factor_jvp(fn, plan: Plan, primals, tangents):
    (a,), (da,) = primals, tangents
    _square_only(a, "lu_factor")
    lu_, piv = fn(a)
    p, l, u = programs.plu(lu_, piv, call=plan)
    dl, du = _lu_tangent(p, l, u, da, plan)
    return (lu_, piv), (like(dl + du, lu_), np.zeros(piv.shape, jax.dtypes.float0))


# (lu, piv) of one matrix with jax's LU derivative (square a)
LU_FACTOR = route.Op(
    "distla.linalg.lu_factor",
    one_device=jsl.lu_factor,
    distributed=lambda plan, a: route.distributed(_FACTOR, plan, a),
    jvp=_lu_factor_jvp,
)


def lu_factor_2d(a, *, call: Plan):
    """``(lu, piv)`` of one matrix with jax's LU derivative (square ``a``)."""
    return route.distributed(LU_FACTOR, call, a)


def _plu_jvp(fn, plan: Plan, primals, tangents):
    (a,), (da,) = primals, tangents
    _square_only(a, "lu")
    p, l, u = fn(a)
    dl, du = _lu_tangent(p, l, u, da, plan)
    # every tangent in its primal's sharding type (jax 0.11 checks the zeros' too)
    return (p, l, u), (like(jnp.zeros_like(p), p), like(dl, l), like(du, u))


# (p, l, u) of one matrix with jax's LU derivative (square a)
PLU = route.Op(
    "distla.linalg.lu",
    one_device=jsl.lu,
    distributed=lambda plan, a: tuple(programs.lu(a, call=plan)),
    jvp=_plu_jvp,
)


# ---------------------------------------------------------------------- solves

# op(A)^-1 b with one factorisation, whose jax.vmap is one batched call
_SOLVE_WITH_FACTORS = route.Op(
    "distla.linalg.lu_solve",
    one_device=jsl.lu_solve,
    distributed=lambda plan, lu, piv, b, *, trans: programs.lu_solve(
        lu, piv, b, call=plan, trans=trans
    ),
    vmap=functools.partial(stacks.vmap_rule, "lu_solve"),
)


def _solves(lu, piv, trans, plan: Plan):
    """``(solve, transpose_solve)`` of ``op(A)`` for ``lax.custom_linear_solve``."""

    def with_factors(rhs, trans):
        return route.distributed(_SOLVE_WITH_FACTORS, plan, lu, piv, rhs, trans=trans)

    def solve(_, rhs):
        return like(with_factors(rhs, trans), rhs)

    def transpose_solve(_, rhs):
        if trans == 2:  # the linear transpose of x -> A^-H x is x -> conj(A^-1 conj(x))
            x = jnp.conj(with_factors(jnp.conj(rhs), 0))
        else:
            x = with_factors(rhs, 1 - trans)
        return like(x, rhs)

    return solve, transpose_solve


def lu_solve_2d(lu, piv, b, *, trans, call: Plan):
    """``op(A)^-1 b`` from one factorisation: linear in ``b``, differentiable in ``lu``.

    One program (inlined into the caller's under ``jax.jit``) that takes the
    factors as operands: ``jax.jacrev`` outside a mesh context then runs the
    transposed solve with the factors, which carry the ``Explicit`` mesh's
    devices, among its operands."""
    return _lu_solve_program(trans, call)(lu, piv, b)


@functools.cache
def _lu_solve_program(trans, call: Plan):
    def solve(lu, piv, b):
        def mv(x):
            return like(programs.factors_matvec(lu, piv, x, call=call, trans=trans), x)

        return natural(lax.custom_linear_solve(mv, b, *_solves(lu, piv, trans, call)))

    return jax.jit(solve)


def _solve_linear(a, b, plan: Plan):
    """``a^-1 b`` as ``lax.custom_linear_solve``: linear in ``b``, its transpose the
    ``trans=1`` solve, differentiable in ``a`` through ``a @ x``; the factors of
    ``a`` are computed once."""
    lu, piv = route.distributed(_FACTOR, plan, lax.stop_gradient(a))
    # saving nothing, the transpose of a @ x recomputes from a what it would otherwise
    # hoist out of the product's program typed for Auto axes (jax.vmap of the solve
    # on an Explicit mesh refuses those): see _triangular.solve_linear
    product = jax.checkpoint(
        lambda a, x: matvec(a, x, plan.mesh), policy=jax.checkpoint_policies.nothing_saveable
    )
    mv = lambda x: like(product(a, x), x)  # noqa: E731
    return natural(lax.custom_linear_solve(mv, b, *_solves(lu, piv, 0, plan)))


def _fused_solve(plan: Plan, a, b):
    """``a^-1 b`` in one program (factorisation and solves); eagerly on the bucket's order."""
    (x,) = on_bucket(
        lambda a, b: (programs.solve(a, b, call=plan),),
        a,
        b,
        call=plan,
        results=lambda: ((b.shape,), (result_spec(plan.grid, b.shape),)),
    )
    return x


def _solve_jvp(fn, plan: Plan, primals, tangents):
    return route.jvp_in_live(lambda a, b: _solve_linear(a, b, plan), primals, tangents)


# a^-1 b in one program (factorisation and solves), differentiated as a linear solve; zero
# tangents stay symbolic (None): jax would instantiate them eagerly, with the operand's
# sharding, which outside jax.set_mesh names no devices
SOLVE = route.Op(
    "distla.linalg.solve",
    one_device=jnp.linalg.solve,
    distributed=_fused_solve,
    vmap=functools.partial(stacks.vmap_rule, "solve"),
    jvp=_solve_jvp,
    symbolic_zeros=True,
)


def solve_2d(a, b, *, call: Plan):
    """``a^-1 b`` in one program (factorisation and solves), differentiated as a linear solve."""
    return route.distributed(SOLVE, call, a, b)


# ----------------------------------------------------- det, slogdet, inv


def _tr_inv_times(a, da, plan: Plan):
    """``trace(a^-1 da)``, linear in ``da`` and differentiable in ``a`` (to any order)."""
    return programs.trace(_solve_linear(a, da, plan))


def _regular_or_eye(a, regular):
    """``a`` where ``regular``, else the identity: a safe operand for the unused branch."""
    eye = like(jnp.eye(a.shape[-1], dtype=a.dtype), a)
    return jnp.where(regular, a, eye)


def _slogdet_jvp(fn, plan: Plan, primals, tangents):
    # the solve is differentiable in a (custom_linear_solve through a @ x), so every
    # order is right: d log|det a| = trace(a^-1 da)
    (a,), (da,) = primals, tangents
    sign, logabs = fn(a)
    g = _tr_inv_times(a, da, plan)
    if jnp.issubdtype(plan.dtype, jnp.complexfloating):
        sign_dot = (g - jnp.real(g).astype(g.dtype)).astype(sign.dtype) * sign
    else:
        sign_dot = jnp.zeros_like(sign)
    return (sign, logabs), (sign_dot, jnp.real(g).astype(logabs.dtype))


# (sign, logabsdet) with jnp's rule d log|det a| = trace(a^-1 da)
SLOGDET = route.Op(
    "distla.linalg.slogdet",
    one_device=jnp.linalg.slogdet,
    distributed=lambda plan, a: tuple(programs.slogdet(a, call=plan)),
    vmap=functools.partial(stacks.vmap_rule, "slogdet"),
    jvp=_slogdet_jvp,
)


def _no_derivative(fn, plan, primals, tangents):
    raise TypeError(
        "the adjugate is not differentiable in distla; differentiate distla.linalg.solve or "
        "distla.linalg.lu_solve, whose derivatives reuse the factorisation."
    )


# jnp's cofactor construction of adj(a), for det's derivative at a singular a
_ADJUGATE = route.Op(
    "distla.linalg.det",
    one_device=jnp.linalg.det,
    distributed=lambda plan, a: programs.adjugate(a, call=plan),
    jvp=_no_derivative,
    on_mesh=False,
)


def _det_jvp(fn, plan: Plan, primals, tangents):
    # Where det is finite and non-zero, adj(a) = det(a) a^-1 built from differentiable
    # pieces (det's own rule and a solve differentiable in a), so higher derivatives
    # are right; at a singular (or overflowing) a, jnp's cofactor construction of
    # adj(a) (programs.adjugate), which is zero where det overflows, as jnp's.
    (a,), (da,) = primals, tangents
    d = fn(a)
    regular = jnp.isfinite(d) & (d != 0)
    safe = _regular_or_eye(a, regular)
    t_regular = fn(safe) * _tr_inv_times(safe, da, plan)
    adj = route.distributed(_ADJUGATE, plan, lax.stop_gradient(a))
    t_singular = jnp.sum(like(jnp.transpose(adj), da) * da)
    return d, jnp.where(regular, t_regular.astype(d.dtype), t_singular.astype(d.dtype))


# det(a) with jnp's rule d det = trace(adj(a) da)
DET = route.Op(
    "distla.linalg.det",
    one_device=jnp.linalg.det,
    distributed=lambda plan, a: programs.det(a, call=plan),
    vmap=functools.partial(stacks.vmap_rule, "det"),
    jvp=_det_jvp,
)


def _inv_jvp(fn, plan: Plan, primals, tangents):
    (a,), (da,) = primals, tangents
    x = fn(a)
    return x, -product(product(x, da, plan.mesh), x, plan.mesh)


# a^-1 with the rule d(a^-1) = -a^-1 da a^-1
INV = route.Op(
    "distla.linalg.inv",
    one_device=jnp.linalg.inv,
    distributed=lambda plan, a: programs.inv(a, call=plan),
    vmap=functools.partial(stacks.vmap_rule, "inv"),
    jvp=_inv_jvp,
)


def inv_2d(a, *, call: Plan):
    """``a^-1`` with the rule ``d(a^-1) = -a^-1 da a^-1``."""
    return route.distributed(INV, call, a)


# ------------------------------------------------------------- mixed precision
# The LU as refinement's factorisation (distla.linalg._refine): on the call's plan, the
# batched LU for stacks, the one-matrix LU otherwise; jax's on one device (plan None).


def _refine_factor(plan: Plan | None, a):
    if plan is None:
        return empty_or_one_device(jsl.lu_factor, a)
    plan = dataclasses.replace(plan, dtype=np.dtype(a.dtype))
    return stacks.lu_factor(plan, a) if a.ndim > 2 else lu_factor_2d(a, call=plan)


def _refine_solve(plan: Plan | None, factors, r, trans):
    lu, piv = factors
    if plan is None:
        return empty_or_one_device(
            lambda lu, piv, r: jsl.lu_solve((lu, piv), r, trans=trans), lu, piv, r
        )
    plan = dataclasses.replace(plan, dtype=np.dtype(lu.dtype))
    if lu.ndim > 2:  # one vector per member goes to the batched solve as a column
        vector = r.ndim == lu.ndim - 1
        x = stacks.lu_solve(plan, lu, piv, r[..., None] if vector else r, trans=trans)
        return x[..., 0] if vector else x
    return lu_solve_2d(lu, piv, r, trans=trans, call=plan)


LU = Factorisation(factor=_refine_factor, solve=_refine_solve, fused=True)
