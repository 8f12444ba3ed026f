"""Global view of the distributed LU and its solves (private).

Issue 3. Called by ``distla.linalg`` for a single matrix on a mesh.
"""

from __future__ import annotations


def _todo(*args, **kwargs):
    raise NotImplementedError("the distributed LU is not implemented yet")


lu_factor = lu_solve = lu = solve = det = slogdet = inv = _todo
