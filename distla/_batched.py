"""Batched solves: each device factors and solves its own matrices (private).

Issue 4. Called by ``distla.linalg`` for stacks ``[..., n, n]`` on a mesh,
after the common validation; returns sharded results.
"""

from __future__ import annotations


def _todo(*args, **kwargs):
    raise NotImplementedError("batched solves are not implemented yet")


solve = lu_factor = lu_solve = det = slogdet = inv = _todo
