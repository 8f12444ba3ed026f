"""Distributed polar decomposition by QDWH: ``distla.linalg.polar`` (see docs/spectral.md).

QDWH (Nakatsukasa, Bai & Gygi 2010) is a dynamically weighted Halley
iteration ``X ← X (a I + b XᴴX)(I + c XᴴX)⁻¹`` on ``X₀ = A/α``
(``α ≥ ‖A‖₂``) that converges to the unitary polar factor ``U``. Every
iteration takes the QR-based form ``[√c X; I] = [Q₁; Q₂] R``,
``X ← (b/c) X + (a − b/c)/√c · Q₁Q₂ᴴ`` (``distla.linalg.qr`` and
``distla.matmul``). Nakatsukasa & Higham switch to the Cholesky-based form
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
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._core.checks import (
    ShapeError,
    as_array,
    empty_or_one_device,
    is_empty,
    is_traced,
    result_dtype,
)
from .._core.matmul import mm
from .._core.matrix import block_spec, ct, eye, on_mesh, put, round_up
from .._core.mesh import fitting_spec, grid_of, is_explicit, operand_mesh, run_on_mesh
from .._core.plan import plan_here
from . import _qr

# ----------------------------------------------------------------- layout helpers


def quantum(mesh) -> int:
    """Sizes that are multiples of this split evenly in the 2D block layout."""
    g = grid_of(mesh, what="distla.linalg")
    return math.lcm(g.pr, g.pc)


def pow2_scale(x: jax.Array) -> jax.Array:
    """``2⁻ᵉ`` (real scalar) with ``max|x| = f·2ᵉ``, ``f ∈ [½, 1)``: ``x`` times it has
    max-norm in ``[½, 1)``, exactly (a power of two). ``1`` for a zero or non-finite ``x``."""
    real = jnp.finfo(x.dtype).dtype
    mx = jnp.max(jnp.abs(x))
    _, e = jnp.frexp(mx)
    top = jnp.finfo(real).maxexp - 2
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


def qdwh_qr_step(state, *, spec: P):
    """``[√c X; I] = [Q₁; Q₂] R``, ``X ← (b/c) X + (a − b/c)/√c · Q₁Q₂ᴴ``."""
    k, x, l, _ = state
    m, n = x.shape
    pa, pb, pc, l_next = weights(l)
    eye_n = eye(n, n, x.dtype, spec)
    stacked = put(jnp.concatenate([jnp.sqrt(pc).astype(x.dtype) * x, eye_n]), spec)
    q, _ = _qr.qr_2d(stacked, mode="reduced", call=plan_here(x.dtype))
    q1 = put(q[:m], spec)
    q2 = put(q[m:], spec)
    upd = mm(q1, ct(q2, spec), spec)
    new = (pb / pc).astype(x.dtype) * x + ((pa - pb / pc) / jnp.sqrt(pc)).astype(x.dtype) * upd
    new = put(new, spec)
    return k + 1, new, l_next, jnp.linalg.norm(new - x) / jnp.sqrt(float(n))


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
    """:func:`qdwh` on a concrete ``x``: the loop on the host, each step compiled once."""
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
    q = quantum(mesh)
    n_pad = round_up(n, q)
    m_pad = round_up(m + (n_pad - n), q)
    scale = norm_bound(x)
    scale = jnp.where(scale > 0, scale, jnp.ones_like(scale)).astype(x.dtype)
    # the padding's singular values (s) sit inside x's range: no slower convergence
    r = lax.broadcasted_iota(jnp.int32, (m_pad, n_pad), 0)
    c = lax.broadcasted_iota(jnp.int32, (m_pad, n_pad), 1)
    pad = jnp.where((r >= m) & (r - m == c - n), scale, jnp.zeros((), x.dtype))
    xp = put(put(jnp.pad(x, ((0, m_pad - m), (0, n_pad - n))), spec) + put(pad, spec), spec)
    return xp, s


def polar_finish(u, xp, s, *, mesh, side, shape):
    """``(u, p)`` of ``a`` (``shape``) from the polar factor ``u`` of the padded ``xp`` (``a``
    scaled by ``s``: ``p`` is scaled back)."""
    spec = block_spec(mesh)
    wide, m, n = _shapes(*shape)
    uh = ct(u, spec)
    # tall x = u h: right factor uᴴx (n x n), left factor x uᴴ (m x m). For wide a,
    # x = aᴴ = w h gives a = h wᴴ (left: p = h) and a = wᴴ (x wᴴ) (right: p = x wᴴ).
    if (side == "right") != wide:
        h = hermitian(mm(uh, xp, spec), spec)[:n, :n]
    else:
        h = hermitian(mm(xp, uh, spec), spec)[:m, :m]
    h = h / s.astype(h.dtype)
    u_out = jnp.conj(u[:m, :n].T) if wide else u[:m, :n]
    return u_out, h


def _out_specs(mesh, shape, side, a_spec=None):
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


@functools.partial(jax.jit, static_argnames=("side", "max_iterations"))
def _polar_2d(a, *, side, max_iterations):
    """``(u, p)`` of one matrix on a mesh, traced (for callers under ``jax.jit``)."""
    mesh = operand_mesh(a, names=("a",))
    body = functools.partial(polar_body, mesh=mesh, side=side, max_iterations=max_iterations)
    return run_on_mesh(body, mesh, _out_specs(mesh, a.shape, side, _spec_of(a)), a)


def polar_body(a, *, mesh, side, max_iterations=12):
    """``(u, p)`` of ``a`` traced inside ``run_on_mesh`` (Auto axes in context)."""
    xp, s = polar_prep(a, mesh=mesh)
    u, _ = qdwh(xp, block_spec(mesh), max_iterations=max_iterations)
    return polar_finish(u, xp, s, mesh=mesh, side=side, shape=a.shape)


def polar_eager(a, *, side, max_iterations=12):
    """``(u, p)`` of a concrete matrix: host loop over compiled QDWH steps."""
    mesh = operand_mesh(a, names=("a",))
    spec = block_spec(mesh)
    xp, s = on_mesh(polar_prep, mesh, (spec, P()), (("mesh", mesh),))(a)
    u, _ = qdwh_eager(xp, mesh, spec, max_iterations=max_iterations)
    finish = on_mesh(
        polar_finish,
        mesh,
        _out_specs(mesh, a.shape, side, _spec_of(a)),
        (("mesh", mesh), ("side", side), ("shape", a.shape)),
    )
    return finish(u, xp, s)


def _explicit_batch(a) -> bool:
    """Whether ``a`` is sharded on a multi-device Explicit mesh jax's polar cannot take
    (a stack sharded along its batch, or a member of one under ``jax.vmap``)."""
    mesh = getattr(jax.typeof(a).sharding, "mesh", None)
    return isinstance(mesh, jax.sharding.AbstractMesh) and mesh.size > 1 and is_explicit(mesh)


def _auto_axes_polar(ref, a, side):
    """jax's polar of ``a`` under ``auto_axes`` (its padding step rejects Explicit batch
    shardings): ``u`` in ``a``'s sharding, ``p`` in its batch sharding."""
    sh = jax.typeof(a).sharding
    spec = tuple(sh.spec) + (None,) * (a.ndim - len(sh.spec))
    p_sh = NamedSharding(sh.mesh, P(*spec[:-2], None, None))
    return jax.sharding.auto_axes(ref, out_sharding=(sh, p_sh))(a)


