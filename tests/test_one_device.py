"""A 1-device mesh takes jnp's path: no shard_map, no padding, jnp's values.

Every row of the public-function table (``test_no_empty_operands.CASES``) is
traced on a one-device mesh (2-axis Explicit, 1-axis Auto) and must hold no
``shard_map`` and no ``pad`` at any depth (polar: jax's own QDWH pads, so only
its shard_maps are counted); a few are run and compared with jnp.
"""

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from test_no_empty_operands import CASES, _inputs

import distla


def primitives(closed) -> set[str]:
    """Every primitive in ``closed``, at any depth."""
    found = set()

    def walk(jaxpr):
        if isinstance(jaxpr, jcore.ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        for eqn in jaxpr.eqns:
            found.add(eqn.primitive.name)
            for sub in jcore.jaxprs_in_params(eqn.params):
                walk(sub)

    walk(closed)
    return found


@pytest.fixture(
    scope="module",
    params=[((1, 1), "explicit"), ((1,), "auto")],
    ids=["1x1-explicit", "1-auto"],
)
def one(request):
    shape, kind = request.param
    mesh = build_mesh(shape, kind)
    return mesh, _inputs(mesh, 8)


@pytest.mark.parametrize("name", list(CASES))
def test_no_shard_map_no_padding(name, one):
    mesh, x = one
    with jax.set_mesh(mesh):
        prims = primitives(jax.make_jaxpr(CASES[name][0])(x))
    assert "shard_map" not in prims, (name, sorted(prims))
    assert "pad" not in prims or name in JNP_PADS, (name, sorted(prims))


JNP_PADS = {"polar"}  # jax.scipy.linalg.polar's QDWH pads on its own


def test_checker_sees_a_shard_map():
    mesh = build_mesh((2, 4), "explicit")
    x = _inputs(mesh, 8)
    with jax.set_mesh(mesh):
        assert "shard_map" in primitives(jax.make_jaxpr(CASES["solve"][0])(x))


def test_values_are_jnps(one):
    mesh, x = one
    a, b = (np.asarray(x[k]) for k in ("a", "b"))
    vol = np.asarray(x["cvol"])
    with jax.set_mesh(mesh):
        pairs = [
            (distla.matmul(x["a"], x["b"]), jnp.matmul(a, b)),
            (distla.linalg.solve(x["a"], x["b"]), jnp.linalg.solve(a, b)),
            (distla.linalg.cholesky(x["spd"]), jnp.linalg.cholesky(np.asarray(x["spd"]))),
            (distla.fft.fftn(x["cvol"]), jnp.fft.fftn(vol)),
        ]
    for ours, theirs in pairs:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-5)
