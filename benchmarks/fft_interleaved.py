"""3D FFTs on 2x4 and 4x2, one call of each case in turn per round (so that load falls on
every case alike), medians over the rounds (docs/benchmarks.md, "3D FFT, interleaved"):

    JAX_PLATFORMS=cpu python benchmarks/fft_interleaved.py --sizes 64 128 256 --rounds 15

Cases, on the same complex64 volume: one device's ``jnp.fft.fftn`` (jitted), eager
``distla.fft.fftn`` on ``Auto`` and on ``Explicit`` meshes, jaxdecomp's ``pfft3d``
(``Auto`` only; the pure-JAX backend) and ``jnp.fft.fftn`` on the ``Auto``-sharded
input (XLA's own partitioning). Ratios are to one device. ``--cases`` keeps some of
them: XLA's partitioning gathers the volume onto every device, and the page faults of
those allocations slow the call after it (docs/benchmarks.md, "3D FFT").
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402
from interleaved import medians  # noqa: E402



def _cases(n: int, shape: tuple[int, int]) -> dict:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((n, n, n), dtype=np.float32)
         + 1j * rng.standard_normal((n, n, n), dtype=np.float32)).astype(np.complex64)
    on = {kind: jax.device_put(x, NamedSharding(
        jax.make_mesh(shape, ("x", "y"), axis_types=(kind,) * 2), P("x", "y")))
        for kind in (AxisType.Auto, AxisType.Explicit)}
    one = jax.device_put(x, jax.devices()[0])
    fftn = jax.jit(jnp.fft.fftn)
    cases = {
        "one device": lambda: fftn(one),
        "distla Auto": lambda: distla.fft.fftn(on[AxisType.Auto]),
        "distla Explicit": lambda: distla.fft.fftn(on[AxisType.Explicit]),
        "jnp sharded": lambda: fftn(on[AxisType.Auto]),
    }
    try:
        import jaxdecomp
        cases["jaxdecomp"] = lambda: jaxdecomp.fft.pfft3d(on[AxisType.Auto])
    except ImportError:
        pass
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--meshes", nargs="+", default=["2x4", "4x2"])
    parser.add_argument("--rounds", type=int, default=15)
    names = ["one device", "distla Auto", "distla Explicit", "jaxdecomp", "jnp sharded"]
    parser.add_argument("--cases", nargs="+", default=names, choices=names)
    args = parser.parse_args()
    names = [name for name in names if name in args.cases]
    print("| mesh | n³ | " + " | ".join(f"{name} ms" for name in names)
          + " | distla Auto / one | distla Explicit / one | distla Auto / jaxdecomp |")
    print("|---" * (len(names) + 5) + "|")
    for mesh in args.meshes:
        shape = tuple(int(s) for s in mesh.split("x"))
        for n in args.sizes:
            cases = {k: v for k, v in _cases(n, shape).items() if k in names}
            ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
            cells = [f"{ms[name]:.1f}" for name in names]
            ratios = [_ratio(ms, "distla Auto", "one device"),
                      _ratio(ms, "distla Explicit", "one device"),
                      _ratio(ms, "distla Auto", "jaxdecomp")]
            print(f"| {mesh} | {n} | " + " | ".join(cells + ratios) + " |", flush=True)


def _ratio(ms: dict, case: str, base: str) -> str:
    return f"{ms[case] / ms[base]:.2f}x" if case in ms and base in ms else "-"


if __name__ == "__main__":
    main()
