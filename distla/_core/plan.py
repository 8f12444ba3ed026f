"""One call, resolved once: the plan a public function hands down (private).

A public function of ``distla.linalg`` checks and promotes its operands
(``distla._core.checks``) and then calls `resolve` once, which reads the
mesh the operands share (``distla._core.mesh.operand_mesh``). The resulting
`Plan` goes down to the algorithm modules (``_lu``, ``_cholesky``,
``_triangular``, ``_qr``, ``_batched``): they take it as a static argument of
their compiled programs and never read the operands' mesh, or check the
operands, again. The shapes stay with the arrays; what a plan adds is what
the arrays do not say: the mesh (also for tracers that carry none of its
device ids), the process grid on it, the dtype the call computes in and the
caller's block size.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from jax.sharding import AbstractMesh

from .blas import single_thread_lapack_for_cpu_devices
from .mesh import Grid, grid_of, operand_mesh


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one public call resolved: hashable, so compiled programs take it as static.

    Attributes:
      mesh: the mesh every sharded operand lives on (more than one device).
      dtype: the dtype the call computes in (``_checks.result_dtype``).
      block_size: the caller's block size, ``None`` for the algorithm's choice.
    """

    mesh: AbstractMesh
    dtype: np.dtype
    block_size: int | None = None

    @property
    def grid(self) -> Grid:
        """The ``pr x pc`` process grid of a 1- or 2-axis mesh (``ValueError`` otherwise)."""
        return grid_of(self.mesh, what="distla.linalg")


def plan_here(dtype: Any, block_size: int | None = None) -> Plan:
    """The plan of a call made inside a body (``run_on_mesh``): the mesh in context.

    The operands of such a call live on that mesh by construction, so nothing is read
    off them again.
    """
    return Plan(jax.sharding.get_abstract_mesh(), np.dtype(dtype), block_size)


def mesh_of(*operands: Any, names: tuple[str, ...]) -> AbstractMesh | None:
    """The operands' mesh, or ``None`` when no operand is sharded (the jnp fall-back).

    On a mesh, the CPU BLAS is limited first (``distla._core.blas``), once per process.
    """
    mesh = operand_mesh(*operands, names=names)
    if mesh is not None:
        single_thread_lapack_for_cpu_devices()
    return mesh


def check_block_size(block_size: Any) -> None:
    """A caller's ``block_size``: ``None`` or a positive int (``ValueError`` otherwise)."""
    if block_size is not None and (not isinstance(block_size, int) or block_size < 1):
        raise ValueError(
            f"block_size must be a positive int (or None, the algorithm's "
            f"choice); got {block_size!r}"
        )


def resolve(
    *operands: Any, names: tuple[str, ...], dtype: Any, block_size: int | None = None
) -> Plan | None:
    """The `Plan` of a call on ``operands``, or ``None`` when none is sharded.

    A bad ``block_size`` raises here, whichever plan the call then takes.
    """
    check_block_size(block_size)
    mesh = mesh_of(*operands, names=names)
    if mesh is None:
        return None
    return Plan(mesh, np.dtype(dtype), block_size)


# ------------------------------------------------------------------ distributed or one device

PLANS = ("auto", "distributed", "one_device")


#: Default memory budget of the one-device plan: bytes of the operands plus the
#: results that one device may receive and hold. ``DISTLA_PLAN_BUDGET`` (bytes,
#: read at import) or ``set_plan_budget`` change it.
def _budget_from_environment(default: int) -> int:
    text = os.environ.get("DISTLA_PLAN_BUDGET")
    if text is None:
        return default
    try:
        nbytes = int(text)
    except ValueError:
        nbytes = -1
    if nbytes < 0:
        raise ValueError(
            f"the environment variable DISTLA_PLAN_BUDGET must be a non-negative int of "
            f"bytes (e.g. 536870912 for 512 MiB; 0 keeps every call distributed), got {text!r}"
        )
    return nbytes


DEFAULT_BUDGET = _budget_from_environment(512 * 2**20)

#: Largest ``n`` (of an ``n x n`` problem) at which ``"auto"`` moves a
#: family's call to one device, measured on the 2-core CPU test bed with 8
#: simulated devices, nothing else running (docs/benchmarks-log.md, "The LU,
#: Cholesky and expm crossovers"; ``benchmarks/plans_crossover.py``): the
#: largest size at which the one-device plan beat the distributed algorithm
#: both called eagerly (three dispatches: the transfer, LAPACK, the transfer
#: back) and under ``jax.jit`` (one program, whose temporaries XLA:CPU maps
#: afresh on every call: it loses where a whole ``n x n`` result goes back
#: after a short LAPACK call, ``lu_factor``/``lu`` and ``cholesky`` from 2048;
#: ``inv``'s longer call and ``det``/``slogdet``'s scalars still win). The
#: spectral family (eigh by tridiagonal reduction, svd and polar on QDWH) took
#: 2.6-3x one device at n = 2048, where the transfer and LAPACK take 1.0x. The
#: 8 devices share the cores that one device's call already uses; on devices
#: with their own compute the distributed plans win earlier, and
#: ``plan="distributed"`` or ``set_plan_budget`` select them.
CROSSOVER = {
    "eigh": 4096,
    "svd": 4096,
    "polar": 4096,
    "cholesky": 1024,
    "solve": 4096,
    "lu": 1024,  # lu_factor, lu
    "det": 4096,  # det, slogdet
    "inv": 4096,
    "expm": 4096,
    # gehrd on one device (one BLAS thread: blas.keeps_one_blas_thread) against the
    # blocked Householder reduction, whose n per-column syncs and 2x LAPACK's flops
    # per device the 8 devices share on 2 cores (docs/scipy-linalg-timings.md)
    "hessenberg": 4096,
    "lu_solve": 1024,  # and 4096 eagerly (EAGER_CROSSOVER)
    # no distributed algorithm (eig and eigvals; qr(mode="raw")): the alternative is
    # jnp's gather onto every device, so the budget alone decides
    "eig": 2**62,
    "qr_raw": 2**62,
    # distla.scipy.linalg's options and functions with no distributed algorithm:
    # qr(pivoting=True), svd(lapack_driver="gesvd"), schur's QR iteration (and
    # rsf2csf of a Schur form whose 2x2 blocks touch), solve_sylvester's triangular
    # solve and its method="eigen"
    "qr_pivoting": 2**62,
    "svd_gesvd": 2**62,
    "schur": 2**62,
    "sylvester": 2**62,
}

