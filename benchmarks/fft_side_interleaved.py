"""dctn against fftn, prfft3d against pfft3d, one call of each case in turn per round (so
that load falls on every case alike), medians over the rounds (docs/benchmarks.md):

    JAX_PLATFORMS=cpu python benchmarks/fft_side_interleaved.py --sizes 128 256 --rounds 15

Cases on 2x4 and 4x2 (``Explicit`` meshes for dctn/fftn, ``Auto`` for the pfft3d
family, where jaxdecomp runs): ``distla.fft.fftn`` of a complex64 volume and
``distla.scipy.fft.dctn`` of a float32 one of the same size (the contract: dctn
within 1.3x of fftn); ``distla.jaxdecomp.fft.pfft3d`` of the complex64 volume and
``prfft3d`` of the float32 one (the contract: prfft3d at most 0.7x of pfft3d), and
jaxdecomp's own ``pfft3d`` where jaxdecomp is installed; ``halo_exchange`` of the
float32 volume with 2 ghost cells per side, distla's and jaxdecomp's (``Auto``).
Ratios are of medians; ``distla.cost`` gives each case's bytes per device.
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402
import distla.jaxdecomp  # noqa: E402
import distla.scipy.fft  # noqa: E402


def _cases(n: int, shape: tuple[int, int]) -> tuple[dict, dict]:
    real = np.random.default_rng(0).standard_normal((n, n, n), dtype=np.float32)
    put = {
        kind: (
            lambda v, kind=kind: jax.device_put(v, NamedSharding(_mesh(shape, kind), P("x", "y")))
        )
        for kind in (AxisType.Auto, AxisType.Explicit)
    }
    explicit, auto = put[AxisType.Explicit], put[AxisType.Auto]
    xr, xc = explicit(real), explicit(real.astype(np.complex64))
    ar, ac = auto(real), auto(real.astype(np.complex64))
    jd = distla.jaxdecomp.fft
    cases = {
        "fftn": (distla.fft.fftn, xc),
        "dctn": (distla.scipy.fft.dctn, xr),
        "pfft3d": (jd.pfft3d, ac),
        "prfft3d": (jd.prfft3d, ar),
    }
    cases["halo"] = (lambda v: distla.jaxdecomp.halo_exchange(v, (2, 2), (True, True)), ar)
    try:
        import jaxdecomp

        cases["jaxdecomp pfft3d"] = (jaxdecomp.fft.pfft3d, ac)
        cases["jaxdecomp halo"] = (lambda v: jaxdecomp.halo_exchange(v, (2, 2), (True, True)), ar)
    except ImportError:
        pass
    calls = {name: (lambda fn=fn, x=x: fn(x)) for name, (fn, x) in cases.items()}
    nbytes = {name: distla.cost(fn, x).total_collective_bytes for name, (fn, x) in cases.items()}
    return calls, nbytes


def _mesh(shape, kind):
    return distla.make_mesh(shape, ("x", "y"), axis_types=kind)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256])
    parser.add_argument("--meshes", nargs="+", default=["4x2", "2x4"])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    print(
        "| mesh | n³ | fftn ms | dctn ms | dctn / fftn | pfft3d ms | prfft3d ms "
        "| prfft3d / pfft3d | bytes prfft3d / pfft3d | jaxdecomp pfft3d ms "
        "| halo ms | jaxdecomp halo ms |"
    )
    print("|---" * 12 + "|")
    for mesh in args.meshes:
        shape = tuple(int(s) for s in mesh.split("x"))
        for n in args.sizes:
            calls, nbytes = _cases(n, shape)
            ms = {name: s * 1e3 for name, s in medians(calls, args.rounds).items()}
            jd = f"{ms['jaxdecomp pfft3d']:.1f}" if "jaxdecomp pfft3d" in ms else "-"
            jd_halo = f"{ms['jaxdecomp halo']:.1f}" if "jaxdecomp halo" in ms else "-"
            print(
                f"| {mesh} | {n} | {ms['fftn']:.1f} | {ms['dctn']:.1f} "
                f"| {ms['dctn'] / ms['fftn']:.2f}x | {ms['pfft3d']:.1f} | {ms['prfft3d']:.1f} "
                f"| {ms['prfft3d'] / ms['pfft3d']:.2f}x "
                f"| {nbytes['prfft3d'] / nbytes['pfft3d']:.3f} | {jd} "
                f"| {ms['halo']:.1f} | {jd_halo} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
