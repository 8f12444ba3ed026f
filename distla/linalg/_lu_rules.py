"""The LU family's one-matrix calls with their batching and derivative rules (private).

``distla.linalg`` resolves a call (``distla._core.plan.Plan``) and hands one sharded
matrix to the functions here. Each wraps ``distla.linalg._lu`` so that ``jax.vmap``
of it becomes one batched call (``_batched.with_vmap_rule``) and its
derivatives reuse the factorisation: solves are ``lax.custom_linear_solve``,
whose transpose is the solve with ``trans=1``, as ``jnp.linalg.solve``'s is;
``det``, ``slogdet``, ``inv`` and ``lu`` carry jnp's JVP rules written with
distla's solves and matmul.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_derivatives import SymbolicZero
from jax.sharding import PartitionSpec as P

from .._core.block_cyclic import result_spec
from .._core.buckets import on_bucket
from .._core.checks import is_traced
from .._core.matmul import matvec, product
from .._core.matrix import like, natural, tril, triu
from .._core.mesh import fitting_spec, rule_on_mesh
from .._core.plan import Plan
from . import _batched, _lu


def _not_differentiable(fn, what):
    fn = jax.custom_jvp(fn)

    def rule(primals, tangents):
        raise TypeError(
            f"{what} is not differentiable in distla; differentiate distla.linalg.solve or "
            "distla.linalg.lu_solve, whose derivatives reuse the factorisation."
        )

    fn.defjvp(rule)
    return fn


def _factor(a, call: Plan):
    def factor(a):
        return tuple(_lu.lu_factor(a, call=call))

    if not is_traced(a):  # the rules act only under a transformation
        m, n = a.shape
        if m != n:
            return factor(a)
        return on_bucket(
            factor,
            a,
            call=call,
            results=lambda: (
                ((n, n), (n,)),
                (fitting_spec((n, n), call.mesh, call.grid.block_spec), P()),
            ),
        )
    return _batched.with_vmap_rule("lu_factor", factor)(a)


def _lu_solve_kernel(trans, call: Plan):
    def kernel(lu, piv, b):
        return _lu.lu_solve(lu, piv, b, call=call, trans=trans)

    return _batched.with_vmap_rule("lu_solve", kernel, trans=trans)


def _solves(lu, piv, trans, call: Plan):
    """``(solve, transpose_solve)`` of ``op(A)`` for ``lax.custom_linear_solve``."""

    def solve(_, rhs):
        return like(_lu_solve_kernel(trans, call)(lu, piv, rhs), rhs)

    def transpose_solve(_, rhs):
        if trans == 2:  # the linear transpose of x -> A^-H x is x -> conj(A^-1 conj(x))
            x = jnp.conj(_lu_solve_kernel(0, call)(lu, piv, jnp.conj(rhs)))
        else:
            x = _lu_solve_kernel(1 - trans, call)(lu, piv, rhs)
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
            return like(_lu.factors_matvec(lu, piv, x, call=call, trans=trans), x)

        return natural(lax.custom_linear_solve(mv, b, *_solves(lu, piv, trans, call)))

    return jax.jit(solve)


def _solve_linear(a, b, call: Plan):
    """``a^-1 b`` as ``lax.custom_linear_solve``: linear in ``b``, its transpose the
    ``trans=1`` solve, differentiable in ``a`` through ``a @ x``; the factors of
    ``a`` are computed once."""
    lu, piv = _factor(lax.stop_gradient(a), call)
    # saving nothing, the transpose of a @ x recomputes from a what it would otherwise
    # hoist out of the product's program typed for Auto axes (jax.vmap of the solve
    # on an Explicit mesh refuses those): see _triangular.solve_linear
    product = jax.checkpoint(
        lambda a, x: matvec(a, x, call.mesh), policy=jax.checkpoint_policies.nothing_saveable
    )
    mv = lambda x: like(product(a, x), x)  # noqa: E731
    return natural(lax.custom_linear_solve(mv, b, *_solves(lu, piv, 0, call)))


def solve_2d(a, b, *, call: Plan):
    """``a^-1 b`` in one program (factorisation and solves), differentiated as a linear solve."""

    def fused(a, b):
        return _lu.solve(a, b, call=call)

    if not is_traced(a, b):  # the rules act only under a transformation
        (x,) = on_bucket(
            lambda a, b: (fused(a, b),),
            a,
            b,
            call=call,
            results=lambda: ((b.shape,), (result_spec(call.grid, b.shape),)),
        )
        return x

    def jvp(primals, tangents):
        (a, b), (da, db) = primals, tangents
        if da is None:  # linear in b
            db = like(jnp.zeros(b.shape, b.dtype), b) if db is None else db
            return jax.jvp(lambda b: _solve_linear(a, b, call), (b,), (db,))
        if db is None:
            return jax.jvp(lambda a: _solve_linear(a, b, call), (a,), (da,))
        return jax.jvp(lambda a, b: _solve_linear(a, b, call), (a, b), (da, db))

    def rule(primals, tangents):
        # zero tangents stay symbolic (None): jax would instantiate them eagerly, with
        # the operand's sharding, which outside jax.set_mesh names no devices
        live = tuple(None if isinstance(t, SymbolicZero) else t for t in tangents)
        return rule_on_mesh(jvp)(primals, live)

    primal = jax.custom_jvp(_batched.with_vmap_rule("solve", fused))
    primal.defjvp(rule, symbolic_zeros=True)
    return primal(a, b)


def _tr_inv_times(a, da, call: Plan):
    """``trace(a^-1 da)``, linear in ``da`` and differentiable in ``a`` (to any order)."""
    return _lu.trace(_solve_linear(a, da, call))


def _regular_or_eye(a, regular):
    """``a`` where ``regular``, else the identity: a safe operand for the unused branch."""
    eye = like(jnp.eye(a.shape[-1], dtype=a.dtype), a)
    return jnp.where(regular, a, eye)


def _one_matrix_op(op: str, primal, jvp):
    """``primal`` (a one-matrix ``op`` of ``a``) batched under ``jax.vmap`` (one
    ``_batched`` call) and differentiated by ``jvp(fn, a, da) -> (out, tangent)``,
    where ``fn`` is the op itself (so that ``jvp`` can use its higher derivatives)."""
    fn = jax.custom_jvp(_batched.with_vmap_rule(op, primal))
    fn.defjvp(rule_on_mesh(lambda primals, tangents: jvp(fn, *primals, *tangents)))
    # the rules act only under a transformation
    return lambda a: fn(a) if is_traced(a) else primal(a)


def slogdet_2d(a, *, call: Plan):
    """``(sign, logabsdet)`` with jnp's rule ``d log|det a| = trace(a^-1 da)``."""

    def jvp(fn, a, da):
        # the solve is differentiable in a (custom_linear_solve through a @ x),
        # so every order is right
        sign, logabs = fn(a)
        g = _tr_inv_times(a, da, call)
        if jnp.issubdtype(call.dtype, jnp.complexfloating):
            sign_dot = (g - jnp.real(g).astype(g.dtype)).astype(sign.dtype) * sign
        else:
            sign_dot = jnp.zeros_like(sign)
        return (sign, logabs), (sign_dot, jnp.real(g).astype(logabs.dtype))

    return _one_matrix_op("slogdet", lambda a: tuple(_lu.slogdet(a, call=call)), jvp)(a)


