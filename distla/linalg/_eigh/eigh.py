"""The eigh family's public functions: ``eigh`` and ``eigvalsh`` (private).

``jnp.linalg``'s forms (one Hermitian matrix, or a stack) declare `EIGH`
and `EIGVALSH`: the tridiagonal drivers with jax's rule (``rules``), jnp's
functions on each device's members for stacks. ``scipy.linalg.eigh``'s forms
(a pencil, a type, a subset, values only) declare ``pencil.GENERALIZED``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.checks import ShapeError, as_array, result_dtype
from ..._core.one_device import block_layout
from ..._core.plan import Plan
from . import pencil, rules


class EighResult(NamedTuple):
    """``(eigenvalues, eigenvectors)`` as ``jnp.linalg.eigh`` returns them.

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.arange(4.0)), mesh)
      >>> result = distla.linalg.eigh(a)
      >>> np.round(np.asarray(result.eigenvalues), 4) + 0.0
      array([0., 1., 2., 3.], dtype=float32)
    """

    eigenvalues: jax.Array
    eigenvectors: jax.Array


def _check_uplo(what, UPLO):
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{what}: UPLO must be one of None, 'L', or 'U'; got {UPLO!r}")


def _pair_layouts(plan: Plan, a, *, results, **options):
    """The distributed plan's layouts: eigenvalues replicated, eigenvectors in 2D blocks."""
    del results, options
    spec = block_layout(a.shape, plan.mesh)
    return (spec,), (P(), spec)


def _values_layouts(plan: Plan, a, *, results, **options):
    del results, options
    return (block_layout(a.shape, plan.mesh),), (P(),)


def _flags(UPLO, symmetrize_input):
    return dict(symmetrize=bool(symmetrize_input), lower=UPLO in (None, "L"))


# jnp.linalg.eigh's form: one Hermitian matrix by tridiagonal reduction, a stack by jnp's
# eigh on each device's members
EIGH = route.Op(
    "distla.linalg.eigh",
    check=route.square,
    one_device=jnp.linalg.eigh,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, *, UPLO, symmetrize_input: rules.eigh_stack(
        plan, a, uplo=UPLO, symmetrize=symmetrize_input
    ),
    family="eigh",
    layouts=_pair_layouts,
    distributed=lambda plan, a, *, UPLO, symmetrize_input: rules.eigh_2d(
        plan, a, **_flags(UPLO, symmetrize_input)
    ),
    result=lambda out, **options: EighResult(*out),
    keep_replicated=True,
)

EIGVALSH = route.Op(
    "distla.linalg.eigvalsh",
    check=route.square,
    one_device=jnp.linalg.eigvalsh,
    is_stack=route.beyond(2),
    stacked=lambda plan, a, *, UPLO, symmetrize_input: rules.eigh_stack(
        plan, a, uplo=UPLO, symmetrize=symmetrize_input
    )[0],
    family="eigh",
    layouts=_values_layouts,
    distributed=lambda plan, a, *, UPLO, symmetrize_input: rules.eigvalsh_2d(
        plan, a, **_flags(UPLO, symmetrize_input)
    ),
)


def _jnp_positional(b, uplo, symmetrize_input):
    """jnp's ``eigh(a, UPLO, symmetrize_input)`` called positionally lands on ``b`` and
    ``UPLO``: a string ``b`` is ``UPLO``, a bool ``UPLO`` is ``symmetrize_input``."""
    if isinstance(b, str):
        if uplo is not None and not isinstance(uplo, (bool, np.bool_)):
            raise TypeError(
                "distla.linalg.eigh: with UPLO given positionally, the third "
                f"argument is symmetrize_input (a bool); got {uplo!r}"
            )
        return None, b, bool(uplo) if uplo is not None else symmetrize_input
    if isinstance(uplo, (bool, np.bool_)):
        return b, None, bool(uplo)
    return b, uplo, symmetrize_input


def _real_dtype(dtype):
    return np.dtype(jnp.finfo(dtype).dtype)


