"""The one-device plan's peak memory on its device, modelled per family (private).

The one-device plan (``distla._core.one_device``) runs jax's one-device function
of a family on the mesh's first device. What that device holds at the peak is

* the operands and the results (what the plan moves: ``moved_bytes``);
* the function's own temporaries, which XLA allocates and sees: the copy of the
  operand that LAPACK overwrites in place (``syevd``, ``getrf``, ``potrf``,
  ``geqrf``, ``gesdd`` take a copy of ``A``), an LU factor behind ``solve``,
  ``inv`` and ``det``, the Padé terms of ``expm``, the complex Schur form and
  the recurrence of ``sqrtm``;
* the LAPACK workspace each jaxlib kernel allocates inside its custom call,
  which XLA's memory analysis (``distla.cost``'s ``peak_memory_bytes``) does
  not see: jaxlib's CPU kernels (``jaxlib/cpu/lapack_kernels.cc``) allocate
  ``work``/``rwork``/``iwork`` arrays of the sizes below (and ``geev``'s copy
  of ``A`` and its two real eigenvector matrices) with ``AllocateScratchMemory``
  on each call; its GPU kernels allocate cuSOLVER's own buffer-size query's
  bytes from the device's scratch allocator, which this CPU model stands in for.

`footprint` gives the last two for one call. The LAPACK figures are each
routine's documented minimum ``LWORK`` (and ``LRWORK``/``LIWORK``): jaxlib asks
LAPACK's workspace query for its optimum, which adds ``O(n·nb)`` elements
(``nb`` LAPACK's block size, 32 to 64) to the routines whose optimum is
blocked (``geqrf``, ``gesvd``, ``gees``, ``gehrd``, ``geev``). The
temporaries are the multiples of the first operand's bytes that XLA's memory
analysis reported on CPU at n = 256 and 512, float32, float64 and complex64:
the least of jax's one-device function's own ``temp_size_in_bytes``
(``jax.jit(fn).lower(...).compile().memory_analysis()``, the eager route's
program) and what the plan's compiled program holds beyond the bytes moved
(``distla.cost``, where XLA reuses the gathered operand's buffer), less
``MARGIN``: so the modelled peak is at most what ``distla.cost`` reports for
the plan, and within a quarter of an operand of it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

#: Bytes of one LAPACK integer (jaxlib's 32-bit LAPACK interface).
_INT = 4


@dataclasses.dataclass(frozen=True)
class Footprint:
    """What the one-device function holds besides its operands and results.

    Attributes:
      lapack: bytes LAPACK allocates inside its custom call (XLA does not see them).
      temporaries: bytes of the function's own arrays, which XLA sees.
    """

    lapack: int = 0
    temporaries: int = 0


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of a family's one-device function, in shapes alone.

    Attributes:
      operands: ``(shape, dtype)`` of each operand.
      results: ``(shape, dtype)`` of each result leaf.
      options: its static keyword arguments.
    """

    operands: tuple[tuple[tuple[int, ...], np.dtype], ...]
    results: tuple[tuple[tuple[int, ...], np.dtype], ...]
    options: dict

    @property
    def dims(self) -> tuple[int, int]:
        """``(m, n)`` of the first operand (the matrix the LAPACK routine takes)."""
        shape = self.operands[0][0]
        return (shape[-2], shape[-1]) if len(shape) >= 2 else (shape[-1], 1)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.operands[0][1])

    @property
    def complex(self) -> bool:
        return self.dtype.kind == "c"

    @property
    def vectors(self) -> bool:
        """Whether a result is a matrix (eigenvectors, singular vectors): LAPACK's ``'V'``."""
        return any(len(shape) >= 2 for shape, _ in self.results)

    def words(self, elements: int, rwork: int = 0, iwork: int = 0) -> int:
        """Bytes of ``elements`` of the operand's dtype, ``rwork`` of its real
        dtype and ``iwork`` LAPACK integers."""
        real = np.dtype(self.dtype.char.lower()) if self.complex else self.dtype
        return elements * self.dtype.itemsize + rwork * real.itemsize + iwork * _INT

    def squares(self, multiple: float) -> int:
        """``multiple`` times the first operand's bytes."""
        shape, dtype = self.operands[0]
        return int(multiple * math.prod(shape) * np.dtype(dtype).itemsize)


# ------------------------------------------------------------------ LAPACK's workspaces


