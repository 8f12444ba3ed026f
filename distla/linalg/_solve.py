"""The LU family's public calls and the solves built on it (``distla.linalg``).

``lu_factor``, ``lu_solve``, ``lu``, ``solve``, ``det``, ``slogdet``,
``inv``, ``tensorinv``, ``tensorsolve`` and ``cho_solve``. Each checks and
promotes its operands once (``distla._core.checks``), resolves the call once
(``distla._core.plan.resolve``: the mesh, dtype and block size) and hands that
plan down: to the one-matrix calls with their batching and derivative rules
(``_lu_rules``, which run ``_lu``), to the batched calls (``_batched``), to
Cholesky (``_cholesky``) or to mixed-precision refinement (``_refine``). The
layers below never read the operands' mesh again.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import PartitionSpec as P

from .._core import route
from .._core.block_cyclic import solve_layouts
from .._core.checks import (
    ShapeError,
    as_array,
    empty_or_one_device,
    is_empty,
    onto_mesh,
    result_dtype,
    rhs_core,
    square,
)
from .._core.eager import one_program
from .._core.matmul import product
from .._core.matrix import like, natural, tril, triu
from .._core.mesh import (
    axes_taken_by_vmap,
    drop_trivial_sharding,
    fitting_spec,
    grid_of,
    is_explicit,
    operand_mesh,
    run_on_mesh,
    shard_spec,
)
from .._core.one_device import choose_plan, on_one_device, planned
from .._core.plan import resolve
from . import _batched, _cholesky, _refine
from ._cholesky import solve_pos
from ._lu_rules import (
    det_2d,
    inv_2d,
    lu_factor_2d,
    lu_solve_2d,
    plu_2d,
    slogdet_2d,
    solve_2d,
)


def checked_solve_operands(what: str, a, b):
    """``(a, b, dtype)``: a square ``a`` and a matching ``b`` (jax.scipy's rule), promoted."""
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    square(a, what)
    rhs_core(a, b, what)
    dtype = result_dtype(what, a, b)
    return a.astype(dtype), b.astype(dtype), dtype


def solved_on_one_device(family, plan, fn, *operands, call, what, options=(), like_b=False):
    """``fn(*operands)`` by the one-device plan if ``plan`` resolves to it, else ``None``."""
    if choose_plan(family, plan, fn, *operands, what=what, options=options) != "one_device":
        return None
    ins, outs = solve_layouts(call, *operands, results=None, like_b=like_b)
    return on_one_device(
        fn, *operands, mesh=call.mesh, in_specs=ins, out_specs=outs, options=options
    )


class SlogdetResult(NamedTuple):
    """``(sign, logabsdet)`` with ``det(a) == sign * exp(logabsdet)``."""

    sign: jax.Array
    logabsdet: jax.Array


def _square_operand(a, what: str, block_size: int | None):
    """``a`` checked square (or a stack of square matrices) and promoted, and its call's plan."""
    a = as_array(a, "a", what)
    square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    return a, resolve(a, names=("a",), dtype=dtype, block_size=block_size)


def _inv_one_device(a):
    """``jnp.linalg.inv``, also per example under ``jax.vmap`` over Explicit axes.

    There jnp's own ``inv`` gathers from an unbatched identity with batched
    pivots, which sharding-in-types cannot type; the vmap becomes one
    batched call instead (``_batched.with_vmap_rule``).
    """
    if not axes_taken_by_vmap():
        return jnp.linalg.inv(a)
    return _batched.with_vmap_rule("inv", jnp.linalg.inv)(a)


def _check_scipy_flags(what, **flags):
    """``check_finite``/``overwrite_*``: accepted and ignored, as in jax.scipy.linalg."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(
                f"{what}: {name} must be a bool (ignored, as in jax.scipy); got {value!r}"
            )


@one_program
def lu_factor(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> tuple[jax.Array, jax.Array]:
    """LU factorisation with partial pivoting, as ``jax.scipy.linalg.lu_factor``.

    Args:
      a: ``[m, n]`` matrix, sharded on a 1- or 2-axis mesh (any layout), or a
        stack ``[..., n, n]`` sharded along its batch dimensions. Integer and
        bool inputs promote to the default float, as in jax.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: the distributed LU's block size ``nb`` (panel width and
        block-cyclic block); ``None`` picks one near 128 that pads least.

      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as :func:`solve`'s (the one-device plan runs jnp's function).

    Returns:
      ``(lu, piv)``: ``lu`` (``[m, n]``) holds ``L`` (unit diagonal, not
      stored) below the diagonal and ``U`` on and above it, in the 2D block
      layout ``P(r, c)`` of ``a``'s mesh (the largest even layout that fits
      for uneven sizes); ``piv[i]`` (int32, ``min(m, n)`` of them) is the row
      interchanged with row ``i``, 0-based, as LAPACK and scipy number them.
      For a stack, both carry the batch dimensions and are sharded along them
      like ``a``. Empty inputs give jax's empty results.

    Pivoting is LAPACK's partial pivoting: at each step the entry of largest
    magnitude (for complex, largest ``|re| + |im|``) in the current column,
    so every ``|l_ij| <= 1`` and the pivots match scipy's wherever that entry
    is unambiguous. A singular ``a`` gives a zero on U's diagonal and no
    exception, as in LAPACK and jax (scipy warns; jax cannot).
    Differentiable for one square matrix (jax's LU derivative).

    Raises:
      ValueError: ``a`` has fewer than 2 dimensions. (A stack of rectangular
        matrices is factored by ``jax.scipy.linalg.lu_factor`` where it lies.)
      TypeError: dtypes jnp would not promote (or float16, which jax's LAPACK lacks).

    See also: ``jax.scipy.linalg.lu_factor``, ``distla.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_factor"
    _check_scipy_flags(what, overwrite_a=overwrite_a, check_finite=check_finite)
    a = as_array(a, "a", what)
    if a.ndim < 2:
        square(a, what)
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    call = resolve(a, names=("a",), dtype=dtype, block_size=block_size)
    if call is None or is_empty(a):
        return empty_or_one_device(jsl.lu_factor, a)
    if a.ndim > 2 and a.shape[-1] != a.shape[-2]:
        return jsl.lu_factor(a)  # jax's own: each member where it lies, no communication
    if a.ndim > 2:
        return _batched.lu_factor(a, call=call)
    one = planned("lu", plan, jsl.lu_factor, a, mesh=call.mesh, what=what)
    return one if one is not None else lu_factor_2d(a, call=call)


@one_program
def lu_solve(
    lu_and_piv: tuple[jax.typing.ArrayLike, jax.typing.ArrayLike],
    b: jax.typing.ArrayLike,
    trans: int = 0,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b`` from ``lu_factor(a)``, as ``jax.scipy.linalg.lu_solve``.

    Args:
      lu_and_piv: the tuple ``(lu, piv)`` from :func:`lu_factor`.
      b: ``[..., n]`` or ``[..., n, k]`` right-hand side(s), in any layout on
        the same mesh (an operand on one device is moved onto it). As in jax,
        ``b`` is a vector when it is 1-D (or, deprecated in jax, has one
        dimension fewer than ``lu`` and ends in ``n``); batch dimensions broadcast: a 2-D
        factorisation serves a
        ``[B, n, k]`` stack of right-hand sides (folded into ``n x B k``
        columns of one distributed solve) and a stacked one a single ``[n]``.
      trans: 0 solves ``a x = b``, 1 ``a^T x = b``, 2 ``a^H x = b``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      a: mixed precision (a distla extension): the matrix that was factored,
        in the system's precision, when ``(lu, piv)`` is its factorisation in
        the lower precision (float32 for float64, complex64 for complex128).
        The solve is then refined against ``a`` to ``a``'s precision, as the
        second half of LAPACK's dsgesv (GMRES-IR where classical refinement
        stalls; NaN where neither converges), so one low-precision factor
        serves many right-hand sides. ``a`` must have ``lu``'s shape and
        ``b`` its batch dimensions. With a factor of any other dtype ``a``
        is ignored; without ``a`` the semantics are jax's.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        factorisation and a 1- or 2-D ``b``, as :func:`solve`'s; ``"auto"``
        takes one device only when called eagerly (as a compiled program the
        plan's collectives cost more than the two triangular solves).

    Returns:
      ``x`` with the broadcast shape: ``[n, k]`` in the 2D block layout of
      the mesh (``[n]`` split over the mesh's devices), or the largest even
      layout that fits; stacks sharded along the batch.

    Raises:
      TypeError: ``lu_and_piv`` is not a ``(lu, piv)`` pair.
      ValueError: shapes that do not match, or ``trans`` not in (0, 1, 2).

    See also: ``jax.scipy.linalg.lu_solve``.
    """
    what = "distla.linalg.lu_solve"
    _check_scipy_flags(what, overwrite_b=overwrite_b, check_finite=check_finite)
    if not isinstance(lu_and_piv, (tuple, list)) or len(lu_and_piv) != 2:
        got = (
            f"a {type(lu_and_piv).__name__} of shape {np.shape(lu_and_piv)}"
            if hasattr(lu_and_piv, "shape")
            else repr(type(lu_and_piv).__name__)
        )
        raise TypeError(
            f"{what}: the first argument must be the pair (lu, piv) that lu_factor returns; "
            f"got {got}. Call lu_solve(lu_factor(a), b) or lu_solve((lu, piv), b)."
        )
    lu, piv = lu_and_piv
    lu = as_array(lu, "lu", what)
    piv = as_array(piv, "piv", what)
    b = as_array(b, "b", what)
    square(lu, what)
    if trans not in (0, 1, 2):
        raise ValueError(f"{what}: trans must be 0, 1 or 2; got {trans!r}")
    if not jnp.issubdtype(piv.dtype, jnp.integer):
        raise TypeError(f"{what}: piv must be an integer array (from lu_factor); got {piv.dtype}")
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        x = _refine.lu_solve_mixed(lu, piv, b, trans=trans, a=a)
        if x is not None:
            return x
    n = lu.shape[-1]
    # jax.scipy's rule: a vector when b is 1-D, or (deprecated in jax) when b has
    # one dimension fewer than lu and ends in n
    vector = b.ndim == 1 or (b.ndim == lu.ndim - 1 and b.shape[-1:] == (n,))
    bb_shape = (*b.shape, 1) if vector else b.shape
    if piv.shape[-1:] != (n,) or b.ndim < 1 or len(bb_shape) < 2 or bb_shape[-2] != n:
        raise ShapeError(
            f"{what}: lu {lu.shape}, piv {piv.shape} and b {b.shape} do not match: piv must be "
            f"(..., {n}) and b (..., {n}) (one dimension fewer than lu) or (..., {n}, k)"
        )
    try:
        batch = tuple(np.broadcast_shapes(lu.shape[:-2], piv.shape[:-1], bb_shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"{what}: batch dimensions of lu {lu.shape}, piv {piv.shape} and b {b.shape} do "
            "not broadcast"
        ) from None
    dtype = result_dtype(what, lu, b)
    lu, b = lu.astype(dtype), b.astype(dtype)
    piv = piv.astype(jnp.int32)
    call = resolve(lu, b, names=("lu", "b"), dtype=dtype)
    if call is None or is_empty(lu, b):
        return empty_or_one_device(
            lambda lu, piv, b: jsl.lu_solve((lu, piv), b, trans=trans), lu, piv, b
        )
    lu, piv, b = onto_mesh(lu, piv, b)
    if lu.ndim == 2 and piv.ndim == 1:
        if b.ndim <= 2:
            one = solved_on_one_device(
                "lu_solve",
                plan,
                _lu_solve_one,
                lu,
                piv,
                b,
                call=call,
                what=what,
                options=(("trans", trans),),
            )
            return one if one is not None else lu_solve_2d(lu, piv, b, trans=trans, call=call)
        cols = _fold_columns(b)  # [..., n, k] -> [n, (...) k]: one solve, many columns
        x = lu_solve_2d(lu, piv, cols, trans=trans, call=call)
        return _unfold_columns(x, b.shape, mesh=call.mesh)
    bb = b[..., None] if vector else b
    lu = _broadcast_batch(lu, batch, 2)
    piv = _broadcast_batch(piv, batch, 1)
    bb = _broadcast_batch(bb, batch, 2)
    x = _batched.lu_solve(lu, piv, bb, trans=trans, call=call)
    return x[..., 0] if vector else x


def _lu_solve_one(lu, piv, b, *, trans):
    """``jax.scipy.linalg.lu_solve`` with its operands apart (the one-device plan's)."""
    return jsl.lu_solve((lu, piv), b, trans=trans)


def _broadcast_batch(x, batch, core):
    shape = (*batch, *x.shape[x.ndim - core :])
    return x if x.shape == shape else jnp.broadcast_to(x, shape)


@jax.jit
def _fold_columns(b):
    mesh = operand_mesh(b, names=("b",))
    n, k = b.shape[-2:]

    def body(b):
        return jnp.moveaxis(b.reshape(-1, n, k), 1, 0).reshape(n, -1)

    if mesh is None:  # a one-device b beside a sharded factorisation
        return body(b)
    spec = shard_spec((n, b.size // n), mesh)
    return run_on_mesh(body, mesh, spec, b)


@functools.partial(jax.jit, static_argnames=("shape", "mesh"))
def _unfold_columns(x, shape, *, mesh):
    n, k = shape[-2:]
    spec = shard_spec(shape, mesh)

    def body(x):
        return jnp.moveaxis(x.reshape(n, -1, k), 0, 1).reshape(shape)

    return run_on_mesh(body, mesh, spec, x)


class LUResult(NamedTuple):
    """``(p, l, u)`` with ``a == p @ l @ u``."""

    p: jax.Array
    l: jax.Array  # noqa: E741
    u: jax.Array


@one_program
def lu(
    a: jax.typing.ArrayLike,
    permute_l: bool = False,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> LUResult | tuple[jax.Array, jax.Array]:
    """``a == p @ l @ u``, as ``jax.scipy.linalg.lu``.

    Args:
      a: ``[m, n]`` matrix sharded on a 1- or 2-axis mesh (any layout;
        rectangular as in jax: the LU of an identity-padded square matrix,
        whose leading steps are ``a``'s own).
      permute_l: return ``(p @ l, u)`` instead of ``(p, l, u)``, as jax.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: as in :func:`lu_factor`.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as
        :func:`lu_factor`'s (the one-device plan runs ``jax.scipy.linalg.lu``).

    Returns:
      ``(p [m, m], l [m, k], u [k, n])`` with ``k = min(m, n)``: the
      permutation matrix, unit lower trapezoidal ``l`` and upper trapezoidal
      ``u``, each in the 2D block layout of the mesh (or the largest even
      layout that fits); ``p`` in ``a``'s real dtype, as jax's. Pivots as in
      :func:`lu_factor`. Differentiable
      (``jax.grad``/``jax.jvp``, any order) for square ``a``, with jax's rule.

    Raises:
      ValueError: ``a`` is not a matrix.

    See also: ``jax.scipy.linalg.lu``.
    """
    what = "distla.linalg.lu"
    _check_scipy_flags(
        what, permute_l=permute_l, overwrite_a=overwrite_a, check_finite=check_finite
    )
    a = as_array(a, "a", what)
    if a.ndim != 2:
        raise ShapeError(f"{what}: a must be a matrix (m, n); got a of shape {a.shape}")
    dtype = result_dtype(what, a)
    a = a.astype(dtype)
    call = resolve(a, names=("a",), dtype=dtype, block_size=block_size)
    if call is None or is_empty(a):
        out = empty_or_one_device(lambda a: jsl.lu(a, permute_l=permute_l), a)
        return tuple(out) if permute_l else LUResult(*out)
    one = planned(
        "lu", plan, jsl.lu, a, mesh=call.mesh, what=what, options=(("permute_l", permute_l),)
    )
    if one is not None:
        return tuple(one) if permute_l else LUResult(*one)
    p, l, u = plu_2d(a, call=call)
    if permute_l:
        return natural(product(p, l, call.mesh)), u
    return LUResult(jnp.real(p), l, u)  # jax's p is real


def _solve_shapes(a: jax.Array, b: jax.Array, what: str) -> bool:
    """Check shapes as jnp.linalg.solve does; True when b is a single vector."""
    square(a, what)
    n = a.shape[-1]
    if b.ndim == 1:
        if b.shape[0] != n:
            raise ShapeError(f"{what}: b of shape {b.shape} does not match a of shape {a.shape}")
        return True
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(
            f"{what}: b must have shape (n,) or (..., n, k) with n = {n} (numpy 2 rules, as "
            f"jnp.linalg.solve); got a of shape {a.shape}, b of shape {b.shape}. For a stack "
            "of vectors use solve(a, b[..., None])[..., 0]."
        )
    try:
        jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ShapeError(
            f"{what}: batch dimensions of a {a.shape} and b {b.shape} do not broadcast"
        ) from None
    return False


_ASSUME_A = ("gen", "sym", "her", "pos")


@one_program
def solve(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike,
    lower: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    debug: bool = False,
    check_finite: bool = True,
    assume_a: str = "gen",
    *,
    block_size: int | None = None,
    factor_dtype: jax.typing.DTypeLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b``, as ``jnp.linalg.solve`` (and ``jax.scipy.linalg.solve``).

    A single matrix sharded over a mesh is solved by the distributed LU; a
    stack sharded along its batch dimensions is solved on each device, with
    no communication at all.

    Args:
      a: ``[n, n]`` matrix, or ``[..., n, n]`` stack. Integer and bool inputs
        promote to the default float, as in jnp.
      b: ``[n]`` vector or ``[..., n, k]`` matrices (one-device operands are
        moved onto ``a``'s mesh). As in the installed jax (numpy 2 rules), a
        ``[B, n]`` right-hand side for a ``[B, n, n]`` stack is not a stack of
        vectors: use ``solve(a, b[..., None])[..., 0]``; with
        ``assume_a="pos"`` it is, as in ``jax.scipy.linalg.solve``.
      assume_a: ``"gen"``, ``"sym"``, ``"her"`` or ``"pos"``, as in
        ``jax.scipy.linalg.solve``. ``"pos"`` on one sharded matrix runs the
        distributed Cholesky (:func:`cho_factor`); every other case, and
        stacks of matrices, runs the LU (right for any nonsingular ``a``).
        With ``"pos"`` only the triangle named by ``lower`` is read, as in
        jax (which reads all of ``a`` otherwise).
      lower: which triangle of ``a`` holds the matrix for ``assume_a`` other
        than ``"gen"``.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      debug: accepted and ignored, as in ``jax.scipy``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      block_size: the distributed LU's block size (see :func:`lu_factor`).
      factor_dtype: mixed precision (a distla extension): factor in this
        dtype (float32 for a float64 system, complex64 for complex128) and
        refine to the system's precision, as LAPACK's dsgesv; NaN where
        refinement does not converge (docs: lu.md). ``None``: no.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix: below the budget (:func:`set_plan_budget`) and a measured
        crossover size, ``"auto"`` moves ``a`` and ``b`` to one device, runs
        ``jax.scipy.linalg.solve`` (LAPACK) there and shards ``x`` back in
        the same layout; ``distla.cost`` reports the plan.

    Returns:
      ``x`` of shape ``[..., n]`` or ``[..., n, k]``; for one matrix in the 2D
      block layout of the mesh, for a stack in the layout ``a``'s batch
      arrived in (so ``a @ x - b`` works on Explicit meshes).
      A singular ``a`` gives inf/nan, as in LAPACK and jax (no exception).

    Raises:
      ValueError: shapes that do not match (the message names them), or an
        unknown ``assume_a``.

    See also: ``jnp.linalg.solve``, ``jax.scipy.linalg.solve``.
    """
    what = "distla.linalg.solve"
    _check_scipy_flags(
        what,
        lower=lower,
        overwrite_a=overwrite_a,
        overwrite_b=overwrite_b,
        check_finite=check_finite,
    )
    if assume_a not in _ASSUME_A:
        raise ValueError(
            f"{what}: assume_a must be one of {_ASSUME_A} (as jax.scipy.linalg.solve); got "
            f"{assume_a!r}"
        )
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    if assume_a == "pos" and a.ndim > 2 and a.ndim == b.ndim + 1 and b.shape[-1] == a.shape[-1]:
        # jax.scipy's Cholesky path (not jnp's numpy 2 rules) reads [..., n] as one
        # vector per member of an [..., n, n] stack
        return solve(
            a,
            b[..., None],
            assume_a=assume_a,
            lower=lower,
            block_size=block_size,
            factor_dtype=factor_dtype,
            plan=plan,
        )[..., 0]
    vector = _solve_shapes(a, b, what)
    dtype = result_dtype(what, a, b)
    a, b = a.astype(dtype), b.astype(dtype)
    if assume_a == "pos":  # jax.scipy reads only the `lower` triangle here (Cholesky)
        a = _symmetrize(drop_trivial_sharding(a), lower=lower)
    call = resolve(a, b, names=("a", "b"), dtype=dtype, block_size=block_size)
    if factor_dtype is not None and not is_empty(a, b):
        # factor_dtype equal to the system's dtype is the plain solve below
        if _refine.check_factor_dtype(dtype, factor_dtype, what) != dtype:
            a, b = onto_mesh(a, b)
            if a.ndim > 2 or b.ndim > 2 and not vector:  # one system per member
                batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[: -2 + vector]))
                a = _broadcast_batch(a, batch, 2)
                b = _broadcast_batch(b, batch, 1 if vector else 2)
            return _refine.solve_mixed(a, b, factor_dtype=factor_dtype)
    if call is None or is_empty(a, b):
        return empty_or_one_device(jnp.linalg.solve, a, b)
    a, b = onto_mesh(a, b)
    if a.ndim > 2 or b.ndim > 2 and not vector:
        return _batched.solve(a, b, call=call)
    options = (("assume_a", assume_a), ("lower", bool(lower)))
    # the distributed plans' layouts: on Explicit meshes Cholesky's x keeps b's; the
    # LU's is the largest even one
    one = solved_on_one_device(
        "solve",
        plan,
        jsl.solve,
        a,
        b,
        call=call,
        what=what,
        options=options,
        like_b=assume_a == "pos",
    )
    if one is not None:
        return one
    if assume_a == "pos":
        return solve_pos(a, b, lower=lower, call=call)
    return solve_2d(a, b, call=call)


def _symmetrize(a, *, lower):
    """The Hermitian matrix whose ``lower`` (or upper) triangle ``a`` holds."""
    tri = tril(a) if lower else triu(a)
    strict = tril(a, -1) if lower else triu(a, 1)
    return tri + like(jnp.conj(jnp.swapaxes(strict, -1, -2)), tri)


@one_program
def det(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Determinant, as ``jnp.linalg.det``.

    ``sign * exp(logabsdet)`` from the diagonal of U and the parity of the
    pivots, as jnp forms it (an overflow gives ``+-inf``; complex: inf in both
    parts); for one sharded matrix the product is a distributed reduction.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack; integer and bool inputs
        promote to the default float.
      overwrite_a: accepted and ignored, as in ``jax.scipy.linalg.det``.
      check_finite: accepted and ignored, as in ``jax.scipy.linalg.det``.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as :func:`solve`'s (the one-device plan runs jnp's function).

    Returns:
      Scalar (replicated), or ``[...]`` sharded along the batch like ``a``.
      ``det`` of a 0x0 matrix is 1. Derivatives of every order where ``a``
      is regular; at a singular ``a`` the gradient is the adjugate (jnp's
      cofactor construction: right for rank ``n - 1`` with the zero pivot
      last, zero for lower rank or an overflowing det), as jnp's.
    """
    _check_scipy_flags("distla.linalg.det", overwrite_a=overwrite_a, check_finite=check_finite)
    a, call = _square_operand(a, "distla.linalg.det", block_size)
    if call is None or is_empty(a):
        return empty_or_one_device(jnp.linalg.det, a)
    if a.ndim > 2:
        return _batched.det(a, call=call)
    one = planned("det", plan, jnp.linalg.det, a, mesh=call.mesh, what="distla.linalg.det")
    return one if one is not None else det_2d(a, call=call)


@one_program
def slogdet(
    a: jax.typing.ArrayLike,
    *,
    method: str | None = None,
    block_size: int | None = None,
    plan: str = "auto",
) -> SlogdetResult:
    """Sign and log-magnitude of the determinant, as ``jnp.linalg.slogdet``.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.
      method: ``None``/``"lu"`` or ``"qr"`` as in jnp; distla computes both
        with its LU (the values agree).

      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as :func:`solve`'s (the one-device plan runs jnp's function).

    Returns:
      ``SlogdetResult(sign, logabsdet)``; ``sign`` has ``a``'s dtype (a unit
      complex number for complex ``a``), ``logabsdet`` its real dtype. For a
      singular ``a``: sign 0 and logabsdet ``-inf``; a real matrix with an
      inf entry keeps a sign of +-1, as in jnp.

    Raises:
      ValueError: an unknown ``method``, or ``a`` not square.
    """
    what = "distla.linalg.slogdet"
    if method not in (None, "lu", "qr"):
        raise ValueError(
            f"{what}: unknown method {method!r}; supported are 'lu' (None) and 'qr', as jnp"
        )
    a, call = _square_operand(a, what, block_size)
    if method == "qr" and jnp.issubdtype(a.dtype, jnp.complexfloating):
        raise NotImplementedError(
            f"{what}: method='qr' is not implemented for complex inputs (nor in jnp)"
        )
    if call is None or is_empty(a):
        return SlogdetResult(*empty_or_one_device(jnp.linalg.slogdet, a))
    if a.ndim > 2:
        return SlogdetResult(*_batched.slogdet(a, call=call))
    one = planned(
        "det", plan, jnp.linalg.slogdet, a, mesh=call.mesh, what=what, options=(("method", method),)
    )
    return SlogdetResult(*(one if one is not None else slogdet_2d(a, call=call)))


@one_program
def inv(
    a: jax.typing.ArrayLike,
    overwrite_a: bool = False,
    check_finite: bool = True,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Inverse, as ``jnp.linalg.inv``: ``lu_solve`` against the identity.

    Args:
      a: ``[n, n]`` matrix or ``[..., n, n]`` stack.
      overwrite_a: accepted and ignored, as in ``jax.scipy.linalg.inv``.
      check_finite: accepted and ignored, as in ``jax.scipy.linalg.inv``.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        matrix, as :func:`solve`'s (the one-device plan runs jnp's function).

    Returns:
      ``a^{-1}`` in ``a``'s layout (2D blocks, or sharded along the batch).
      Singular ``a`` gives inf/nan.
    """
    _check_scipy_flags("distla.linalg.inv", overwrite_a=overwrite_a, check_finite=check_finite)
    a, call = _square_operand(a, "distla.linalg.inv", block_size)
    if call is None or is_empty(a):
        return empty_or_one_device(_inv_one_device, a)
    if a.ndim > 2:
        return _batched.inv(a, call=call)
    one = planned("inv", plan, jnp.linalg.inv, a, mesh=call.mesh, what="distla.linalg.inv")
    return one if one is not None else inv_2d(a, call=call)


@one_program
def tensorinv(a: jax.typing.ArrayLike, ind: int = 2) -> jax.Array:
    """Tensor inverse, as ``jnp.linalg.tensorinv``: :func:`inv` of ``a`` as a matrix.

    Args:
      a: array whose first ``ind`` axes have as many elements as the rest
        (``prod(a.shape[:ind]) == prod(a.shape[ind:])``).
      ind: number of leading axes that index the rows.

    Returns:
      ``a.shape[ind:] + a.shape[:ind]``, the distributed LU's inverse of the
      ``[N, N]`` matrix reshaped back. A 2-D ``a`` keeps the layouts of
      :func:`inv`; higher ranks are reshaped by XLA (which may move the
      operand between layouts, never into one device's memory by design).

    Raises:
      ValueError: ``ind`` is not positive or the two groups of axes differ in size.
    """
    what = "distla.linalg.tensorinv"
    a = as_array(a, "a", what)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"{what}: ind must be a positive integer; got {ind}")
    rows, cols = a.shape[:ind], a.shape[ind:]
    n = math.prod(rows)
    if n != math.prod(cols):
        raise ShapeError(
            f"{what}: the first {ind} axes of a {a.shape} hold {n} elements, the rest "
            f"{math.prod(cols)}; they must match (choose ind so that they do)"
        )
    if a.ndim == 2:
        return inv(a)
    mesh = getattr(jax.typeof(a).sharding, "mesh", None)
    if mesh is None or mesh.size <= 1 or not is_explicit(mesh):
        return inv(a.reshape(n, n)).reshape(cols + rows)
    # an Explicit reshape that merges or splits sharded dimensions may have no sharding
    # rule: XLA moves the blocks, the matrix's row axis onto the first row dimension,
    # its column axis onto the first column dimension, where they divide
    grid = grid_of(mesh, what=what)
    out = inv(_reshaped(a, (n, n), fitting_spec((n, n), mesh, grid.block_spec)))
    spec = fitting_spec(
        cols + rows,
        mesh,
        P(grid.row, *[None] * (len(cols) - 1), grid.col, *[None] * (len(rows) - 1)),
    )
    return _reshaped(out, cols + rows, spec)


@functools.partial(jax.jit, static_argnames=("shape", "spec"))
def _reshaped(x, shape, spec):
    """``x.reshape(shape)``, laid out ``spec`` on ``x``'s mesh."""
    return run_on_mesh(lambda y: y.reshape(shape), jax.typeof(x).sharding.mesh, spec, x)


@one_program
def tensorsolve(
    a: jax.typing.ArrayLike, b: jax.typing.ArrayLike, axes: tuple[int, ...] | None = None
) -> jax.Array:
    """Solves ``tensordot(a, x, x.ndim) = b`` for ``x``, as ``jnp.linalg.tensorsolve``.

    :func:`solve` (the distributed LU) on ``a`` reshaped to a square matrix.

    Args:
      a: array whose leading ``b.ndim`` axes are ``b``'s shape and whose
        remaining axes (``x``'s shape) hold as many elements as ``b``.
      b: right-hand side.
      axes: axes of ``a`` moved to the end first, as jnp's.

    Returns:
      ``x`` of shape ``a.shape[b.ndim:]`` (after moving ``axes``).

    Raises:
      ValueError: ``a``'s shape does not make a square system with ``b``.
    """
    what = "distla.linalg.tensorsolve"
    a = as_array(a, "a", what)
    b = as_array(b, "b", what)
    if axes is not None:
        axes = [operator.index(i) % a.ndim for i in axes]
        a = jnp.moveaxis(a, axes, range(a.ndim - len(axes), a.ndim))
    out_shape = a.shape[b.ndim :]
    n = math.prod(out_shape)
    if a.shape[: b.ndim] != b.shape or math.prod(b.shape) != n:
        raise ShapeError(
            f"{what}: a of shape {a.shape} does not make a square system for b of shape "
            f"{b.shape}: a's leading axes must be b's shape and its other axes must hold "
            f"{math.prod(b.shape)} elements"
        )
    matrix = a if a.ndim == 2 else a.reshape(n, n)
    x = solve(matrix, b.reshape(n))
    return x.reshape(out_shape)


@one_program
def cho_solve(
    c_and_lower: tuple[jax.typing.ArrayLike, bool],
    b: jax.typing.ArrayLike,
    overwrite_b: bool = False,
    check_finite: bool = True,
    *,
    a: jax.typing.ArrayLike | None = None,
    plan: str = "auto",
) -> jax.Array:
    """Solve ``a x = b`` from :func:`cho_factor`, as ``jax.scipy.linalg.cho_solve``.

    Two distributed triangular solves with the factor (``Lᴴ x = L⁻¹ b`` or
    ``U x = U⁻ᴴ b``).

    Args:
      c_and_lower: ``(c, lower)`` from :func:`cho_factor`.
      b: ``[n]`` or ``[n, k]`` right-hand side(s) on the same mesh, any
        layout (with ``c``'s batch dimensions in front for a stack).
      overwrite_b: accepted and ignored, as in jax.
      check_finite: accepted and ignored, as in jax.
      a: mixed precision (a distla extension): the Hermitian matrix that was
        factored, in the system's precision, when ``c`` is its factor in the
        lower precision (float32 for float64, complex64 for complex128). The
        solve is then refined against ``a`` to ``a``'s precision (as
        :func:`lu_solve` with ``a``; NaN where refinement does not converge).
        With a factor of any other dtype ``a`` is ignored; without ``a`` the
        semantics are jax's.
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"`` for one sharded
        factor, as :func:`solve`'s; ``"auto"`` takes one device only when
        called eagerly (as a compiled program the plan's collectives cost
        more than the two triangular solves).

    Returns:
      ``x`` with ``b``'s shape: ``[n, k]`` in the mesh's 2D block layout,
      ``[n]`` split over all devices (the largest even layout that fits).
      Differentiable in ``c`` and ``b`` to any order.

    Raises:
      ValueError: shapes that do not match.

    See also: ``jax.scipy.linalg.cho_solve``.
    """
    if a is not None:  # mixed precision: a lower-precision factor refined against a
        c, lower = c_and_lower
        _, b_checked, _ = checked_solve_operands("distla.linalg.cho_solve", c, b)
        x = _refine.cho_solve_mixed(c, lower, b_checked, a=a)  # the factor's own dtype
        if x is not None:
            return x
    del overwrite_b, check_finite
    c, lower = c_and_lower
    return route.call(_cholesky.CHO_SOLVE, c, b, plan=plan, lower=bool(lower))
