"""Calls where jnp works and distla did not: each case found once, kept as a test.

Found by the sweep (tests/test_dropin_sweep.py), by numpy's, scipy's and jax's own
linalg and fft test files run against distla, and by users. Each is
compared with jnp on the same host data through tests/dropin.py's runner, or
asserted directly where the point is one value.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from conftest import build_mesh
from dropin import OURS, REF, SPECS, Variant, check, compare, fitting
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import distla
import distla.linalg as dl


def open_case(reason: str):
    """A case found and not fixed yet: it fails today, and the test fails once it passes
    (then drop the mark)."""
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


@pytest.fixture(scope="module")
def mesh():
    return build_mesh((2, 4), "explicit")


def _put(x, mesh, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


# ---------------------------------------------------------------- empty operands


@pytest.mark.parametrize(
    "where, shape",
    [
        ("numpy", (0, 3, 2)),
        ("numpy", (4, 0, 2)),
        ("numpy", (4, 3, 0)),
        ("numpy", (0, 0, 0)),
        ("sharded", (0, 3, 2)),
        ("sharded", (4, 0, 2)),
        ("sharded", (4, 3, 0)),
        ("sharded", (0, 0, 0)),
    ],
    ids=str,
)
def test_lstsq_of_empty_operands_with_numpy_residuals(mesh, shape, where):
    """numpy's and scipy's lstsq tests of empty operands (TracerBoolConversionError
    inside jax.eval_shape of jnp's lstsq, whose numpy_resid=True needs the rank's value)."""
    m, n, k = shape
    a = np.arange(m * n, dtype=np.float32).reshape(m, n) + 1
    b = np.ones((m, k), np.float32)
    ref = jnp.linalg.lstsq(a, b, numpy_resid=True)
    if where == "sharded":
        a, b = distla.shard(a, mesh), distla.shard(b, mesh)
    got = dl.lstsq(a, b, numpy_resid=True)
    for g, r in zip(got, ref):
        g, r = np.asarray(g), np.asarray(r)
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape)
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["explicit", "auto"])
@pytest.mark.parametrize("spec", [P("x"), P(None, "x"), P("x", "y")], ids=str)
def test_empty_stacks_read_back(kind, spec):
    """Found: np.asarray of cholesky of a (1000, 0, 0) stack split over 'x' raised
    "could not broadcast input array from shape (1000,0,0) into (500,0,0)"; numpy's
    det tests of (3, 2, 0, 0) stacks the same."""
    m = build_mesh((2, 4), kind)
    cases = [
        ((1000, 0, 0), lambda L, a: L.linalg.cholesky(a)),
        ((4, 2, 0, 0), lambda L, a: L.linalg.det(a)),
        ((4, 2, 0, 0), lambda L, a: L.linalg.slogdet(a)),
        ((4, 2, 0, 0), lambda L, a: L.linalg.inv(a)),
        ((4, 0, 0), lambda L, a: L.linalg.eigh(a)),
        ((4, 0, 0), lambda L, a: L.linalg.svd(a)),
        ((4, 0, 0), lambda L, a: L.linalg.qr(a)),
    ]
    for shape, call in cases:
        host = np.zeros(shape, np.float32)
        got = call(OURS, _put(host, m, fitting(spec, shape, m)))
        compare(got, call(REF, host), rtol_units=1, where=f"{shape} {spec}")


def test_outer_of_empty_vectors_on_an_explicit_mesh(mesh):
    """Found: jnp's outer of an empty sharded vector and a sharded one is "illegally
    sharded" on an Explicit mesh."""
    check(SPECS["linalg.outer"], Variant(n=0))
    check(SPECS["linalg.outer"], Variant(n=8))


# ---------------------------------------------------------------- stacks


@pytest.mark.parametrize(
    "name, option",
    [
        ("linalg.pinv", 0),
        ("linalg.pinv", 1),  # hermitian=True: DuplicateSpecError / illegally sharded add
        ("linalg.matrix_rank", 0),
        ("linalg.matrix_rank", 1),
        ("linalg.matrix_norm", 1),  # ord=2
        ("linalg.norm", 1),  # ord=2, axis=(-2, -1)
        ("linalg.norm", 2),  # "nuc"
        ("linalg.norm", 3),  # -2
        ("linalg.cond", 0),
    ],
)
def test_spectral_reductions_of_stacks_in_shards_layout(name, option):
    """Found: pinv, matrix_rank, matrix_norm(2), norm(2, -2, "nuc") and cond of a 3-D
    stack in distla.shard's own layout failed inside svd ("must be unsharded on non-batch
    dimensions")."""
    check(SPECS[name], Variant(n=8, batch=(4,), option=option))


def test_diagonal_on_an_explicit_mesh():
    """Found: jnp's diagonal of a matrix split in 2D blocks asks for ``out_sharding``."""
    check(SPECS["linalg.diagonal"], Variant(n=8))
    check(SPECS["linalg.diagonal"], Variant(n=8, option=1))


