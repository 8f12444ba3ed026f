"""QDWH, the polar factor's iteration (private; see docs/spectral.md).

The distributed driver of ``distla.linalg.polar`` (``_polar``), and the step
that ``svd`` (``_svd``) and eigh's divide and conquer (``_eigh.divide``) share.

QDWH (Nakatsukasa, Bai & Gygi 2010) is a dynamically weighted Halley
iteration ``X ← X (a I + b XᴴX)(I + c XᴴX)⁻¹`` on ``X₀ = A/α``
(``α ≥ ‖A‖₂``) that converges to the unitary polar factor ``U``. Every
iteration takes the QR-based form ``[√c X; I] = [Q₁; Q₂] R``,
``X ← (b/c) X + (a − b/c)/√c · Q₁Q₂ᴴ``: one kernel (``kernels/qdwh.py``) factors
the stack in place, forms ``Q`` over it and multiplies ``Q₁Q₂ᴴ`` from ``Q``'s
block-cyclic order, about three blocks beside ``X`` (docs/memory.md); shapes it does
not take (eigh's divide and conquer) use ``distla.linalg.qr`` and SUMMA. Nakatsukasa &
Higham switch to the Cholesky-based form
(``I + c XᴴX = L Lᴴ`` and two triangular solves, half the flops) once
``c ≤ 100``; distla does not: on 8 devices of the CPU test bed that step took
as long as the QR-based one (polar at n = 2048: 4.43 s with it, 4.36 s
without; 1.02 s against 1.15 s at 1024), and its program (a distributed
Cholesky and two substitutions, three loops of their own) was 3.9 s of the
first call's compile at n = 1024 (docs/benchmarks.md, "First call").

One ``lax.while_loop`` (compile size does not grow with n or with the
iteration count). No device holds a whole matrix: every step is a
distributed matmul or QR, or elementwise.

Naming: ``x`` an iterate (``[m, n]``, 2D block layout), ``l`` the lower
bound of its singular values, ``(pa, pb, pc)`` the QDWH weights.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.qdwh import qr_product

from .._core.block_cyclic import blocking
from .._core.checks import is_traced
from .._core.matmul import mm
from .._core.matrix import HIGHEST, block_spec, ct, eye, on_mesh, once, put, round_up
from .._core.mesh import fitting_spec, grid_of, is_explicit, run_on_mesh, shard_map
from .._core.plan import Plan, plan_here
from . import _qr

# ----------------------------------------------------------------- layout helpers


def quantum(mesh) -> int:
    """Sizes that are multiples of this split evenly in the 2D block layout."""
    g = grid_of(mesh, what="distla.linalg")
    return math.lcm(g.pr, g.pc)


def step_block(mesh, m: int, n: int) -> int | None:
    """The block size of the in-place QR step (`qr_product`) for an ``m x n`` iterate, or
    ``None`` when its shape does not let the stack's block-cyclic order be ``X``'s above
    ``I``'s (``n`` a multiple of ``nb·lcm(pr, pc)``, ``m`` of ``nb·pr``)."""
    g = grid_of(mesh, what="distla.linalg")
    nb, _ = blocking(g, n)
    fits = n % (nb * quantum(mesh)) == 0 and m % (nb * g.pr) == 0
    return nb if fits else None


def padded_shape(mesh, m: int, n: int) -> tuple[int, int]:
    """``(m_pad, n_pad)``: QDWH's iterate for an ``m x n`` (``m >= n``) matrix, padded so
    that the in-place QR step takes it (`step_block`)."""
    g = grid_of(mesh, what="distla.linalg")
    _, n_pad = blocking(g, n)
    nb, _ = blocking(g, n_pad)
    return round_up(m + (n_pad - n), nb * quantum(mesh)), n_pad


def pow2_scale(x: jax.Array) -> jax.Array:
    """``2⁻ᵉ`` (real scalar) with ``max|x| = f·2ᵉ``, ``f ∈ [½, 1)``: ``x`` times it has
    max-norm in ``[½, 1)``, exactly (a power of two). ``1`` for a zero or non-finite ``x``."""
    real = jnp.finfo(x.dtype).dtype
    mx = jnp.max(jnp.abs(x))
    _, e = jnp.frexp(mx)
    # clipped to ±(maxexp - 8): with the scale at the last normal binade (2⁻¹²⁶ for
    # float32 entries near 1e38) XLA folds ((a + aᴴ)/2)·s into (a + aᴴ)·(s/2), s/2 is
    # subnormal, XLA:CPU flushes it to zero, and eigh returned every eigenvalue as 0
    top = jnp.finfo(real).maxexp - 8
    ok = (mx > 0) & jnp.isfinite(mx)
    return jnp.where(ok, jnp.ldexp(jnp.ones((), real), jnp.clip(-e, -top, top)), jnp.ones((), real))


