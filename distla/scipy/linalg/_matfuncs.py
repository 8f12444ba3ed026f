"""Matrix functions distributed: ``sqrtm`` and ``funm`` (private).

Both take the route the matrix's structure allows (one small program checks
``‖A − Aᴴ‖_F`` and ``‖AᴴA − AAᴴ‖_F``):

- Hermitian ``A``: ``F = V f(Λ) Vᴴ`` from the distributed eigh and two SUMMA
  products; normal ``A`` (``AᴴA = AAᴴ``): the same with ``V`` the eigenvectors of
  the Hermitian ``B = H + θK`` (``A = H + iK``; ``θ`` irrational, so ``B``'s
  eigenvectors are ``A``'s wherever ``A``'s eigenvalues are distinct),
  ``Λ = diag(Vᴴ A V)``, accepted when ``‖A V − V Λ‖_F`` is small.
- ``sqrtm`` of any other matrix: the scaled product form of the Denman–Beavers
  iteration (Higham, "Functions of Matrices", 2008, eq. (6.29)),

      M₀ = Y₀ = A,  μ_k = (‖M_k⁻¹‖_F / ‖M_k‖_F)^¼ while ‖M_k − I‖_F > 10⁻², else 1,
      M_{k+1} = ½ (I + (μ_k² M_k + μ_k⁻² M_k⁻¹)/2),   Y_{k+1} = ½ μ_k Y_k (I + μ_k⁻² M_k⁻¹),

  ``Y_k → A^½``, ``M_k → I``: each step one distributed inverse (the LU of
  ``distla.linalg``) and one SUMMA product, in the real dtype for real ``A``; it
  stops when ``‖M_k − I‖_F ≤ 4√n·eps`` or once it stagnates below 10⁻². Where it
  does not converge (eigenvalues on the closed negative real axis of a real ``A``,
  a singular ``A``), jax's Schur method (Björck and Hammarling) on the one-device
  plan. (On an ill-conditioned Hermitian matrix the iteration's residual
  ``‖Y² − A‖`` grows with ``κ(A)``, some 10² n·eps·‖Y‖² at ``κ = 1/√eps``; the eigen
  route stays at the eigh's.)
- ``funm`` of any other matrix: jax's Schur–Parlett (``schur``, ``rsf2csf``, Golub
  and Van Loan's Algorithm 11.1.1) on the one-device plan, the plan the Schur form
  takes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from ... import linalg as _linalg
from ..._core import plan as _plan
from ..._core import route
from ..._core.checks import ShapeError, is_traced
from ..._core.matmul import product, product_here
from ..._core.matrix import block_spec, ct, eye, pad_identity
from ..._core.mesh import axes_taken_by_vmap, constrain, fitting_spec, run_on_mesh
from ..._core.one_device import block_layout, moved_bytes, on_one_device
from ..._core.plan import Plan
from ..._core.stacked import stack, vmappable
from ...linalg._lu.rules import inv_2d
from ._everywhere import everywhere, result_types

#: Most Denman–Beavers steps (quadratic convergence: about 6-10 once scaled).
MAX_ITERATIONS = 40
#: ‖M_k − I‖_F below which the scaling stops (Higham's switch) and stagnation counts.
UNSCALED = 1e-2
#: ``θ`` of ``B = H + θK`` for normal matrices: irrational, far from simple ratios.
THETA = math.sqrt(2) - 0.5


# --------------------------------------------------------------------------- sqrtm


def _db_body(a, *, dtype, n_pad, tol, max_iterations):
    """``(Y, converged)``: the scaled product Denman–Beavers iteration on ``a``, inside a body."""
    mesh = jax.sharding.get_abstract_mesh()
    inner = Plan(mesh, np.dtype(dtype))
    spec = inner.grid.block_spec
    n = a.shape[0]
    # blockdiag(A, I), whose root is blockdiag(√A, I)
    x = constrain(pad_identity(a.astype(dtype), n_pad), spec)
    ident = eye(n_pad, n_pad, dtype, spec)
    real = jnp.finfo(dtype).dtype

    def distance(m):
        return jnp.linalg.norm(m - ident).astype(real)

    def cond(state):
        k, _, _, before, now = state
        stalled = (before < UNSCALED) & (now > 0.5 * before)
        return (k < max_iterations) & (now > tol) & ~stalled & jnp.isfinite(now)

    def step(state):
        k, m, y, _, now = state
        minv = constrain(inv_2d(m, call=inner), spec)
        ratio = jnp.linalg.norm(minv) / jnp.linalg.norm(m)
        mu = jnp.where(now > UNSCALED, jnp.sqrt(jnp.sqrt(ratio)), 1).astype(real)
        mu2 = (mu * mu).astype(dtype)
        # one product: Y (I + μ⁻² M⁻¹) = Y + μ⁻² Y M⁻¹
        ym = constrain(product_here(y, minv), spec)
        y = constrain((0.5 * mu).astype(dtype) * (y + ym / mu2), spec)
        m = constrain(0.5 * (ident + (mu2 * m + minv / mu2) / 2), spec)
        return k + 1, m, y, now, distance(m)

    start = (jnp.int32(0), x, x, jnp.asarray(np.inf, real), distance(x))
    _, _, y, _, now = lax.while_loop(cond, step, start)
    converged = jnp.isfinite(now) & (now <= jnp.finfo(real).eps ** 0.25)
    converged &= jnp.isfinite(jnp.sum(jnp.abs(y)))
    return y[:n, :n], converged


@functools.partial(jax.jit, static_argnames=("call", "out_dtype", "max_iterations"))
def _denman_beavers(a, *, call: Plan, out_dtype, max_iterations):
    """``(√a in out_dtype, converged)`` of one matrix on ``call.mesh``."""
    n = a.shape[0]
    q = math.lcm(call.grid.pr, call.grid.pc)
    dtype = call.dtype
    tol = 4 * math.sqrt(n) * float(jnp.finfo(dtype).eps)

    def body(a):
        y, ok = _db_body(
            a, dtype=dtype, n_pad=-(-n // q) * q, tol=tol, max_iterations=max_iterations
        )
        return y.astype(out_dtype), ok

    spec = fitting_spec(a.shape, call.mesh, call.grid.block_spec)
    return run_on_mesh(body, call.mesh, (spec, P()), a)


def _schur_sqrtm(a):
    """jax's Schur method (``jax.scipy.linalg.sqrtm``), the one-device fallback."""
    return jsl.sqrtm(a)


