"""Per-device SPMD programs: the bodies distla runs inside ``jax.shard_map``.

A kernel sees its local blocks and the mesh axis names it may communicate
over, never a global array or a mesh. The global-view API in ``distla``
validates, pads and re-lays out the operands and wraps these in
``shard_map``. Installed as ``distla.kernels``.

Names used in every kernel (a module states only what it adds):

- ``pr x pc``: the mesh grid; ``row_axis``/``col_axis`` (or ``axis_name``)
  the mesh axis names a kernel communicates over (``None``: size 1).
- ``nb``: the block size; ``nbr``/``nbc``: block rows/columns of the whole
  (padded) matrix; ``mb``: block rows per device.
- ``mloc x nloc``: the local block's shape.
- suffix ``_blk``: a device's local block (``a_blk``); ``_cyc``: a local
  block in block-cyclic order (``kernels/cyclic.py``); ``_g``: global
  indices of local rows or columns (``row_g``); ``_p``: a panel's
  factorisation as LAPACK returns it (``lu_p``, ``piv_p``).
- ``k``: a global block column (a step); ``[k0, k1)``: a phase of steps run
  by one ``lax.fori_loop`` (``kernels/phases.py``).
"""
