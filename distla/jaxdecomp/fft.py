"""``jaxdecomp.fft``'s names: ``import distla.jaxdecomp as jaxdecomp`` and call
``jaxdecomp.fft.pfft3d`` as before.

The 3-D FFTs in jaxdecomp's transposed ``(Y, Z, X)`` order (natural order with
``transpose_axis_contiguous=False``) and their wavenumbers; the same functions
as ``distla.fft``'s. ``prfft3d``/``pirfft3d``, which jaxdecomp 0.3.1 declares
but does not implement, are the real-to-complex half of ``pfft3d``.
"""

from distla.fft import fftfreq3d as fftfreq3d
from distla.fft import pfft3d as pfft3d
from distla.fft import pifft3d as pifft3d
from distla.fft import pirfft3d as pirfft3d
from distla.fft import prfft3d as prfft3d
from distla.fft import rfftfreq3d as rfftfreq3d

__all__ = ["fftfreq3d", "pfft3d", "pifft3d", "pirfft3d", "prfft3d", "rfftfreq3d"]