def _within_budget(fn, a, *, family, options=()):
    """The bytes ``fn(a)``'s one-device plan moves if they fit the budget (noted for
    ``distla.cost``), else ``None``."""
    nbytes = moved_bytes(fn, a, **dict(options))
    if nbytes > _plan.plan_budget():
        return None
    _plan.note(family, "one_device", nbytes)
    return nbytes


def _fallback(fn, a, *, mesh, family, out_spec, options=()):
    """``fn(a)`` on the one-device plan if the budget allows it, else ``None``."""
    if _within_budget(fn, a, family=family, options=options) is None:
        return None
    return lambda a: on_one_device(
        fn,
        a,
        mesh=mesh,
        in_specs=(block_layout(a.shape, mesh),),
        out_specs=(out_spec,),
        options=options,
    )


def _check(what, a, *, asked, **options):
    del options
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ShapeError(f"{what}: A must be a square matrix (n, n); got A of shape {a.shape}")
    if asked not in _plan.PLANS:
        raise ValueError(f"{what}: plan must be one of {_plan.PLANS}, got {asked!r}")


def _working_dtype(out_dtype, a):
    """The dtype the routes compute in: the result's, real for a real ``A``."""
    return np.dtype(jnp.finfo(out_dtype).dtype) if not jnp.iscomplexobj(a) else out_dtype


def _sqrtm_dtype(what, a, **options):
    del what, options
    return _working_dtype(np.dtype(result_types(jsl.sqrtm, a).dtype), a)


def _jax_sqrtm(a, **options):
    """jax's ``sqrtm``; inside a ``jax.vmap`` over a batch on ``Explicit`` mesh axes, where
    jax's Schur method (its loops) cannot be batched, the vmap is one call of it on the
    stack, each device its own members (``_core.stacked``)."""
    del options
    if axes_taken_by_vmap():
        return _sqrtm_of_members(a)
    return jsl.sqrtm(a)


def _sqrtm_of_one(a):
    return jsl.sqrtm(a)  # (custom_vmap would trace jax's blocksize=1 as an operand)


def _sqrtm_of_stack(a):
    return stack(jnp.vectorize(_sqrtm_of_one, signature="(n,n)->(n,n)"), (a,), (2,), 2)


