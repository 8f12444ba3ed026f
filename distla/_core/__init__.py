"""The floor of distla: what every algorithm stands on.

Mesh and plan resolution (`mesh`, `plan`), validation and promotion (`checks`),
the sharded-matrix primitives (`matrix`), the internal distributed product that
takes operands already checked and a mesh already read (`matmul`), the one-device
plan (`one_device`),
a channel of its own for every collective of a CPU program (`channels`, installed
on import), the BLAS thread limit (`blas`), compiled-program inspection (`hlo`) and the
layout of stacks of matrices (`batch_layout`, `stacked`). Modules here import
only each other, jax and `distla.kernels`; never an algorithm or public module.
"""

from . import channels as _channels

_channels.install()