@pytest.mark.parametrize("transform", ["eager", "jit", "jacfwd", "grad"])
@pytest.mark.parametrize("name", ["linalg.diagonal", "linalg.vecdot", "linalg.outer"])
def test_jnps_forms_in_every_layout_on_an_explicit_mesh(name, transform):
    """Found: jnp's diagonal and vecdot (re-exported) under jacfwd of a matrix split over
    its columns asked for out_sharding ("Contracting dimensions are sharded"); they are
    jnp's values in every layout, sizes the mesh does and does not divide, each option."""
    sp = SPECS[name]
    for n in (8, 5) if transform in ("eager", "jacfwd") else (5,):
        for layout in range(6):
            for option in range(len(sp.options)):
                v = Variant(n=n, dtype="float64", x64=True, place="spec", layout=layout)
                check(sp, dataclasses.replace(v, transform=transform, option=option))


@pytest.mark.parametrize(
    "name",
    [
        "linalg.tensorsolve",
        "linalg.tensorinv",
    ],
)
def test_tensor_solves_of_4d_tensors_in_shards_layout(name):
    """Found: tensorsolve/tensorinv of a 4-D tensor in distla.shard's layout raised jax's
    ShardingTypeError "This reshape is not supported"."""
    check(SPECS[name], Variant(n=4))


# ---------------------------------------------------------------- bad input


def test_tensorsolve_refuses_axes_out_of_range(mesh):
    """Found: axes=(5,) on a 3-D ``a`` was wrapped modulo ndim (a different system)."""
    a = np.arange(36, dtype=np.float32).reshape(2, 3, 6)
    b = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.linalg.tensorsolve(a, b, axes=(5,))
    for x, y in ((a, b), (distla.shard(a, mesh), distla.shard(b, mesh))):
        with pytest.raises(ValueError, match="axis 5 is out of bounds"):
            dl.tensorsolve(x, y, axes=(5,))


@pytest.mark.parametrize("n", [3, 8])
def test_lstsq_residuals_in_the_layout_of_jnps(n):
    """Found: lstsq's residuals came back replicated where jnp's follow the columns of
    ``b`` (``P('x')`` for ``b`` of 2 columns in ``P(None, 'x')``)."""
    check(SPECS["linalg.lstsq"], Variant(n=n))


def test_lstsq_of_a_3d_a_refused_as_jnp_refuses_it(mesh):
    """Found: distla checked the rank before the shapes (TypeError where jnp's ValueError
    says the leading dimensions differ); the class and jnp's words, numpy or sharded."""
    a = np.ones((2, 4, 4), np.float32)
    b = np.ones(4, np.float32)
    message = "Leading dimensions of input arrays must match"
    with pytest.raises(ValueError, match=message):
        jnp.linalg.lstsq(a, b)
    for x, y in ((a, b), (distla.shard(a, mesh), distla.shard(b, mesh))):
        with pytest.raises(ValueError, match=message):
            dl.lstsq(x, y)


# ---------------------------------------------------------------- operands from elsewhere


