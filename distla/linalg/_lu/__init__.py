"""The LU family: ``lu_factor``, ``lu_solve``, ``lu``, ``solve``, ``det``, ``slogdet``, ``inv``.

Its rooms, from the public functions down (an arrow: imports):

- ``factor`` (``lu_factor``, ``lu_solve``, ``lu``), ``solve`` (``solve``,
  ``tensorsolve``), ``det`` (``det``, ``slogdet``) and ``inverse`` (``inv``,
  ``tensorinv``): each public function, with the declaration of what it does
  (``distla._core.route.Op``) and the route call that does it;
- ``rules``: the one-matrix computations with their derivative and vmap rules,
  declared once (a solve is ``lax.custom_linear_solve``; ``det``, ``slogdet``,
  ``inv`` and ``lu`` carry jnp's rules) -> ``programs``, ``stacks``;
- ``programs``: the distributed programs of one matrix on a mesh (the blocked LU
  on the 2D block-cyclic layout and its solves, ``kernels/lu.py``, ``kernels/trsm.py``);
- ``stacks``: stacks sharded along their batch, each device its own members.

Mixed precision (``factor_dtype=``, ``lu_solve(..., a=)``) hands the LU to
``distla.linalg._refine``; ``solve(..., assume_a="pos")`` runs the Cholesky
family's solve.
"""
