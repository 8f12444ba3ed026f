"""Distributed QR: ``distla.linalg.qr`` (see docs/qr.md).

One matrix on a mesh is factored by one of two kernels:

- **TSQR** (``distla.kernels.tsqr``) for tall-skinny matrices,
  ``m >= TALL·p·n`` on ``p`` devices and ``mode`` ``"reduced"`` or ``"r"``:
  the rows are split over every device (``P(r, None)`` on a 1-axis mesh,
  ``P((r, c), None)`` on a 2-axis one), each factors its rows, and a flat
  reduction tree combines the ``n x n`` R factors.
- **Blocked Householder** (``distla.kernels.qr``, ScaLAPACK's PDGEQRF) for
  everything else, on the 2D block-cyclic layout of ``distla.kernels.cyclic``
  (the LU's), with ``Q`` formed in place from the reflectors.

Stacks sharded along their batch dimensions are factored on each device with
no collective (the layout rules of ``distla._core.batch_layout``). Derivatives follow
jax's ``qr_jvp_rule``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from distla.kernels._axes import zero_after
from distla.kernels.cyclic import from_block_cyclic_2d, relayout_fraction, to_block_cyclic_2d
from distla.kernels.qr import form_q, global_index, qr_block_cyclic, stage_bounds
from distla.kernels.tsqr import tsqr_local

from .._core import batch_layout as layouts
from .._core import route
from .._core.block_cyclic import blocking as lu_blocking
from .._core.checks import ShapeError
from .._core.matrix import HIGHEST, round_up
from .._core.mesh import (
    Grid,
    constrain,
    fitting_spec,
    replicated,
    run_on_mesh,
    shard_map,
)
from .._core.one_device import block_layout
from .._core.plan import Plan

# TSQR when every device holds at least this many times n rows: the gathered
# R factors (p·n² elements) are then at most 1/TALL of the matrix.
TALL = 2
# fori_loops the Householder panels are split over (kernels/qr.py): the
# trailing matrix shrinks stage by stage; compile cost is per stage, not per panel
# (about 1 CPU s each for the factorisation and again for Q), so four keep the
# first call short, for about 1/4 of the update's flops masked.
STAGES = 4
_MODES = ("reduced", "complete", "r", "raw", "full")


class QRResult(NamedTuple):
    """``(Q, R)`` with ``a == Q @ R``, as ``jnp.linalg.qr`` returns them."""

    Q: jax.Array
    R: jax.Array


# --------------------------------------------------------------------------- plans


def use_tsqr(m: int, n: int, p: int, mode: str) -> bool:
    """Whether an ``m x n`` QR on ``p`` devices goes to TSQR (tall-skinny, no complete Q)."""
    return mode != "complete" and n >= 1 and m >= TALL * p * n


def _tsqr_rows(mesh) -> str | tuple[str, ...]:
    names = tuple(mesh.axis_names)
    return names[0] if len(names) == 1 else names


def blocking(grid: Grid, m: int, n: int, block_size: int | None = None) -> tuple[int, int, int]:
    """``(nb, m_pad, n_pad)`` for the Householder kernel on ``grid``.

    The block size is the LU's choice for ``min(m, n)`` (``distla._core.block_cyclic.blocking``)
    unless ``block_size`` is given; ``m_pad`` is a multiple of ``nb·pr`` and
    ``n_pad`` of ``nb·pc``.
    """
    nb, _ = lu_blocking(grid, max(1, min(m, n)), block_size)
    return nb, round_up(m, nb * grid.pr), round_up(n, nb * grid.pc)


def _out_shapes(m: int, n: int, mode: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(q_shape, r_shape)`` of ``jnp.linalg.qr`` (``"r"``: ``r`` as in reduced)."""
    k = min(m, n)
    if mode == "complete":
        return (m, m), (m, n)
    return (m, k), (k, n)


# --------------------------------------------------------------------------- kernels


