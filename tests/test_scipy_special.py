"""Structured matrices built where they lie (distla.scipy.linalg's constructors).

Values, dtypes and shapes equal jax.scipy.linalg's; the result is in the natural
layout of the defining vectors' mesh (or of ``device=``); and the compiled program's
only collectives replicate the defining vectors: no device computes or receives
more than its block. Meshes 2x4 Auto and Explicit, sizes the mesh divides and
sizes it does not.
"""

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from conftest import build_mesh
from helpers import has_layout
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.scipy.linalg as sla
from distla._core.mesh import shard_spec


@pytest.fixture(scope="module", params=["auto", "explicit"])
def mesh(request):
    return build_mesh((2, 4), request.param)


def _vec(x, mesh):
    """A vector split over every device where the mesh divides it, replicated otherwise."""
    x = jnp.asarray(x)
    spec = P(("x", "y")) if x.shape[0] % 8 == 0 else P()
    return jax.device_put(x, NamedSharding(mesh, spec))


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


rng = np.random.default_rng(0)
C16 = rng.standard_normal(16).astype(np.float32)
R13 = rng.standard_normal(13).astype(np.float32)
Z16 = (C16 + 1j * rng.standard_normal(16)).astype(np.complex64)
VECTOR_CASES = [
    pytest.param("toeplitz", (C16, R13), id="toeplitz"),
    pytest.param("toeplitz", (Z16,), id="toeplitz-hermitian"),
    pytest.param("hankel", (C16, R13), id="hankel"),
    pytest.param("hankel", (R13,), id="hankel-zeros"),
    pytest.param("circulant", (Z16,), id="circulant"),
    pytest.param("leslie", (C16, C16[:15]), id="leslie"),
    pytest.param("companion", (C16,), id="companion"),
    pytest.param("companion", (np.arange(1, 17, dtype=np.int32),), id="companion-int"),
    pytest.param("fiedler", (Z16,), id="fiedler-complex"),
    pytest.param("fiedler", (np.arange(16, dtype=np.int32),), id="fiedler-int"),
    pytest.param("fiedler_companion", (np.r_[1.0, C16].astype(np.float32),), id="fiedler_comp"),
]


@pytest.mark.parametrize("name, vectors", VECTOR_CASES)
def test_from_sharded_vectors(mesh, name, vectors):
    got = getattr(sla, name)(*(_vec(v, mesh) for v in vectors))
    want = getattr(jsl, name)(*vectors)
    _same(got, want)
    assert has_layout(got, mesh, shard_spec(got.shape, mesh))


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolution_matrix(mesh, mode):
    for n in (5, 24):
        want = jsl.convolution_matrix(C16, n, mode)
        _same(sla.convolution_matrix(_vec(C16, mesh), n, mode), want)


SIZE_CASES = [
    ("hilbert", (16,)),
    ("hilbert", (13,)),
    ("invhilbert", (8,)),
    ("pascal", (8,)),
    ("pascal", (16, "lower")),
    ("pascal", (8, "upper")),
    ("invpascal", (8,)),
    ("invpascal", (12, "lower")),
    ("invpascal", (16, "upper")),
    ("helmert", (9,)),
    ("helmert", (16, True)),
    ("hadamard", (16,)),
    ("hadamard", (8, jnp.float32)),
    ("dft", (16,)),
    ("dft", (12, "sqrtn")),
    ("dft", (8, "n")),
]


@pytest.mark.parametrize("name, args", SIZE_CASES, ids=[f"{n}{a}" for n, a in SIZE_CASES])
def test_from_sizes_with_device(mesh, name, args):
    dev = NamedSharding(mesh, P("x", "y"))
    got = getattr(sla, name)(*args, device=dev)
    want = getattr(jsl, name)(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    scale = max(1.0, float(np.max(np.abs(np.asarray(want)))))
    # jax forms the symmetric Pascal matrix as a float32 product (distla from C(i+j, i)),
    # and the DFT's phase i·j/n in floating point (distla: i·j mod n in integers)
    tol = 1e-5 if name in ("pascal", "dft") else 1e-6
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=tol * scale, rtol=tol)
    n, m = got.shape
    if n % 2 == 0 and m % 4 == 0:  # where the mesh divides the shape, the layout asked for
        assert has_layout(got, mesh, P("x", "y"))


def test_against_scipy_exact_values():
    """The closed forms against scipy's exact integers (float64)."""
    import scipy.linalg as sl

    with jax.enable_x64(True):
        np.testing.assert_allclose(sla.invhilbert(10), sl.invhilbert(10, exact=True), rtol=1e-9)
        np.testing.assert_allclose(sla.invpascal(12), sl.invpascal(12, exact=True), rtol=1e-9)
        np.testing.assert_allclose(sla.dft(1000, device=jax.devices()[0]), sl.dft(1000), atol=1e-12)
    np.testing.assert_allclose(sla.pascal(12), sl.pascal(12, exact=True), rtol=1e-5)
    np.testing.assert_array_equal(sla.hadamard(64), sl.hadamard(64))


