"""``precision=None`` in ``distla.matmul`` means what it means in ``jnp.matmul``.

The precision of every dot in the lowered program is compared with
``jnp.matmul``'s under jax's default and under ``jax.default_matmul_precision``
contexts; an explicit ``precision=`` is passed through; the factorisations keep
``HIGHEST`` whatever the context.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import build_mesh
from jax import lax

import distla


def dot_precisions(fn, *args) -> set[str]:
    """The ``precision`` attribute of every dot in ``fn``'s lowered (StableHLO) program."""
    text = jax.jit(fn).lower(*args).as_text()
    dots = re.findall(r"stablehlo\.dot_general[^\n]*", text)
    assert dots, "no dot in the program"
    found = (re.search(r"precision = \[([^\]]*)\]", d) for d in dots)
    return {",".join(re.findall(r"[A-Z]+", m.group(1))) if m else "default" for m in found}


@pytest.fixture(scope="module")
def operands():
    mesh = build_mesh((2, 4), "explicit")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    return (
        distla.shard(a, mesh),
        jnp.asarray(a),
        distla.shard(a @ a.T + 16 * np.eye(16, dtype=np.float32), mesh),
    )


@pytest.mark.parametrize("context", [None, "bfloat16", "float32", "tensorfloat32", "highest"])
def test_default_precision_follows_jnp(operands, context):
    a, a1, _ = operands
    with jax.default_matmul_precision(context) if context else _nothing():
        ours = dot_precisions(distla.matmul, a, a)
        theirs = dot_precisions(jnp.matmul, a1, a1)
    assert ours == theirs, (context, ours, theirs)


def test_contexts_differ(operands):
    """The comparison can fail: the contexts give different dot precisions."""
    a, _, _ = operands
    with jax.default_matmul_precision("bfloat16"):
        low = dot_precisions(distla.matmul, a, a)
    with jax.default_matmul_precision("highest"):
        high = dot_precisions(distla.matmul, a, a)
    assert low != high


@pytest.mark.parametrize("precision", ["highest", lax.Precision.HIGH, lax.Precision.DEFAULT])
def test_explicit_precision_passes_through(operands, precision):
    a, a1, _ = operands
    with jax.default_matmul_precision("bfloat16"):
        ours = dot_precisions(lambda x, y: distla.matmul(x, y, precision=precision), a, a)
        theirs = dot_precisions(lambda x, y: jnp.matmul(x, y, precision=precision), a1, a1)
    assert ours == theirs


def test_factorisations_keep_highest(operands):
    """Under a bfloat16 default, the LU solve's products stay HIGHEST."""
    a, _, spd = operands
    with jax.default_matmul_precision("bfloat16"):
        for fn, args in ((distla.linalg.solve, (a, a)), (distla.linalg.cholesky, (spd,))):
            assert dot_precisions(fn, *args) == {"HIGHEST,HIGHEST"}, fn


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False
