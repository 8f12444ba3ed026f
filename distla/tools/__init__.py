"""distla's command-line tools: ``python -m distla demo | scaling | launch``.

Not part of the library: ``import distla`` never imports this package, and
nothing here is public API (no stability guarantees). The tools only call
distla's public functions, ``distla.cost`` and ``distla.init_distributed``.

Modules:
  cli       the one command-line parser; each tool adds its own arguments.
  demo      the operation table at one mesh and one size per operation.
  scaling   the scaling study's arguments and entry point.
  run       timing the cases of a study (interleaved rounds, one executable).
  report    the results document (json) and its markdown table.
  plot      the four-panel scaling plot.
  ops       the operation table, one module per family.
  launch    N local processes on jax.distributed.
  devices   simulated CPU devices (``jax_num_cpu_devices``).
  timing    compile once, warm up, time with ``block_until_ready``.
  ratios    LAPACK's scaled residual ratios (tests, demo, scaling, benchmarks).
  table     the one table formatter (aligned text or markdown).
"""
