"""Wherever jnp works, distla works: every public function, drawn operands and transformations.

The table of functions and the runner are in tests/dropin.py. Here:

- every public name of ``distla``, ``distla.linalg``, ``distla.fft`` and
  ``distla.scipy.fft`` is either in the table or named, with the reason, in
  ``dropin.NOT_ARRAY_FUNCTIONS``;
- each function is called as drawn (``dropin.draw``): the size (0, 1, primes the 2x4
  mesh does not divide, 8), a stack (none, 2, 0, 3x2 members), the dtype (float32,
  complex64, int32, float64 with x64 switched on after import), the operands' placement
  (numpy, one device, distla.shard's layout, the layouts a user gives, a sharded operand
  beside a numpy or one-device one), the mesh (Explicit or Auto), the plan, and the
  transformation (eager, ``jit``, ``vmap``, ``grad``; ``jacfwd`` and ``vjp`` outside
  ``jax.set_mesh``; ``grad`` outside it, where jax 0.10.2 needs the mesh for any
  Explicit-sharded scalar), and compared with jnp's call on the same host data;
- bad input is refused with the exception class jnp raises.

Values at float32's edges and non-finite entries are tests/test_edge_sweep.py's.
The cost is bounded: one drawn call per function (the same on every run), small sizes.
``DISTLA_DROPIN_EXAMPLES=N`` (and ``DISTLA_DROPIN_SEED``) draws N calls per function
instead: the wide sweep, which reports every failing call. What a sweep found and nobody
fixed yet is listed (``OPEN_DRAWN``, ``OPEN_BAD``, ``OPEN_CALLS`` here;
tests/test_dropin_cases.py) as strict expected failures: each shows in the run, and its
test fails once it is fixed (then drop the mark).
"""

from __future__ import annotations

import os

import dropin
import jax
import numpy as np
import pytest

import distla
import distla.fft as dfft
import distla.linalg as dl
import distla.scipy.fft as dsfft
import distla.scipy.linalg as dsla

# Drawn calls per function: one by default (the suite's budget); more, or other ones, for a
# wider sweep: DISTLA_DROPIN_EXAMPLES=50 DISTLA_DROPIN_SEED=1 pytest tests/test_dropin_sweep.py
# -k test_dropin (the default run's expected failures apply to seed 0 only).
EXAMPLES = int(os.environ.get("DISTLA_DROPIN_EXAMPLES", "1"))
SEED = int(os.environ.get("DISTLA_DROPIN_SEED", "0"))
MODULES = {"distla": distla, "linalg": dl, "fft": dfft, "scipy.fft": dsfft, "scipy.linalg": dsla}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_public_name_is_in_the_table(module):
    """A public name is a function of the table or named, with a reason, as one that is not."""
    public = set(MODULES[module].__all__)
    table = {n.rsplit(".", 1)[1] for n in dropin.SPECS if n.rsplit(".", 1)[0] == module}
    table = {n.removesuffix("_generalized") for n in table}
    other = set(dropin.NOT_ARRAY_FUNCTIONS[module])
    if module == "scipy.linalg":  # distla.linalg's own functions: swept as linalg.*
        other |= {n for n in public if getattr(dsla, n) is getattr(dl, n, None)}
    assert not table & other, sorted(table & other)
    missing = public - table - other
    assert not missing, f"{module}: {sorted(missing)} neither in tests/dropin.py's table nor named"
    assert not (table | other) - public, sorted((table | other) - public)


def _open(reason: str):
    """A failure the sweep found and nobody fixed yet: the test fails today and fails once
    it passes (then drop the mark)."""
    return pytest.mark.xfail(strict=True, reason=f"open: {reason}")


# Calls drawn per function for the default run whose failure is known (name: reason).
# jax 0.10.2's defect: a program whose result is zero-size and split over the mesh returns
# whole-size shards (jax.jit(lambda x: x * 0)(x) of a (2, 0, 0) array in P('x', 'y') cannot
# be read back), so the cotangent of an empty operand in such a layout, which jax's
# transposition computes in a program, cannot be read back
EMPTY_COTANGENT = (
    "the cotangent of an empty operand split over an Explicit mesh cannot be read back "
    "(np.asarray: 'could not broadcast input array from shape (2,0,0) into shape (1,0,0)'; "
    "jax 0.10.2 returns whole-size shards of zero-size arrays split over a mesh from a program)"
)
OPEN_DRAWN: dict[str, str] = {
    "linalg.inv": EMPTY_COTANGENT + " (jax.vjp outside jax.set_mesh of a (2, 0, 0) stack in "
    "P('x'); jnp's inv fails there too: 'Mapped away dimension ... sharded the same')",
}
if tuple(jax.__version_info__[:2]) >= (0, 11):  # jax 0.11 reads those shards back
    del OPEN_DRAWN["linalg.inv"]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[_open(OPEN_DRAWN[n])] if n in OPEN_DRAWN and SEED == 0 else [])
        for n in sorted(dropin.SPECS)
    ],
)
def test_dropin(name):
    """Each public function, called as drawn (``EXAMPLES`` calls), against jnp; every
    failing call is named."""
    sp = dropin.SPECS[name]
    failures = []
    for variant in dropin.drawn(sp, EXAMPLES, SEED):
        try:
            dropin.check(sp, variant)
        except Exception as e:  # noqa: BLE001 (each failing call is reported below)
            failures.append(f"{variant}: {type(e).__name__}: {str(e)[-400:]}")
    assert not failures, f"{len(failures)} of {EXAMPLES} calls failed:\n" + "\n".join(failures)


# Bad input distla does not refuse as jnp does (label: what happens).
OPEN_BAD: dict[str, str] = {}


@pytest.mark.parametrize(
    "label, ops, call",
    [
        pytest.param(*c, marks=[_open(OPEN_BAD[c[0]])] if c[0] in OPEN_BAD else [], id=c[0])
        for c in dropin.BAD_CALLS
    ],
)
def test_bad_input_refused_as_jnp_refuses_it(label, ops, call):
    dropin.check_bad(label, ops, call)


def test_the_runner_can_fail():
    """The comparison raises on a wrong value, dtype and shape (a test that cannot fail is
    a defect)."""
    ref = np.ones((2, 2), np.float32)
    for got in (ref * 1.01, ref.astype(np.float64), np.ones((2, 3), np.float32)):
        with pytest.raises(AssertionError):
            dropin.compare(got, ref, rtol_units=1.0, where="probe")
    dropin.compare(ref.copy(), ref, rtol_units=1.0, where="probe")


# Calls the wide sweep (DISTLA_DROPIN_EXAMPLES=50) found failing and nobody fixed yet; each
# runs here (one call) so that the suite shows it and fails once it is fixed.
V = dropin.Variant
OPEN_CALLS: list = []


@pytest.mark.parametrize(
    "name, variant",
    [
        pytest.param(n, v, marks=_open(why), id=f"{n}-{i}")
        for i, (n, v, why) in enumerate(OPEN_CALLS)
    ],
)
def test_open_call(name, variant):
    dropin.check(dropin.SPECS[name], variant)