def _syevd(c: Call) -> int:
    """``?syevd``/``?heevd`` (jax's ``eigh`` on CPU). Vectors: ``LWORK >= 1 + 6n + 2n²``
    reals, ``LIWORK >= 3 + 5n``; complex ``LWORK >= 2n + n²``, ``LRWORK >= 1 + 5n + 2n²``.
    Values only: ``2n + 1`` (complex ``n + 1`` and ``LRWORK >= n``), ``LIWORK >= 1``."""
    n = c.dims[1]
    if c.complex:
        if c.vectors:
            return c.words(2 * n + n * n, 1 + 5 * n + 2 * n * n, 3 + 5 * n)
        return c.words(n + 1, n, 1)
    if c.vectors:
        return c.words(1 + 6 * n + 2 * n * n, 0, 3 + 5 * n)
    return c.words(2 * n + 1, 0, 1)


def _gesdd(c: Call) -> int:
    """``?gesdd`` (jax's ``svd``), ``mn = min(m, n)``, ``mx = max(m, n)``, ``IWORK`` of
    ``8·mn``. Real ``LWORK``: ``JOBZ='N'`` ``3mn + max(mx, 7mn)``, ``'S'``
    ``4mn² + 7mn``, ``'A'`` ``4mn² + 6mn + mx``. Complex ``LWORK``: ``'N'`` ``2mn + mx``,
    ``'S'`` ``mn² + 3mn``, ``'A'`` ``mn² + 2mn + mx``; ``LRWORK`` as jaxlib allocates it:
    ``7mn`` without vectors, else ``max(5mn² + 5mn, 2·mx·mn + 2mn² + mn)``."""
    m, n = c.dims
    mn, mx = min(m, n), max(m, n)
    full = c.options.get("full_matrices", True)
    if c.complex:
        if not c.vectors:
            return c.words(2 * mn + mx, 7 * mn, 8 * mn)
        work = mn * mn + 2 * mn + mx if full else mn * mn + 3 * mn
        rwork = max(5 * mn * mn + 5 * mn, 2 * mx * mn + 2 * mn * mn + mn)
        return c.words(work, rwork, 8 * mn)
    if not c.vectors:
        return c.words(3 * mn + max(mx, 7 * mn), 0, 8 * mn)
    work = 4 * mn * mn + 6 * mn + mx if full else 4 * mn * mn + 7 * mn
    return c.words(work, 0, 8 * mn)


def _gesvd(c: Call) -> int:
    """``?gesvd`` (``lapack_driver="gesvd"``): real ``LWORK >= max(3mn + mx, 5mn)``;
    complex ``LWORK >= 2mn + mx``, ``RWORK`` of ``5mn``."""
    m, n = c.dims
    mn, mx = min(m, n), max(m, n)
    if c.complex:
        return c.words(2 * mn + mx, 5 * mn)
    return c.words(max(3 * mn + mx, 5 * mn))


def _geev(c: Call) -> int:
    """``?geev`` (jax's ``eig``). jaxlib's real kernel copies ``A`` and computes both
    eigenvector matrices into real scratch before making them complex: ``3n²`` reals,
    and ``LWORK >= 4n`` with vectors (``3n`` without). The complex kernel copies ``A``
    (``n²``), ``LWORK >= 2n``, ``RWORK`` of ``2n``."""
    n = c.dims[1]
    if c.complex:
        return c.words(n * n + 2 * n, 2 * n)
    return c.words(3 * n * n + (4 * n if c.vectors else 3 * n))


def _geqrf(c: Call) -> int:
    """``?geqrf`` and ``?orgqr``/``?ungqr`` (QR, QDWH's QR steps): ``LWORK >= n``."""
    return c.words(c.dims[1])


def _geqp3(c: Call) -> int:
    """``?geqp3`` then ``?orgqr`` (``pivoting=True``): real ``LWORK >= 3n + 1``; complex
    ``LWORK >= n + 1`` and ``RWORK`` of ``2n``."""
    n = c.dims[1]
    if c.complex:
        return c.words(n + 1, 2 * n)
    return c.words(3 * n + 1)


def _gees(c: Call) -> int:
    """``?gees`` (``schur``; the complex Schur form of ``sqrtm`` and ``funm``): real
    ``LWORK >= 3n``; complex ``LWORK >= 2n`` and ``RWORK`` of ``n``. ``rsf2csf`` (two
    operands) calls no LAPACK routine."""
    n = c.dims[1]
    if len(c.operands) > 1:
        return 0
    if c.complex:
        return c.words(2 * n, n)
    return c.words(3 * n)