def test_device_keyword_forms():
    d0 = jax.devices()[1]
    h = sla.hilbert(6, device=d0)
    assert h.devices() == {d0}
    _same(h, jsl.hilbert(6))
    _same(sla.pascal(5, device=jax.sharding.SingleDeviceSharding(d0)), jsl.pascal(5))
    _same(sla.helmert(5), jsl.helmert(5))  # device=None: jax's own
    with pytest.raises(TypeError, match="device"):
        sla.hilbert(4, device="cpu:0")
    with pytest.raises(ValueError, match="power of 2"):
        sla.hadamard(12)
    with pytest.raises(ValueError, match="kind"):
        sla.pascal(4, "diagonal")


def _collectives(c):
    return {k: b for k, b in c.collective_bytes.items() if b}


@pytest.mark.parametrize("n", [256, 8192])
def test_only_the_vectors_move(n):
    """Compile only: the programs' collectives are the defining vectors' all-gathers."""
    mesh = build_mesh((2, 4), "explicit")
    v = jax.ShapeDtypeStruct((n,), jnp.float32, sharding=NamedSharding(mesh, P(("x", "y"))))
    vector = n * 4
    share = n * n * 4 // 8
    for fn, args in [(sla.toeplitz, (v, v)), (sla.hankel, (v, v)), (sla.circulant, (v,))]:
        c = distla.cost(fn, *args)
        assert set(_collectives(c)) == {"all-gather"}, c
        assert c.largest() <= vector and c.total_collective_bytes <= len(args) * vector, c
        assert c.peak_memory_bytes <= 1.1 * share, c  # the block, nothing else
    dev = NamedSharding(mesh, P("x", "y"))
    for fn in (sla.hilbert, sla.invpascal, sla.dft, sla.hadamard):
        c = distla.cost(lambda: fn(n, device=dev))  # noqa: B023
        assert not _collectives(c), (fn, c)
        # the block (the DFT's as cos and sin too), and for invpascal two slices of L⁻¹
        # (GRAM_CHUNK rows of this device's columns) and their product
        slices = 4 * 256 * (n // 2) * 4 if fn is sla.invpascal else 0
        assert c.peak_memory_bytes <= 2.5 * share * (2 if fn is sla.dft else 1) + slices, c


def test_block_diag(mesh):
    a = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8, 24)).astype(np.float32)
    blocks = [
        jax.device_put(a, NamedSharding(mesh, P("x", "y"))),
        jnp.ones((3, 5)),
        jax.device_put(b, NamedSharding(mesh, P("x", "y"))),
        jnp.float32(7.0),
        np.arange(3.0),
    ]
    got = sla.block_diag(*blocks)
    want = jsl.block_diag(a, jnp.ones((3, 5)), b, jnp.float32(7.0), np.arange(3.0))
    _same(got, want)
    # (28, 40) fits (('x', 'y')...) no better than 2x4 blocks of rows: largest even layout
    assert has_layout(got, mesh, shard_spec(got.shape, mesh))
    c = distla.cost(lambda x, y: sla.block_diag(x, y), blocks[0], blocks[2])
    assert c.largest() < (a.nbytes + b.nbytes) / 2, c  # pieces of the blocks, never all


def test_differentiable_and_jittable(mesh):
    c, r = _vec(C16, mesh), _vec(np.r_[R13, 0.0, 1.0, 2.0].astype(np.float32), mesh)
    f = jax.jit(lambda c, r: jnp.sum(sla.toeplitz(c, r) ** 2))
    g = jax.jit(lambda c, r: jnp.sum(jsl.toeplitz(c, r) ** 2))
    np.testing.assert_allclose(f(c, r), g(np.asarray(c), np.asarray(r)), rtol=1e-5)
    with jax.set_mesh(mesh):
        got = jax.grad(f, argnums=(0, 1))(c, r)
    want = jax.grad(g, argnums=(0, 1))(np.asarray(c), np.asarray(r))
    for x, y in zip(got, want):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def test_stacks_and_unsharded_are_jaxs():
    cs = rng.standard_normal((3, 5)).astype(np.float32)
    _same(sla.toeplitz(cs), jsl.toeplitz(cs))
    _same(sla.circulant(C16), jsl.circulant(C16))
    _same(sla.block_diag(), jsl.block_diag())
    _same(sla.convolution_matrix(C16[:4], 3, "same"), jsl.convolution_matrix(C16[:4], 3, "same"))
    with pytest.raises(ValueError):
        sla.leslie(C16, C16)
    with pytest.raises(ValueError):
        sla.companion(C16[:1])
