"""Eigenpairs of a real symmetric tridiagonal matrix: ``eigh_tridiagonal`` (private).

The tridiagonal step of ``distla.linalg.eigvalsh``/``eigh``, on its own: the
defining vectors ``d, e`` (``n`` numbers each) go to every device, each device
bisects its share of the wanted eigenvalue indices on Sturm counts
(``distla.kernels.tridiagonal.bisect``, LAPACK's ``xSTEBZ``) and the shares are
gathered; eigenvectors by inverse iteration, each device a contiguous range of
them (``distla.kernels.tridiagonal_vectors``, ScaLAPACK's ``PxSTEIN``), in the 2D
block layout, with the eigh's orthogonality check and repair.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.sharding import PartitionSpec as P

from ..._core import route
from ..._core.matrix import block_spec
from ..._core.mesh import constrain, fitting_spec, grid_of, run_on_mesh
from ..._core.plan import Plan
from ...linalg._eigh.tridiagonal import _bisect, _loose, _repaired, _vectors_of_tridiagonal
from ._everywhere import result_types


def _body(d, e, *, first, count, vectors, w_dtype, v_dtype):
    mesh = jax.sharding.get_abstract_mesh()
    grid = grid_of(mesh, what="distla.scipy.linalg.eigh_tridiagonal")
    n = d.shape[0]
    d, e = constrain(d, P()), constrain(e, P())  # the n-vectors, on every device
    d = jnp.real(d)  # jax's: the real part of d, the modulus of e
    e = jnp.abs(e) if jnp.iscomplexobj(e) else e
    e = jnp.concatenate([e, jnp.zeros((1,), e.dtype)])  # one unread entry
    w = _bisect(d, e, grid=grid, count=count, first=first)
    if not vectors:
        return w.astype(w_dtype)
    spec = fitting_spec((n, n), mesh, block_spec(mesh))
    every = w if count == n else _bisect(d, e, grid=grid, count=n)
    z = _vectors_of_tridiagonal(d, e, every, grid=grid, spec=spec)
    z = _repaired(z, d, e, every, grid=grid, spec=spec, needed=_loose(z))
    return w.astype(w_dtype), z[:, first : first + count].astype(v_dtype)


@functools.partial(
    jax.jit, static_argnames=("mesh", "first", "count", "vectors", "w_dtype", "v_dtype")
)
def _eigh_tridiagonal_on(d, e, *, mesh, first, count, vectors, w_dtype, v_dtype):
    n = d.shape[0]
    out = P() if not vectors else (P(), fitting_spec((n, count), mesh, block_spec(mesh)))
    body = functools.partial(
        _body, first=first, count=count, vectors=vectors, w_dtype=w_dtype, v_dtype=v_dtype
    )
    return run_on_mesh(body, mesh, out, d, e)


def _jax_eigh_tridiagonal(d, e, **options):
    """jax's function, the one-device function of the op."""
    return jsl.eigh_tridiagonal(d, e, **options)


def _jax_takes(d, e, *, select, **options):
    """jax's function takes the call: not two vectors of the right lengths and one dtype,
    one entry, or ``select="v"``."""
    del options
    n = d.shape[0] if d.ndim == 1 else 0
    simple = d.ndim != 1 or e.ndim != 1 or n <= 1 or select not in ("a", "i")
    return simple or d.dtype != e.dtype or e.shape[0] != n - 1


def _bisected(plan: Plan, d, e, *, eigvals_only, select, select_range, tol, key):
    """The distributed driver: bisection and inverse iteration on ``plan``'s mesh."""
    ref = functools.partial(
        jsl.eigh_tridiagonal,
        eigvals_only=eigvals_only,
        select=select,
        select_range=select_range,
        tol=tol,
        key=key,
    )
    n = d.shape[0]
    out = result_types(ref, d, e)
    w_dtype = np.dtype(jax.tree.leaves(out)[0].dtype)
    v_dtype = None if eigvals_only else np.dtype(out[1].dtype)
    first, count = 0, n
    if select == "i":
        lo, hi = (int(x) for x in select_range)
        first, count = lo, hi - lo + 1
    return _eigh_tridiagonal_on(
        d,
        e,
        mesh=plan.mesh,
        first=first,
        count=count,
        vectors=not eigvals_only,
        w_dtype=w_dtype,
        v_dtype=v_dtype,
    )


EIGH_TRIDIAGONAL = route.Op(
    "distla.scipy.linalg.eigh_tridiagonal",
    operands=("d", "e"),
    one_device=_jax_eigh_tridiagonal,
    distributed=_bisected,
    promote=route.first_dtype,
    cast=route.as_given,
    empty=_jax_takes,
)


@route.public
def eigh_tridiagonal(
    d: jax.typing.ArrayLike,
    e: jax.typing.ArrayLike,
    *,
    eigvals_only: bool = False,
    select: str = "a",
    select_range: tuple[float, float] | None = None,
    tol: float | None = None,
    key: jax.Array | None = None,
) -> jax.Array | tuple[jax.Array, jax.Array]:
    """Eigenvalues (and eigenvectors) of a symmetric tridiagonal matrix, as
    ``jax.scipy.linalg.eigh_tridiagonal``.

    With ``d``/``e`` on a mesh (sharded or replicated over it), each device bisects
    its share of the wanted indices (LAPACK's ``xSTEBZ`` on Sturm counts, to within a
    few ``eps·‖T‖``; the ``n``-vectors ``d, e`` are all any device receives), and the
    eigenvectors come from inverse iteration on each device's range (ScaLAPACK's
    ``PxSTEIN``), orthonormalized across devices where clusters straddle them.
    Unsharded ``d``/``e`` run jax's function.

    Args:
      d: ``[n]`` diagonal (float32/float64; complex: its real part, as jax).
      e: ``[n − 1]`` off-diagonal (complex: its modulus, as jax), ``d``'s dtype.
      eigvals_only: return the eigenvalues only.
      select: ``"a"`` (all) or ``"i"`` (indices ``select_range[0]..select_range[1]``,
        inclusive); ``"v"`` is not implemented, as in jax.
      select_range: the index range for ``select="i"``.
      tol: accepted; the bisection runs to full precision (jax's ``tol`` loosens
        it).
      key: accepted; the inverse iteration's starts are a fixed hash of each
        eigenvalue's index.

    Returns:
      ``w`` ascending, real, replicated (``[k]``), or ``(w, v)`` with ``v`` ``[n, k]``
      (the eigenvectors, in columns) in the mesh's 2D block layout (the largest even
      layout that fits). With ``select="i"`` and vectors, all ``n`` are computed and
      the ``k`` selected.

    Raises:
      TypeError: dtypes that differ or are not floating, as jax.
      NotImplementedError: ``select="v"``, as jax.

    See also: ``jax.scipy.linalg.eigh_tridiagonal``, ``distla.linalg.eigvalsh``.

    Examples:
      >>> import distla, distla.scipy.linalg as sla, jax.numpy as jnp, numpy as np
      >>> mesh = distla.make_mesh((2, 4))
      >>> d = jnp.full(256, 2.0)
      >>> e = jnp.full(255, -1.0)
      >>> w = sla.eigh_tridiagonal(d, e, eigvals_only=True)
      >>> w.shape, bool(w.min() > 0) and bool(w.max() < 4)
      ((256,), True)
    """
    return route.call(
        EIGH_TRIDIAGONAL,
        d,
        e,
        eigvals_only=eigvals_only,
        select=select,
        select_range=select_range,
        tol=tol,
        key=key,
    )
