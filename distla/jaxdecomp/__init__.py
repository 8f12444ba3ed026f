"""jaxdecomp's public functions on distla: ``import distla.jaxdecomp as jaxdecomp``.

Code written for jaxdecomp 0.3 keeps its calls: ``jaxdecomp.fft.pfft3d``,
``pifft3d``, ``prfft3d``, ``pirfft3d``, ``fftfreq3d``, ``rfftfreq3d`` (also at
the top level, where jaxdecomp has them), ``halo_exchange``, the six pencil
transposes ``transposeXtoY`` ... ``transposeZtoX``, ``get_fft_output_sharding``,
``get_output_specs``, ``validate_spec_matches_mesh``, ``config`` and its
constants. Values and layouts are jaxdecomp's on ``Auto`` meshes; these also
run on ``Explicit`` meshes, 1-axis meshes, sizes the mesh does not divide,
and on one device (where they compute what jaxdecomp computes there), with
no cuDecomp and no GPU. ``backend=`` is accepted everywhere and changes
nothing; ``config.transpose_axis_contiguous`` changes the results as in
jaxdecomp (see ``docs/fft.md``).

Not here: ``get_pencil_info``, ``get_autotuned_config`` and ``make_config``,
which query and tune cuDecomp's own runtime.
"""

from distla.fft._halo import halo_exchange as halo_exchange
from distla.fft._pencils import get_fft_output_sharding as get_fft_output_sharding
from distla.fft._pencils import get_output_specs as get_output_specs
from distla.fft._pencils import validate_spec_matches_mesh as validate_spec_matches_mesh
from distla.fft._settings import Decomposition as Decomposition
from distla.fft._settings import HaloCommBackend as HaloCommBackend
from distla.fft._settings import JAXDecompConfig as JAXDecompConfig
from distla.fft._settings import TransposeCommBackend as TransposeCommBackend
from distla.fft._settings import TransposeType as TransposeType
from distla.fft._settings import config as config
from distla.fft._settings import finalize as finalize
from distla.fft._settings import init as init
from distla.fft._transposes import transposeXtoY as transposeXtoY
from distla.fft._transposes import transposeXtoZ as transposeXtoZ
from distla.fft._transposes import transposeYtoX as transposeYtoX
from distla.fft._transposes import transposeYtoZ as transposeYtoZ
from distla.fft._transposes import transposeZtoX as transposeZtoX
from distla.fft._transposes import transposeZtoY as transposeZtoY

from . import fft as fft
from .fft import fftfreq3d as fftfreq3d
from .fft import pfft3d as pfft3d
from .fft import pifft3d as pifft3d
from .fft import rfftfreq3d as rfftfreq3d

# jaxdecomp's constants, by the same names and values
NO_DECOMP = Decomposition.NO_DECOMP
SLAB_XY = Decomposition.SLAB_XY
SLAB_YZ = Decomposition.SLAB_YZ
PENCILS = Decomposition.PENCILS
TRANSPOSE_XY = TransposeType.TRANSPOSE_XY
TRANSPOSE_YX = TransposeType.TRANSPOSE_YX
TRANSPOSE_YZ = TransposeType.TRANSPOSE_YZ
TRANSPOSE_ZY = TransposeType.TRANSPOSE_ZY
HALO_COMM_MPI = HaloCommBackend.HALO_COMM_MPI
HALO_COMM_MPI_BLOCKING = HaloCommBackend.HALO_COMM_MPI_BLOCKING
HALO_COMM_NCCL = HaloCommBackend.HALO_COMM_NCCL
HALO_COMM_NVSHMEM = HaloCommBackend.HALO_COMM_NVSHMEM
HALO_COMM_NVSHMEM_BLOCKING = HaloCommBackend.HALO_COMM_NVSHMEM_BLOCKING
TRANSPOSE_COMM_MPI_A2A = TransposeCommBackend.TRANSPOSE_COMM_MPI_A2A
TRANSPOSE_COMM_MPI_P2P = TransposeCommBackend.TRANSPOSE_COMM_MPI_P2P
TRANSPOSE_COMM_MPI_P2P_PL = TransposeCommBackend.TRANSPOSE_COMM_MPI_P2P_PL
TRANSPOSE_COMM_NCCL = TransposeCommBackend.TRANSPOSE_COMM_NCCL
TRANSPOSE_COMM_NCCL_PL = TransposeCommBackend.TRANSPOSE_COMM_NCCL_PL
TRANSPOSE_COMM_NVSHMEM = TransposeCommBackend.TRANSPOSE_COMM_NVSHMEM
TRANSPOSE_COMM_NVSHMEM_PL = TransposeCommBackend.TRANSPOSE_COMM_NVSHMEM_PL

__all__ = [
    "config",
    "init",
    "finalize",
    "halo_exchange",
    "pfft3d",
    "pifft3d",
    "fftfreq3d",
    "rfftfreq3d",
    "transposeXtoY",
    "transposeYtoX",
    "transposeYtoZ",
    "transposeZtoY",
    "transposeXtoZ",
    "transposeZtoX",
    "get_fft_output_sharding",
    "get_output_specs",
    "validate_spec_matches_mesh",
    "TRANSPOSE_XY",
    "TRANSPOSE_YX",
    "TRANSPOSE_YZ",
    "TRANSPOSE_ZY",
    "SLAB_XY",
    "SLAB_YZ",
    "PENCILS",
    "NO_DECOMP",
    "HALO_COMM_MPI",
    "HALO_COMM_MPI_BLOCKING",
    "HALO_COMM_NCCL",
    "HALO_COMM_NVSHMEM",
    "HALO_COMM_NVSHMEM_BLOCKING",
    "TRANSPOSE_COMM_MPI_A2A",
    "TRANSPOSE_COMM_MPI_P2P",
    "TRANSPOSE_COMM_MPI_P2P_PL",
    "TRANSPOSE_COMM_NCCL",
    "TRANSPOSE_COMM_NCCL_PL",
    "TRANSPOSE_COMM_NVSHMEM",
    "TRANSPOSE_COMM_NVSHMEM_PL",
]
