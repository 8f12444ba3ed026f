"""3D FFTs on 2x4 and 4x2, one call of each case in turn per round (so that load falls on
every case alike), medians over the rounds (docs/benchmarks-log.md, "3D FFT, interleaved"):

    JAX_PLATFORMS=cpu python benchmarks/fft_interleaved.py --sizes 64 128 256 --rounds 15

Cases, on the same complex64 volume: one device's ``jnp.fft.fftn`` (jitted), eager
``distla.fft.fftn`` on ``Auto`` and on ``Explicit`` meshes, jaxdecomp's ``pfft3d``
(``Auto`` only; the pure-JAX backend) and ``jnp.fft.fftn`` on the ``Auto``-sharded
input (XLA's own partitioning). Ratios are to one device. ``--cases`` keeps some of
them: XLA's partitioning gathers the volume onto every device, and the page faults of
those allocations slow the call after it (docs/benchmarks-log.md, "3D FFT").

Two more cases measure the floor under any pencil FFT on this machine (docs/benchmarks-log.md,
"The floor under a pencil FFT"): ``exchanges alone``, the pencil plan's two ``all_to_all``
exchanges (over the second mesh axis, then the first) of the whole local block with
nothing else (no transform, no packing: the chunks already lie along the major axis),
``transforms alone``, each device's ``jnp.fft.fftn`` of its own block (the three passes
of 1-D transforms a pencil plan runs, on an eighth of the volume each, with no
exchange), and ``copy on one device``, one read and write of the volume on one device.
"""

import argparse
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from interleaved import medians  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import distla  # noqa: E402


def _cases(n: int, shape: tuple[int, int]) -> dict:
    rng = np.random.default_rng(0)
    x = (
        rng.standard_normal((n, n, n), dtype=np.float32)
        + 1j * rng.standard_normal((n, n, n), dtype=np.float32)
    ).astype(np.complex64)
    on = {
        kind: jax.device_put(
            x, NamedSharding(jax.make_mesh(shape, ("x", "y"), axis_types=(kind,) * 2), P("x", "y"))
        )
        for kind in (AxisType.Auto, AxisType.Explicit)
    }
    one = jax.device_put(x, jax.devices()[0])
    fftn = jax.jit(jnp.fft.fftn)
    cases = {
        "one device": lambda: fftn(one),
        "distla Auto": lambda: distla.fft.fftn(on[AxisType.Auto]),
        "distla Explicit": lambda: distla.fft.fftn(on[AxisType.Explicit]),
        "jnp sharded": lambda: fftn(on[AxisType.Auto]),
    }
    exchanges = _exchanges_alone(on[AxisType.Auto].sharding.mesh)
    scaled = jax.jit(lambda v: v * np.complex64(1))  # one read and one write of the volume
    transforms = jax.jit(
        jax.shard_map(
            jnp.fft.fftn,
            mesh=on[AxisType.Auto].sharding.mesh,
            in_specs=P("x", "y"),
            out_specs=P("x", "y"),
        )
    )
    cases["exchanges alone"] = lambda: exchanges(on[AxisType.Auto])
    cases["transforms alone"] = lambda: transforms(on[AxisType.Auto])
    cases["copy on one device"] = lambda: scaled(one)
    try:
        import jaxdecomp

        cases["jaxdecomp"] = lambda: jaxdecomp.fft.pfft3d(on[AxisType.Auto])
    except ImportError:
        pass
    return cases


def _exchanges_alone(mesh: jax.sharding.Mesh):
    """The pencil plan's two exchanges of a ``P("x", "y")`` volume, and nothing else."""
    px, py = mesh.shape["x"], mesh.shape["y"]

    def body(block):
        shape = block.shape
        block = lax.all_to_all(block.reshape(py, -1), "y", 0, 0, tiled=True)
        block = lax.all_to_all(block.reshape(px, -1), "x", 0, 0, tiled=True)
        return block.reshape(shape)

    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--meshes", nargs="+", default=["2x4", "4x2"])
    parser.add_argument("--rounds", type=int, default=15)
    names = ["one device", "distla Auto", "distla Explicit", "jaxdecomp", "jnp sharded"]
    floor = ["exchanges alone", "transforms alone", "copy on one device"]
    parser.add_argument("--cases", nargs="+", default=names, choices=names + floor)
    args = parser.parse_args()
    names = [name for name in names + floor if name in args.cases]
    extra = [name for name in floor if name in names]
    print(
        "| mesh | n³ | "
        + " | ".join(f"{name} ms" for name in names)
        + " | distla Auto / one | distla Explicit / one | distla Auto / jaxdecomp |"
        + "".join(f" {name} / one |" for name in extra)
    )
    print("|---" * (len(names) + 5 + len(extra)) + "|")
    for mesh in args.meshes:
        shape = tuple(int(s) for s in mesh.split("x"))
        for n in args.sizes:
            cases = {k: v for k, v in _cases(n, shape).items() if k in names}
            ms = {name: s * 1e3 for name, s in medians(cases, args.rounds).items()}
            cells = [f"{ms[name]:.1f}" for name in names]
            ratios = [
                _ratio(ms, "distla Auto", "one device"),
                _ratio(ms, "distla Explicit", "one device"),
                _ratio(ms, "distla Auto", "jaxdecomp"),
            ]
            ratios += [_ratio(ms, name, "one device") for name in extra]
            print(f"| {mesh} | {n} | " + " | ".join(cells + ratios) + " |", flush=True)


def _ratio(ms: dict, case: str, base: str) -> str:
    return f"{ms[case] / ms[base]:.2f}x" if case in ms and base in ms else "-"


if __name__ == "__main__":
    main()