def norm_bound(x: jax.Array) -> jax.Array:
    """``sqrt(‖x‖₁ ‖x‖∞) ≥ ‖x‖₂`` (distributed reductions of |x|), formed on ``x``
    scaled by a power of two so that the product neither under- nor overflows."""
    ax = jnp.abs(x)
    s = pow2_scale(ax)
    ax = ax * s
    n1 = jnp.max(jnp.sum(ax, axis=0))
    ninf = jnp.max(jnp.sum(ax, axis=1))
    return jnp.sqrt(n1 * ninf) / s


# --------------------------------------------------------------------------- QDWH


def weights(l):
    """QDWH's dynamic weights ``(a, b, c)`` for lower bound ``l`` and the next bound."""
    l2 = l * l
    d = jnp.cbrt(4.0 * (1.0 - l2) / (l2 * l2))
    sqd = jnp.sqrt(1.0 + d)
    pa = sqd + 0.5 * jnp.sqrt(8.0 - 4.0 * d + 8.0 * (2.0 - l2) / (l2 * sqd))
    pb = (pa - 1.0) ** 2 / 4.0
    pc = pa + pb - 1.0
    l_next = jnp.minimum(l * (pa + pb * l2) / (1.0 + pc * l2), 1.0)
    return pa, pb, pc, l_next


def _tolerances(dtype):
    eps = float(jnp.finfo(jnp.finfo(dtype).dtype).eps)
    return eps, 5.0 * eps, (5.0 * eps) ** (1.0 / 3.0)


def qdwh_init(x: jax.Array, spec: P):
    """QDWH's state ``(k, x/α, l, step)`` for ``x`` (``α ≥ ‖x‖₂``, ``l = eps``)."""
    real = jnp.finfo(x.dtype).dtype
    eps, _, _ = _tolerances(x.dtype)
    alpha = norm_bound(x)
    alpha = jnp.where(alpha > 0, alpha, jnp.ones((), real))
    x = put(x / alpha.astype(x.dtype), spec)
    return (jnp.zeros((), jnp.int32), x, jnp.asarray(eps, real), jnp.asarray(jnp.inf, real))


def qdwh_going(state, *, max_iterations: int):
    """Whether QDWH goes on: ``l`` not yet 1 or the last step not yet below ``(5 eps)^(1/3)``."""
    k, x, l, diff = state
    _, tol_l, tol_x = _tolerances(x.dtype)
    return (k < max_iterations) & ((jnp.abs(1.0 - l) > tol_l) | (diff > tol_x))


