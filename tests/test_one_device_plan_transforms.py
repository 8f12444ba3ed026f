"""The one-device plan under jax's transformations, against jnp.

tests/conftest.py keeps ``plan="auto"`` distributed (``DISTLA_PLAN_BUDGET=0``) so that
the suites test the distributed algorithms; a user's small matrices take the one-device
plan instead (``distla._core.one_device``: its own program, ``custom_jvp`` rule and
``custom_vmap`` rule). Its derivative once gave LU's int pivots int zero tangents
(jax asks for ``float0``) and no test saw it. Here every family with a one-device plan
is called on a small sharded matrix with the library's default budget, under
``jax.jit(jax.grad)``, ``jax.vmap`` and ``jax.jacfwd``, and compared with jnp through
tests/dropin.py's runner; each call must have taken the one-device plan.

``cho_solve`` and ``solve_triangular`` take it eagerly only (``EAGER_CROSSOVER``), and
``cho_factor`` has none: not here.
"""

from __future__ import annotations

import pytest
from dropin import SPECS, Variant, check

from distla._core import plan as _plan

# family -> the public call that exercises it (tests/dropin.py's table)
FAMILIES = {
    "det": "linalg.slogdet",
    "inv": "linalg.inv",
    "solve": "linalg.solve",
    "lu": "linalg.lu_factor",  # int pivots: float0 zero tangents
    "lu_solve": "linalg.lu_solve",
    "cholesky": "linalg.cholesky",
    "eigh": "linalg.eigh",
    "eigh_pencil": "linalg.eigh_generalized",
    "svd": "linalg.svd",
    "polar": "linalg.polar",
    "expm": "linalg.expm",
    "eig": "linalg.eigvals",  # jnp differentiates neither eig nor eigvals here
    "schur": "scipy.linalg.solve_sylvester",  # schur's and sylvester's plans
}
# the family whose plan each call must note (distla._core.plan.choose)
NOTED = {"eigh_pencil": "eigh"}
# jnp has no derivative of these (tests/dropin.py: differentiable=False)
NOT_DIFFERENTIABLE = {"eig", "schur"}
# vmap of these maps the whole call (no member plan): solve_sylvester, the pencil
NO_MEMBER_PLAN = {"schur", "eigh_pencil"}


def _cases():
    """Every family's transforms; the derivatives on one mesh kind each, alternating by
    family (Explicit: jit(grad) inside ``jax.set_mesh``, jacfwd outside it), to keep the
    file cheap; vmap, cheap, on both."""
    for i, family in enumerate(FAMILIES):
        kinds = ("explicit", "auto") if i % 2 == 0 else ("auto", "explicit")
        if family in NOT_DIFFERENTIABLE:
            cases = [("jit", kinds[0])]
        else:
            cases = [("jit_grad", kinds[0]), ("jacfwd", kinds[1])]
        if family not in NO_MEMBER_PLAN:
            cases += [("vmap", "explicit"), ("vmap", "auto")]
        for transform, mesh_kind in cases:
            yield pytest.param(family, transform, mesh_kind, id=f"{family}-{transform}-{mesh_kind}")


@pytest.mark.parametrize("family, transform, mesh_kind", list(_cases()))
def test_one_device_plan_under_transform_is_jnps(family, transform, mesh_kind):
    """``transform`` of the call on a 6 x 6 matrix of a 2x4 mesh (a stack of two laid out
    as matrices for ``vmap``: each member then takes the plan) equals jnp's."""
    variant = Variant(
        n=6,
        place="spec" if transform == "vmap" else "shard",
        layout=2,  # a stack's members in row blocks (LAYOUTS[3][2]): not along its batch
        transform=transform,
        mesh=mesh_kind,
        plan="auto",
    )
    with _plan.recording() as notes:
        check(SPECS[FAMILIES[family]], variant)
    taken = {(c.family, c.plan) for c in notes}
    assert (NOTED.get(family, family), "one_device") in taken, (family, transform, taken)