@route.public
def eigh(
    a: jax.typing.ArrayLike,
    b: jax.typing.ArrayLike | None = None,
    UPLO: str | None = None,
    symmetrize_input: bool = True,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    type: int = 1,  # noqa: A002  (scipy's name)
    check_finite: bool = True,
    subset_by_index: tuple[int, int] | None = None,
    subset_by_value: tuple[float, float] | None = None,
    driver: str | None = None,
    turbo: bool = True,
    eigvals: tuple[int, int] | None = None,
    plan: str = "auto",
) -> EighResult | tuple[jax.Array, jax.Array] | jax.Array:
    """Hermitian eigenproblems, as ``jnp.linalg.eigh`` and ``scipy.linalg.eigh``.

    ``eigh(a)``, ``eigh(a, UPLO)`` and ``eigh(a, UPLO, symmetrize_input)`` are
    ``jnp.linalg.eigh`` (see [`eigvalsh`][distla.linalg.eigvalsh]; the divide and conquer of
    docs/spectral.md). With ``b``, ``type``, a subset or ``eigvals_only`` the
    call is ``scipy.linalg.eigh``'s: ``b = L Lᴴ`` by the distributed Cholesky,
    the pencil reduced to ``C y = λ y`` (type 1: ``C = L⁻¹ a L⁻ᴴ``, types 2
    and 3: ``C = Lᴴ a L``) by the distributed triangular solves and SUMMA,
    and the eigenvectors transformed back (``x = L⁻ᴴ y``, type 3 ``x = L y``).
    No device holds a whole matrix. A subset of a concrete matrix of order
    256 or more descends only into the halves of the divide and conquer
    that hold wanted eigenvalues, so it costs less than the whole spectrum;
    under ``jax.jit``/``jax.grad`` (and below that order) the whole problem
    is solved and the subset selected.

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh (any
        layout); the jnp form also takes a ``[..., n, n]`` stack. Integers
        and bools promote to the default float (with ``b``: ``a`` and ``b``
        promote together, as jnp promotes them).
      b: ``[n, n]`` Hermitian positive definite matrix on the same mesh
        (any layout), or ``None`` (the standard problem). Not positive
        definite: NaN, as the distributed Cholesky gives (scipy raises).
      UPLO: ``None``/``"L"`` or ``"U"`` as in jnp: the triangle of ``a`` (and
        ``b``) read when ``symmetrize_input`` is False; ``None`` defers to
        ``lower``.
      symmetrize_input: use ``(a + aᴴ)/2`` and ``(b + bᴴ)/2`` (jnp's
        default). False reads one triangle only, as scipy does.
      lower: scipy's choice of triangle (``UPLO`` wins when given).
      eigvals_only: return the eigenvalues only.
      overwrite_a: accepted and ignored, as in ``jax.scipy``.
      overwrite_b: accepted and ignored, as in ``jax.scipy``.
      type: 1 ``a x = λ b x``, 2 ``a b x = λ x``, 3 ``b a x = λ x``.
      check_finite: accepted and ignored, as in ``jax.scipy``.
      subset_by_index: ``(lo, hi)``, the eigenvalues ``lo..hi`` (0-based,
        inclusive, ascending), as scipy.
      subset_by_value: ``(vl, vu)``, the eigenvalues in ``(vl, vu]``, as
        scipy. The count is known only from the values, so this form needs
        concrete operands (not under ``jax.jit``).
      driver: accepted and ignored (LAPACK's driver; distla has one route).
      turbo: accepted and ignored, as in ``jax.scipy``.
      eigvals: scipy's older name of ``subset_by_index`` (``jax.scipy`` takes
        only ``None``).
      plan: ``"auto"`` (below the one-device budget the whole problem runs
        with jnp's functions on one device and comes back in the same
        layouts), ``"distributed"`` or ``"one_device"``.

    Returns:
      ``EighResult(eigenvalues, eigenvectors)`` for the jnp form;
      ``(w, x)`` or ``w`` (``eigvals_only``) for scipy's: ``w`` ``[k]``
      ascending, real, replicated; ``x`` ``[n, k]`` in the mesh's 2D block
      layout (the largest even layout that fits), normalised as scipy's:
      ``xᴴ b x = I`` for types 1 and 2, ``xᴴ b⁻¹ x = I`` for type 3.
      Differentiable (forward and reverse) for the whole spectrum and for
      ``subset_by_index`` (the derivative solves the whole problem).

    Raises:
      ValueError: ``a`` or ``b`` not square, shapes that differ, a stack with
        scipy's arguments, ``type`` not 1, 2 or 3, a bad subset, an unknown
        ``UPLO`` or ``plan``, or ``subset_by_value`` under ``jax.jit``.
      TypeError: dtypes jnp would not promote.

    See also: ``scipy.linalg.eigh``, ``jnp.linalg.eigh``, [`eigvalsh`][distla.linalg.eigvalsh].

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.arange(256.0)) + 0.01, mesh)
      >>> w, v = distla.linalg.eigh(a)
      >>> w.shape, v.shape
      ((256,), (256, 256))
      >>> np.allclose(np.asarray(a) @ np.asarray(v), np.asarray(v) * np.asarray(w), atol=1e-3)
      True
    """
    what = "distla.linalg.eigh"
    if eigvals is not None:
        if subset_by_index is not None:
            raise ValueError(f"{what}: give subset_by_index or eigvals (its older name), not both")
        subset_by_index = eigvals
    b, UPLO, symmetrize_input = _jnp_positional(b, UPLO, symmetrize_input)
    _check_uplo(what, UPLO)
    if UPLO is None and not lower:
        UPLO = "U"
    scipy_form = (
        b is not None
        or type != 1
        or eigvals_only
        or subset_by_index is not None
        or subset_by_value is not None
    )
    if not scipy_form:
        options = dict(UPLO=UPLO, symmetrize_input=bool(symmetrize_input))
        return route.call(EIGH, a, plan=plan, **options)
    if type not in (1, 2, 3):
        raise ValueError(
            f"{what}: type must be 1 (a x = λ b x), 2 (a b x = λ x) or 3 "
            f"(b a x = λ x), as scipy; got {type!r}"
        )
    a = as_array(a, "a", what)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ShapeError(
            f"{what}: with b, type, a subset or eigvals_only a must be one square matrix "
            f"(n, n), as scipy.linalg.eigh; got a of shape {a.shape} (for a stack, call eigh "
            "on each matrix)"
        )
    n = a.shape[0]
    operands = (a,)
    if b is not None:
        b = as_array(b, "b", what)
        if b.shape != a.shape:
            raise ShapeError(f"{what}: b must have a's shape {a.shape}; got b of shape {b.shape}")
        operands = (a, b)
    sel = pencil.check_subsets(what, n, subset_by_index, subset_by_value)
    dtype = result_dtype(what, *operands)
    if n == 0:
        w = jnp.zeros((0,), _real_dtype(dtype))
        return w if eigvals_only else (w, jnp.zeros((0, 0), dtype))
    symmetrize = bool(symmetrize_input)
    flags = dict(kind=int(type), lower=UPLO in (None, "L"), symmetrize=symmetrize)
    flags.update(vectors=not eigvals_only, sel=sel)
    return route.call(pencil.GENERALIZED, *operands, plan=plan, **flags)


