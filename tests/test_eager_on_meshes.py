"""Eager calls on a mesh of several devices go straight to the function.

``one_program`` compiles eager calls whose operands lie on one device; a concrete
operand spanning several devices runs the function as written. After the first such
call, later ones skip the look-ups that decide it (``_freeze`` of every argument), so
an eager ``distla.matmul`` on a mesh costs one ``jax.jit`` dispatch.
"""

import jax
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
from distla._core import eager


@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_a_call_on_a_mesh_skips_the_lookups(monkeypatch, kind):
    mesh = build_mesh((2, 4), kind)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((24, 24)).astype(np.float32)
    a = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    first = distla.matmul(a, a)  # learns that such operands span several devices
    frozen = []
    freeze = eager._freeze

    def counting(value, operands):
        frozen.append(value)
        return freeze(value, operands)

    monkeypatch.setattr(eager, "_freeze", counting)
    again = distla.matmul(a, a)
    assert not frozen, "the eager call on a mesh took one_program's look-ups"
    assert again.sharding == first.sharding
    np.testing.assert_allclose(np.asarray(again), np.asarray(first), rtol=0, atol=0)
    np.testing.assert_allclose(np.asarray(again), x @ x, rtol=1e-5, atol=1e-4)
    # a one-device operand still takes its compiled one-device program
    one = jax.device_put(x, jax.devices()[0])
    np.testing.assert_allclose(np.asarray(distla.matmul(one, one)), x @ x, rtol=1e-5, atol=1e-4)
