"""``Q`` of the distributed QR applied to a matrix: ``distla.scipy.linalg.qr_multiply`` (private).

The Householder QR of ``distla.linalg.qr`` (ScaLAPACK's PDGEQRF on the 2D
block-cyclic layout, ``distla.kernels.qr``) leaves ``Q`` as its panels' compact-WY
factors ``I − V T Vᴴ``; ``qr_multiply`` applies them to ``c`` (ScaLAPACK's PDORMQR,
``distla.kernels.qr.apply_q``) instead of forming ``Q``: per panel one broadcast of
``V`` along the mesh row and one psum of an ``nb``-row panel along the mesh column,
``2·m·P·K`` flops where forming ``Q`` and multiplying would take ``4·m²·K``.
``pivoting=True`` (LAPACK's ``geqp3``) has no distributed algorithm: the
one-device plan within the budget.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from distla.kernels.cyclic import from_block_cyclic, to_block_cyclic
from distla.kernels.qr import apply_q, global_index, qr_block_cyclic

from ..._core import route
from ..._core.checks import ShapeError
from ..._core.matrix import HIGHEST, pad_to, round_up
from ..._core.mesh import (
    constrain,
    fitting_spec,
    run_on_mesh,
    shard_map,
)
from ..._core.one_device import planned
from ..._core.plan import Plan
from ...linalg._qr import blocking, stages_for
from ._everywhere import everywhere


def _multiply_body(a, c, *, call: Plan, mode: str, conjugate: bool):
    """``(result, R)`` inside a body: the QR of ``a``, then ``Q`` applied to ``c``."""
    grid = call.grid
    blocks = grid.block_spec
    row, col = grid.row, grid.col
    m, n = a.shape
    k = min(m, n)
    nb, m_pad, n_pad = blocking(grid, m, n, call.block_size)
    panels = -(-k // nb)
    stages = stages_for(panels)
    # the operand Q (or Qᴴ) multiplies: Q·c for "left", Qᴴ·cᴴ = (c·Q)ᴴ for "right";
    # conj(Q)·c = conj(Q·conj(c)) and c·conj(Q) = (Qᴴ·cᵀ)ᵀ
    if mode == "left":
        y = jnp.conj(c) if conjugate else c
    else:
        y = c.T if conjugate else jnp.conj(c.T)
    cols = y.shape[1]
    p_pad = round_up(cols, nb * grid.pc)
    a = constrain(pad_to(a.astype(call.dtype), (m_pad, n_pad)), blocks)
    y = constrain(pad_to(y.astype(call.dtype), (m_pad, p_pad)), blocks)  # [c; 0] for "left"

    def kernel(a_blk, y_blk):
        def cyclic(x):
            x = to_block_cyclic(x, axis=0, axis_name=row, nb=nb)
            return to_block_cyclic(x, axis=1, axis_name=col, nb=nb)

        def contiguous(x):
            x = from_block_cyclic(x, axis=1, axis_name=col, nb=nb)
            return from_block_cyclic(x, axis=0, axis_name=row, nb=nb)

        h, ts = qr_block_cyclic(
            cyclic(a_blk),
            row_axis=row,
            col_axis=col,
            nb=nb,
            panels=panels,
            stages=stages,
            precision=HIGHEST,
        )
        z = apply_q(
            h,
            ts,
            cyclic(y_blk),
            row_axis=row,
            col_axis=col,
            nb=nb,
            stages=stages,
            adjoint=mode == "right",
            precision=HIGHEST,
        )
        grow = global_index(h.shape[0], row, nb)
        gcol = global_index(h.shape[1], col, nb)
        r = jnp.where(grow[:, None] <= gcol[None, :], h, jnp.zeros((), h.dtype))
        return contiguous(z), contiguous(r)

    z, r = shard_map(
        kernel, in_specs=(blocks, blocks), out_specs=(blocks, blocks), check_vma=False
    )(a, y)
    r = r[:k, :n]
    if mode == "left":
        z = z[:m, :cols]
        return (jnp.conj(z) if conjugate else z), r
    z = z[:k, :cols]  # (c·Q)[:, :k]ᴴ
    return (z.T if conjugate else jnp.conj(z.T)), r


@functools.partial(jax.jit, static_argnames=("call", "mode", "conjugate"))
def _qr_multiply_2d(a, c, *, call: Plan, mode: str, conjugate: bool):
    m, n = a.shape
    k = min(m, n)
    out = (m, c.shape[1]) if mode == "left" else (c.shape[0], k)
    specs = tuple(fitting_spec(s, call.mesh, call.grid.block_spec) for s in (out, (k, n)))
    body = functools.partial(_multiply_body, call=call, mode=mode, conjugate=conjugate)
    return run_on_mesh(body, call.mesh, specs, a, c)


def _pivoted(a, c, *, mode, conjugate):
    """jax's ``qr_multiply`` with column pivoting, the one-device plan's function."""
    return jsl.qr_multiply(a, c, mode=mode, pivoting=True, conjugate=conjugate)


def _jax_multiply(a, c, *, mode, pivoting, conjugate, asked):
    """jax's ``qr_multiply`` (unsharded operands, stacks, empty ones)."""
    del asked
    return jsl.qr_multiply(a, c, mode=mode, pivoting=pivoting, conjugate=conjugate)


