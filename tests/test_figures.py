"""The pictures of docs/img/make_figures.py draw the layouts distla really uses.

The owner maps the script colours by are compared with where ``distla.shard`` and
the FFTs put each element (8 simulated devices, tiny arrays: no compile to speak
of), and each page shows its picture.
"""

from __future__ import annotations

import importlib.util

import jax.numpy as jnp
import numpy as np
import pytest
from docstring_check import ROOT

import distla

spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs/img/make_figures.py")
figures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(figures)


def owners(x) -> np.ndarray:
    """The mesh position ``i * pc + j`` of the device holding each element of ``x``."""
    mesh = x.sharding.mesh
    pc = mesh.devices.shape[1]
    out = np.full(x.shape, -1)
    for shard in x.addressable_shards:
        i, j = np.argwhere(mesh.devices == shard.device)[0]
        if shard.replica_id == 0:
            out[shard.index] = i * pc + j
    return out


def test_the_callers_layout_is_distla_shards():
    mesh = distla.make_mesh((2, 4))
    x = distla.shard(np.zeros((8, 8), np.float32), mesh)
    np.testing.assert_array_equal(owners(x), figures.contiguous_owner(8, 2, 4))


def test_block_cyclic_owner_is_the_rule_the_page_states():
    owner = figures.cyclic_owner(8, 2, 4)
    rows, cols = np.indices((8, 8))
    np.testing.assert_array_equal(owner, (rows % 2) * 4 + cols % 4)


def test_pencils_in_and_out_are_the_transforms_layouts():
    mesh = distla.make_mesh((4, 2))
    x = distla.shard(jnp.zeros((8, 8, 8), jnp.complex64), mesh)
    np.testing.assert_array_equal(owners(x), figures.pencil_owner((8, 8, 8), {0: 0, 1: 1}, 4, 2))
    y = distla.fft.fftn(x)
    np.testing.assert_array_equal(owners(y), figures.pencil_owner((8, 8, 8), {0: 1, 1: 2}, 4, 2))


@pytest.mark.parametrize(
    "page, picture",
    [
        ("lu.md", "layout-block-cyclic.png"),
        ("matmul.md", "summa.png"),
        ("fft.md", "fft-pencil.png"),
    ],
)
def test_each_page_shows_its_picture(page, picture):
    assert picture in figures.FIGURES
    assert (ROOT / "docs" / "img" / picture).is_file()
    assert f"(img/{picture})" in (ROOT / "docs" / page).read_text()