_sqrtm_of_members = vmappable(_sqrtm_of_one, _sqrtm_of_stack)


def _sqrtm_jax_takes(a, **options):
    """jax's function takes the call: an empty or ``1 x 1`` matrix."""
    del options
    return a.size == 0 or a.shape[0] == 1


def _sqrtm_on(plan: Plan, a, *, hermitian, max_iterations, asked):
    """The routes of the docstring of `sqrtm` on ``plan``'s mesh."""
    mesh = plan.mesh
    out_dtype = np.dtype(result_types(jsl.sqrtm, a).dtype)
    out_spec = fitting_spec(a.shape, mesh, plan.grid.block_spec)
    if asked == "one_device":
        _plan.note("sqrtm", "one_device", moved_bytes(_schur_sqrtm, a))
        return on_one_device(
            _schur_sqrtm,
            a,
            mesh=mesh,
            in_specs=(block_layout(a.shape, mesh),),
            out_specs=(out_spec,),
        )
    _plan.note("sqrtm", "distributed")
    a = a.astype(plan.dtype)
    fallback = _fallback(_schur_sqrtm, a, mesh=mesh, family="sqrtm_schur", out_spec=out_spec)

    def newton(a):
        return _denman_beavers(a, call=plan, out_dtype=out_dtype, max_iterations=max_iterations)

    def otherwise(a):  # the Schur method on one device, or NaN above the budget
        if fallback is not None:
            return fallback(a)
        return _placed(_nan_like(a, out_dtype), mesh=mesh)

    return _by_structure(
        a,
        jnp.sqrt,
        mesh=mesh,
        plan=asked,
        hermitian=hermitian,
        out_dtype=out_dtype,
        general=newton,
        otherwise=otherwise,
    )


SQRTM = route.Op(
    "distla.scipy.linalg.sqrtm",
    operands=("A",),
    one_device=_jax_sqrtm,
    distributed=_sqrtm_on,
    check=_check,
    promote=_sqrtm_dtype,
    cast=route.as_given,
    empty=_sqrtm_jax_takes,
)


@route.public
def sqrtm(
    A: jax.typing.ArrayLike,
    blocksize: int = 1,
    *,
    hermitian: bool | None = None,
    max_iterations: int = MAX_ITERATIONS,
    plan: str = "auto",
) -> jax.Array:
    """Principal matrix square root, as ``jax.scipy.linalg.sqrtm``.

    One matrix sharded over a mesh takes the route its structure allows, as
    [`funm`][distla.scipy.linalg.funm]: a Hermitian (or normal) matrix ``V √Λ Vᴴ`` from the
    distributed eigh and two SUMMA products (the eigen route: accurate to the eigh's ratios, where
    a Newton iteration's residual grows with the condition number); any other the
    scaled product Denman–Beavers iteration (Higham 2008, (6.29)), each step one
    distributed inverse (``distla.linalg``'s LU) and one SUMMA product on the 2D
    block layout, in the real dtype for real ``A``. No device holds the whole
    matrix. Where the iteration does not converge (eigenvalues on the closed negative
    real axis of a real ``A``, whose principal root is complex; a singular ``A``)
    jax's Schur method runs on the one-device plan within the budget
    (``distla.linalg.set_plan_budget``); above it such a matrix gives NaN. An eager
    call compiles only the routes the matrix takes; under ``jax.jit`` they are
    ``lax.switch``/``lax.cond`` branches.

    Args:
      A: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh (any layout); unsharded
        input runs jax's ``sqrtm``.
      blocksize: accepted; the iteration has no blocking (jax raises for values
        above 1, whose Schur method it would block).
      hermitian: a distla extension: ``None`` checks ``A``'s structure; ``True``
        takes the eigen route unchecked (``A``'s Hermitian part); ``False`` the
        iteration unchecked. Under ``jax.jit`` either keeps the other routes out of
        the program.
      max_iterations: the most Denman–Beavers steps (a distla extension).
      plan: ``"auto"`` or ``"distributed"`` (the routes above; the eigh's own plan,
        as ``distla.linalg.eigh``'s) or ``"one_device"`` (jax's Schur method on one
        device).

    Returns:
      ``[n, n]`` complex (jax's dtype: the Schur form is complex), in the mesh's 2D
      block layout (the largest even layout that fits). ``A`` with a real principal
      root gives it with zero imaginary part. Not differentiable (neither is jax's).

    Raises:
      ValueError: ``A`` is not a square matrix.

    See also: ``jax.scipy.linalg.sqrtm``, [`funm`][distla.scipy.linalg.funm].

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([4.0, 9.0])), mesh)
      >>> np.round(np.asarray(sla.sqrtm(a)).real, 4) + 0.0
      array([[2., 0.],
             [0., 3.]], dtype=float32)
    """
    del blocksize
    options = dict(hermitian=hermitian, max_iterations=max_iterations, asked=plan)
    return route.call(SQRTM, A, **options)