def _jax_takes(a, c, **options):
    """jax's function takes the call: ``a`` not one matrix, ``c`` a stack, or empty."""
    del options
    return a.ndim != 2 or c.ndim > 2 or a.size == 0 or c.size == 0


def _multiplied(plan: Plan, a, c, *, mode, pivoting, conjugate, asked):
    """The distributed driver: the QR and ``Q`` applied in one program (the docstring of
    `qr_multiply`); with pivoting, jax's on the one-device plan."""
    what = QR_MULTIPLY.name
    a, c = a.astype(plan.dtype), c.astype(plan.dtype)
    m, n = a.shape
    k = min(m, n)
    onedim = c.ndim == 1
    c2 = (c[:, None] if mode == "left" else c[None, :]) if onedim else c
    want = k if mode == "left" else m
    got = c2.shape[0] if mode == "left" else c2.shape[1]
    if got != want:
        raise ShapeError(
            f"{what}: a has shape {a.shape}, so for mode={mode!r} c must have "
            f"{'rows' if mode == 'left' else 'columns'} {want}; got c of shape {c.shape}"
        )
    if pivoting:
        options = (("mode", mode), ("conjugate", conjugate))
        one = planned(
            "qr_pivoting", asked, _pivoted, a, c, mesh=plan.mesh, what=what, options=options
        )
        if one is not None:
            return tuple(one)
        return tuple(everywhere(_pivoted, a, c, mesh=plan.mesh, options=options))
    result, r = _qr_multiply_2d(a, c2, call=plan, mode=mode, conjugate=conjugate)
    if onedim:
        result = result.ravel()
    return result, r


def _as_tuple(out, **options):
    del options
    return tuple(out)


QR_MULTIPLY = route.Op(
    "distla.scipy.linalg.qr_multiply",
    operands=("a", "c"),
    one_device=_jax_multiply,
    distributed=_multiplied,
    cast=route.as_given,
    empty=_jax_takes,
    result=_as_tuple,
)


@route.public
def qr_multiply(
    a: jax.typing.ArrayLike,
    c: jax.typing.ArrayLike,
    mode: str = "right",
    pivoting: bool = False,
    conjugate: bool = False,
    overwrite_a: bool = False,
    overwrite_c: bool = False,
    *,
    block_size: int | None = None,
    plan: str = "auto",
) -> tuple[jax.Array, ...]:
    """The QR decomposition of ``a`` and ``Q`` applied to ``c``, as
    ``jax.scipy.linalg.qr_multiply``.

    One matrix ``a`` on a mesh: the distributed blocked Householder QR (ScaLAPACK's
    PDGEQRF on the 2D block-cyclic layout), and ``Q``'s compact-WY panels applied to
    ``c`` in the same program (PDORMQR): ``Q`` is never formed and no device holds a
    whole matrix. ``pivoting=True`` runs jax's ``geqp3`` route on the one-device
    plan within the budget (``distla.linalg.set_plan_budget``), above it jax's call
    (which gathers onto every device). Stacks and unsharded operands are jax's own.

    Args:
      a: ``[M, N]`` matrix sharded on a 1- or 2-axis mesh (any layout).
      c: ``"left"``: ``[K, P]`` (``K = min(M, N)``) or ``[K]``; ``"right"``:
        ``[P, M]`` or ``[M]``; on the same mesh or unsharded.
      mode: ``"right"`` (``c @ Q``, then its first ``K`` columns) or ``"left"``
        (``Q @ c``, ``Q`` square ``M x M`` with ``c`` padded by zero rows).
      pivoting: column pivoting (returns ``P`` last).
      conjugate: use ``conj(Q)``.
      overwrite_a: accepted and ignored, as in jax.
      overwrite_c: accepted and ignored, as in jax.
      block_size: the QR's panel width (``None``: distla's choice).
      plan: for ``pivoting=True``, as ``distla.scipy.linalg.qr``'s.

    Returns:
      ``(result, R)`` or ``(result, R, P)``: ``result`` ``[M, P]`` (``"left"``) or
      ``[P, K]`` (``"right"``), raveled for a 1-D ``c``; ``R`` ``[K, N]`` upper
      triangular; both in the mesh's 2D block layout (the largest even layout that
      fits); ``P`` replicated.

    Raises:
      ValueError: an unknown ``mode``, or shapes that do not fit, as jax.

    See also: ``jax.scipy.linalg.qr_multiply``, ``distla.scipy.linalg.qr``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(256) + 0.5, mesh)
      >>> c = distla.shard(jnp.ones((8, 256)), mesh)
      >>> cq, r = sla.qr_multiply(a, c)
      >>> cq.shape, r.shape
      ((8, 256), (256, 256))
    """
    del overwrite_a, overwrite_c
    if mode not in ("right", "left"):
        raise ValueError(f"{QR_MULTIPLY.name}: mode must be 'right' or 'left', got {mode!r}")
    options = dict(mode=mode, pivoting=pivoting, conjugate=bool(conjugate), asked=plan)
    return route.call(QR_MULTIPLY, a, c, block_size=block_size, **options)