@route.public
def eigvalsh(
    a: jax.typing.ArrayLike,
    UPLO: str | None = "L",
    *,
    symmetrize_input: bool = True,
    plan: str = "auto",
) -> jax.Array:
    """Eigenvalues of a Hermitian matrix, ascending, as ``jnp.linalg.eigvalsh``.

    One matrix sharded over a mesh is reduced to real tridiagonal form by
    Householder reflections on its 2D block layout (LAPACK's ``xHETRD``,
    blocked as ``xLATRD``; one psum of two ``n``-vectors per column), whose
    eigenvalues each device then bisects for its ``n/p`` share (``xSTEBZ``):
    about ``4n³/3`` flops, LAPACK's count, and no device holds more than its
    block of the matrix (``distla.kernels.tridiagonal``). Below the
    one-device budget ``plan="auto"`` runs ``jnp.linalg.eigvalsh`` on one
    device instead, as [`eigh`][distla.linalg.eigh]. A stack sharded along its batch runs
    jnp's on each device.

    Args:
      a: ``[n, n]`` Hermitian matrix sharded on a 1- or 2-axis mesh, or a
        ``[..., n, n]`` stack; integers and bools promote to the default float.
      UPLO: ``"L"``/``None`` or ``"U"``: the triangle read when
        ``symmetrize_input`` is False.
      symmetrize_input: use ``(a + aᴴ)/2`` (jnp's default).
      plan: ``"auto"``, ``"distributed"`` or ``"one_device"``, as [`eigh`][distla.linalg.eigh].

    Returns:
      ``[n]`` real eigenvalues, ascending, replicated (``[..., n]`` sharded
      along the batch for stacks); NaN for a non-finite matrix. Within a few
      ``n·eps·‖a‖₂`` of LAPACK's. Differentiable to any order (the derivative
      is [`eigh`][distla.linalg.eigh]'s, ``dw = re diag(Vᴴ dA V)``).

    Examples:
      >>> import distla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> a = distla.shard(jnp.diag(jnp.arange(4.0)), mesh)
      >>> np.round(np.asarray(distla.linalg.eigvalsh(a)), 4) + 0.0
      array([0., 1., 2., 3.], dtype=float32)
    """
    _check_uplo(EIGVALSH.name, UPLO)
    options = dict(UPLO=UPLO, symmetrize_input=bool(symmetrize_input))
    return route.call(EIGVALSH, a, plan=plan, **options)
