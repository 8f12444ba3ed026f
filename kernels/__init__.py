"""Per-device SPMD programs: the bodies distla runs inside ``jax.shard_map``.

A kernel sees its local blocks and the mesh axis names it may communicate
over, never a global array or a mesh. The global-view API in ``distla``
validates, pads and re-lays out the operands and wraps these in
``shard_map``. Installed as ``distla.kernels``.
"""
