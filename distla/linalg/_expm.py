"""Matrix exponential by scaling and squaring: ``distla.linalg.expm`` (see docs/algorithms.md).

Higham (2005), "The scaling and squaring method for the matrix exponential
revisited", SIAM J. Matrix Anal. Appl. 26(4), Algorithm 2.3:

1. ``‖A‖₁`` picks the Padé degree ``m``: the smallest of 3, 5, 7, 9 with
   ``‖A‖₁ ≤ θ_m``, else 13 on ``A/2ˢ`` with ``s = ⌈log₂(‖A‖₁/θ₁₃)⌉``.
   ``θ_m`` is the largest norm at which ``r_m``'s backward error is at most
   the unit roundoff (Higham's Table 2.3); float32/complex64 stop at
   degree 7, whose ``θ₇`` is the single-precision one.
2. ``r_m = q_m⁻¹ p_m`` with ``p_m = V + U``, ``q_m = V − U``: ``U`` holds the
   odd powers of ``A``, ``V`` the even ones (degree 13 in Higham's
   6-product form (2.5)). The products run on distla's SUMMA
   (``distla.matmul``), the solve on the distributed LU (or the triangular
   solve for ``upper_triangular=True``).
3. ``s`` squarings, SUMMA products again.

Everything stays in the mesh's 2D block layout: the matrix is padded once to
a size the mesh divides (``blockdiag(A, 0)``, whose exponential is
``blockdiag(eᴬ, I)`` and whose 1-norm is ``A``'s), and no step gathers it.
The degree and ``s`` are traced values (``lax.switch`` over the degrees,
``lax.scan`` of ``lax.cond`` squarings), so one compiled program serves every
matrix of a shape and derivatives of every order come from differentiating
the algorithm, as jax's own ``expm`` is differentiated.
"""

from __future__ import annotations

import functools
import math
import operator

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.pade import pade13_local, pade_sums_local

from .._core import route
from .._core.checks import ShapeError, as_array, onto_mesh, result_dtype, square
from .._core.matmul import default_panels, product_here
from .._core.matrix import HIGHEST
from .._core.mesh import (
    constrain,
    drop_trivial_sharding,
    fitting_spec,
    held_by_vmap,
    is_explicit,
    run_on_mesh,
    shard_map,
    tangent_on_mesh,
)
from .._core.one_device import block_layout
from .._core.plan import Plan
from .._core.stacked import vmappable
from . import _triangular
from ._lu import rules as lu_rules

# Higham (2005), Table 2.3: theta_m for the degrees his algorithm uses, in
# double precision (u = 2^-53) and single precision (u = 2^-24).
_THETA = {
    8: (
        (3, 1.495585217958292e-2),
        (5, 2.539398330063230e-1),
        (7, 9.504178996162932e-1),
        (9, 2.097847961257068e0),
        (13, 5.371920351148152e0),
    ),
    4: ((3, 4.258730016922831e-1), (5, 1.880152677804762e0), (7, 3.925724783138660e0)),
}