def check_options(side: str, method: str, what: str) -> None:
    """Refuse a ``side`` or ``method`` that ``jax.scipy.linalg.polar`` does not know."""
    if side not in ("right", "left"):
        raise ValueError(f"{what}: side must be 'right' or 'left'; got {side!r}")
    if method not in ("qdwh", "svd"):
        raise ValueError(f"{what}: method must be 'qdwh' or 'svd'; got {method!r}")


def polar(
    a: jax.typing.ArrayLike,
    side: str = "right",
    *,
    method: str = "qdwh",
    eps: float | None = None,
    max_iterations: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Polar decomposition ``a = u p`` (``side="right"``) or ``a = p u`` (``"left"``).

    As ``jax.scipy.linalg.polar``. One matrix sharded over a mesh runs the
    distributed QDWH iteration (QR-based), built from ``distla.linalg.qr`` and
    ``distla.matmul``; no device holds the whole matrix. Stacks and one-device
    inputs fall back to jax's function.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh (any layout).
        Integer and bool inputs promote to the default float.
      side: ``"right"`` (``a = u p``, ``p`` is ``[n, n]``) or ``"left"``
        (``a = p u``, ``p`` is ``[m, m]``).
      method: ``"qdwh"`` (distributed) or ``"svd"`` (jax's, on the gathered
        matrix: use only for small inputs).
      eps: accepted for jax compatibility; distla iterates to its own
        tolerance (``(5·eps)^(1/3)`` on the step, as jax).
      max_iterations: cap on QDWH iterations (default 12; float64 needs about 6).

    Returns:
      ``(u, p)``: ``u`` ``[m, n]`` with orthonormal columns (rows if ``m < n``),
      ``p`` Hermitian positive semidefinite; both in the mesh's 2D block
      layout (the largest even layout that fits for uneven sizes), except
      that on an Explicit mesh ``u`` keeps ``a``'s layout, so ``u @ p - a``
      combines.
      Differentiable (``m >= n`` for ``"right"``, ``m <= n`` for ``"left"``):
      ``ΩH + HΩ = UᴴdA − dAᴴU`` solved in the eigenbasis of ``p`` from a
      distributed SVD, products by ``distla.matmul``.

    Raises:
      ValueError: ``a`` is not a matrix (stacks go to jax), or an unknown
        ``side``/``method``.

    See also: ``jax.scipy.linalg.polar``.
    """
    what = "distla.linalg.polar"
    check_options(side, method, what)
    a = as_array(a, "a", what)
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got shape {a.shape}")
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    mesh = operand_mesh(a, names=("a",))
    if mesh is None or mesh.size == 1 or is_empty(a) or a.ndim > 2 or method == "svd":

        def ref(x):
            return jax.scipy.linalg.polar(
                x, side=side, method=method, eps=eps, max_iterations=max_iterations
            )

        if not is_empty(a) and _explicit_batch(a):
            return _auto_axes_polar(ref, a, side)
        return empty_or_one_device(ref, a)
    if is_traced(a):
        return _polar_2d(a, side=side, max_iterations=max_iterations or 12)
    return polar_eager(a, side=side, max_iterations=max_iterations or 12)
