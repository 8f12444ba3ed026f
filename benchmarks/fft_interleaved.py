"""3D FFTs on 2x4 and 4x2, one call of each case in turn per round (so that load falls on
every case alike), medians over the rounds (docs/benchmarks.md, "3D FFT, interleaved"):

    JAX_PLATFORMS=cpu python benchmarks/fft_interleaved.py --sizes 64 128 256 --rounds 15

Cases, on the same complex64 volume: one device's ``jnp.fft.fftn`` (jitted), eager
``distla.fft.fftn`` on ``Auto`` and on ``Explicit`` meshes, jaxdecomp's ``pfft3d``
(``Auto`` only; the pure-JAX backend) and ``jnp.fft.fftn`` on the ``Auto``-sharded
input (XLA's own partitioning). Ratios are to one device.
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
    args = parser.parse_args()
    names = ["one device", "distla Auto", "distla Explicit", "jaxdecomp", "jnp sharded"]
    print("| mesh | n³ | " + " | ".join(f"{name} ms" for name in names)
          + " | distla Auto / one | distla Explicit / one | distla Auto / jaxdecomp |")
    print("|---" * (len(names) + 5) + "|")
    for mesh in args.meshes:
        shape = tuple(int(s) for s in mesh.split("x"))
        for n in args.sizes:
            cases = _cases(n, shape)
            ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
            cells = [f"{ms[name]:.1f}" if name in ms else "-" for name in names]
            jd = f"{ms['distla Auto'] / ms['jaxdecomp']:.2f}x" if "jaxdecomp" in ms else "-"
            print(f"| {mesh} | {n} | " + " | ".join(cells)
                  + f" | {ms['distla Auto'] / ms['one device']:.2f}x"
                  f" | {ms['distla Explicit'] / ms['one device']:.2f}x | {jd} |", flush=True)


if __name__ == "__main__":
    main()