def _complex_gees(c: Call) -> int:
    """``?gees`` on ``A`` made complex (jax's ``sqrtm`` and ``funm``): ``LWORK >= 2n``
    complex elements and ``RWORK`` of ``n`` reals."""
    n = c.dims[1]
    real = np.dtype(c.dtype.char.lower()) if c.complex else c.dtype
    return (2 * n * 2 + n) * real.itemsize


def _gehrd(c: Call) -> int:
    """``?gehrd`` and ``?orghr`` (``hessenberg``): ``LWORK >= n``."""
    return c.words(c.dims[1])


def _none(c: Call) -> int:
    """``?getrf``, ``?potrf`` factor in place, ``?getrs``/``?trsm`` solve in place: no
    workspace (the pivots are a result)."""
    del c
    return 0


# ------------------------------------------------------------------ XLA's temporaries


#: What the temporaries' model leaves out of each measured multiple, so that it stays
#: below what XLA reports for the plan's program whatever its mesh and layouts.
MARGIN = 0.25


def _temporaries(multiple: float | Callable[[Call], float]) -> Callable[[Call], int]:
    def of(c: Call) -> int:
        measured = multiple(c) if callable(multiple) else multiple
        return c.squares(max(0.0, measured - MARGIN))

    return of


def _geev_temporaries(c: Call) -> float:
    """jax's ``eig``: the complex results made from ``geev``'s real ones (real ``A``)."""
    if c.complex:
        return 2.0 if c.vectors else 3.0
    return 3.0 if c.vectors else 5.0


#: family -> (its LAPACK workspace, its XLA temporaries), both in bytes. The
#: temporaries' multiples of the first operand (see the module's docstring):
#: eigh's copy of ``A`` (the generalized problem's two); gesdd's copy of ``A``
#: and, without vectors, the ``U``/``Vᵀ`` jax still makes; QDWH's iterates;
#: the LU factor behind solve, det and inv; expm's Padé terms; geev's complex
#: eigenvectors made from the real ones; sqrtm's complex Schur form and
#: recurrence.
MODELS: dict[str, tuple[Callable[[Call], int], Callable[[Call], int]]] = {
    "eigh": (_syevd, _temporaries(lambda c: 2.0 if len(c.operands) > 1 else 1.0)),
    "svd": (_gesdd, _temporaries(lambda c: 1.0 if c.vectors else 3.0)),
    "polar": (
        lambda c: _gesdd(c) if c.options.get("method") == "svd" else _geqrf(c),
        _temporaries(lambda c: 2.0 if c.options.get("method") == "svd" else 5.25),
    ),
    "cholesky": (_none, _temporaries(1.0)),
    "cho_solve": (_none, _temporaries(0.0)),
    "solve": (_none, _temporaries(1.0)),
    "lu": (_none, _temporaries(lambda c: 1.0 if len(c.results) == 2 else 0.0)),
    "lu_solve": (_none, _temporaries(0.0)),
    "det": (_none, _temporaries(1.0)),
    "inv": (_none, _temporaries(1.0)),
    "expm": (_none, _temporaries(5.0)),
    "solve_triangular": (_none, _temporaries(1.0)),
    "eig": (_geev, _temporaries(_geev_temporaries)),
    "qr_raw": (_geqrf, _temporaries(1.0)),
    "qr_pivoting": (_geqp3, _temporaries(1.0)),
    "svd_gesvd": (_gesvd, _temporaries(1.0)),
    "schur": (_gees, _temporaries(lambda c: 0.0 if len(c.operands) > 1 else 1.0)),
    "sylvester": (_none, _temporaries(0.0)),
    "hessenberg": (_gehrd, _temporaries(0.75)),
    "sqrtm": (_complex_gees, _temporaries(lambda c: 3.0 if c.complex else 6.0)),
    "sqrtm_schur": (_complex_gees, _temporaries(lambda c: 3.0 if c.complex else 6.0)),
    "funm": (_complex_gees, _temporaries(1.0)),
}


def footprint(family: str, call: Call) -> Footprint:
    """The LAPACK workspace and XLA temporaries of ``family``'s one-device function
    on ``call`` (zero for a family with no model)."""
    lapack, temporaries = MODELS.get(family, (_none, _temporaries(0.0)))
    return Footprint(lapack=int(lapack(call)), temporaries=int(temporaries(call)))


def call_of(operands: Any, results: Any, options: dict) -> Call:
    """A `Call` of structs (anything with ``shape`` and ``dtype``)."""

    def spec(xs):
        return tuple((tuple(x.shape), np.dtype(x.dtype)) for x in xs)

    return Call(spec(operands), spec(results), dict(options))