def _by_structure(a, func, *, mesh, plan, hermitian, out_dtype, general, otherwise, finish=None):
    """``f(A)`` by the route ``A``'s structure allows, each returning ``(F, ok)``
    (``finish(F)``: the result; ``otherwise(a)`` returns one itself).

    Hermitian ``A`` (or ``hermitian=True``): ``V f(Λ) Vᴴ`` from the distributed eigh;
    normal: the same from ``H + θK``; any other (or a route whose ``ok`` is false):
    ``general``, then ``otherwise`` where that fails. An eager call runs only the
    routes it takes; a traced one ``lax.switch``es over the first three and
    ``lax.cond``s to ``otherwise``.
    """

    def eigen(normal):
        def route(a):
            f, ok = _eigen_funm(a, func, mesh=mesh, normal=normal, plan=plan)
            return f.astype(out_dtype), ok

        return route

    finish = finish or (lambda f: f)
    if hermitian:
        return finish(eigen(False)(a)[0])
    if hermitian is False:  # the general route alone
        f, ok = general(a)
        if not is_traced(a, f):
            return finish(f) if bool(ok) else otherwise(a)
        return lax.cond(ok, lambda a: finish(f), otherwise, a)
    tol = 4 * a.shape[0] * float(jnp.finfo(a.dtype).eps)
    herm, normal = _classify(a, mesh=mesh, tol=tol)
    if not is_traced(a, herm):  # eagerly: only the routes the matrix takes
        if bool(herm) or bool(normal):
            f, ok = eigen(not bool(herm))(a)
            if bool(ok):
                return finish(f)
        f, ok = general(a)
        return finish(f) if bool(ok) else otherwise(a)
    index = jnp.where(herm, 0, jnp.where(normal, 1, 2))
    f, ok = lax.switch(index, [eigen(False), eigen(True), general], a)
    return lax.cond(ok, lambda a: finish(f), otherwise, a)


# --------------------------------------------------------------------------- funm


def _hermitian_body(a, *, normal):
    """``H = (A + Aᴴ)/2``, or for ``normal`` ``H + θK`` with ``K = (A − Aᴴ)/2i``."""
    spec = block_spec(jax.sharding.get_abstract_mesh())
    a = constrain(a, spec)
    ah = ct(a, spec)
    if not normal:
        return (a + ah) / 2
    return (a + ah) / 2 + THETA * ((a - ah) / 2j)


@functools.partial(jax.jit, static_argnames=("mesh", "normal"))
def _hermitian(a, *, mesh, normal):
    spec = fitting_spec(a.shape, mesh, block_spec(mesh))
    return run_on_mesh(functools.partial(_hermitian_body, normal=normal), mesh, spec, a)


def _classify_body(a, *, tol):
    """``(hermitian, normal)``: ``‖A − Aᴴ‖_F`` and ``‖AᴴA − AAᴴ‖_F`` against ``tol·‖A‖``."""
    spec = block_spec(jax.sharding.get_abstract_mesh())
    norm = jnp.linalg.norm(a)
    ah = ct(a, spec)
    hermitian = jnp.linalg.norm(a - ah) <= tol * norm
    gap = jnp.linalg.norm(product_here(ah, a) - product_here(a, ah))
    return hermitian, gap <= tol * norm * norm


@functools.partial(jax.jit, static_argnames=("mesh", "tol"))
def _classify(a, *, mesh, tol):
    return run_on_mesh(functools.partial(_classify_body, tol=tol), mesh, (P(), P()), a)


