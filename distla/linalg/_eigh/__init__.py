"""The eigh family: ``eigh`` (jnp's and scipy's forms) and ``eigvalsh``.

Its rooms, from the public functions down (an arrow: imports):

- ``eigh``: the public functions, with the declarations of what they do
  (``distla._core.route.Op``) -> ``pencil``, ``rules``;
- ``pencil``: scipy's forms, a pencil reduced to a standard problem by the
  Cholesky family's factor and the triangular solves, and subsets -> ``divide``,
  ``rules``;
- ``rules``: the one-matrix eigh and eigvalsh with their derivative and vmap
  rules, declared once -> ``tridiagonal``;
- ``tridiagonal``: the driver of the whole spectrum (Householder reduction,
  bisection, inverse iteration; and svdvals' bidiagonal reduction);
- ``divide``: the driver of subsets of large matrices, divide and conquer on
  QDWH (``distla.linalg._qdwh``).
"""
