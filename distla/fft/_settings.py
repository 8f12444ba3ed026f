"""jaxdecomp's configuration object and constants, for ``distla.jaxdecomp`` (private).

Code written for jaxdecomp sets ``jaxdecomp.config.update(key, value)`` and
passes its enums (``jaxdecomp.PENCILS``, ``jaxdecomp.HALO_COMM_NCCL``, ...).
distla keeps the same names with the same values. The one setting that
changes results is ``transpose_axis_contiguous``: the pencil transposes and
``pfft3d``'s family read it through `contiguous` (a keyword argument
of the call first, then this object once set, then jaxdecomp's own
``config`` when jaxdecomp is imported, else ``True``). The communication
backends select cuDecomp's transports on GPUs; distla records them and runs
its own exchanges.
"""

from __future__ import annotations

import enum
import sys
from typing import Any


class Decomposition(enum.IntEnum):
    """jaxdecomp's decompositions of a mesh ``(pdims[0], pdims[1])``."""

    SLAB_XY = 0
    SLAB_YZ = 1
    PENCILS = 2
    NO_DECOMP = 3


class TransposeType(enum.IntEnum):
    TRANSPOSE_XY = 0
    TRANSPOSE_YZ = 1
    TRANSPOSE_ZY = 2
    TRANSPOSE_YX = 3
    TRANSPOSE_ZX = 4
    TRANSPOSE_XZ = 5


class HaloCommBackend(enum.IntEnum):
    HALO_COMM_MPI = 1
    HALO_COMM_MPI_BLOCKING = 2
    HALO_COMM_NCCL = 3
    HALO_COMM_NVSHMEM = 4
    HALO_COMM_NVSHMEM_BLOCKING = 5


class TransposeCommBackend(enum.IntEnum):
    TRANSPOSE_COMM_MPI_P2P = 1
    TRANSPOSE_COMM_MPI_P2P_PL = 2
    TRANSPOSE_COMM_MPI_A2A = 3
    TRANSPOSE_COMM_NCCL = 4
    TRANSPOSE_COMM_NCCL_PL = 5
    TRANSPOSE_COMM_NVSHMEM = 6
    TRANSPOSE_COMM_NVSHMEM_PL = 7


_UNSET = object()


class JAXDecompConfig:
    """jaxdecomp's settings: ``config.update(key, value)`` or attribute assignment.

    Attributes:
      halo_comm_backend: cuDecomp's halo transport (recorded; distla's
        exchange runs whatever it is).
      transpose_comm_backend: cuDecomp's transpose transport (recorded).
      transpose_axis_contiguous: ``True``: ``pfft3d`` returns ``(Y, Z, X)``
        and each pencil transpose reorders the axes; ``False``: the natural
        order. Until set here it reads jaxdecomp's own ``config`` when
        jaxdecomp is imported, else ``True``.
    """

    def __init__(self) -> None:
        self.halo_comm_backend = HaloCommBackend.HALO_COMM_NCCL
        self.transpose_comm_backend = TransposeCommBackend.TRANSPOSE_COMM_NCCL
        self._contiguous: Any = _UNSET

    @property
    def transpose_axis_contiguous(self) -> bool:
        if self._contiguous is not _UNSET:
            return bool(self._contiguous)
        theirs = getattr(sys.modules.get("jaxdecomp"), "config", None)
        return bool(getattr(theirs, "transpose_axis_contiguous", True))

    @transpose_axis_contiguous.setter
    def transpose_axis_contiguous(self, value: bool) -> None:
        self._contiguous = bool(value)

    def update(self, key: str, value: Any) -> None:
        """Set ``key`` (one of the attributes) to ``value``, as jaxdecomp's ``update``.

        Raises:
          ValueError: ``key`` is not a setting.
        """
        if key not in ("halo_comm_backend", "transpose_comm_backend", "transpose_axis_contiguous"):
            raise ValueError(f"key {key!r} is not a valid configuration key")
        setattr(self, key, value)

    def __repr__(self) -> str:
        return (
            f"JAXDecompConfig(halo_comm_backend={self.halo_comm_backend!r}, "
            f"transpose_comm_backend={self.transpose_comm_backend!r}, "
            f"transpose_axis_contiguous={self.transpose_axis_contiguous!r})"
        )


config = JAXDecompConfig()


def contiguous(flag: bool | None) -> bool:
    """``transpose_axis_contiguous`` for one call: ``flag`` when given, else `config`'s."""
    return config.transpose_axis_contiguous if flag is None else bool(flag)


def init() -> None:
    """jaxdecomp's ``init``: starts cuDecomp there; nothing to start here.

    Examples:
      >>> import distla.jaxdecomp as jaxdecomp
      >>> jaxdecomp.init()
    """


def finalize() -> None:
    """jaxdecomp's ``finalize``: stops cuDecomp there; nothing to stop here.

    Examples:
      >>> import distla.jaxdecomp as jaxdecomp
      >>> jaxdecomp.finalize()
    """