@pytest.mark.parametrize("where", ["numpy", "one device"])
def test_generalized_eigh_with_b_not_sharded(mesh, where):
    """Found: eigh(a, b, plan="distributed") with ``a`` sharded and ``b`` a numpy or
    one-device array raised an AttributeError in the mesh code."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((2, 8, 8)).astype(np.float32)
    a_np, b_np = x + x.T, y @ y.T + 8 * np.eye(8, dtype=np.float32)
    b = b_np if where == "numpy" else jax.device_put(b_np, jax.devices()[0])
    w = dl.eigh(distla.shard(a_np, mesh), b, eigvals_only=True, plan="distributed")
    # scipy's: jax.scipy.linalg.eigh implements only b=None
    w_ref = scipy.linalg.eigh(a_np.astype(np.float64), b_np.astype(np.float64))[0]
    np.testing.assert_allclose(np.asarray(w), w_ref, rtol=1e-4, atol=1e-4 * np.abs(w_ref).max())


# ---------------------------------------------------------------- derivatives


@pytest.mark.parametrize(
    "shape, hermitian, dtype",
    [((8, 8), False, np.float32), ((8, 5), False, np.complex64), ((5, 8), False, np.float32)]
    + [((8, 8), True, np.float32)],
)
def test_pinv_gradient_at_a_rank_deficient_point_is_jaxs(mesh, shape, hermitian, dtype):
    """Found: the gradient of pinv at a rank-deficient matrix was NaN everywhere (jax
    differentiated distla's SVD, whose rule divides by differences of repeated singular
    values) where jax's is finite (jax's rule for pinv, from the pseudo-inverse alone): it
    is jax's, NaN exactly where jax's is, for tall, wide and Hermitian ``a``."""
    x = np.zeros(shape, dtype)
    x[:2, :2] = [[1.0, 2.0], [2.0, 4.0]]  # rank 1: six or more zero singular values
    w = (np.arange(np.prod(shape)).reshape(shape[::-1]) / np.prod(shape)).astype(dtype)

    def loss(pinv):
        return lambda a: jnp.sum(jnp.real(pinv(a, hermitian=hermitian) * w))

    ref = np.asarray(jax.grad(loss(jnp.linalg.pinv))(x))
    with jax.set_mesh(mesh):
        got = np.asarray(jax.grad(loss(dl.pinv))(distla.shard(x, mesh)))
    assert np.isfinite(ref).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-3, atol=1e-3 * np.abs(ref[fin]).max())


@pytest.mark.parametrize(
    "variant",
    [
        Variant(n=8, dtype="float64", x64=True, place="mixed_device", layout=4,
                transform="grad_outside", mesh="auto"),  # the sweep's draw
        Variant(n=5, place="mixed_device", transform="grad_outside", mesh="auto"),
        Variant(n=8, place="mixed_device", transform="jacfwd", mesh="auto"),
        Variant(n=8, place="mixed_device", transform="grad"),
    ],
    ids=str,
)  # fmt: skip
def test_expm_frechet_of_a_sharded_a_and_a_one_device_e(variant):
    """Found: expm_frechet of a sharded A under a derivative, with E on one device, raised
    "Received incompatible devices for jitted computation" (E, expm's tangent, stayed on
    its device while A's primal lives on the mesh); E joins A's mesh, as the route moves
    one-device operands."""
    check(SPECS["linalg.expm_frechet"], variant)


@pytest.mark.parametrize(
    "variant",
    [
        Variant(n=8, batch=(2,), dtype="float64", x64=True, place="mixed_device", layout=5),
        Variant(n=8, batch=(3,), place="mixed_device", layout=2),
        Variant(n=5, place="mixed_device", mesh="auto"),
    ],
    ids=str,
)
def test_vecdot_of_a_sharded_operand_and_a_one_device_one(variant):
    """Found (the sweep's draw): vecdot of an operand split over an Explicit mesh and one
    on one device raised "Received incompatible devices" (jnp's: "Mapped away dimension
    of inputs passed to vmap should be sharded the same"); the one-device operand joins
    the mesh, as the route moves one-device operands."""
    check(SPECS["linalg.vecdot"], variant)


@pytest.mark.parametrize(
    "name, variant",
    [
        ("linalg.vecdot", Variant(n=8, place="mixed_device", transform="jacfwd")),
        ("linalg.vecdot", Variant(n=8, batch=(3,), place="mixed_device", transform="grad")),
        ("linalg.vecdot", Variant(n=5, place="mixed_device", transform="vjp_outside")),
        ("linalg.vecdot", Variant(n=8, place="mixed_device", layout=2, transform="jacfwd",
                                  dtype="complex64")),
        ("linalg.outer", Variant(n=8, place="mixed_device", transform="jacfwd")),
        ("linalg.outer", Variant(n=5, place="mixed_device", transform="grad")),
        # the route's own operands: the same look through the derivative's tracer
        ("linalg.solve", Variant(n=8, place="mixed_device", transform="grad")),
        ("linalg.cho_solve", Variant(n=5, place="mixed_device", transform="jacfwd")),
        ("linalg.cho_solve", Variant(n=8, place="mixed", transform="jacfwd")),
        ("linalg.matmul", Variant(n=3, place="mixed_device", transform="vjp_outside")),
        ("linalg.lstsq", Variant(n=5, place="mixed_device", transform="jacfwd")),
    ],
    ids=str,
)  # fmt: skip
def test_a_derivatives_tracer_beside_a_one_device_operand(name, variant):
    """Found: vecdot (and outer, and the route's functions) of a derivative's tracer
    (jax.jvp, jacfwd, grad) of an operand split on an Explicit mesh beside an operand on
    one device raised "Received incompatible devices for jitted computation" (the
    one-device operand joined the mesh only beside a concrete sharded array; the tracer's
    primal names the mesh too); cho_solve's jacfwd beside a numpy ``b`` raised "Custom JVP
    rule must produce primal and tangent outputs with equal shapes and dtypes"."""
    check(SPECS[name], variant)


@pytest.mark.parametrize(
    "variant",
    [
        Variant(n=8, place="mixed_device", transform="jacfwd"),
        Variant(n=5, place="mixed", transform="grad"),
        Variant(n=8, place="mixed", transform="grad", mesh="auto", dtype="float64", x64=True),
        Variant(n=5, place="mixed_device", transform="jacfwd", mesh="auto", option=1),
        Variant(n=8, place="mixed_device", transform="grad", option=2, dtype="complex64"),
        Variant(n=8, place="mixed", transform="jacfwd", plan="distributed"),
    ],
    ids=str,
)
def test_lu_solve_derivative_with_a_b_off_the_mesh(variant):
    """Found: jax.jvp (jacfwd, grad) of lu_solve(lu_factor(a), b) with ``a`` sharded and
    ``b`` a numpy or one-device array raised "primal and tangent arguments to jax.jvp do
    not match ... primal dtype int32 ... tangent dtype int32": the one-device plan's rule
    made the pivots' zero tangent with ``zeros_like`` (an int32 array) where jax.jvp asks
    for ``float0``."""
    check(SPECS["linalg.lu_solve"], variant)


@pytest.mark.parametrize("mesh_kind", ["explicit", "auto"])
@pytest.mark.parametrize("where", ["numpy", "one device"])
def test_scipy_lu_solve_jvp_is_jaxs(where, mesh_kind):
    """The same through ``distla.scipy.linalg``: jax.jvp in the factor's operand of a
    sharded ``a`` beside ``b`` off the mesh equals jax.scipy.linalg's, in float64, with
    the library's default plan budget (a small system takes the one-device plan)."""
    m = build_mesh((2, 4), mesh_kind)
    rng = np.random.default_rng(5)
    a_np = rng.standard_normal((8, 8)) / 3 + 3 * np.eye(8)
    da, b_np = rng.standard_normal((8, 8)), rng.standard_normal((8, 2))

    def f(sla, b):
        return lambda a: sla.lu_solve(sla.lu_factor(a), b)

    previous = dl.set_plan_budget(512 * 2**20)
    try:
        with jax.enable_x64(True):
            b = b_np if where == "numpy" else jax.device_put(b_np, jax.devices()[0])
            got = jax.jvp(f(distla.scipy.linalg, b), (distla.shard(a_np, m),), (da,))
            want = jax.jvp(f(jax.scipy.linalg, b_np), (a_np,), (da,))
            compare(got, want, rtol_units=10, where=f"{where} {mesh_kind}")
    finally:
        dl.set_plan_budget(previous)


@pytest.mark.parametrize(
    "name, variant",
    [
        ("linalg.tensorsolve", Variant(n=5, place="mixed_device", transform="grad")),
        ("linalg.tensorsolve", Variant(n=8, place="mixed_device", transform="grad",
                                       dtype="float64", x64=True)),
        ("linalg.multi_dot", Variant(n=5, place="mixed_device", transform="grad")),
        ("linalg.multi_dot", Variant(n=8, place="mixed_device", transform="grad",
                                     dtype="float64", x64=True)),
        ("scipy.linalg.toeplitz", Variant(n=5, place="mixed_device", transform="grad")),
        ("scipy.linalg.toeplitz", Variant(n=8, place="mixed_device", transform="grad",
                                          dtype="complex64")),
    ],
    ids=str,
)  # fmt: skip
def test_grad_inside_set_mesh_with_a_one_device_operand(name, variant):
    """Found: jax.grad inside jax.set_mesh (Explicit) of tensorsolve, multi_dot and
    toeplitz with a sharded first operand beside a one-device one raised "Received
    incompatible devices for jitted computation ... jit's context mesh": each ran jnp's
    operations (a reshape, a product of the one-device operands, atleast_1d) on the
    one-device operand before the route moved it onto the mesh; it joins the mesh first."""
    check(SPECS[name], variant)


@pytest.mark.parametrize("mesh_kind", ["explicit", "auto"])
@pytest.mark.parametrize("transform", ["eager", "vmap", "jacfwd", "grad", "jit"])
def test_cross_of_a_sharded_and_a_one_device_operand(transform, mesh_kind):
    """Found: ``distla.linalg.cross`` was ``jnp.linalg.cross`` itself, which refuses a
    sharded operand beside one committed to one device ("Received incompatible devices
    for jitted computation"), eagerly, under vmap and derivatives; the one-device operand
    now joins the mesh first, as for vecdot and outer (``a``'s vectors split, not the
    axis vmap maps: vmap itself refuses a mapped axis split on one operand only).
    ``jax.jit`` of any function refuses such a pair of arguments itself, before the
    function runs: there distla's raises what jnp's raises (docs/caveats.md)."""
    m = build_mesh((2, 4), mesh_kind)
    rng = np.random.default_rng(2)
    a_np, b_np = rng.standard_normal((2, 2, 8, 3)).astype(np.float32)
    a = _put(a_np, m, P(None, ("x", "y")))
    b = jax.device_put(b_np, jax.devices()[0])
    calls = {
        "eager": lambda cross, x, y: cross(x, y),
        "jit": lambda cross, x, y: jax.jit(cross)(x, y),
        "vmap": lambda cross, x, y: jax.vmap(cross)(x, y),
        "jacfwd": lambda cross, x, y: jax.jacfwd(lambda x_: cross(x_, y))(x),
        "grad": lambda cross, x, y: jax.grad(lambda x_: jnp.sum(cross(x_, y) ** 2))(x),
    }
    call = calls[transform]
    context = jax.set_mesh(m) if transform == "grad" else contextlib.nullcontext()
    with context:
        with pytest.raises(ValueError, match="incompatible devices"):
            call(jnp.linalg.cross, a, b)
        if transform == "jit":
            with pytest.raises(ValueError, match="incompatible devices"):
                call(dl.cross, a, b)
            return
        got = call(dl.cross, a, b)
        beside_numpy = call(dl.cross, a, b_np)
    want = call(jnp.linalg.cross, a_np, b_np)
    compare(got, want, rtol_units=1, where=transform)
    compare(beside_numpy, want, rtol_units=1, where=f"{transform}, b numpy")


@pytest.mark.parametrize("name", ["vecdot", "outer"])
def test_jnps_products_refuse_lists_as_jnp(name):
    """Found: distla's vecdot took Python lists (jnp.asarray first) where jnp's refuses them
    with a TypeError."""
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        getattr(jnp.linalg, name)([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        getattr(dl, name)([1.0, 2.0], [3.0, 4.0])


def test_generalized_eigh_gradient_outside_set_mesh(mesh):
    """Found: jax.grad of the generalized eigh on an Explicit mesh outside jax.set_mesh
    failed inside distla (jax's "Length of device assignment 1 ..."). Now the forward pass
    runs; jax 0.10.2's grad of any scalar on an Explicit mesh needs the mesh in context
    itself (``x.sum()`` alone fails there), so a failure names jax.set_mesh, and jax.vjp
    with a cotangent on the mesh works."""
    check(SPECS["linalg.eigh_generalized"], Variant(n=8, transform="vjp_outside"))
    check(SPECS["linalg.eigh_generalized"], Variant(n=8, transform="grad_outside"))


# ---------------------------------------------------------------- distla.fft


@pytest.mark.parametrize(
    "name, variant",
    [
        ("fft.fftshift", Variant(n=8, place="spec", layout=2)),  # P(('x','y'), None)
        ("fft.fftshift", Variant(n=3, batch=(2,))),
        ("fft.ifftshift", Variant(n=2, batch=(8,))),
        ("fft.ifftshift", Variant(n=3, batch=(2,), transform="grad")),
    ],
    ids=str,
)
def test_shifts_of_sharded_axes_on_an_explicit_mesh(name, variant):
    """Found: distla.fft.fftshift/ifftshift (jnp's own) of an axis split over the mesh
    raised "slicing on sharded dims where out dim (4) is not divisible by mesh axes (8)"
    on an Explicit mesh."""
    check(SPECS[name], variant)


@pytest.mark.parametrize(
    "name, variant",
    [
        ("scipy.linalg.sqrtm", Variant(n=8, transform="vmap")),
        ("scipy.linalg.sqrtm", Variant(n=5, transform="vmap", dtype="complex64")),
        ("linalg.expm_frechet", Variant(n=8, transform="vmap")),
        ("scipy.linalg.companion", Variant(n=8, transform="vmap")),
        ("scipy.linalg.companion", Variant(n=8, transform="vmap", dtype="int32")),
    ],
    ids=str,
)
def test_vmap_of_jaxs_loops_over_a_stack_in_shards_layout(name, variant):
    """Found: jax.vmap over a stack in distla.shard's layout (its batch on Explicit axes)
    of sqrtm and expm_frechet failed inside jax's own function, whose loops cannot be
    batched there ("Resource axis: x of P('x',) is not found in mesh: ()", jnp's too on
    the stack in P('x', None, None)); companion's scatter of a batched row into an
    unbatched matrix asked for out_sharding. The vmap is one call on the stack now (each
    device its own members); companion builds its matrix without the scatter."""
    check(SPECS[name], variant)


@pytest.mark.parametrize(
    "name, variant",
    [
        ("fft.fft", Variant(n=3, transform="grad", mesh="auto")),  # a replicated vector
        ("fft.fftn", Variant(n=8, transform="grad", mesh="auto")),  # a matrix in 2D blocks
        ("fft.ifft2", Variant(n=8, transform="grad", mesh="auto", dtype="complex64")),
    ],
    ids=str,
)
def test_reverse_mode_of_the_transforms_on_an_auto_mesh(name, variant):
    """Found: jax.grad of the FFTs on an Auto mesh raised XLA's "No registered
    implementation for untyped custom call to xla.sdy.GlobalToLocalShape for Host": the
    transform is linear, so its transpose is a program of the cotangent alone, on one
    device, whose shard_map over the abstract mesh compiled for that one device. The
    tangent is now laid out on the operand's concrete mesh, which the transpose keeps."""
    check(SPECS[name], variant)


@pytest.mark.parametrize(
    "name, variant",
    [
        ("fft.fft", Variant(n=8, batch=(4,), transform="jit_grad", mesh="auto")),
        ("fft.fftn", Variant(n=8, transform="jit_grad", mesh="auto")),
        ("fft.fftn", Variant(n=5, transform="jit_grad", mesh="auto")),
        ("fft.ifftn", Variant(n=8, transform="jit_grad", mesh="auto", dtype="complex64")),
        ("fft.rfftn", Variant(n=8, transform="jit_grad", mesh="auto")),
        ("fft.irfftn", Variant(n=5, transform="jit_grad", mesh="auto")),
        ("fft.pfft3d", Variant(n=8, transform="jit_grad", mesh="auto")),
        ("fft.prfft3d", Variant(n=8, transform="jit_grad", mesh="auto")),  # pfft3d's kernels
        ("fft.prfft3d", Variant(n=5, transform="jit_grad", mesh="auto")),  # the half spectrum's
        ("fft.pirfft3d", Variant(n=8, transform="jit_grad", mesh="auto")),
        ("scipy.fft.dctn", Variant(n=8, transform="jit_grad", mesh="auto")),
        ("scipy.fft.dct", Variant(n=5, transform="jit_grad", mesh="auto")),  # a gathered vector
        ("scipy.fft.idct", Variant(n=8, batch=(4,), transform="jit_grad", mesh="auto")),
        ("fft.fftn", Variant(n=4, transform="jit_jacfwd", mesh="auto")),
        ("fft.fftn", Variant(n=8, transform="jit_grad")),  # Explicit: worked before, pinned
    ],
    ids=str,
)
def test_derivatives_of_the_transforms_inside_jit_on_an_auto_mesh(name, variant):
    """Found: jax.jit(jax.grad(...)) and jax.jit(jax.jacfwd(...)) of a loss linear in an FFT
    (or a DCT) on an Auto mesh raised XLA's "No registered implementation for untyped
    custom call to xla.sdy.GlobalToLocalShape for Host" where the un-jitted derivative
    works: the derivative does not depend on the operand's values, so jit dropped the
    operand and compiled for one device a program holding the transform's shard_map over
    the mesh."""
    check(SPECS[name], variant)


@pytest.mark.parametrize("name", ["transposeXtoY", "halo_exchange", "dctn"])
def test_linear_transpose_of_the_exchanges_on_an_auto_mesh(name):
    """Found (CI: test_particle_mesh[auto], which folds ghosts by the halo exchange's
    transpose): tying a body's operand into its program for jit(grad) by a select whose
    predicate read the operand broke jax.linear_transpose (select's transpose rule); the
    tie acts on the derivative only (``_fftnd.tied``). The transpose is the vjp."""
    import distla.jaxdecomp as djd

    m = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(7)
    x = distla.shard(rng.standard_normal((8, 8, 8)).astype(np.float32), m)
    fn = {
        "transposeXtoY": djd.transposeXtoY,
        "halo_exchange": functools.partial(
            djd.halo_exchange, halo_extents=(1, 1), halo_periods=(True, True)
        ),
        "dctn": distla.scipy.fft.dctn,
    }[name]
    ct = fn(x) * 0.5 + 1.0
    with jax.set_mesh(m):
        (got,) = jax.linear_transpose(fn, x)(ct)
    (want,) = jax.vjp(fn, x)[1](ct)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "name", ["transposeXtoY", "transposeYtoZ", "transposeZtoY", "transposeYtoX", "halo_exchange"]
)
def test_jaxdecomps_exchanges_differentiated_inside_jit_on_an_auto_mesh(name):
    """Found with the FFTs' case above: jax.jit(jax.grad(...)) of a loss linear in a pencil
    transpose or a halo exchange on an Auto mesh raised the same XLA error. The gradient
    is the un-jitted one's; a transpose's is the weights transposed back."""
    import distla.jaxdecomp as djd

    m = build_mesh((2, 4), "auto")
    rng = np.random.default_rng(5)
    host = rng.standard_normal((8, 8, 8)).astype(np.float32)
    x = distla.shard(host, m)
    if name == "halo_exchange":
        fn = functools.partial(djd.halo_exchange, halo_extents=(1, 1), halo_periods=(True, True))
    else:
        fn = getattr(djd, name)
    w = rng.standard_normal(fn(x).shape).astype(np.float32)

    def loss(v):
        return jnp.sum(fn(v) * w)

    got = np.asarray(jax.jit(jax.grad(loss))(x))
    want = np.asarray(jax.grad(loss)(x))
    if name != "halo_exchange":  # a transpose in value: the weights transposed back
        out = np.asarray(fn(x))
        perm = next(
            p
            for p in itertools.permutations(range(3))
            if out.shape == host.transpose(p).shape and np.array_equal(out, host.transpose(p))
        )
        np.testing.assert_array_equal(want, w.transpose(np.argsort(perm)))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("transform", ["jit", "vmap"])
def test_wavenumbers_traced_outside_set_mesh(transform):
    """Found: fftfreq3d under jax.jit or jax.vmap of a spectrum on an Explicit mesh,
    outside jax.set_mesh, raised "Length of device assignment 1 is not equal to the size
    of the mesh 8"; the wavenumbers come back as jnp's constants there."""
    check(SPECS["fft.fftfreq3d"], Variant(n=3, transform=transform))
    check(SPECS["fft.rfftfreq3d"], Variant(n=8, transform=transform))


@pytest.mark.parametrize(
    "name, transform",
    [
        ("linalg.solve", "jacfwd"),
        ("linalg.solve", "vjp_outside"),
        ("linalg.lu", "vjp_outside"),
        ("linalg.lu_factor", "jacfwd"),
    ],
)
def test_one_device_plans_derivatives_outside_set_mesh(name, transform):
    """Found: jax.jacfwd and jax.vjp of the one-device plan on an Explicit mesh outside
    jax.set_mesh raised "Passing lowering_platforms ... is required when only AbstractMesh
    exists" (jax made the zero tangents of the operands not differentiated, and of LU's
    pivots, from their avals, as programs with no devices)."""
    check(SPECS[name], Variant(n=3, transform=transform))


# One public function of each differentiable family (every family must be differentiable
# on an Explicit mesh outside jax.set_mesh, or failing with a message naming it).
FAMILIES = (
    "linalg.solve",
    "linalg.inv",
    "linalg.slogdet",
    "linalg.cholesky",
    "linalg.cho_solve",
    "linalg.solve_triangular",
    "linalg.qr",
    "linalg.eigh",
    "linalg.svd",
    "linalg.polar",
    "linalg.lstsq",
    "linalg.norm",
    "linalg.expm",
    "linalg.matmul",
    "fft.fftn",
    "fft.pfft3d",
    "scipy.fft.dctn",
    "scipy.linalg.eigh",
    "scipy.linalg.toeplitz",
)


@pytest.mark.parametrize("transform", ["vjp_outside", "jacfwd"])
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_differentiable_outside_set_mesh(name, transform):
    """Found: jax.jacfwd of solve_triangular and jax.vjp of cho_solve (the triangular
    solves' derivatives) on an Explicit mesh outside jax.set_mesh raised "Passing
    lowering_platforms ..." / "Length of device assignment 1 ...": jax filled the tangent of
    the operand not differentiated from its type alone. Each family, sharded in distla's
    layout, against jnp."""
    check(SPECS[name], Variant(n=3, transform=transform))


@pytest.mark.parametrize(
    "fn",
    [dl.inv, dl.cholesky, distla.scipy.linalg.cholesky, dl.eigvalsh, lambda a: dl.slogdet(a)[1]],
    ids=["inv", "cholesky", "scipy.cholesky", "eigvalsh", "slogdet.logabsdet"],
)
@pytest.mark.parametrize(
    "shape, spec", [((0, 0), P()), ((4, 0, 0), P("x")), ((3, 2, 0, 0), P(None, "x"))]
)
def test_empty_operands_differentiable_outside_set_mesh(mesh, fn, shape, spec):
    """Found: jax.vjp of inv of a replicated (0, 0) matrix, and grad of scipy's cholesky
    of an empty stack, on an Explicit mesh outside jax.set_mesh raised "Passing
    lowering_platforms ... is required when only AbstractMesh exists": the empty result was
    a constant (jax.eval_shape gave its type no sharding), so jax built the operand's
    zero cotangent from its type alone. The cotangent comes back zero-size, in the
    operand's layout (values are not read: jax 0.10.2 cannot read back zero-size arrays
    split over a mesh from a program)."""
    a = _put(np.zeros(shape, np.float32), mesh, spec)
    out, pullback = jax.vjp(fn, a)
    (ct,) = pullback(jax.tree.map(jnp.zeros_like, out))
    assert ct.shape == a.shape and ct.dtype == a.dtype
    assert ct.sharding.is_equivalent_to(a.sharding, a.ndim), ct.sharding
    if spec == P():
        assert np.asarray(ct).shape == shape


@pytest.mark.parametrize("name", ["linalg.solve_triangular", "linalg.cho_solve"])
def test_sharded_a_beside_a_one_device_b(name):
    """Found: a sharded ``a`` beside a ``b`` on one device raised jax's "Received
    incompatible devices for jitted computation" (b was not moved onto a's mesh)."""
    check(SPECS[name], Variant(n=3, place="mixed_device"))


SOLVES_OF_STACKS = {
    "cho_solve": (
        lambda L, c, b: L.scipy.linalg.cho_solve((c, True), b),
        lambda a: np.linalg.cholesky(a),
    ),
    "solve": (lambda L, a, b: L.linalg.solve(a, b), None),
    "lu_solve": (lambda L, a, b: L.linalg.lu_solve(L.linalg.lu_factor(a), b), None),
    "solve_triangular": (
        lambda L, c, b: L.linalg.solve_triangular(c, b, lower=True),
        lambda a: np.linalg.cholesky(a),
    ),
}


@pytest.mark.parametrize("name", sorted(SOLVES_OF_STACKS))
@pytest.mark.parametrize(
    "kind, spec, where",
    [
        ("auto", P("x"), ("mesh", "device")),
        ("auto", P("x"), ("device", "mesh")),
        ("auto", P(None, "x", "y"), ("mesh", "device")),
        ("explicit", P(None, "x", "y"), ("mesh", "device")),
        ("explicit", P(None, "x", "y"), ("device", "mesh")),
        ("explicit", P(None, "x", "y"), ("numpy", "mesh")),
    ],
    ids=str,
)
def test_vmap_of_the_solves_with_mixed_placements(name, kind, spec, where):
    """Found: jax.vmap of cho_solve (and solve, lu_solve, solve_triangular) over a stack of
    factors on the mesh and a stack of right-hand sides on one device (and the reverse)
    raised "Received incompatible devices for jitted computation": the one-device operand
    joined the mesh only beside a concrete sharded array, not beside vmap's tracer of one.
    (On an Explicit mesh with the vmapped axis split beside an unsplit operand, jax.vmap
    itself refuses, jnp's too: "Mapped away dimension ... should be sharded the same".)"""
    call, factor = SOLVES_OF_STACKS[name]
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 8, 8)).astype(np.float32)
    a = x @ x.transpose(0, 2, 1) / 8 + np.eye(8, dtype=np.float32)
    c = factor(a) if factor is not None else a
    b = rng.standard_normal((4, 8, 3)).astype(np.float32)
    m = build_mesh((2, 4), kind)

    def placed(v, how, spec_):
        if how == "numpy":
            return v
        if how == "device":
            return jax.device_put(v, jax.devices()[0])
        return _put(v, m, spec_)

    ops = placed(c, where[0], spec), placed(b, where[1], P(*tuple(spec)[:2]))
    got = jax.vmap(functools.partial(call, OURS))(*ops)
    want = jax.vmap(functools.partial(call, REF))(c, b)
    compare(got, want, rtol_units=10, where=f"{name} {kind} {spec} {where}")


@pytest.mark.parametrize("mesh_kind", ["auto", "explicit"])
@pytest.mark.parametrize("name", ["scipy.linalg.toeplitz", "scipy.linalg.hankel"])
def test_sharded_vector_beside_a_one_device_vector(name, mesh_kind):
    """Found: toeplitz(c, r) with ``c`` sharded and ``r`` on one device raised jax's
    "Received incompatible devices for jitted computation" on the distributed plan (r was
    not moved onto c's mesh)."""
    check(SPECS[name], Variant(n=8, place="mixed_device", mesh=mesh_kind, plan="distributed"))


@pytest.mark.parametrize("plan", ["auto", "distributed"])
@pytest.mark.parametrize(
    "name",
    [
        "linalg.cholesky",
        "linalg.cho_factor",
        "linalg.cho_solve",
        "scipy.linalg.cholesky",
        "linalg.lu_factor",
        "linalg.lu_solve",
        "linalg.lu",
        "linalg.solve",
        "linalg.inv",
        "linalg.qr",
        "linalg.eigh",
        "linalg.svd",
        "linalg.pinv",
    ],
)
def test_factorisations_of_a_replicated_operand_are_replicated(name, plan):
    """Found by the sweep: cho_factor (and cholesky) of a replicated ``a`` (``P()`` on an
    Explicit mesh) returned the factor in the 2D block layout ``P('x', 'y')``; jnp's is
    replicated. The LU family, qr, eigh, svd and pinv did the same (the route's
    ``keep_replicated``)."""
    check(SPECS[name], Variant(n=8, place="spec", layout=5, plan=plan))


def test_cholesky_of_a_replicated_stack_is_replicated(mesh):
    """A replicated stack stays replicated too, as jnp's (it did before the fix above:
    pinned, since the rule now also acts on the stacked path)."""
    a = np.eye(5, dtype=np.float32) * 4 + 1
    a = _put(np.stack([a, 2 * a, 3 * a]), mesh, P())
    got = dl.cholesky(a)
    assert jax.typeof(got).sharding.spec == jax.typeof(jnp.linalg.cholesky(a)).sharding.spec
    np.testing.assert_allclose(np.asarray(got), np.linalg.cholesky(np.asarray(a)), rtol=1e-5)


@pytest.mark.parametrize(
    "variant",
    [
        Variant(n=5, batch=(2,), option=2),
        Variant(n=8, option=2, place="spec", layout=2),
        Variant(n=5, option=2, transform="jit"),
        Variant(n=5, option=2, transform="vmap"),
        Variant(n=5, batch=(2,), option=2, transform="jacfwd"),
        Variant(n=8, option=2, place="spec", layout=5, transform="jacfwd"),
    ],
    ids=str,
)
def test_matrix_power_zero_is_jnps_identity(variant):
    """Found: matrix_power(a, 0) on an Explicit mesh returned the identity in ``a``'s
    sharding (jnp's is replicated), and under jit, vmap and jacfwd outside jax.set_mesh
    raised jax's "Length of device assignment 1 is not equal to the size of the mesh 8"."""
    assert SPECS["linalg.matrix_power"].options[variant.option] == {"n": 0}
    check(SPECS["linalg.matrix_power"], variant)


@pytest.mark.parametrize("plan", ["auto", "distributed"])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "complex128"])
@pytest.mark.parametrize("shape", [(6, 8, 3), (8, 8, 3), (8, 4, 0), (6, 8, 0)], ids=str)
def test_lstsq_numpy_residuals_dtype_is_jnps(mesh, shape, dtype, plan):
    """Found: lstsq(..., numpy_resid=True) of sharded operands returned the empty residuals
    in ``a``'s real dtype; jnp's are ``jnp.asarray([])``, the default float dtype
    (float64 with x64 on, whatever ``a``'s dtype)."""
    m, n, k = shape
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        a = rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if "c" in dtype else 0)
        a = a.astype(dtype)
        a[:, -1] = a[:, 0]  # rank-deficient: empty residuals even where m > n
        b = rng.standard_normal((m, k)).astype(dtype)
        ref = jnp.linalg.lstsq(a, b, numpy_resid=True)
        previous = dl.set_plan_budget(0 if plan == "distributed" else 512 * 2**20)
        try:
            got = dl.lstsq(distla.shard(a, mesh), distla.shard(b, mesh), numpy_resid=True)
        finally:
            dl.set_plan_budget(previous)
        for i, (g, r) in enumerate(zip(got, ref)):
            assert g.shape == r.shape and g.dtype == r.dtype, (i, g.shape, g.dtype, r.dtype)
        np.testing.assert_allclose(np.asarray(got[0]), np.asarray(ref[0]), rtol=1e-4, atol=1e-4)