def pade_coefficients(m: int) -> tuple[float, ...]:
    """``b_j`` of the ``[m/m]`` Padé approximant of ``eˣ``.

    ``p_m(x) = Σ b_j xʲ``, ``q_m(x) = p_m(−x)``.

    ``b_j = (2m − j)! / (j! (m − j)!)``: the textbook ``(2m−j)! m! / ((2m)! j! (m−j)!)``
    scaled so that ``b_m = 1`` (exact integers; Higham 2005, eq. (2.1)).
    """
    f = math.factorial
    return tuple(float(f(2 * m - j) // (f(j) * f(m - j))) for j in range(m + 1))


def _thetas(dtype) -> tuple[tuple[int, float], ...]:
    return _THETA[np.dtype(jnp.finfo(dtype).dtype).itemsize]


# ---------------------------------------------------------------- the global view


def _mm(x, y, spec):
    """``x @ y`` on SUMMA (``HIGHEST``), in ``spec``."""
    return constrain(product_here(x, y), spec)


def _eye(n, dtype, spec):
    r = lax.broadcasted_iota(jnp.int32, (n, n), 0)
    c = lax.broadcasted_iota(jnp.int32, (n, n), 1)
    return constrain((r == c).astype(dtype), spec)


def _panels(grid, n: int) -> int:
    """SUMMA's steps for ``n x n`` products inside a kernel: the most, up to
    ``default_panels``, that divide ``n`` (no padding: ``n`` is a multiple of
    ``lcm(pr, pc)``)."""
    q = math.lcm(grid.pr, grid.pc)
    return max(d for d in range(1, default_panels(grid, n) + 1) if n % (q * d) == 0)


def _pade(x, scale, index, degrees, grid):
    """``(U, V)`` of the degree ``degrees[index]`` at ``scale·x`` (``scale`` a power of two).

    ``U = x Σ b_{2k+1} x²ᵏ`` and ``V = Σ b_{2k} x²ᵏ``; degrees 9 and 13 in Higham's
    form (2.5), ``U = x [x⁶(b₁₃x⁶ + b₁₁x⁴ + b₉x²) + b₇x⁶ + … + b₁I]`` and
    ``V = x⁶(b₁₂x⁶ + b₁₀x⁴ + b₈x²) + b₆x⁶ + … + b₀I`` (degree 9: ``b₁₀ … b₁₃``
    zero). Each product runs under ``lax.cond`` or ``lax.switch`` on the degree, so a
    small degree skips the higher powers (3: 2 products, 5: 3, 7: 4, 9 and 13: 6) and
    the program holds each product once, not once per degree.

    Memory (docs/memory.md): the scaled matrix is never held beside ``x``
    (``scale`` goes into the right operand of the first product, made for it
    alone, and into ``U``'s sum before the last product); the last power's
    product and the sums run in one branch per degree, the sums a row chunk
    at a time with ``V`` written over the last power (``kernels/pade.py``), so
    the powers die into ``U`` and ``V`` instead of living until ``U``'s product
    (5.7 shares in all, float32, was 7.7).
    """
    n, dtype = x.shape[0], x.dtype
    real = jnp.finfo(dtype).dtype
    spec = grid.block_spec

    def zeros(*_):  # made in the branch: an operand of the degrees' branch would be held
        return constrain(jnp.zeros((n, n), dtype), spec)  # through degree 13's products

    def product_if(pred, f, *operands):  # f(*operands) where pred, else zeros (not computed)
        return lax.cond(pred, f, zeros, *operands)

    odd, even = [], []  # per degree: the coefficients of I, x², x⁴, x⁶, x⁸
    for m in degrees:
        b = pade_coefficients(m)
        low = 3 if m == 13 else m // 2  # degree 13: x⁸ and up come from the product below
        odd.append([b[2 * k + 1] if k <= low else 0.0 for k in range(5)])
        even.append([b[2 * k] if k <= low else 0.0 for k in range(5)])
    odd_c = jnp.asarray(odd, real)[index].astype(dtype)
    even_c = jnp.asarray(even, real)[index].astype(dtype)

    def sums(*powers):  # U's and V's sums over I and x², x⁴, ...: V over the last power
        kernel = functools.partial(pade_sums_local, row_axis=grid.row, col_axis=grid.col)
        specs = (P(), P()) + (spec,) * len(powers)
        k = len(powers) + 1
        return shard_map(kernel, in_specs=specs, out_specs=(spec, spec))(
            odd_c[:k], even_c[:k], *powers
        )

    def up_to_7(x):  # degrees 3 to 7: x², x⁴, then one branch per degree
        a2 = _mm(x, x * (scale * scale), spec)  # (scale·x)², exact: scale is a power of two
        powers = [a2, product_if(index >= 1, lambda p: _mm(p, p, spec), a2)]  # x², x⁴
        # x⁶'s product and the sums in one branch per degree: the branch's results are
        # made there, so the powers die into them (outside a branch XLA fuses the sums
        # into their readers, and every power lives until U's product)
        finish = [sums, lambda x2, x4: sums(x2, x4, _mm(x4, x2, spec))]
        return lax.switch((index == 2).astype(jnp.int32), finish, *powers)

    def form_2_5(x):
        # degrees 9 and 13 in Higham's (2.5) form on x², x⁴, x⁶ made in this branch (a
        # branch's operands are read-only: XLA copies one that a loop in the branch
        # writes; its own values are not), degree 9's coefficients b₀ … b₉ in b₀ … b₉'s
        # places (U_in = x⁶(b₉x²) + b₇x⁶ + …: one product more than x⁸'s, so that it
        # holds what degree 13 holds): B_u is written over x², B_v over B_u and V's low
        # sum over x⁴, and the low sums added into the products (kernels/pade.py): four
        # blocks at most, x⁶, B_u, x⁴ and x⁶B_u (five with both B operands beside x² and
        # x⁴; sums and products over the shared powers held ten; degree 9's x⁸ beside
        # x², x⁴, x⁶ and U's sum, five)
        x2 = _mm(x, x * (scale * scale), spec)
        x4 = _mm(x2, x2, spec)
        x6 = _mm(x4, x2, spec)
        forms = [(*pade_coefficients(9), 0.0, 0.0, 0.0, 0.0), pade_coefficients(13)]
        b = jnp.asarray(forms, real)[index - 3].astype(dtype)
        kernel = functools.partial(
            pade13_local,
            row_axis=grid.row,
            col_axis=grid.col,
            panels=_panels(grid, n),
            precision=HIGHEST,
        )
        return shard_map(kernel, in_specs=(P(),) + (spec,) * 3, out_specs=(spec, spec))(
            b, x2, x4, x6
        )

    if degrees[-1] == 13:
        u_in, v = lax.cond(index >= 3, form_2_5, up_to_7, x)
    else:
        u_in, v = up_to_7(x)
    return _mm(x, constrain(u_in * scale, spec), spec), constrain(v, spec)


def _expm_body(a, *, dtype, n_pad, upper_triangular, max_squarings):
    """``eᴬ`` of one matrix, traced inside ``run_on_mesh`` (Auto axes in context)."""
    mesh = jax.sharding.get_abstract_mesh()
    inner = Plan(mesh, np.dtype(dtype))  # the solves' plan, on the mesh of this context
    spec = inner.grid.block_spec
    n = a.shape[0]
    x = constrain(jnp.pad(a, ((0, n_pad - n), (0, n_pad - n))), spec)  # blockdiag(A, 0)
    real = jnp.finfo(dtype).dtype
    # ‖A‖₁ (column sums reduced over the mesh rows, then a scalar max); the degree and
    # s are piecewise constant in A, so they carry no derivative
    col_sums = lax.stop_gradient(jnp.sum(jnp.abs(x), axis=0))
    norm1 = jnp.max(col_sums)
    has_nan = jnp.isnan(jnp.sum(col_sums))  # XLA's sharded max can drop a NaN; a sum keeps it
    degrees, thetas = zip(*_thetas(dtype))
    s = jnp.maximum(0.0, jnp.ceil(jnp.log2(norm1 / thetas[-1])))
    too_many = ~(s <= max_squarings)  # also NaN/inf in A: jax's NaN result
    s = jnp.where(too_many, 0.0, s)
    scale = jnp.exp2(-s).astype(real).astype(dtype)  # A/2ˢ, exact: a power of two
    # the smallest degree whose theta bounds the norm (s > 0 only for the largest)
    index = sum((norm1 > t).astype(jnp.int32) for t in thetas[:-1])
    u, v = _pade(x, scale, index, degrees, inner.grid)
    p, q = constrain(v + u, spec), constrain(v - u, spec)
    if upper_triangular:  # q_m(A) is upper triangular too: substitution, no pivoting
        r = _triangular.solve_2d(q, p, trans=0, lower=False, unit_diagonal=False, call=inner)
    else:
        r = lu_rules.solve_2d(q, p, call=inner)
    r = constrain(r, spec)
    steps = s.astype(jnp.int32)

    def square_step(r, i):  # r <- r @ r while i < s
        return lax.cond(i < steps, lambda r: _mm(r, r, spec), lambda r: r, r), None

    if max_squarings > 0:
        r, _ = lax.scan(square_step, r, jnp.arange(max_squarings, dtype=jnp.int32))
    r = jnp.where(too_many, jnp.full((), jnp.nan, dtype), r)
    # as jax's: a NaN in A reaches the derivative too (jax computes on it; a constant
    # NaN would carry a zero tangent, as jax's does for inf or too large a norm)
    r = r * jnp.where(has_nan, jnp.nan, 1.0).astype(dtype)
    return r[:n, :n]


def _pad_to(n: int, plan: Plan) -> int:
    q = math.lcm(plan.grid.pr, plan.grid.pc)
    return -(-n // q) * q


@functools.partial(
    jax.jit, static_argnames=("call", "upper_triangular", "max_squarings", "out_spec")
)
def _expm_2d(a, *, call: Plan, upper_triangular: bool, max_squarings: int, out_spec: P):
    body = functools.partial(
        _expm_body,
        dtype=call.dtype,
        n_pad=_pad_to(a.shape[0], call),
        upper_triangular=upper_triangular,
        max_squarings=max_squarings,
    )
    return run_on_mesh(body, call.mesh, out_spec, a)


def _result_spec(a, call: Plan) -> P:
    """Where ``eᴬ`` comes back: ``a``'s own layout on Explicit meshes (so that
    ``expm(a) @ x`` and ``expm(a) - a`` combine as jnp's would), the mesh's 2D block
    layout (the largest even one that fits) on Auto meshes."""
    if is_explicit(call.mesh):
        spec = tuple(jax.typeof(a).sharding.spec)
        return P(*spec, *(None,) * (2 - len(spec)))
    return fitting_spec(a.shape, call.mesh, call.grid.block_spec)


# ---------------------------------------------------------------- public functions


def _flags(upper_triangular, max_squarings, what):
    if not isinstance(upper_triangular, (bool, np.bool_)):
        raise TypeError(f"{what}: upper_triangular must be a bool; got {upper_triangular!r}")
    try:
        max_squarings = operator.index(max_squarings)
    except TypeError:
        raise TypeError(
            f"{what}: max_squarings must be an int (a static count); got {max_squarings!r}"
        ) from None
    return bool(upper_triangular), max_squarings


def _check(what, a, **options):
    del options
    square(a, what)


def _layouts(plan: Plan, a, *, results, **options):
    return (block_layout(a.shape, plan.mesh),), (_result_spec(a, plan),)


def _expm(plan: Plan, a, *, upper_triangular, max_squarings):
    return _expm_2d(
        a,
        call=plan,
        upper_triangular=upper_triangular,
        max_squarings=max_squarings,
        out_spec=_result_spec(a, plan),
    )


EXPM = route.Op(
    "distla.linalg.expm",
    operands=("A",),
    check=_check,
    one_device=jsl.expm,
    is_stack=route.beyond(2),
    stacked=route.members(jsl.expm, (2,), 2),
    family="expm",
    layouts=_layouts,
    distributed=_expm,
)


@route.public
def expm(
    A: jax.typing.ArrayLike,
    *,
    upper_triangular: bool = False,
    max_squarings: int = 16,
    plan: str = "auto",
) -> jax.Array:
    """Matrix exponential ``eᴬ``, as ``jax.scipy.linalg.expm``.

    Scaling and squaring with Padé approximants (Higham 2005): the 1-norm of
    ``A`` picks the degree (3, 5, 7, 9 or 13; up to 7 for float32/complex64)
    and the number ``s`` of squarings; the Padé numerator and denominator
    are formed with distla's SUMMA products, ``r = q⁻¹p`` is solved by the
    distributed LU, and ``r`` is squared ``s`` times on SUMMA: no device
    holds the whole matrix (except that for ``n <= 128`` the LU's solve takes
    its few-right-hand-sides path, which holds the ``n x n`` right-hand side
    ``p`` on each device). A stack sharded along its batch dimensions runs
    jax's ``expm`` on each device's members (no communication).

    Args:
      A: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh (any layout), or a
        stack ``[..., n, n]`` sharded along its batch dimensions. Integer and
        bool inputs promote to the default float, as in jax.
      upper_triangular: ``A`` is upper triangular: the solve is a triangular
        solve on ``q``'s upper triangle (as jax's, which then reads no other
        entry of ``q``).
      max_squarings: the most squarings allowed (a Python int). A matrix
        needing more (``‖A‖₁ > θ · 2^max_squarings``, ``θ`` = 5.37 in double
        and 3.93 in single precision) gives NaN, as in jax; so does any NaN
        or infinite entry.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix (a distla extension): below the budget
        (``distla.linalg.set_plan_budget``) and a measured crossover size,
        ``"auto"`` moves ``A`` to one device, runs ``jax.scipy.linalg.expm``
        there and shards the result back in the same layout;
        ``distla.cost`` reports the plan.

    Returns:
      ``[..., n, n]`` array of ``A``'s (promoted) dtype. One matrix comes
      back in ``A``'s own layout on an Explicit mesh and in the mesh's 2D
      block layout ``P(r, c)`` on an Auto mesh (the largest even layout that
      fits when the mesh does not divide ``n``); a stack sharded along its
      batch. Empty input gives jax's empty result. Differentiable to any
      order (``jax.grad``, ``jax.jvp``) through the algorithm, as jax's is.

    jax counts squarings as ``⌊log₂(‖A‖₁/θ)⌋``, one fewer than Higham's
    ``⌈log₂(‖A‖₁/θ)⌉`` used here whenever ``‖A‖₁/θ`` is not a power of two;
    the values agree to rounding, but a matrix right at the
    ``max_squarings`` limit can be NaN here where jax returns a number.

    Raises:
      ValueError: ``A`` is not square or has fewer than 2 dimensions.
      TypeError: float16/bfloat16 or non-numeric ``A``, or a non-int
        ``max_squarings``.

    See also: ``jax.scipy.linalg.expm``, [`expm_frechet`][distla.linalg.expm_frechet].

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.zeros((256, 256)), mesh)
      >>> e = distla.linalg.expm(a)
      >>> e.sharding.spec, bool((e == jnp.eye(256)).all())
      (P('rows', 'cols'), True)
    """
    upper_triangular, max_squarings = _flags(upper_triangular, max_squarings, EXPM.name)
    options = dict(upper_triangular=upper_triangular, max_squarings=max_squarings)
    return route.call(EXPM, A, plan=plan, **options)


@route.public
def expm_frechet(
    A: jax.typing.ArrayLike,
    E: jax.typing.ArrayLike,
    *,
    method: str | None = None,
    compute_expm: bool = True,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Fréchet derivative of the matrix exponential at ``A`` in direction ``E``,
    as ``jax.scipy.linalg.expm_frechet``.

    ``jax.jvp`` of [`expm`][distla.linalg.expm] (as jax computes it): the derivative of the
    distributed scaling and squaring, so every product is a SUMMA product and
    every solve a distributed LU solve; nothing is gathered.

    Args:
      A: ``[..., n, n]`` matrix or stack, laid out as for [`expm`][distla.linalg.expm].
      E: the direction, of ``A``'s shape, on the same mesh.
      method: accepted and ignored, as in jax.
      compute_expm: also return ``expm(A)``.

    Returns:
      ``(expm(A), L(A, E))`` if ``compute_expm`` else ``L(A, E)``, each of
      ``A``'s shape and in [`expm`][distla.linalg.expm]'s layout, in the dtype ``A`` and ``E``
      promote to.

    Raises:
      ValueError: ``A`` or ``E`` is not square, or their shapes differ.

    See also: ``jax.scipy.linalg.expm_frechet``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.zeros((64, 64)), mesh)
      >>> e = distla.shard(jnp.eye(64), mesh)
      >>> expm_a, frechet = distla.linalg.expm_frechet(a, e)
      >>> float(np.asarray(frechet)[0, 0]), float(np.asarray(expm_a)[0, 0])
      (1.0, 1.0)
    """
    what = "distla.linalg.expm_frechet"
    del method  # ignored, as in jax
    a = as_array(A, "A", what)
    e = as_array(E, "E", what)
    for name, x in (("A", a), ("E", e)):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise ShapeError(
                f"{what}: {name} must be a square matrix or a stack of them ([..., n, n]); "
                f"got {name} of shape {x.shape}"
            )
    if a.shape != e.shape:
        raise ShapeError(f"{what}: A and E must have the same shape; got A {a.shape}, E {e.shape}")
    dtype = result_dtype(what, a, e)
    a, e = _on_one_mesh(a.astype(dtype), e.astype(dtype))
    if held_by_vmap(a, e):
        value, derivative = _frechet_of_members(a, e)
    else:
        value, derivative = jax.jvp(expm, (a,), (e,))
    return (value, derivative) if compute_expm else derivative


def _on_one_mesh(a, e):
    """``A`` and ``E`` on one mesh, as the route puts a call's operands
    (``_core.checks.onto_mesh``): a one-device ``E`` beside a sharded ``A`` is replicated
    on ``A``'s mesh, also where ``A`` is a derivative's tracer (whose primal names the
    mesh); ``E`` is the tangent of ``A``, which jax places as its primal."""
    anchor = a
    while isinstance(anchor, jax.core.Tracer) and hasattr(anchor, "primal"):
        anchor = anchor.primal
    return onto_mesh(a, tangent_on_mesh(e, anchor))


def _frechet_of_stack(a, e):
    return jax.jvp(expm, (a,), (e,))


# Inside a jax.vmap over a batch on Explicit mesh axes, expm's derivative is jax's on each
# member (route._vmapped_members), which jax's loops cannot batch there: the vmap is one
# call on the stack instead, expm's stacked body (each device its own members)
_frechet_of_members = vmappable(
    lambda a, e: jax.jvp(jsl.expm, (drop_trivial_sharding(a),), (drop_trivial_sharding(e),)),
    _frechet_of_stack,
)
