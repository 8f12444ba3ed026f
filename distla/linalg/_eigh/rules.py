"""eigh's one-matrix computations with their batching and derivative rules (private).

Declared once as ``distla._core.route.Op``\\ s and run by ``route.distributed`` on
the call's plan: called eagerly, the tridiagonal drivers themselves
(``tridiagonal``); under a transformation, ``jax.vmap`` of one is jnp's eigh on
each device's members (`eigh_stack`) and its derivative is jax's rule,
``dw = re diag(Vᴴ dA V)``, ``dV = V (F ∘ Vᴴ dA V)``, with distla's products.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.matmul import product_here
from ..._core.matrix import block_spec, ct_moved, diag_mask, diagonal, hermitian_from
from ..._core.mesh import fitting_spec, run_on_mesh, tangent_on_mesh
from ..._core.plan import Plan
from ..._core.stacked import stack
from . import tridiagonal


@functools.partial(jax.jit, static_argnames=("mesh",))
def _eigh_tangent(w, v, da, *, mesh):
    """jax's eigh JVP: ``dw = re diag(Vᴴ dA V)``, ``dV = V (F ∘ Vᴴ dA V)``,
    ``F_ij = 1/(w_j − w_i)``."""
    spec = block_spec(mesh)
    n = v.shape[0]
    out = (P(), fitting_spec((n, n), mesh, spec))

    def body(w, v, da):
        vh = jnp.conj(v.T)
        m = product_here(product_here(vh, da), v)
        on_diag = diag_mask(m)
        diag = diagonal(jnp.real(m))
        gap = w[None, :] - w[:, None]
        f = jnp.where(on_diag, 0, 1 / jnp.where(on_diag, 1, gap)).astype(m.dtype)
        dv = product_here(v, f * m)
        return diag.astype(w.dtype), dv

    return run_on_mesh(body, mesh, out, w, v, da)


@functools.partial(jax.jit, static_argnames=("symmetrize", "lower", "mesh", "chunked"))
def _hermitian(a, *, symmetrize, lower, mesh, chunked=False):
    spec = fitting_spec(a.shape, mesh, block_spec(mesh))
    transpose = functools.partial(ct_moved, spec=spec) if chunked else None

    def body(a):
        return hermitian_from(a, symmetrize=symmetrize, lower=lower, transpose=transpose)

    return run_on_mesh(body, mesh, spec, a)


def hermitian(plan: Plan, a, *, symmetrize: bool, lower: bool, chunked: bool = False):
    """The Hermitian matrix eigh reads from ``a`` on ``plan``'s mesh (``(a + aᴴ)/2``, or
    one triangle mirrored), in the largest even 2D block layout; with ``chunked`` its
    transpose is moved a chunk at a time (`ct_moved`: no whole all-to-all in flight)."""
    return _hermitian(a, symmetrize=symmetrize, lower=lower, mesh=plan.mesh, chunked=chunked)


def eigh_stack(plan: Plan, a, *, uplo, symmetrize):
    """``(w, v)``: ``jnp.linalg.eigh`` of a stack's members, each device its own."""

    def fn(x):
        w, v = jnp.linalg.eigh(x, UPLO=uplo, symmetrize_input=symmetrize)
        return w[..., None, :], v

    w, v = stack(fn, (a,), (2,), 2, mesh=plan.mesh)
    return w[..., 0, :], v


def _eigh_one(plan: Plan, a, *, symmetrize, lower):
    return tuple(tridiagonal.eigh_2d(a, mesh=plan.mesh, symmetrize=symmetrize, lower=lower))


def _eigh_stacks(plan: Plan, a, *, symmetrize, lower):
    # jax.vmap of eigh: the stack path, batch-sharded as jnp's
    return eigh_stack(plan, a, uplo="L" if lower else "U", symmetrize=symmetrize)


def _eigh_jvp(fn, plan: Plan, primals, tangents, *, symmetrize, lower):
    (a,), (da,) = primals, tangents
    w, v = fn(a)
    da = tangent_on_mesh(da, a)  # jax.jacfwd's one-device basis
    da_h = hermitian(plan, da, symmetrize=symmetrize, lower=lower)
    dw, dv = _eigh_tangent(w, v, da_h, mesh=plan.mesh)
    return (w, v), (dw, dv)


# (w, v) of one Hermitian matrix (read as eigh reads it: symmetrize, else the lower or
# upper triangle) by tridiagonal reduction, with jax's rule
EIGH_2D = route.Op(
    "distla.linalg.eigh",
    one_device=jnp.linalg.eigh,
    distributed=_eigh_one,
    vmap=route.by_stacks(_eigh_stacks),
    jvp=_eigh_jvp,
    on_mesh=False,
)


def eigh_2d(plan: Plan, a, *, symmetrize: bool, lower: bool):
    """``(w, v)`` of one matrix with jax's rule; ``jax.vmap`` of it each device's members."""
    return route.distributed(EIGH_2D, plan, a, symmetrize=symmetrize, lower=lower)


def _eigvalsh_one(plan: Plan, a, *, symmetrize, lower):
    return tridiagonal.eigvalsh_2d(a, mesh=plan.mesh, symmetrize=symmetrize, lower=lower)


def _eigvalsh_stacks(plan: Plan, a, *, symmetrize, lower):
    return _eigh_stacks(plan, a, symmetrize=symmetrize, lower=lower)[0]


def _eigvalsh_jvp(fn, plan: Plan, primals, tangents, *, symmetrize, lower):
    # dw = re diag(Vᴴ dA V) needs the eigenvectors
    def values(a):
        return eigh_2d(plan, a, symmetrize=symmetrize, lower=lower)[0]

    return jax.jvp(values, primals, tangents)


# eigenvalues by reduction to tridiagonal form; derivatives by eigh's rule
EIGVALSH_2D = route.Op(
    "distla.linalg.eigvalsh",
    one_device=jnp.linalg.eigvalsh,
    distributed=_eigvalsh_one,
    vmap=route.by_stacks(_eigvalsh_stacks),
    jvp=_eigvalsh_jvp,
    on_mesh=False,
)


def eigvalsh_2d(plan: Plan, a, *, symmetrize: bool, lower: bool):
    """Eigenvalues of one matrix, differentiable (eigh's rule), batched under ``jax.vmap``."""
    return route.distributed(EIGVALSH_2D, plan, a, symmetrize=symmetrize, lower=lower)