#: Crossovers that apply to eager calls only (concrete operands whose devices the
#: process holds: the plan's three dispatches). With one right-hand side,
#: ``solve_triangular``'s one-device plan took 0.64-0.80x the distributed time
#: eagerly at n = 256 to 2048 (1.13x at 4096), ``cho_solve``'s 0.35-0.54x and
#: ``lu_solve``'s 0.41-0.77x up to 4096; as a compiled program, whose 2·(p-1)
#: collective-permutes cost about what the solves do, they took 1.0-3.3x
#: (``lu_solve`` 0.90-0.92x up to 1024, its ``CROSSOVER``; docs/benchmarks-log.md,
#: "The LU, Cholesky and expm crossovers"). Above ``CROSSOVER`` a call under
#: ``jax.jit`` (and ``distla.cost``, which compiles) stays distributed.
EAGER_CROSSOVER = {
    "solve_triangular": 2048,
    "cho_solve": 4096,
    "lu_solve": 4096,
}

_budget: list[int] = [DEFAULT_BUDGET]
_notes: contextvars.ContextVar[list | None] = contextvars.ContextVar("distla_plans", default=None)


@dataclasses.dataclass(frozen=True)
class Chosen:
    """One plan a call chose: ``family`` (``"eigh"``, ...), ``plan``, and ``bytes``
    the one-device plan moves (operands to one device plus results back; 0 for
    ``"distributed"``, whose collectives ``distla.cost`` counts itself)."""

    family: str
    plan: str
    bytes: int


def set_plan_budget(nbytes: int) -> int:
    """Set the one-device plan's memory budget; returns the previous one.

    ``plan="auto"`` moves a call to one device only when the bytes of its
    operands and results are at most ``nbytes`` (``0`` keeps every call
    distributed). Read when a call is traced: a function the caller has
    already jitted keeps the plan it was traced with.

    Args:
      nbytes: the budget in bytes, a non-negative int.

    Returns:
      The budget in force before the call.

    Raises:
      ValueError: ``nbytes`` is not a non-negative int.

    Examples:
      >>> import distla
      >>> previous = distla.linalg.set_plan_budget(0)
      >>> distla.linalg.plan_budget()
      0
      >>> _ = distla.linalg.set_plan_budget(previous)
    """
    if not isinstance(nbytes, (int, np.integer)) or isinstance(nbytes, bool) or nbytes < 0:
        raise ValueError(f"plan budget must be a non-negative int of bytes, got {nbytes!r}")
    previous, _budget[0] = _budget[0], int(nbytes)
    return previous


def plan_budget() -> int:
    """The one-device plan's memory budget in bytes (see
    [`set_plan_budget`][distla.linalg.set_plan_budget]).

    Examples:
      >>> import distla
      >>> previous = distla.linalg.set_plan_budget(2**30)
      >>> distla.linalg.plan_budget()
      1073741824
      >>> _ = distla.linalg.set_plan_budget(previous)
    """
    return _budget[0]


@contextlib.contextmanager
def budget(nbytes: int) -> Iterator[None]:
    """``with budget(nbytes):`` the one-device budget inside the block only."""
    previous = set_plan_budget(nbytes)
    try:
        yield
    finally:
        _budget[0] = previous


def choose(family: str, plan: str, *, n: int, nbytes: int, what: str, eager: bool = False) -> str:
    """``"distributed"`` or ``"one_device"`` for a call of ``family`` on an ``n``-sized problem.

    ``plan="auto"`` picks one device when ``n <= CROSSOVER[family]`` (for an
    ``eager`` call, or ``EAGER_CROSSOVER[family]``) and the ``nbytes`` moved
    fit the budget; an explicit ``"one_device"`` is honoured whatever the
    budget. The choice is noted for ``distla.cost``.

    Raises:
      ValueError: ``plan`` is not one of ``PLANS``.
    """
    if plan not in PLANS:
        raise ValueError(f"{what}: plan must be one of {PLANS}, got {plan!r}")
    if plan == "auto":
        crossover = CROSSOVER.get(family, 0)
        if eager:
            crossover = max(crossover, EAGER_CROSSOVER.get(family, 0))
        fits = nbytes <= _budget[0] and n <= crossover
        plan = "one_device" if fits else "distributed"
    note(family, plan, nbytes if plan == "one_device" else 0)
    return plan


def note(family: str, plan: str, nbytes: int = 0) -> None:
    """Record a plan chosen while tracing, for ``distla.cost`` (no-op outside it)."""
    notes = _notes.get()
    if notes is not None:
        notes.append(Chosen(family, plan, nbytes))


@contextlib.contextmanager
def recording() -> Iterator[list[Chosen]]:
    """Collect the plans chosen while tracing inside the block (``distla.cost``)."""
    notes: list[Chosen] = []
    token = _notes.set(notes)
    try:
        yield notes
    finally:
        _notes.reset(token)
