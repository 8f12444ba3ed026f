"""Schur forms and Sylvester equations: ``schur``, ``rsf2csf``, ``solve_sylvester`` (private).

- ``schur``: the QR iteration has no distributed algorithm here (ScaLAPACK's
  PDHSEQR chases chains of small bulges across the block-cyclic layout with
  aggressive early deflation; docs/scipy-linalg.md says what that would take).
  ``plan="auto"`` runs LAPACK's ``gees`` on one device within the budget (it
  reduces to Hessenberg form itself, so a distributed reduction first would only
  add work there); ``plan="distributed"`` reduces ``A = Q H Qᴴ`` distributed
  (``hessenberg``), runs the QR iteration ``H = Z_H T Z_Hᴴ`` on one device and
  forms ``Z = Q Z_H`` by SUMMA.
- ``rsf2csf``: the 2x2 blocks of a real Schur form never overlap, so their
  rotations commute and apply at once (``distla.kernels.rotations``: each device its
  block, one halo row or column from each neighbour).
- ``solve_sylvester``: Bartels–Stewart. The Schur forms of ``A`` and ``Bᴴ`` on the
  plan ``schur`` takes, ``F = Uᴴ C V`` and ``X = U Y Vᴴ`` by SUMMA, and the
  triangular equation ``R Y + Y Sᴴ = F`` column by column (an ``m x m`` triangular
  solve each) on the one-device plan.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels.rotations import rotate_adjacent
from distla.kernels.structured import global_indices

from ..._core import route
from ..._core.checks import ShapeError, is_empty, is_traced
from ..._core.matmul import product
from ..._core.matrix import block_spec, diagonal, pad_to, round_up
from ..._core.mesh import (
    constrain,
    fitting_spec,
    grid_of,
    run_on_mesh,
    shard_map,
    spec_groups,
)
from ..._core.one_device import planned
from ..._core.plan import Plan
from ..._core.stacked import stack
from ._everywhere import everywhere, result_types
from ._hessenberg import hessenberg

# --------------------------------------------------------------------------- helpers


@functools.partial(jax.jit, static_argnames=("mesh",))
def _ct(x, *, mesh):
    """``xᴴ`` in the largest even 2D block layout that fits (an all-to-all, no gather)."""
    spec = fitting_spec(x.shape[::-1], mesh, block_spec(mesh))
    return run_on_mesh(lambda x: jnp.conj(x.T), mesh, spec, x)


@functools.partial(jax.jit, static_argnames=("mesh",))
def _diag(x, *, mesh):
    """The diagonal of the square ``x``, replicated (a masked row reduction)."""
    return run_on_mesh(diagonal, mesh, P(), x)


def _mm(x, y, mesh):
    return product(x, y, mesh)


# --------------------------------------------------------------------------- schur


def _schur_one(a, *, output):
    """jax's ``schur`` (LAPACK's ``gees``), the one-device plan's function."""
    return jsl.schur(a, output=output)


def _check_square(what, a, **options):
    del options
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{what}: a must be square, (..., n, n); got a of shape {a.shape}")


def _schur_of(a, *, output, asked):
    del asked
    return _schur_one(a, output=output)


def _schur_stack(plan: Plan, a, *, output, asked):
    """A stack sharded along its batch: jax's ``schur`` on each device's members."""
    del asked
    return stack(functools.partial(_schur_one, output=output), (a,), (2,), 2, mesh=plan.mesh)


def _schur_distributed(plan: Plan, a, *, output, asked):
    """Above the one-device budget: jax's call (which gathers); with ``plan="distributed"``
    asked, the Hessenberg reduction distributed and the QR iteration on one device."""
    options = (("output", output),)
    what = "distla.scipy.linalg.schur"
    if asked == "distributed":
        h, q = hessenberg(a, calc_q=True, block_size=plan.block_size, plan="distributed")
        t, zh = _on_one_device_or_jax(h, mesh=plan.mesh, options=options, what=what)
        return t, _mm(q.astype(zh.dtype), zh, plan.mesh)
    return everywhere(_schur_one, a, mesh=plan.mesh, options=options)  # jax's: gathers


