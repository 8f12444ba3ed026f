"""The particle-mesh example of docs/particle-mesh.md, on a 2x4 mesh against one device.

The page's code (its first python block) evolves particles under gravity:
cloud-in-cell painting whose ghosts are folded home by the adjoint of
distla.jaxdecomp.halo_exchange, a Poisson solve with pfft3d and fftfreq3d,
forces read back through the exchange's ghosts, kick-drift-kick steps. On the
2x4 mesh (Explicit and Auto) it must give the particles of a one-device run
of the same code, and its gradient with respect to the initial displacements
must be jax's own autodiff of that one-device run.
"""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax.sharding import NamedSharding
from test_docs import python_blocks

PAGE = Path(__file__).resolve().parents[1] / "docs" / "particle-mesh.md"
N = 16


@pytest.fixture(scope="module")
def example():
    """The page's definitions, run as the page runs them."""
    namespace = {"__name__": "particle_mesh"}
    code = python_blocks(PAGE)[0]["code"]
    exec(compile(code, str(PAGE), "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def initial():
    rng = np.random.default_rng(0)
    disp0 = (0.4 * rng.uniform(-1, 1, (N, N, N, 3))).astype(np.float32)
    target = rng.standard_normal(disp0.shape).astype(np.float32)
    return disp0, np.zeros_like(disp0), target


def _run(example, mesh, disp0, vel0, target, grad):
    put = lambda a: jax.device_put(a, NamedSharding(mesh, example["BLOCKS"]))  # noqa: E731
    simulate = example["simulate"]
    with jax.set_mesh(mesh):
        disp, vel = simulate(put(disp0), put(vel0), mesh)
        acc = example["accelerations"](put(disp0), mesh)
        g = None
        if grad:
            g = jax.grad(lambda d: jnp.sum(simulate(d, put(vel0), mesh)[0] * put(target)))(
                put(disp0)
            )
    return disp, vel, acc, g


@pytest.fixture(scope="module")
def one_device(example, initial):
    mesh = build_mesh((1, 1), "explicit")
    return _run(example, mesh, *initial, grad=True)


@pytest.mark.parametrize("kind", ["explicit", "auto"])
def test_evolves_as_on_one_device(example, initial, one_device, kind):
    mesh = build_mesh((2, 4), kind)
    disp, vel, acc, grad = _run(example, mesh, *initial, grad=kind == "explicit")
    disp1, vel1, acc1, grad1 = one_device
    assert disp.sharding.is_equivalent_to(NamedSharding(mesh, example["BLOCKS"]), 4)
    moved = np.abs(np.asarray(disp) - initial[0]).max()
    assert moved > 1e-2, moved  # the particles fell
    assert np.abs(np.asarray(disp)).max() < example["HALO"]  # stayed within their ghosts
    np.testing.assert_allclose(np.asarray(disp), np.asarray(disp1), atol=1e-5)
    np.testing.assert_allclose(np.asarray(vel), np.asarray(vel1), atol=1e-5)
    np.testing.assert_allclose(np.asarray(acc), np.asarray(acc1), atol=1e-5)
    # no particle pushes itself: the accelerations of all particles sum to zero
    total = np.abs(np.asarray(acc, np.float64).sum(axis=(0, 1, 2))).max()
    assert total <= 1e-5 * np.abs(np.asarray(acc)).sum(), total
    if grad is not None:  # against jax's autodiff of the one-device run
        scale = np.abs(np.asarray(grad1)).max()
        np.testing.assert_allclose(np.asarray(grad), np.asarray(grad1), atol=1e-5 * scale)
        assert grad.sharding.is_equivalent_to(NamedSharding(mesh, example["BLOCKS"]), 4)


def test_painting_conserves_mass_and_matches_numpy(example, initial):
    """The fold puts every particle's unit mass on the 8 cells around it, wherever its
    cloud spills into a neighbour's block: numpy's periodic cloud in cell."""
    disp0 = initial[0]
    mesh = build_mesh((2, 4), "explicit")
    put = lambda a: jax.device_put(a, NamedSharding(mesh, example["BLOCKS"]))  # noqa: E731
    with jax.set_mesh(mesh):
        density = np.asarray(example["paint"](put(disp0), mesh))
    pos = np.stack(np.meshgrid(*[np.arange(N)] * 3, indexing="ij"), axis=-1) + disp0
    low = np.floor(pos).astype(int)
    frac = pos - low
    want = np.zeros((N, N, N))
    for corner in example["CORNERS"]:
        w = np.prod(np.where(corner == 1, frac, 1 - frac), axis=-1)
        idx = (low + corner) % N
        np.add.at(want, (idx[..., 0], idx[..., 1], idx[..., 2]), w)
    np.testing.assert_allclose(density, want, atol=1e-5)
    assert abs(density.sum() - N**3) < 1e-2
