"""``jax.vmap`` over a stack in ``distla.shard``'s layout, one function per family.

``distla.shard`` lays a ``(2, 8, 8)`` stack out as ``P('x', 'y', None)`` on a 2x4
mesh: under ``jax.vmap`` each member arrives split over ``'y'``, which jnp's
one-matrix functions refuse on an ``Explicit`` mesh ("must be unsharded on non-batch
dimensions"). distla's route runs an op with a stacked body on the whole stack
(``route._vmapped_members``) and makes each member whole where it falls back to jnp's
function (``_core.mesh.drop_trivial_sharding``), so the results equal jnp's on the
same data, laid out as jnp lays them out where it takes the stack: its batch where
the stack's is, each member whole (on an ``Auto`` mesh, as jnp's on the same stack).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as dsl
from distla import linalg as dl

N = 8


def _spd(rng, n):
    a = rng.standard_normal((2, n, n)).astype(np.float32)
    return a @ a.transpose(0, 2, 1) + n * np.eye(n, dtype=np.float32)


# family: (distla's function, jnp's, operands from a generator)
FAMILIES = {
    "lu": (dl.solve, jnp.linalg.solve, lambda r: (_spd(r, N), r.standard_normal((2, N, 3)))),
    "cholesky": (dl.cholesky, jnp.linalg.cholesky, lambda r: (_spd(r, N),)),
    "eigh": (dl.eigvalsh, jnp.linalg.eigvalsh, lambda r: (_spd(r, N),)),
    # jax's own expm fails under such a vmap (a scan): the route runs the stacked body
    "expm": (dl.expm, jsl.expm, lambda r: (r.standard_normal((2, N, N)) / N,)),
    "svd": (dl.svdvals, jnp.linalg.svdvals, lambda r: (r.standard_normal((2, N, N)),)),
    "special": (dsl.toeplitz, jsl.toeplitz, lambda r: (r.standard_normal((2, N)),)),
}

# On an Auto mesh the vmapped call takes distla's own route, whose layouts differ from jnp's
# (not this file's fix; the values are still compared):
AUTO_LAYOUTS = {
    "expm": "each member laid over the mesh, the batch whole: P(None, 'x', 'y')",
    "svd": "svdvals' values come back replicated (P()); jnp's keep the batch on 'x'",
    "special": "toeplitz lays each matrix over the mesh (its docstring): P(None, 'x', 'y')",
}


@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_vmap_over_a_stack_in_shards_layout(family, kind):
    mesh = build_mesh((2, 4), kind)
    ours, theirs, make = FAMILIES[family]
    ops = tuple(x.astype(np.float32) for x in make(np.random.default_rng(0)))
    placed = tuple(distla.shard(x, mesh) for x in ops)
    assert any(s is not None for x in placed for s in tuple(x.sharding.spec)[1:]), (
        "members must arrive split, or this test cannot fail"
    )
    got = jax.vmap(ours)(*placed)
    ref = jax.vmap(theirs)(*ops)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=2e-4, atol=2e-4)
    # laid out as jnp lays it out where it takes the stack: on an Explicit mesh the
    # stack's batch layout with whole members, on an Auto mesh the same stack
    if kind == "explicit":
        batch = tuple(x.sharding.spec[0] for x in placed)
        where = tuple(
            jax.device_put(x, NamedSharding(mesh, P(b))) for x, b in zip(ops, batch, strict=True)
        )
    elif family in AUTO_LAYOUTS:
        return  # the values are jnp's; the layout is distla's own (AUTO_LAYOUTS)
    else:
        where = placed
    if family == "expm" and kind == "explicit":
        # jax's own expm fails on the stack in P('x', None, None) (its scan): the layout
        # jnp gives the other families there
        same = NamedSharding(mesh, P(placed[0].sharding.spec[0]))
    else:
        same = jax.vmap(theirs)(*where).sharding
    assert got.sharding.is_equivalent_to(same, got.ndim), (got.sharding, same)


# derivatives of one member, vmapped over the stack (jax.vmap(jax.grad(f)), as jnp takes them)
DERIVATIVES = {
    "grad": lambda inv: jax.vmap(jax.grad(lambda a: jnp.sum(inv(a)))),
    "jit_grad": lambda inv: jax.jit(jax.vmap(jax.grad(lambda a: jnp.sum(inv(a))))),
    "jacfwd": lambda inv: jax.vmap(jax.jacfwd(inv)),
    "hessian": lambda inv: jax.vmap(jax.hessian(lambda a: inv(a)[0, 1])),
}


@pytest.mark.parametrize(
    "transform, kind",
    [(t, "explicit") for t in sorted(DERIVATIVES)] + [("grad", "auto")],
)
def test_inv_derivatives_of_members_under_vmap(transform, kind):
    """Found: ``jax.vmap(jax.grad(lambda a: distla.linalg.inv(a).sum()))`` of a stack in
    ``distla.shard``'s layout failed ("Linearization failed to produce known values";
    jacfwd: RecursionError) where jnp's works. Each member's inverse is the stack's
    (a ``custom_vmap``), whose own derivative computes primal and tangent in one call that
    reverse mode cannot split; it has inv's rule now, d(a^-1) = -a^-1 da a^-1."""
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 5, 5)) + 4 * np.eye(5)).astype(np.float32)
    f = DERIVATIVES[transform]
    ref = np.asarray(f(jnp.linalg.inv)(x))
    placed = distla.shard(x, mesh)
    with jax.set_mesh(mesh):
        got = np.asarray(f(dl.inv)(placed))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
