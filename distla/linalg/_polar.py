"""The polar decomposition: ``distla.linalg.polar`` (private; see docs/spectral.md).

One matrix sharded over a mesh runs QDWH (``_qdwh``); below the one-device
budget the one-device plan runs jax's on one device. Both differentiate by the
rule of `_polar_jvp`, from the distributed SVD (``_svd``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.checks import ShapeError
from .._core.matmul import product_here
from .._core.matrix import HIGHEST, block_spec, ct_on
from .._core.mesh import fitting_spec, is_explicit, run_on_mesh
from .._core.one_device import block_layout
from .._core.plan import Plan
from . import _svd
from ._qdwh import out_specs, polar_2d


@functools.partial(jax.jit, static_argnames=("mesh",))
def _polar_tangent(u, h, w, s, vh, da, *, mesh):
    """``(dU, dH)`` of ``a = U H`` (``m >= n``) from the SVD ``a = W diag(s) Vᴴ``.

    ``Ω = Uᴴ dU`` solves ``ΩH + HΩ = UᴴdA − dAᴴU`` (diagonal in ``V``'s basis:
    ``Ω̃_ij = M̃_ij / (s_i + s_j)``), ``dH = UᴴdA − ΩH``, and for ``m > n``
    ``dU = UΩ + (I − UUᴴ) dA H⁻¹``.
    """
    del w
    spec = block_spec(mesh)
    m, n = da.shape
    out = (fitting_spec((m, n), mesh, spec), fitting_spec((n, n), mesh, spec))

    def body(u, h, s, vh, da):
        dt = da.dtype
        v = jnp.conj(vh.T)
        uda = product_here(jnp.conj(u.T), da)
        mt = product_here(product_here(vh, uda - jnp.conj(uda.T)), v)
        tot = s[:, None] + s[None, :]
        om_t = jnp.where(tot > 0, mt / jnp.where(tot > 0, tot, 1).astype(dt), 0)
        om = product_here(product_here(v, om_t), vh)
        dh = uda - product_here(om, h)
        dh = (dh + jnp.conj(dh.T)) / 2
        du = product_here(u, om)
        if m > n:
            inv_s = jnp.where(s > 0, 1 / jnp.where(s > 0, s, 1), 0).astype(dt)
            rest = da - product_here(u, uda)
            du = du + product_here(product_here(rest, v * inv_s[None, :]), vh)
        return du, dh

    return run_on_mesh(body, mesh, out, u, h, s, vh, da)


def _polar_on_one_device(a, side, method, eps, max_iterations):
    """The one-device plan's polar: every shape and side, as the distributed plan takes them.

    ``jax.scipy.linalg.polar``'s QDWH refuses ``side="left"`` for ``m >= n`` and
    ``side="right"`` for ``m < n``, and traces ``eps``, which its QDWH needs static; so
    this calls ``jax.lax.linalg.qdwh`` on ``a`` (``m >= n``) or ``aᴴ`` and forms the
    other side's factor from the unitary one: ``a = u h`` gives ``p = a uᴴ`` on the left,
    ``a = p u`` gives ``h = uᴴ a`` on the right.
    """
    if method == "svd":
        return jsl.polar(a, side, method="svd")
    m, n = a.shape
    x = a if m >= n else jnp.conj(a.T)
    w, h, _, _ = lax.linalg.qdwh(x, max_iterations=max_iterations, eps=eps)
    u = w if m >= n else jnp.conj(w.T)
    if (side == "right") == (m >= n):  # the factor qdwh returned is this side's
        return u, h
    p = (
        jnp.matmul(a, jnp.conj(u.T), precision=HIGHEST)
        if side == "left"
        else jnp.matmul(jnp.conj(u.T), a, precision=HIGHEST)
    )
    return u, (p + jnp.conj(p.T)) / 2


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


def _polar_jvp(fn, plan: Plan, primals, tangents, *, side, **options):
    """``(du, dp)`` from the SVD (`_polar_tangent`): linear in the tangent, so
    reverse mode and every order work."""
    (a,), (da,) = primals, tangents
    u, p = fn(a)
    m, n = a.shape
    mesh = plan.mesh
    svd = dict(full_matrices=False, compute_uv=True, hermitian=False, subset_by_index=None)
    if side == "right" and m >= n:
        w, s, vh = route.on_plan(_svd.SVD, plan, a, **svd)
        du, dp = _polar_tangent(u, p, w, s, vh, da, mesh=mesh)
    elif side == "left" and m <= n:  # aᴴ = uᴴ p: the right polar of aᴴ
        ah, dah = ct_on(a, mesh=mesh), ct_on(da, mesh=mesh)
        w, s, vh = route.on_plan(_svd.SVD, plan, ah, **svd)
        du, dp = _polar_tangent(ct_on(u, mesh=mesh), p, w, s, vh, dah, mesh=mesh)
        du = ct_on(du, mesh=mesh)
    else:
        raise NotImplementedError(
            f"distla.linalg.polar: the derivative needs m >= n for side='right' and "
            f"m <= n for side='left'; got a of shape {a.shape}, side={side!r}"
        )
    return (u, p), (du, dp)


def _check(what, a, **options):
    del options
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have at least 2 dimensions; got shape {a.shape}")


def _jax_polar(a, *, side, method, eps, max_iterations):
    """``jax.scipy.linalg.polar`` (unsharded operands, stacks, ``method="svd"``)."""

    def ref(x):
        return jax.scipy.linalg.polar(
            x, side=side, method=method, eps=eps, max_iterations=max_iterations
        )

    if 0 not in a.shape and _explicit_batch(a):
        return _auto_axes_polar(ref, a, side)
    return ref(a)


# (u, p) of one matrix by the distributed QDWH, differentiated by the rule above
_QDWH = route.Op(
    "distla.linalg.polar",
    one_device=_polar_on_one_device,
    distributed=lambda plan, a, *, side, max_iterations: tuple(
        polar_2d(plan, a, side=side, max_iterations=max_iterations)
    ),
    jvp=_polar_jvp,
    on_mesh=False,
)


def _distributed(plan: Plan, a, *, side, method, eps, max_iterations):
    if method != "qdwh":
        return _jax_polar(a, side=side, method=method, eps=eps, max_iterations=max_iterations)
    return route.distributed(_QDWH, plan, a, side=side, max_iterations=max_iterations or 12)


def _layouts(plan: Plan, a, *, results, side, **options):
    ins = (block_layout(a.shape, plan.mesh),)
    return ins, out_specs(plan.mesh, a.shape, side, P(*jax.typeof(a).sharding.spec))


def _planned(run, plan: Plan, a, *, side, method, **options):
    m, n = a.shape
    if method == "svd" or (side == "right") != (m >= n) and m != n:
        # jax differentiates its SVD route itself; the rule covers the shapes whose
        # polar factor is unitary (QDWH's forward mode, the rest)
        return tuple(run(a))
    # jax's QDWH is a while loop, which reverse mode cannot differentiate: the
    # distributed plan's rule instead, so that both plans differentiate alike
    fn = jax.custom_jvp(lambda a: tuple(run(a)))
    fn.defjvp(lambda primals, tangents: _polar_jvp(fn, plan, primals, tangents, side=side))
    return fn(a)


POLAR = route.Op(
    "distla.linalg.polar",
    check=_check,
    unsharded=_jax_polar,
    one_device=_polar_on_one_device,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, **options: _jax_polar(a, **options),
    family="polar",
    layouts=_layouts,
    planned=route.Planned(finish=_planned),
    distributed=_distributed,
)


@route.public
def polar(
    a: jax.typing.ArrayLike,
    side: str = "right",
    *,
    method: str = "qdwh",
    eps: float | None = None,
    max_iterations: int | None = None,
    plan: str = "auto",
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
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as [`eigh`][distla.linalg.eigh]'s:
        below the one-device budget ``"auto"`` runs ``jax.scipy.linalg.polar`` (with
        ``method``) on one device and shards ``(u, p)`` back in the distributed
        plan's layouts; ``method="svd"`` on a sharded matrix has only that plan.

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

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([2.0, -3.0])), mesh)
      >>> u, p = distla.linalg.polar(a)
      >>> np.round(np.asarray(u), 4) + 0.0
      array([[ 1.,  0.],
             [ 0., -1.]], dtype=float32)
      >>> np.round(np.asarray(p), 4) + 0.0
      array([[2., 0.],
             [0., 3.]], dtype=float32)
    """
    check_options(side, method, POLAR.name)
    if method == "svd" and plan == "auto":
        plan = "one_device"
    options = dict(side=side, method=method, eps=eps, max_iterations=max_iterations)
    return route.call(POLAR, a, plan=plan, **options)