def _eigen_funm(a, func, *, mesh, normal, plan):
    """``(F, residual ok)`` of a Hermitian (or normal) ``a`` from the distributed eigh."""
    cdtype = jnp.result_type(a.dtype, jnp.complex64)
    if not normal:
        w, v = _linalg.eigh(_hermitian(a, mesh=mesh, normal=False), plan=plan)
        lam = w.astype(cdtype)
        ok = jnp.all(jnp.isfinite(w))
    else:  # B = H + θK (A = H + iK) shares A's eigenvectors
        w, v = _linalg.eigh(_hermitian(a, mesh=mesh, normal=True), plan=plan)
        lam, ok = _eigenvalues_of_normal(a.astype(cdtype), v.astype(cdtype), mesh=mesh)
    f = jnp.asarray(func(lam)).astype(cdtype)
    vc = v.astype(cdtype)
    return _placed(product(_scaled(vc, f, mesh=mesh), _ct(vc, mesh=mesh), mesh), mesh=mesh), ok


@functools.partial(jax.jit, static_argnames=("mesh",))
def _scaled(v, f, *, mesh):
    """``V diag(f)`` (each device scales its columns)."""
    spec = fitting_spec(v.shape, mesh, block_spec(mesh))
    return run_on_mesh(_scaled_columns_body, mesh, spec, v, f)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _ct(v, *, mesh):
    spec = fitting_spec(v.shape[::-1], mesh, block_spec(mesh))
    return run_on_mesh(lambda v: jnp.conj(v.T), mesh, spec, v)


def _normal_body(a, v):
    """``(Λ, ok)``: ``Λ = diag(Vᴴ A V)``, ``ok`` where ``‖A V − V Λ‖_F`` is small."""
    spec = block_spec(jax.sharding.get_abstract_mesh())
    av = constrain(product_here(a, v), spec)
    lam = jnp.sum(jnp.conj(v) * av, axis=0)
    resid = jnp.linalg.norm(av - v * lam[None, :])
    tol = 64 * a.shape[0] * jnp.finfo(a.dtype).eps * jnp.linalg.norm(a)
    return lam, resid <= tol


@functools.partial(jax.jit, static_argnames=("mesh",))
def _eigenvalues_of_normal(a, v, *, mesh):
    return run_on_mesh(_normal_body, mesh, (P(), P()), a, v)


def _scaled_columns_body(v, f):
    return v * f[None, :]


def _nan_like(a, dtype):
    """NaN of ``a``'s shape, computed from ``a`` (so that it lives on ``a``'s mesh)."""
    return jnp.full_like(a, np.nan, dtype)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _placed(x, *, mesh):
    """``x`` in the largest even 2D block layout of ``mesh`` that fits it (one type for
    every branch of a ``lax.cond``)."""
    return run_on_mesh(lambda x: x, mesh, fitting_spec(x.shape, mesh, block_spec(mesh)), x)


def _schur_funm(a, *, func, disp):
    """jax's Schur–Parlett ``funm``, the one-device plan's function."""
    return jsl.funm(a, func, disp=disp)


def _err_of(f, dtype):
    """jax's error estimate for a diagonal Schur form: its ``tol`` (``inf`` if ``F`` is)."""
    char = np.dtype(dtype).char.lower()
    tol = np.finfo(np.float32 if char == "f" else np.float64).eps
    return jnp.where(jnp.any(jnp.isinf(f)), np.inf, tol).astype(jnp.finfo(dtype).dtype)


def _funm_dtype(what, a, *, func, disp, **options):
    del what, options
    out = result_types(functools.partial(_schur_funm, func=func, disp=disp), a)
    return _working_dtype(np.dtype(jax.tree.leaves(out)[0].dtype), a)


def _jax_funm(a, *, func, disp, **options):
    del options
    return jsl.funm(a, func, disp=disp)


