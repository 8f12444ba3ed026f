"""Every family on a 1-device mesh against its jnp namesake: the ratio distla / jnp.

    JAX_PLATFORMS=cpu python benchmarks/bench_one_device.py [--sizes 512] [--json out.json]

On one device distla takes jnp's own path (no shard_map, no padding), so each
ratio should be about 1 (within 1.1). Runs ``distla doctor``'s families with a
mesh of the first device only; ratios come from one run (best of ``--repeat``).
"""

import argparse
import json
import sys

import jax

from distla.tools import doctor


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    doctor.add_arguments(p)
    p.add_argument("--json", default=None, help="also write the rows here")
    args = p.parse_args(argv)
    # Auto axes: the jnp functions run on the same (trivially sharded) inputs there
    mesh = jax.make_mesh((1, 1), ("rows", "cols"), devices=jax.devices()[:1],
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)  # fmt: skip
    rows = doctor.run(mesh, args.sizes, args.dtype, only=args.only, repeat=args.repeat)
    for r in rows:
        r["jax"] = jax.__version__
        r["device"] = jax.devices()[0].device_kind
    print(f"1-device mesh, {jax.devices()[0].platform}, jax {jax.__version__}, {args.dtype}")
    print(doctor.table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