def det_2d(a, *, call: Plan):
    """``det(a)`` with jnp's rule ``d det = trace(adj(a) da)``."""

    def jvp(fn, a, da):
        # Where det is finite and non-zero, adj(a) = det(a) a^-1 built from
        # differentiable pieces (det's own rule and a solve differentiable in
        # a), so higher derivatives are right; at a singular (or overflowing)
        # a, jnp's cofactor construction of adj(a) (distla.linalg._lu.adjugate),
        # which is zero where det overflows, as jnp's.
        d = fn(a)
        regular = jnp.isfinite(d) & (d != 0)
        safe = _regular_or_eye(a, regular)
        t_regular = fn(safe) * _tr_inv_times(safe, da, call)
        adj = _not_differentiable(lambda a: _lu.adjugate(a, call=call), "the adjugate")(
            lax.stop_gradient(a)
        )
        t_singular = jnp.sum(like(jnp.transpose(adj), da) * da)
        return d, jnp.where(regular, t_regular.astype(d.dtype), t_singular.astype(d.dtype))

    return _one_matrix_op("det", lambda a: _lu.det(a, call=call), jvp)(a)


def inv_2d(a, *, call: Plan):
    """``a^-1`` with the rule ``d(a^-1) = -a^-1 da a^-1``."""

    def jvp(fn, a, da):
        x = fn(a)
        return x, -product(product(x, da, call.mesh), x, call.mesh)

    return _one_matrix_op("inv", lambda a: _lu.inv(a, call=call), jvp)(a)


def _lu_tangent(p, l, u, da, call: Plan):
    """``(dl, du)`` of ``a = p l u`` (square): jax's rule ``X = l^-1 p^T da u^-1``,
    ``dl = l tril(X, -1)``, ``du = triu(X) u``, with distla's inv and matmul."""
    mesh = call.mesh
    pda = product(like(jnp.transpose(p), da), da, mesh)
    x = product(product(inv_2d(l, call=call), pda, mesh), inv_2d(u, call=call), mesh)
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


def plu_2d(a, *, call: Plan):
    """``(p, l, u)`` of one matrix with jax's LU derivative (square ``a``)."""

    def primal(a):
        return tuple(_lu.lu(a, call=call))

    if not is_traced(a):  # the rules act only under a transformation
        return primal(a)
    fn = jax.custom_jvp(primal)

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        _square_only(a, "lu")
        p, l, u = fn(a)
        dl, du = _lu_tangent(p, l, u, da, call)
        # every tangent in its primal's sharding type (jax 0.11 checks the zeros' too)
        return (p, l, u), (like(jnp.zeros_like(p), p), like(dl, l), like(du, u))

    fn.defjvp(rule_on_mesh(rule))
    return fn(a)


def lu_factor_2d(a, *, call: Plan):
    """``(lu, piv)`` of one matrix with jax's LU derivative (square ``a``)."""
    if not is_traced(a):  # the rules act only under a transformation
        return _factor(a, call)  # (which also skips its batching rule)
    fn = jax.custom_jvp(lambda a: _factor(a, call))

    def rule(primals, tangents):
        (a,), (da,) = primals, tangents
        _square_only(a, "lu_factor")
        lu_, piv = fn(a)
        p, l, u = _lu.plu(lu_, piv, call=call)
        dl, du = _lu_tangent(p, l, u, da, call)
        return (lu_, piv), (like(dl + du, lu_), np.zeros(piv.shape, jax.dtypes.float0))

    fn.defjvp(rule_on_mesh(rule))
    return fn(a)
