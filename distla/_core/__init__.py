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

# A jax whose private lowering registry moved (channels.py reads it) must not stop
# `import distla`: its collectives then keep jax's shared channel id, and
# tests/test_collective_order.py, which asserts channels.installed(), fails there.
try:
    from . import channels as _channels

    _channels.install()
except Exception:  # noqa: BLE001 (ImportError, AttributeError: any jax-internal change)
    pass
