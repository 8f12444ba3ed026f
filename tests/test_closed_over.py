"""A jitted function that closes over sharded arrays gets what an eager call gets.

``jax.jit(lambda t: distla.linalg.solve(a, b) * t)`` hands distla ``a`` and ``b``
as concrete arrays while jax traces: nothing may then run eagerly (the eager
one-device plan's ``jax.set_mesh`` and ``device_put``, the FFT's jit with
compiler options), and a program whose only operands are such constants must
still run on their mesh, not on one default device. On ``Explicit`` meshes jax
asks for the mesh in context in that case (for jnp's functions too), so those
run under ``jax.set_mesh``.
"""

import jax
import numpy as np
import pytest
from conftest import build_mesh
from test_no_empty_operands import CASES, _inputs

# the one-device plans (eager route and program), a tuple and a list of operands,
# the distributed kernels, and the FFT's compiler options
NAMES = [
    "solve",
    "lu_solve",
    "cholesky",
    "cho_solve",
    "solve_triangular",
    "eigh",
    "svd",
    "qr",
    "matmul",
    "multi_dot",
    "fftn",
    "pfft3d",
]


@pytest.fixture(scope="module", params=["auto", "explicit"])
def setting(request):
    mesh = build_mesh((2, 4), request.param)
    return mesh, _inputs(mesh, 16)


@pytest.mark.parametrize("name", NAMES)
def test_a_jitted_function_may_close_over_the_operands(setting, name):
    mesh, x = setting
    fn = CASES[name][0]
    want = jax.tree.leaves(fn(x))
    if mesh.axis_types[0] == jax.sharding.AxisType.Explicit:
        with jax.set_mesh(mesh):
            got = jax.tree.leaves(jax.jit(lambda t: jax.tree.map(lambda y: y * t, fn(x)))(1.0))
    else:  # no argument on the mesh at all
        got = jax.tree.leaves(jax.jit(lambda: fn(x))())
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        assert g.sharding.mesh.size == mesh.size, (name, g.sharding)
        if name not in ("eigh", "svd", "qr"):  # vectors up to sign: checked by their own tests
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)
        else:
            assert np.all(np.isfinite(np.asarray(g)))