def _qr_product(x, sqrt_c, *, spec: P):
    """``Q₁Q₂ᴴ`` of ``[√c X; I] = [Q₁; Q₂] R`` in ``spec``.

    In place where ``x``'s shape lets it (`step_block`; polar pads to it): the stack,
    its QR and ``Q`` over it, the product from ``Q``'s block-cyclic order
    (``kernels/qdwh.py``), about three blocks beside ``X``. Otherwise ``distla``'s QR of
    the stack and SUMMA of ``Q₁`` and ``Q₂ᴴ`` (eigh's divide and conquer)."""
    m, n = x.shape
    call = plan_here(x.dtype)
    nb = step_block(call.mesh, m, n)
    if nb is None:
        eye_n = eye(n, n, x.dtype, spec)
        stacked = put(jnp.concatenate([sqrt_c.astype(x.dtype) * x, eye_n]), spec)
        q, _ = _qr.qr_2d(stacked, mode="reduced", call=call)
        return mm(put(q[:m], spec), ct(put(q[m:], spec), spec), spec)
    grid = call.grid
    kernel = functools.partial(
        qr_product,
        row_axis=grid.row,
        col_axis=grid.col,
        nb=nb,
        stages=_qr.stages_for(n // nb),
        precision=HIGHEST,
    )
    blocks = grid.block_spec
    out = shard_map(kernel, in_specs=(blocks, P()), out_specs=blocks, check_vma=False)(
        put(x, blocks), sqrt_c.astype(x.dtype)
    )
    return put(out, spec)


def qdwh_qr_step(state, *, spec: P):
    """``[√c X; I] = [Q₁; Q₂] R``, ``X ← (b/c) X + (a − b/c)/√c · Q₁Q₂ᴴ``.

    ``√c X`` stays on top: Householder QR without row pivoting is row-wise stable only
    with its rows of large norm first (Powell & Reid), and ``√c`` reaches ``1/eps``.
    """
    k, x, l, _ = state
    m, n = x.shape
    pa, pb, pc, l_next = weights(l)
    upd = _qr_product(x, jnp.sqrt(pc), spec=spec)
    # the step X_new − X first, then X_new = X + step: X's last reader writes X_new, so
    # XLA updates the loop's X in place (with ‖X_new − X‖ read after X_new it copies X
    # at the start of every iteration, one more share through the QR)
    step = (pb / pc - 1).astype(x.dtype) * x + ((pa - pb / pc) / jnp.sqrt(pc)).astype(x.dtype) * upd
    diff = jnp.linalg.norm(step) / jnp.sqrt(float(n))
    new = put(once(x + step, diff), spec)
    return k + 1, new, l_next, diff


def qdwh(x: jax.Array, spec: P, *, max_iterations: int = 12):
    """Unitary polar factor of ``x`` (``[m, n]``, ``m >= n``), traced (``lax.while_loop``).

    ``x`` must split evenly in ``spec`` (the caller pads). Returns ``(u, iterations)``.
    """
    state = lax.while_loop(
        functools.partial(qdwh_going, max_iterations=max_iterations),
        functools.partial(qdwh_qr_step, spec=spec),
        qdwh_init(x, spec),
    )
    k, x, _, _ = state
    return x, k


# ------------------------------------------------------------------- eager driver
# Called on concrete arrays, the spectral functions run their loops in Python
# over separately compiled steps (cached per shape, dtype and mesh), so polar,
# eigh and svd of the same size share one compiled QDWH step; under jax.jit they
# trace the lax.while_loop versions above.


def _state_specs(spec):
    return (P(), spec, P(), P())


# steps the eager drivers ran, by kind (read by tests and benchmarks/bench_spectral.py)
STEPS: dict[str, int] = {}


def count(kind: str) -> None:
    """Count one step of ``kind`` (``"qdwh"``, ``"level"``, ``"leaf"``)."""
    STEPS[kind] = STEPS.get(kind, 0) + 1


def qdwh_eager(x: jax.Array, mesh, spec: P, *, max_iterations: int = 12):
    """`qdwh` on a concrete ``x``: the loop on the host, each step compiled once."""
    specs = _state_specs(spec)
    state = on_mesh(qdwh_init, mesh, specs, (("spec", spec),))(x)
    going = on_mesh(qdwh_going, mesh, P(), (("max_iterations", max_iterations),))
    run = on_mesh(qdwh_qr_step, mesh, specs, (("spec", spec),))
    while bool(going(state)):
        state = run(state)
        count("qdwh")
    return state[1], state[0]


def hermitian(h: jax.Array, spec: P) -> jax.Array:
    """``(h + hᴴ)/2`` in ``spec``."""
    return put((h + ct(h, spec)) / 2, spec)


def _shapes(m0, n0):
    """``(wide, m, n)``: QDWH runs on the tall ``x`` (``aᴴ`` when ``a`` is wide)."""
    wide = m0 < n0
    return wide, max(m0, n0), min(m0, n0)


def polar_prep(a, *, mesh):
    """``(xp, s)``: ``x`` (``a`` or ``aᴴ``, tall) times the power of two ``s`` that brings its
    max-norm into ``[½, 1)``, padded to ``blockdiag(s·x, β·[I; 0])`` in the block layout.

    Scaling first (exact) keeps every later quantity (the norm bound, QDWH's Gram
    matrices and parameters) finite and normal for entries anywhere in the dtype's range."""
    spec = block_spec(mesh)
    wide, m, n = _shapes(*a.shape)
    x = jnp.conj(a.T) if wide else a  # QDWH needs m >= n: a = p u <=> aᴴ = uᴴ p
    s = pow2_scale(x)
    x = x * s.astype(x.dtype)
    m_pad, n_pad = padded_shape(mesh, m, n)
    scale = norm_bound(x)
    scale = jnp.where(scale > 0, scale, jnp.ones_like(scale)).astype(x.dtype)
    # the padding's singular values (s) sit inside x's range: no slower convergence
    r = lax.broadcasted_iota(jnp.int32, (m_pad, n_pad), 0)
    c = lax.broadcasted_iota(jnp.int32, (m_pad, n_pad), 1)
    pad = jnp.where((r >= m) & (r - m == c - n), scale, jnp.zeros((), x.dtype))
    xp = put(put(jnp.pad(x, ((0, m_pad - m), (0, n_pad - n))), spec) + put(pad, spec), spec)
    return xp, s


def polar_finish(u, a, *, mesh, side):
    """``(u, p)`` of ``a`` from the polar factor ``u`` of its padded ``xp`` (`polar_prep`)."""
    spec = block_spec(mesh)
    wide, m, n = _shapes(*a.shape)
    uh = ct(u, spec)
    # xp made again from a once u is there (scaled by a power of two: exactly the same),
    # not kept through QDWH's loop (one more share through every step)
    xp, s = polar_prep(once(a, u), mesh=mesh)
    # tall x = u h: right factor uᴴx (n x n), left factor x uᴴ (m x m). For wide a,
    # x = aᴴ = w h gives a = h wᴴ (left: p = h) and a = wᴴ (x wᴴ) (right: p = x wᴴ).
    if (side == "right") != wide:
        h = hermitian(mm(uh, xp, spec), spec)[:n, :n]
    else:
        h = hermitian(mm(xp, uh, spec), spec)[:m, :m]
    h = h / s.astype(h.dtype)
    u_out = jnp.conj(u[:m, :n].T) if wide else u[:m, :n]
    return u_out, h


def out_specs(mesh, shape, side, a_spec=None):
    """``u`` in the largest even layout; on Explicit meshes in ``a``'s own (``a_spec``), so
    that ``u @ p - a`` combines; ``p`` in the largest even layout of ``[k, k]``."""
    spec = block_spec(mesh)
    m0, n0 = shape
    k = n0 if side == "right" else m0
    u_spec = (
        a_spec if a_spec is not None and is_explicit(mesh) else fitting_spec((m0, n0), mesh, spec)
    )
    return (u_spec, fitting_spec((k, k), mesh, spec))


def _spec_of(a) -> P:
    return P(*jax.typeof(a).sharding.spec)


@functools.partial(jax.jit, static_argnames=("mesh", "side", "max_iterations"))
def polar_traced(a, *, mesh, side, max_iterations):
    """``(u, p)`` of one matrix on ``mesh``, traced (for callers under ``jax.jit``)."""
    body = functools.partial(polar_body, mesh=mesh, side=side, max_iterations=max_iterations)
    return run_on_mesh(body, mesh, out_specs(mesh, a.shape, side, _spec_of(a)), a)


def polar_body(a, *, mesh, side, max_iterations=12):
    """``(u, p)`` of ``a`` traced inside ``run_on_mesh`` (Auto axes in context)."""
    xp, _ = polar_prep(a, mesh=mesh)
    u, _ = qdwh(xp, block_spec(mesh), max_iterations=max_iterations)
    return polar_finish(u, a, mesh=mesh, side=side)


def polar_eager(a, *, mesh, side, max_iterations=12):
    """``(u, p)`` of a concrete matrix on ``mesh``: host loop over compiled QDWH steps."""
    spec = block_spec(mesh)
    xp, _ = on_mesh(polar_prep, mesh, (spec, P()), (("mesh", mesh),))(a)
    u, _ = qdwh_eager(xp, mesh, spec, max_iterations=max_iterations)
    finish = on_mesh(
        polar_finish,
        mesh,
        out_specs(mesh, a.shape, side, _spec_of(a)),
        (("mesh", mesh), ("side", side)),
    )
    return finish(u, a)


def polar_2d(plan: Plan, a, *, side, max_iterations=12):
    """``(u, p)`` of one matrix on ``plan``'s mesh: one program traced, the host loop of
    compiled steps called eagerly (`polar_eager`)."""
    if is_traced(a):
        return polar_traced(a, mesh=plan.mesh, side=side, max_iterations=max_iterations)
    return polar_eager(a, mesh=plan.mesh, side=side, max_iterations=max_iterations)


def unit_scaled(a):
    """``(a·s, s)``: ``a`` scaled by a power of two ``s`` to max-norm in ``[½, 1)`` (exact;
    ``s = 1`` for zero ``a``), so that no square in QDWH under- or overflows."""
    s = pow2_scale(a)
    return a * s.astype(a.dtype), s


def unscaled(out, s):
    """Eigenvalues of ``a`` from those of ``a·s`` (vectors unchanged)."""
    if isinstance(out, tuple):
        return (out[0] / s,) + tuple(out[1:])
    return out / s