def _schur_one_device_options(*, output, asked):
    del asked
    return {"output": output}


def _as_tuple(out, **options):
    del options
    return tuple(out)


SCHUR = route.Op(
    "distla.scipy.linalg.schur",
    one_device=_schur_one,
    unsharded=_schur_of,
    distributed=_schur_distributed,
    check=_check_square,
    is_stack=route.beyond(2),
    stacked=_schur_stack,
    family="schur",
    planned=route.Planned(options=_schur_one_device_options),
    result=_as_tuple,
)


@route.public
def schur(
    a: jax.typing.ArrayLike,
    output: str = "real",
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """Schur decomposition ``a = Z T Zᴴ``, as ``jax.scipy.linalg.schur``.

    There is no distributed QR iteration: one matrix sharded over a mesh goes to one
    device within the budget (``distla.linalg.set_plan_budget``), where LAPACK's
    ``gees`` runs, and ``(T, Z)`` come back in the mesh's 2D block layout; above
    the budget jax's call runs, which gathers the matrix onto every device. With
    ``plan="distributed"`` the Hessenberg reduction ``A = Q H Qᴴ`` runs distributed
    (``hessenberg``) and only the QR iteration of ``H`` on one device, then
    ``Z = Q Z_H`` by SUMMA: the same bytes to one device and back, but LAPACK's
    ``gees`` reduces ``H`` again (its cost does not depend on the input's
    structure), so on one device this is the slower plan. A stack sharded along its
    batch runs jax's ``schur`` on each device.

    Args:
      a: ``[n, n]`` matrix sharded on a 1- or 2-axis mesh, or a stack. Integers and
        bools promote to the default float.
      output: ``"real"`` (quasi-triangular ``T`` for real ``a``) or ``"complex"``.
      block_size: the Hessenberg reduction's panel width (``plan="distributed"``).
      plan: ``"auto"``/``"one_device"`` or ``"distributed"`` (above).

    Returns:
      ``(T, Z)``, ``[n, n]`` each, in the mesh's 2D block layout (the largest even
      layout that fits). Not differentiable (neither is jax's).

    Raises:
      ValueError: an unknown ``output``, or ``a`` not square.

    See also: ``jax.scipy.linalg.schur``, [`rsf2csf`][distla.scipy.linalg.rsf2csf].

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.triu(jnp.ones((256, 256))) + jnp.eye(256), mesh)
      >>> t, z = sla.schur(a)
      >>> t.shape, z.shape
      ((256, 256), (256, 256))
      >>> np.allclose(np.asarray(z) @ np.asarray(t) @ np.asarray(z).T, np.asarray(a), atol=1e-3)
      True
    """
    if output not in ("real", "complex"):
        raise ValueError(f"Expected 'output' to be either 'real' or 'complex', got {output=}.")
    return route.call(SCHUR, a, plan=plan, block_size=block_size, output=output, asked=plan)


def _on_one_device_or_jax(a, *, mesh, options, what, plan="auto"):
    one = planned("schur", plan, _schur_one, a, mesh=mesh, what=what, options=options)
    if one is not None:
        return tuple(one)
    return tuple(everywhere(_schur_one, a, mesh=mesh, options=options))  # jax's: gathers


# --------------------------------------------------------------------------- rsf2csf


def _rotations(t, n):
    """The rotations of ``rsf2csf`` from ``t``'s band, replicated, and whether two of
    them touch (not a standardized real Schur form: jax's sequential order matters).

    For each ``m`` with ``|T[m, m−1]| > eps(|T[m−1, m−1]| + |T[m, m]|)``:
    ``μ = eig₀(T[m−1:m+1, m−1:m+1]) − T[m, m]`` (jax's ``eigvals`` order),
    ``r = ‖(μ, T[m, m−1])‖``, ``c = μ/r``, ``s = T[m, m−1]/r`` (jax's ``rsf2csf``).
    """
    size = t.shape[0]
    r_i = lax.broadcasted_iota(jnp.int32, t.shape, 0)
    c_i = lax.broadcasted_iota(jnp.int32, t.shape, 1)
    zero = jnp.zeros((), t.dtype)
    d = diagonal(t)
    sub = jnp.sum(jnp.where(r_i == c_i + 1, t, zero), axis=1)  # sub[m] = T[m, m−1]
    sup = jnp.sum(jnp.where(c_i == r_i + 1, t, zero), axis=0)  # sup[m] = T[m−1, m]
    d_prev = jnp.roll(d, 1)
    blocks = jnp.stack([jnp.stack([d_prev, sup], -1), jnp.stack([sub, d], -1)], -2)
    m = jnp.arange(size)
    eps = jnp.finfo(t.dtype).eps
    active = (m >= 1) & (m <= n - 1) & (jnp.abs(sub) > eps * (jnp.abs(d_prev) + jnp.abs(d)))
    blocks = jnp.where(active[:, None, None], blocks, jnp.eye(2, dtype=t.dtype))
    mu = jnp.linalg.eigvals(blocks)[:, 0].astype(t.dtype) - d
    r = jnp.sqrt(jnp.abs(mu) ** 2 + jnp.abs(sub) ** 2).astype(t.dtype)
    safe = jnp.where(active, r, 1)
    c = jnp.where(active, mu / safe, 1)
    s = jnp.where(active, sub / safe, 0)
    adjacent = jnp.any(active[1:] & active[:-1])
    return active, c, s, adjacent


def _rsf2csf_body(t, z, *, n, dtype):
    mesh = jax.sharding.get_abstract_mesh()
    grid = grid_of(mesh, what="distla.scipy.linalg.rsf2csf")
    spec = grid.block_spec
    size = round_up(n, math.lcm(grid.pr, grid.pc))
    t = constrain(pad_to(t.astype(dtype), (size, size)), spec)
    z = constrain(pad_to(z.astype(dtype), (size, size)), spec)
    active, c, s, adjacent = _rotations(t, n)
    # line i is the first of the pair (i, i + 1) or the second of (i − 1, i)
    first = jnp.roll(active, -1).at[-1].set(False)
    c1, s1 = jnp.roll(c, -1), jnp.roll(s, -1)
    one, zero = jnp.ones((), dtype), jnp.zeros((), dtype)
    # rows: G = [[c̄, s], [−s, c]] on rows (m − 1, m); columns: Gᴴ on columns (m − 1, m)
    row_coef = (
        jnp.where(first, jnp.conj(c1), jnp.where(active, c, one)),
        jnp.where(active, -s, zero),
        jnp.where(first, s1, zero),
    )
    col_coef = (
        jnp.where(first, c1, jnp.where(active, jnp.conj(c), one)),
        jnp.where(active, -jnp.conj(s), zero),
        jnp.where(first, jnp.conj(s1), zero),
    )
    axes = spec_groups(spec, 2, dict(mesh.shape))

    def kernel(t_blk, z_blk, first, second, row_coef, col_coef):
        i, j = global_indices(t_blk.shape, axes)
        i, j = i[:, None], j[None, :]
        # jax's masks: a row rotation from column m − 1 on, a column rotation down to row m
        rows = (first[i] & (j >= i)) | (second[i] & (j >= i - 1))
        t_blk = rotate_adjacent(t_blk, *row_coef, rows, axis=0, axis_name=grid.row)
        cols = (first[j] & (i <= j + 1)) | (second[j] & (i <= j))
        t_blk = rotate_adjacent(t_blk, *col_coef, cols, axis=1, axis_name=grid.col)
        z_blk = rotate_adjacent(z_blk, *col_coef, first[j] | second[j], axis=1, axis_name=grid.col)
        return jnp.where(i == j + 1, jnp.zeros((), t_blk.dtype), t_blk), z_blk

    t, z = shard_map(
        kernel,
        in_specs=(spec, spec, P(), P(), (P(),) * 3, (P(),) * 3),
        out_specs=(spec, spec),
        check_vma=False,
    )(t, z, first, active, row_coef, col_coef)
    return t[:n, :n], z[:n, :n], adjacent


@functools.partial(jax.jit, static_argnames=("mesh", "dtype"))
def _rsf2csf_2d(t, z, *, mesh, dtype):
    n = t.shape[0]
    spec = fitting_spec((n, n), mesh, block_spec(mesh))
    body = functools.partial(_rsf2csf_body, n=n, dtype=dtype)
    return run_on_mesh(body, mesh, (spec, spec, P()), t, z)


def _rsf2csf_one(t, z):
    """jax's ``rsf2csf`` (sequential rotations), the one-device plan's function."""
    return jsl.rsf2csf(t, z)


def _check_schur_form(what, t, z):
    """jax's checks and messages."""
    del what
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError("Input 'T' must be square.")
    if z.ndim < 2 or z.shape[-1] != z.shape[-2]:
        raise ValueError("Input 'Z' must be square.")
    if t.shape[-1] != z.shape[-1]:
        raise ValueError(f"Input array shapes must match: Z: {z.shape} vs. T: {t.shape}")


def _rsf2csf_dtype(what, t, z):
    del what
    return np.dtype(result_types(_rsf2csf_one, t, z)[0].dtype)


def _jax_rotates(t, z):
    """jax's function takes the call: stacks, or a matrix of one entry."""
    return t.ndim != 2 or z.ndim != 2 or t.shape[0] <= 1


def _rsf2csf_distributed(plan: Plan, t, z):
    """The rotations at once (`_rsf2csf_2d`); jax's sequential order, on one device
    within the budget, where two 2x2 blocks touch."""
    mesh, dtype = plan.mesh, plan.dtype
    t2, z2, adjacent = _rsf2csf_2d(t, z, mesh=mesh, dtype=dtype)

    def sequential(tz):  # jax's order, on one device within the budget
        t, z = (x.astype(dtype) for x in tz)
        one = planned("schur", "auto", _rsf2csf_one, t, z, mesh=mesh, what=RSF2CSF.name)
        if one is None:
            one = everywhere(_rsf2csf_one, t, z, mesh=mesh)
        return tuple(one)

    if not is_traced(t, adjacent):
        return sequential((t, z)) if bool(adjacent) else (t2, z2)
    return lax.cond(adjacent, sequential, lambda tz: (t2, z2), (t, z))


RSF2CSF = route.Op(
    "distla.scipy.linalg.rsf2csf",
    operands=("T", "Z"),
    one_device=_rsf2csf_one,
    distributed=_rsf2csf_distributed,
    check=_check_schur_form,
    promote=_rsf2csf_dtype,
    cast=route.as_given,
    empty=_jax_rotates,
    result=_as_tuple,
)


@route.public
def rsf2csf(
    T: jax.typing.ArrayLike, Z: jax.typing.ArrayLike, check_finite: bool = True
) -> tuple[jax.Array, jax.Array]:
    """Real Schur form to complex Schur form, as ``jax.scipy.linalg.rsf2csf``.

    Each 2x2 block of the real Schur form (a complex pair of eigenvalues) is
    triangularized by a rotation of its two rows and columns of ``T`` and columns
    of ``Z``, with jax's rotation. The blocks never overlap, so the rotations
    commute: on a mesh they are computed from ``T``'s band (replicated ``n``-vectors)
    and applied all at once, each device to its block with one halo row or column
    from each neighbour (``distla.kernels.rotations``); nothing else moves. An input
    whose 2x2 blocks touch (not a standardized real Schur form), for which jax's
    sequential order matters, runs jax's function on the one-device plan within the
    budget (above it jax's call, which gathers).

    Args:
      T: ``[n, n]`` real Schur form (quasi-upper-triangular), on a mesh or not.
      Z: ``[n, n]`` its Schur vectors, on the same mesh.
      check_finite: accepted and ignored, as in jax.

    Returns:
      ``(T, Z)`` complex, ``T`` upper triangular, in the mesh's 2D block layout (the
      largest even layout that fits). Stacks and unsharded operands: jax's.

    Raises:
      ValueError: ``T`` or ``Z`` not square, or their shapes differ, as jax.

    See also: ``jax.scipy.linalg.rsf2csf``, [`schur`][distla.scipy.linalg.schur].

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.array([[0.0, 1.0], [-1.0, 0.0]]), mesh)
      >>> t, z = sla.schur(a)
      >>> t_c, z_c = sla.rsf2csf(t, z)
      >>> t_c.dtype, np.allclose(np.tril(np.asarray(t_c), -1), 0)
      (dtype('complex64'), True)
    """
    del check_finite
    return route.call(RSF2CSF, T, Z)


# --------------------------------------------------------------------------- sylvester


def _triangular_sylvester(r, s, f):
    """``Y`` with ``R Y + Y Sᴴ = F`` (``R``, ``S`` upper triangular): Bartels–Stewart by
    columns, the last first: ``(R + conj(S[j, j]) I) y_j = f_j − Σ_{k>j} conj(S[j, k]) y_k``."""
    m, n = f.shape
    eye = jnp.eye(m, dtype=r.dtype)
    cols = jnp.arange(n)

    def step(t, y):
        j = n - 1 - t
        srow = jnp.conj(lax.dynamic_index_in_dim(s, j, axis=0, keepdims=False))
        rhs = lax.dynamic_index_in_dim(f, j, axis=1, keepdims=False)
        rhs = rhs - y @ jnp.where(cols > j, srow, 0)
        shifted = r + srow[j] * eye
        yj = lax.linalg.triangular_solve(shifted, rhs[:, None], left_side=True, lower=False)
        return lax.dynamic_update_slice(y, yj, (0, j))

    return lax.fori_loop(0, n, step, jnp.zeros_like(f))


def _eigen_method(a, b, c, *, tol):
    """jax's ``solve_sylvester(method="eigen")``, the one-device plan's function."""
    return jsl.solve_sylvester(a, b, c, method="eigen", tol=tol)


@functools.partial(jax.jit, static_argnames=("mesh", "tol"))
def _nan_if_singular(x, r, s, *, mesh, tol):
    """``x``, or NaN where two eigenvalues of ``A`` and ``−B`` are within ``tol``
    (jax's test: ``|λ_A + λ_B| < tol``), read off the Schur forms' diagonals."""

    def body(x, r, s):
        la, lb = diagonal(r), jnp.conj(diagonal(s))
        near = jnp.any(jnp.abs(la[:, None] + lb[None, :]) < tol)
        return jnp.where(near, jnp.full((), np.nan, x.dtype), x)

    return run_on_mesh(body, mesh, fitting_spec(x.shape, mesh, block_spec(mesh)), x, r, s)


def _check_sylvester(what, a, b, c, *, method, **options):
    """jax's checks and messages."""
    del what, options
    if c.ndim < 2 or a.shape[-2:] != (c.shape[-2],) * 2 or b.shape[-2:] != (c.shape[-1],) * 2:
        raise ValueError(
            f"Incompatible shapes for Sylvester equation:\nA: {a.shape}\nB: {b.shape}\nC: {c.shape}"
        )
    if method not in ("schur", "eigen"):
        raise ValueError(
            f'Unrecognized method {method}. The two valid methods are either "schur" or "eigen".'
        )


def _jax_sylvester(a, b, c, *, method, tol, asked):
    """jax's function (unsharded operands, empty ones and stacks)."""
    del asked
    return jsl.solve_sylvester(a, b, c, method=method, tol=tol)


def _jax_solves(a, b, c, **options):
    """jax's function takes the call: an empty operand or a stack."""
    del options
    return is_empty(a, b, c) or max(a.ndim, b.ndim, c.ndim) > 2


def _bartels_stewart(plan: Plan, a, b, c, *, method, tol, asked):
    """The distributed driver (the docstring of `solve_sylvester`)."""
    mesh, dtype, what = plan.mesh, plan.dtype, SYLVESTER.name
    if method == "eigen":
        options = (("tol", tol),)
        one = planned(
            "sylvester", asked, _eigen_method, a, b, c, mesh=mesh, what=what, options=options
        )
        if one is not None:
            return one
        return everywhere(_eigen_method, a, b, c, mesh=mesh, options=options)
    cdtype = np.dtype(jnp.result_type(dtype, jnp.complex64))
    r, u = schur(a, "complex", plan=asked)
    s, v = schur(_ct(b, mesh=mesh), "complex", plan=asked)
    f = _mm(_mm(_ct(u, mesh=mesh), c.astype(cdtype), mesh), v, mesh)
    y = planned("sylvester", "auto", _triangular_sylvester, r, s, f, mesh=mesh, what=what)
    if y is None:  # above the budget: on every device, as jax's would be
        y = everywhere(_triangular_sylvester, r, s, f, mesh=mesh)
    x = _mm(_mm(u, y, mesh), _ct(v, mesh=mesh), mesh)
    if not jnp.issubdtype(dtype, jnp.complexfloating):
        x = jnp.real(x)
    return _nan_if_singular(x, r, s, mesh=mesh, tol=float(tol))


SYLVESTER = route.Op(
    "distla.scipy.linalg.solve_sylvester",
    operands=("A", "B", "C"),
    one_device=_jax_sylvester,
    distributed=_bartels_stewart,
    check=_check_sylvester,
    empty=_jax_solves,
)


@route.public
def solve_sylvester(
    A: jax.typing.ArrayLike,
    B: jax.typing.ArrayLike,
    C: jax.typing.ArrayLike,
    *,
    method: str = "schur",
    tol: float = 1e-8,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``A X + X B = C``, as ``jax.scipy.linalg.solve_sylvester``.

    ``method="schur"`` (Bartels–Stewart) on a mesh: the complex Schur forms
    ``A = U R Uᴴ`` and ``Bᴴ = V S Vᴴ`` on the plan [`schur`][distla.scipy.linalg.schur] takes
    (one device
    within the budget), ``F = Uᴴ C V`` by SUMMA, the triangular equation
    ``R Y + Y Sᴴ = F`` column by column (one ``m x m`` triangular solve each,
    ``O(m²n + mn²)``; jax scans the ``m·n`` entries one by one) on the one-device
    plan, and ``X = U Y Vᴴ`` by SUMMA. ``method="eigen"`` (jax's eigendecomposition
    route, ``eig`` having no distributed algorithm) runs on the one-device plan.
    Above the budget those steps run jax's calls, which gather.

    Args:
      A: ``[m, m]`` on a 1- or 2-axis mesh.
      B: ``[n, n]`` on the same mesh.
      C: ``[m, n]`` on the same mesh.
      method: ``"schur"`` or ``"eigen"``.
      tol: NaN is returned when ``|λ_A + λ_B| < tol`` for two eigenvalues, as jax.
      plan: the Schur forms' and the triangular solve's plan: ``"auto"`` or
        ``"one_device"`` (``"distributed"``: [`schur`][distla.scipy.linalg.schur]'s
        distributed plan).

    Returns:
      ``X`` (``[m, n]``, real for real ``C``, as jax) in the mesh's 2D block layout
      (the largest even layout that fits). Stacks and unsharded operands: jax's.

    Raises:
      ValueError: shapes that do not fit, or an unknown ``method``.

    See also: ``jax.scipy.linalg.solve_sylvester``, [`schur`][distla.scipy.linalg.schur].

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.arange(1.0, 65.0)), mesh)
      >>> b = distla.shard(jnp.diag(jnp.arange(1.0, 65.0)), mesh)
      >>> c = distla.shard(jnp.ones((64, 64)), mesh)
      >>> x = sla.solve_sylvester(a, b, c)
      >>> np.allclose(np.asarray(a) @ np.asarray(x) + np.asarray(x) @ np.asarray(b), 1.0, atol=1e-4)
      True
    """
    return route.call(SYLVESTER, A, B, C, method=method, tol=tol, asked=plan)
