"""Pencil- and slab-decomposed 3D FFT: ``distla.fft`` (issue 5)."""

from __future__ import annotations


def _todo(*args, **kwargs):
    raise NotImplementedError("distla.fft is not implemented yet")


fftn = ifftn = rfftn = irfftn = pfft3d = pifft3d = _todo