@functools.partial(jax.jit, static_argnames=("mode", "call"))
def _tsqr(a, *, mode, call: Plan):
    mesh, grid, dtype = call.mesh, call.grid, call.dtype
    m, n = a.shape
    rows = _tsqr_rows(mesh)
    p = mesh.size
    mloc = max(-(-m // p), n)
    want_q = mode != "r"
    (q_shape, r_shape) = _out_shapes(m, n, mode)

    def body(a):
        a = jnp.pad(a.astype(dtype), ((0, p * mloc - m), (0, 0)))
        a = constrain(a, P(rows, None))

        def kernel(a_blk):
            q, r = tsqr_local(a_blk, axis_name=rows, want_q=want_q)
            return r if q is None else (q, r)

        if not want_q:
            return shard_map(kernel, in_specs=P(rows, None), out_specs=P(), check_vma=False)(a)
        q, r = shard_map(
            kernel, in_specs=P(rows, None), out_specs=(P(rows, None), P()), check_vma=False
        )(a)
        return q[:m], r

    r_spec = fitting_spec(r_shape, mesh, grid.block_spec)
    out = r_spec if not want_q else (fitting_spec(q_shape, mesh, grid.block_spec), r_spec)
    return run_on_mesh(body, mesh, out, a)


def _positive_q(h, ts, grow, gcol, q_cols, *, row, col, nb, stages):
    """Inside the kernel: ``Q`` over the reflectors in ``h`` with ``R``'s diagonal made
    non-negative (its columns' signs), in the 2D block layout; ``R`` never formed."""
    # R's diagonal (its real part: Householder's is real) read from h before Q is
    # formed over it; summed along the mesh column once Q exists (XLA:CPU's devices
    # took a reduction beside form_q's loop of all-reduces in different orders)
    part = jnp.sum(jnp.where(grow[:, None] == gcol[None, :], jnp.real(h), 0), axis=0)
    q = form_q(
        h,
        ts,
        q_cols,
        row_axis=row,
        col_axis=col,
        nb=nb,
        stages=stages,
        precision=HIGHEST,
        ready=part,
    )
    part = part + zero_after(q, part.dtype)
    if row is not None:
        part = lax.psum(part, row)
    q = q * jnp.where(part < 0, -1, 1).astype(q.dtype)[None, :]
    return from_block_cyclic_2d(q, row_axis=row, col_axis=col, nb=nb)


@functools.partial(jax.jit, static_argnames=("mode", "call"))
def _householder(a, *, mode, call: Plan):
    mesh, grid, dtype = call.mesh, call.grid, call.dtype
    m, n = a.shape
    nb, m_pad, n_pad = blocking(grid, m, n, call.block_size)
    panels = -(-min(m, n) // nb)
    stages = stages_for(panels)
    want_q, positive = mode != "r", mode == "positive"
    q_shape, r_shape = _out_shapes(m, n, mode)
    q_pad = round_up(q_shape[1], nb * grid.pc)
    blocks = grid.block_spec
    row, col = grid.row, grid.col

    def body(a):
        a = constrain(jnp.pad(a.astype(dtype), ((0, m_pad - m), (0, n_pad - n))), blocks)

        def kernel(a_blk):
            x = to_block_cyclic_2d(a_blk, row_axis=row, col_axis=col, nb=nb)
            h, ts = qr_block_cyclic(
                x,
                row_axis=row,
                col_axis=col,
                nb=nb,
                panels=panels,
                stages=stages,
                precision=HIGHEST,
            )
            grow = global_index(h.shape[0], row, nb)
            gcol = global_index(h.shape[1], col, nb)
            # a mask made once h exists: inside a loop (eigh's repair) XLA hoists a
            # loop-invariant one to the program's start and holds it throughout
            gcol = gcol + zero_after(h, gcol.dtype)
            if positive:
                q_cols = q_pad // grid.pc
                return (
                    _positive_q(h, ts, grow, gcol, q_cols, row=row, col=col, nb=nb, stages=stages),
                )
            r = jnp.where(grow[:, None] <= gcol[None, :], h, jnp.zeros((), h.dtype))
            out = [from_block_cyclic_2d(r, row_axis=row, col_axis=col, nb=nb)]
            if want_q:
                # in place of h where Q has its shape, once R is read from it and moved
                q = form_q(
                    h,
                    ts,
                    q_pad // grid.pc,
                    row_axis=row,
                    col_axis=col,
                    nb=nb,
                    stages=stages,
                    precision=HIGHEST,
                    ready=out[0],
                )
                out.append(from_block_cyclic_2d(q, row_axis=row, col_axis=col, nb=nb))
            return tuple(out)

        outs = shard_map(
            kernel, in_specs=blocks, out_specs=(blocks,) * (1 + want_q - positive), check_vma=False
        )(a)
        if positive:
            return outs[0][:m, : q_shape[1]]
        r = outs[0][: r_shape[0], :n]
        if not want_q:
            return r
        return outs[1][:m, : q_shape[1]], r

    r_spec = fitting_spec(r_shape, mesh, blocks)
    out = r_spec if not want_q else (fitting_spec(q_shape, mesh, blocks), r_spec)
    return run_on_mesh(body, mesh, out[0] if positive else out, a)


def _factor(a, *, mode, call: Plan):
    """``(q, r)`` or ``r`` of one matrix on a mesh, by TSQR or Householder."""
    if use_tsqr(*a.shape, call.mesh.size, mode):
        return _tsqr(a, mode=mode, call=call)
    return _householder(a, mode=mode, call=call)


def stages_for(panels: int) -> int:
    """Stages of the Householder kernel: one per 4 panels, at most ``STAGES``."""
    return max(1, min(STAGES, panels // 4))


# --------------------------------------------------------------------------- derivatives


def _thin_tangent(q, r, da):
    """``(dq, dr)`` of ``a = q r`` along ``da`` for ``q`` ``m x n``, ``r`` ``n x n``
    (jax's ``qr_jvp_rule``, m >= n), in plain jnp operations."""
    n = r.shape[-1]
    hi = HIGHEST
    dx_rinv = lax.linalg.triangular_solve(r, da, left_side=False, lower=False)
    qt_dx_rinv = jnp.matmul(jnp.conj(q).T, dx_rinv, precision=hi)
    lower = jnp.tril(qt_dx_rinv, -1)
    do = lower - jnp.conj(lower).T  # skew-Hermitian
    eye = jnp.eye(n, dtype=do.dtype)
    do = do + eye * (qt_dx_rinv - jnp.real(qt_dx_rinv).astype(qt_dx_rinv.dtype))
    dq = jnp.matmul(q, do - qt_dx_rinv, precision=hi) + dx_rinv
    dr = jnp.matmul(qt_dx_rinv - do, r, precision=hi)
    return dq, dr


def _wide_tangent(q, r, a, da):
    """jax's wide case (m < n): with ``a = [a1 a2]``, ``a1`` square, ``a1 = q r1`` takes the
    square rule and ``r2 = qᴴ a2`` gives ``dr2 = dqᴴ a2 + qᴴ da2``."""
    m = q.shape[-1]
    dq, dr1 = _thin_tangent(q, r[:, :m], da[:, :m])
    dr2 = jnp.matmul(jnp.conj(dq).T, a[:, m:], precision=HIGHEST) + jnp.matmul(
        jnp.conj(q).T, da[:, m:], precision=HIGHEST
    )
    return dq, jnp.concatenate([dr1, dr2], axis=1)


def _complete_tangent(q, r, a, da):
    """jax's tall ``mode="complete"`` case: the thin rule for the first ``n`` columns of
    ``q``, and the last ``m - n`` from Roberts and Roberts (arXiv 2409.13374, eqs. 32-33):
    ``z = q_pn (q_nn - I)⁻¹``, ``dq_mp = dq_mn zᴴ - (q_mn + q_mp z)(dq_pn - z dq_nn)ᴴ``."""
    del a
    m, n = da.shape
    hi = HIGHEST
    q_mn, q_mp = q[:, :n], q[:, n:]
    dq_mn, dr_nn = _thin_tangent(q_mn, r[:n], da)
    q_nn, q_pn = q_mn[:n], q_mn[n:]
    eye = jnp.eye(n, dtype=q.dtype)
    z_h = jnp.linalg.solve(jnp.conj(q_nn - eye).T, jnp.conj(q_pn).T)  # zᴴ
    z = jnp.conj(z_h).T
    dq_mp = jnp.matmul(dq_mn, z_h, precision=hi) - jnp.matmul(
        q_mn + jnp.matmul(q_mp, z, precision=hi),
        jnp.conj(dq_mn[n:] - jnp.matmul(z, dq_mn[:n], precision=hi)).T,
        precision=hi,
    )
    dq = jnp.concatenate([dq_mn, dq_mp], axis=1)
    dr = jnp.concatenate([dr_nn, jnp.zeros((m - n, n), dr_nn.dtype)], axis=0)
    return dq, dr


@functools.partial(jax.jit, static_argnames=("call",))
def _tangents(q, r, a, da, *, call: Plan):
    """``(dq, dr)`` of ``a = q r`` along ``da`` (jax's ``qr_jvp_rule``; reduced ``q``).

    Only differentiation uses it; written with plain jnp operations (an ``n x n``
    (or ``m x m``) triangular solve and products) and left to XLA's partitioner.
    """
    mesh, grid = call.mesh, call.grid
    out = tuple(fitting_spec(x.shape, mesh, grid.block_spec) for x in (q, r))
    if q.shape[0] < r.shape[1]:
        return run_on_mesh(_wide_tangent, mesh, out, q, r, a, da)
    if q.shape[1] > r.shape[1]:  # a tall matrix's complete q (m x m) and r (m x n)
        return run_on_mesh(_complete_tangent, mesh, out, q, r, a, da)
    return run_on_mesh(lambda q, r, a, da: _thin_tangent(q, r, da), mesh, out, q, r, a, da)


def _qr_jvp(fn, plan: Plan, primals, tangents, *, mode):
    """jax's ``qr_jvp_rule``, the factorisation reused (``mode="r"``: of the reduced one)."""
    (a,), (da,) = primals, tangents
    q, r = qr_2d(a, mode="complete" if mode == "complete" else "reduced", call=plan)
    dq, dr = _tangents(q, r, a, da.astype(plan.dtype), call=plan)
    return (r, dr) if mode == "r" else ((q, r), (dq, dr))


def _qr_vmap(plan: Plan, axis_size, in_batched, a, *, mode):
    del axis_size, in_batched
    out = _qr_batched(a, mode=mode, call=plan)
    return out, (True if mode == "r" else (True, True))


def _qr_one(plan: Plan, a, *, mode):
    out = _factor(a, mode=mode, call=plan)
    return out if mode == "r" else tuple(out)


# One matrix on a mesh: batched under jax.vmap, differentiable as jnp's.
_QR_2D = route.Op(
    "distla.linalg.qr",
    one_device=jnp.linalg.qr,
    distributed=_qr_one,
    vmap=_qr_vmap,
    jvp=_qr_jvp,
    on_mesh=False,
)


def qr_2d(a, *, mode, call: Plan):
    """One matrix on a mesh: batched under ``jax.vmap``, differentiable as jnp's."""
    out = route.distributed(_QR_2D, call, a, mode=mode)
    return out if mode == "r" else QRResult(*out)


def positive_q(a, *, call: Plan):
    """``Q`` of the reduced QR of the tall or square ``a`` (one matrix on a mesh) whose
    ``R`` has a non-negative real diagonal (Cholesky QR's ``Q``), by the blocked
    Householder kernel; ``R`` itself is never formed (its diagonal's signs are read
    from the reflectors' matrix before ``Q`` is formed over it: one matrix fewer).
    Not differentiable, not batched (eigh's orthogonality repair)."""
    m, n = a.shape
    if m < n:
        raise ValueError(f"positive_q: a must not be wide; got {a.shape}")
    return _householder(a, mode="positive", call=call)


# --------------------------------------------------------------------------- stacks


def _qr_batched(a, *, mode, call: Plan):
    """``jnp.linalg.qr`` of every member of a stack sharded along its batch: no collective."""
    source = layouts.source_layout(a, call.mesh)
    return _batched_call(a, mode=mode, call=call, source=source)


@functools.partial(jax.jit, static_argnames=("mode", "call", "source"))
def _batched_call(a, *, mode, call: Plan, source):
    mesh, dtype = call.mesh, call.dtype
    batch = a.shape[:-2]
    nbd = len(batch)
    m, n = a.shape[-2:]
    layout, padded = layouts.kernel_layout(
        batch,
        None if source is None else source[:nbd],
        mesh,
        whole=layouts.whole_members(source, 2, mesh),
    )
    q_shape, r_shape = _out_shapes(m, n, mode)
    cores = [r_shape] if mode == "r" else [q_shape, r_shape]
    kernel_specs = tuple(layouts.layout_spec(layout + ((),) * 2) for _ in cores)
    out_specs = tuple(
        s if padded == batch else fitting_spec(batch + c, mesh, s)
        for s, c in zip(kernel_specs, cores)
    )

    def body(a):
        a = layouts.fill_batch(a.astype(dtype), batch, padded, "zeros")  # zero members: Q = I
        a = layouts.relayout(a, source, layout + ((), ()), mesh)

        def kernel(a_blk):
            out = jnp.linalg.qr(a_blk, mode="complete" if mode == "complete" else "reduced")
            return (out[1],) if mode == "r" else tuple(out)

        in_spec = layouts.layout_spec(layout + ((), ()))
        outs = shard_map(kernel, in_specs=in_spec, out_specs=kernel_specs)(a)
        results = []
        for y, spec in zip(outs, out_specs):
            if padded != batch:
                entries = tuple(spec) + (None,) * (y.ndim - len(spec))
                target = tuple(layouts.entry_axes(e) for e in entries)
                y = layouts.relayout(y, layout + ((), ()), target, mesh, final=False)
                y = y[tuple(slice(0, s) for s in batch)]
            results.append(y)
        return results[0] if mode == "r" else tuple(results)

    # returned as jnp returns it: in the stack's own batch layout (or replicated)
    arrived = layouts.arrived_layout(
        batch,
        None if source is None else source[:nbd],
        source is not None and not any(source),
        mesh,
    )
    if arrived is not None:
        out_specs = tuple(layouts.layout_spec(arrived + ((), ())) for _ in cores)
    out = out_specs[0] if mode == "r" else out_specs
    return run_on_mesh(body, mesh, out, a)


# --------------------------------------------------------------------------- public


def _promoted(what, a, **options):
    """The dtype ``jnp.linalg.qr`` computes in for ``a`` (under the current x64 setting)."""
    del what, options
    return _promoted_under(
        np.dtype(a.dtype), bool(jax.config.jax_enable_x64), jax.config.jax_numpy_dtype_promotion
    )


@functools.lru_cache(maxsize=64)
def _promoted_under(dtype, x64, promotion):
    # tracing jnp.linalg.qr costs about half a millisecond, more than the rest of an
    # eager one-device call: once per dtype and setting (x64, promotion: the cache key)
    del x64, promotion
    s = jax.eval_shape(lambda x: jnp.linalg.qr(x, mode="r"), jax.ShapeDtypeStruct((1, 1), dtype))
    return s.dtype


def _check(what, a, **options):
    del options
    if a.ndim < 2:
        raise ShapeError(f"{what}: a must have shape (..., m, n); got a of shape {a.shape}")


def _gathered(a, *, mode):
    """``jnp.linalg.qr`` (on an ``Explicit`` mesh of the matrix made whole first)."""
    return jnp.linalg.qr(replicated(a), mode=mode)


QR = route.Op(
    "distla.linalg.qr",
    check=_check,
    promote=_promoted,
    unsharded=_gathered,
    one_device=jnp.linalg.qr,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, *, mode: _qr_batched(a, mode=mode, call=plan),
    distributed=lambda plan, a, *, mode: route.distributed(_QR_2D, plan, a, mode=mode),
    result=lambda out, *, mode: out if mode == "r" else QRResult(*out),
    keep_replicated=True,
)


def _replicated(plan: Plan, *operands, results, **options):
    """The one-device plan's layouts where jnp's results are replicated."""
    del options
    return tuple(block_layout(x.shape, plan.mesh) for x in operands), (P(),) * len(results)


# mode="raw" (LAPACK's internal form) is jnp's: one sharded matrix goes to one device
# within the plan budget; above it jnp's partitioning gathers the matrix onto every device
QR_RAW = route.Op(
    "distla.linalg.qr",
    check=_check,
    promote=_promoted,
    unsharded=_gathered,
    one_device=jnp.linalg.qr,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, *, mode: _gathered(a, mode=mode),
    family="qr_raw",
    layouts=_replicated,
    distributed=lambda plan, a, *, mode: _gathered(a, mode=mode),
)


@route.public
def qr(
    a: jax.typing.ArrayLike, mode: str = "reduced", *, block_size: int | None = None
) -> QRResult | jax.Array:
    """QR decomposition ``a = Q R``, as ``jnp.linalg.qr``.

    One matrix sharded over a mesh is factored distributed: tall-skinny
    matrices (``m >= 2·p·n`` on ``p`` devices, modes ``"reduced"`` and
    ``"r"``) by TSQR over row blocks, the others by blocked Householder QR
    on the 2D block-cyclic layout (ScaLAPACK's PDGEQRF); no device holds the
    whole matrix. A stack ``[..., m, n]`` sharded along its batch dimensions
    is factored on each device with no communication. Unsharded inputs fall
    back to ``jnp.linalg.qr``. See docs/qr.md.

    Args:
      a: ``[m, n]`` matrix on a 1- or 2-axis mesh (any layout; row blocks
        ``P(r, None)`` are TSQR's natural one, 2D blocks ``P(r, c)`` the
        Householder kernel's), or a stack ``[..., m, n]``. Integer and bool
        inputs promote as in jnp.
      mode: ``"reduced"`` (``Q [m, k]``, ``R [k, n]``, ``k = min(m, n)``),
        ``"complete"`` (``Q [m, m]``, ``R [m, n]``) or ``"r"`` (``R [k, n]``
        only; ``Q`` is never formed). ``"full"`` is ``"reduced"`` as in jnp;
        ``"raw"`` (LAPACK's internal form) is ``jnp.linalg.qr``'s: one sharded
        matrix goes to one device within the plan budget
        (``distla.linalg.set_plan_budget``) and its results come back
        replicated, as jnp's; above it jnp's partitioning gathers the matrix
        onto every device.
      block_size: the Householder kernel's panel width ``nb`` (``None``: the
        LU's choice, near 128).

    Returns:
      ``QRResult(Q, R)``, or ``R`` for ``mode="r"``. One matrix: both in the
      2D block layout ``P(r, c)`` of the mesh (``P(r, None)`` on a 1-axis
      mesh), or the largest even layout that fits their shapes. A stack:
      sharded along the batch. ``R`` is exactly upper triangular. As in
      jnp, the signs of ``R``'s rows (and ``Q``'s columns) are not
      normalised: the Householder kernel's are LAPACK's, TSQR's may differ.

    Raises:
      ValueError: ``a`` has fewer than 2 dimensions, or ``mode`` is unknown.

    Derivatives: as ``jnp.linalg.qr``'s, tall, square and wide (``m < n``: the
    square block's rule, then ``dr2 = dqᴴ a2 + qᴴ da2``), with the factorisation
    reused; the tangent's products and ``min(m, n)``-square triangular solve are
    left to XLA's partitioner; ``mode="complete"`` of a tall matrix as jax forms it
    (an ``n x n`` solve for the last ``m - n`` columns of ``dq``).

    See also: ``jnp.linalg.qr``, ``jax.scipy.linalg.qr``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.eye(512, 256) + 0.5, mesh)
      >>> q, r = distla.linalg.qr(a)
      >>> q.shape, r.shape
      ((512, 256), (256, 256))
      >>> np.allclose(np.asarray(q) @ np.asarray(r), np.asarray(a), atol=1e-4)
      True
    """
    if mode not in _MODES:
        raise ValueError(
            f"{QR.name}: unsupported mode {mode!r}; expected 'reduced', 'complete' or 'r'"
        )
    mode = "reduced" if mode == "full" else mode
    return route.call(QR_RAW if mode == "raw" else QR, a, block_size=block_size, mode=mode)


# --------------------------------------------------------------------------- model


def model_bytes(
    m: int,
    n: int,
    grid: tuple[int, int],
    dtype: jax.typing.DTypeLike,
    *,
    mode: str = "reduced",
    block_size: int | None = None,
) -> float:
    """Bytes one device receives in an ``m x n`` QR on a ``pr x pc`` grid, per docs/qr.md.

    Counted as ``distla.cost`` counts (all-gather ``(g-1)/g`` of its result,
    all-reduce ``2(g-1)/g`` of its operand, all-to-all ``(g-1)/g``), for
    the kernel [`qr`][distla.linalg.qr] picks, with the input in the kernel's layout (row
    blocks for TSQR, 2D blocks for Householder) and the results in the 2D
    block layout (TSQR on a 2-axis mesh: one all-to-all of ``Q``). Public as
    ``distla.linalg.qr_model_bytes``.

    Args:
      m: rows of the matrix.
      n: columns of the matrix.
      grid: the mesh shape ``(pr, pc)``.
      dtype: the matrix dtype (its item size counts).
      mode: ``qr``'s mode (``"reduced"``, ``"complete"``, ``"r"``).
      block_size: the block size the call uses (``None``: distla's choice).

    Returns:
      Bytes received per device, comparable to
      ``distla.cost(...).total_collective_bytes``.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> distla.linalg.qr_model_bytes(8192, 4096, (2, 4), jnp.float32) > 0
      True
    """
    pr, pc = grid
    p = pr * pc
    item = jnp.dtype(dtype).itemsize
    if use_tsqr(m, n, p, mode):
        elements = (p - 1) * n * n  # the R factors, one all-gather
        if mode != "r" and pc > 1 and n % pc == 0:  # Q to P(r, c): an all-to-all over all p
            elements += -(-m // p) * n * (p - 1) / p
        return elements * item
    mesh = jax.sharding.AbstractMesh((pr, pc), ("r", "c"))
    nb, m_pad, n_pad = blocking(Grid(mesh, "r", "c"), m, n, block_size)
    panels = -(-min(m, n) // nb)
    stages = stages_for(panels)
    mloc, nloc = m_pad // pr, n_pad // pc
    q_cols = _out_shapes(m, n, mode)[0][1]
    qloc = round_up(q_cols, nb * pc) // pc

    def relayout(local, p_axis):
        return relayout_fraction(local // nb, p_axis)

    to_cyclic = mloc * nloc * (relayout(mloc, pr) + relayout(nloc, pc))
    back = mloc * nloc * (relayout(mloc, pr) + relayout(nloc, pc))
    if mode != "r":
        back += mloc * qloc * (relayout(mloc, pr) + relayout(qloc, pc))
    elements = to_cyclic + back
    for k0, k1 in stage_bounds(panels, stages):
        h = mloc - (k0 // pr) * nb
        cols = nloc - (k0 // pc) * nb
        per_panel = (pr - 1) * h * nb  # panel gather (owner column)
        per_panel += 2 * (pc - 1) / pc * (h * nb + nb * nb)  # V and T along the mesh row
        per_panel += 2 * (pr - 1) / pr * nb * cols  # Vᴴ A22 along the mesh column
        elements += (k1 - k0) * per_panel
        if mode != "r":
            qc = qloc - (k0 // pc) * nb
            per_q = 2 * (pc - 1) / pc * h * nb + 2 * (pr - 1) / pr * nb * qc
            elements += (k1 - k0) * per_q
    return elements * item
