"""Demo rows for distla.fft: 256^3 fftn (complex64) and rfftn (float32) on a 4x2 mesh.

"vs XLA" is ``jnp.fft.fftn`` (``rfftn``) on the same volume sharded on an
``Auto`` mesh, as for the other rows; jaxdecomp's ``pfft3d``, the
distributed FFT distla replaces, is timed too where it is installed and
reported in the row's note.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType

import distla

from .._demo import Row, to_host
from .._timing import time_calls


def _ratio(y: np.ndarray, x: np.ndarray, real: bool) -> float:
    wide = x.astype(np.float64 if real else np.complex128)
    ref = np.fft.rfftn(wide) if real else np.fft.fftn(wide)
    err = np.linalg.norm(y.astype(ref.dtype) - ref)
    eps = np.finfo(y.dtype).eps
    return float(err / (np.linalg.norm(ref) * math.log2(x.size) * eps))


def _jaxdecomp_pfft3d():
    try:
        import packaging  # noqa: F401  (jaxdecomp 0.3.1 imports it without declaring it)
        from jaxdecomp import fft
    except ImportError:
        return None
    return fft.pfft3d


def _row(n: int, real: bool, shape: tuple[int, int], rounds: int) -> Row:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n, n), dtype=np.float32)
    if not real:
        x = (x + 1j * rng.standard_normal((n, n, n), dtype=np.float32)).astype(np.complex64)
    mesh = distla.make_mesh(shape, axis_types=AxisType.Explicit)
    mesh_auto = distla.make_mesh(shape, axis_types=AxisType.Auto)
    xd, xa = distla.shard(x, mesh), distla.shard(x, mesh_auto)
    ours = distla.fft.rfftn if real else distla.fft.fftn
    theirs = jnp.fft.rfftn if real else jnp.fft.fftn
    cases = {"distla": (ours, (xd,)), "xla": (jax.jit(theirs), (xa,))}
    jd = _jaxdecomp_pfft3d()
    if jd is not None:
        cases["jaxdecomp"] = (jd, (xa,))
    if jax.process_count() == 1:
        cases["one"] = (jax.jit(theirs), (jax.device_put(x, jax.devices()[0]),))
    t = time_calls(cases, rounds=rounds)
    cost = distla.cost(ours, xd)
    y = to_host(ours(xd))
    ms = t["distla"].median_s
    note = f"vs XLA: jnp.fft.{theirs.__name__} on the sharded Auto input"
    if "jaxdecomp" in t:
        jd_s = t["jaxdecomp"].median_s
        what = "of the same real input (as complex)" if real else ""
        note += (
            f"; jaxdecomp pfft3d {what} {jd_s * 1e3:.1f} ms, distla / jaxdecomp {ms / jd_s:.2f}x"
        )
    flops = (2.5 if real else 5.0) * n**3 * math.log2(n**3)
    return Row.measured(
        "rfftn" if real else "fftn", f"{n}x{n}x{n}", shape,
        "float32" if real else "complex64", times=t, flops=flops,
        error_ratio=_ratio(y, x, real), cost=cost, note=" ".join(note.split()),
    )  # fmt: skip


def rows(size_scale: float = 1.0, rounds: int = 5) -> list[Row]:
    n = max(16, int(256 * size_scale) // 16 * 16)
    pr, pc = distla.layout.squarest_grid(jax.device_count())
    shape = (pc, pr)  # 4x2 on 8 devices
    return [_row(n, False, shape, rounds), _row(n, True, shape, rounds)]