def _funm_on(plan: Plan, a, *, func, disp, hermitian, asked):
    """The routes of the docstring of `funm` on ``plan``'s mesh."""
    mesh = plan.mesh
    out = result_types(functools.partial(_schur_funm, func=func, disp=disp), a)
    out_dtype = np.dtype(jax.tree.leaves(out)[0].dtype)
    a = a.astype(plan.dtype)
    out_spec = fitting_spec(a.shape, mesh, plan.grid.block_spec)
    options = (("func", func), ("disp", disp))
    if asked == "one_device":
        _plan.note("funm", "one_device", moved_bytes(_schur_funm, a, **dict(options)))
        return _schur_on_one_device(a, mesh=mesh, out_spec=out_spec, options=options)

    def schur_route(a):
        one = _fallback_funm(a, mesh=mesh, out_spec=out_spec, options=options)
        if one is None:  # above the budget: jax's call, which gathers A onto every device
            one = everywhere(_schur_funm, a, mesh=mesh, options=options)
        f = _placed((one if disp else one[0]).astype(out_dtype), mesh=mesh)
        return f if disp else (f, one[1].astype(jnp.finfo(out_dtype).dtype))

    def neither(a):  # no route of its own: the Schur route (typed as the others' results)
        zero = _placed(jnp.zeros_like(a, out_dtype), mesh=mesh)
        return zero, jnp.sum(jnp.abs(a)) < 0

    def finish(f):  # the eigen route's Schur form is diagonal: jax's estimate is its tol
        return f if disp else (f, _err_of(f, out_dtype))

    return _by_structure(
        a,
        func,
        mesh=mesh,
        plan=asked,
        hermitian=hermitian,
        out_dtype=out_dtype,
        general=neither,
        otherwise=schur_route,
        finish=finish,
    )


FUNM = route.Op(
    "distla.scipy.linalg.funm",
    operands=("A",),
    one_device=_jax_funm,
    distributed=_funm_on,
    check=_check,
    promote=_funm_dtype,
    cast=route.as_given,
)


@route.public
def funm(
    A: jax.typing.ArrayLike,
    func: Callable[[jax.Array], jax.Array],
    disp: bool = True,
    *,
    hermitian: bool | None = None,
    plan: str = "auto",
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Matrix function ``f(A)`` from a scalar function, as ``jax.scipy.linalg.funm``.

    One matrix sharded over a mesh: if it is Hermitian (``‖A − Aᴴ‖_F ≤ 4n·eps·‖A‖_F``)
    ``F = V f(Λ) Vᴴ`` from the distributed eigh and two SUMMA products; if it is
    normal, the same with the eigenvectors of ``H + θK`` (``A = H + iK``) and
    ``Λ = diag(Vᴴ A V)``, checked by the residual ``‖A V − V Λ‖_F``; otherwise jax's
    Schur–Parlett algorithm on the one-device plan within the budget
    (``distla.linalg.set_plan_budget``), above it jax's call (which gathers the
    matrix onto every device). ``func`` sees the eigenvalues as complex numbers, as
    jax's sees the diagonal of the complex Schur form.

    Args:
      A: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh (any layout).
      func: the scalar function, vectorized (``jnp.exp``, ``jnp.sqrt``, a lambda).
      disp: ``False`` also returns jax's error estimate (for the eigen route, where
        the Schur form is diagonal, its ``tol``).
      hermitian: a distla extension: ``None`` checks ``A``'s structure; ``True``
        takes the eigen route unchecked (``A``'s Hermitian part); ``False`` the
        Schur route unchecked. Under ``jax.jit`` either keeps the other routes out
        of the program.
      plan: the eigh's plan (``"auto"``: one device below its crossover within the
        budget, as ``distla.linalg.eigh``), ``"distributed"`` or ``"one_device"``
        (jax's ``funm`` on one device).

    Returns:
      ``F`` (``[n, n]`` complex, jax's dtype) in the mesh's 2D block layout, or
      ``(F, err)``. Not differentiable (neither is jax's).

    Raises:
      ValueError: ``A`` is not a square matrix.

    See also:
      ``jax.scipy.linalg.funm``, [`sqrtm`][distla.scipy.linalg.sqrtm],
      ``distla.linalg.expm``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.array([1.0, 4.0])), mesh)
      >>> np.round(np.asarray(sla.funm(a, jnp.sqrt)).real, 4) + 0.0
      array([[1., 0.],
             [0., 2.]], dtype=float32)
    """
    return route.call(FUNM, A, func=func, disp=bool(disp), hermitian=hermitian, asked=plan)


def _schur_on_one_device(a, *, mesh, out_spec, options):
    disp = dict(options)["disp"]
    specs = (out_spec,) if disp else (out_spec, P())
    return on_one_device(
        _schur_funm,
        a,
        mesh=mesh,
        in_specs=(block_layout(a.shape, mesh),),
        out_specs=specs,
        options=options,
    )


def _fallback_funm(a, *, mesh, out_spec, options):
    """The Schur route on the one-device plan within the budget, else ``None``."""
    if _within_budget(_schur_funm, a, family="funm", options=options) is None:
        return None
    return _schur_on_one_device(a, mesh=mesh, out_spec=out_spec, options=options)
