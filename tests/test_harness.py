"""The harness's own assumptions (tests/conftest.py)."""

import subprocess
import sys
import textwrap

import pytest
from conftest import MAX_MAPS, _maps

# conftest's _release_compiled_programs keeps a worker under vm.max_map_count by
# clearing jax's caches: that works only while a loaded executable holds memory maps
# and jax.clear_caches() gives them back. Checked in a fresh process, so the count is
# this program's alone.
_PROBE = textwrap.dedent(
    """
    import gc
    import jax, jax.numpy as jnp
    def maps():
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    jnp.ones(1).block_until_ready()
    start = maps()
    for i in range(60):
        jax.jit(lambda x, i=i: jnp.sin(x) * i)(jnp.ones(i + 1)).block_until_ready()
    loaded = maps()
    jax.clear_caches()
    gc.collect()
    print(start, loaded, maps())
    """
)


@pytest.mark.skipif(_maps() is None, reason="needs /proc/self/maps (Linux)")
def test_clearing_jaxs_caches_gives_back_the_executables_maps():
    run = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    start, loaded, cleared = map(int, run.stdout.split())
    assert loaded - start >= 120, (start, loaded)  # about 3.5 maps per executable
    assert cleared - start < (loaded - start) / 4, (start, loaded, cleared)


def test_the_map_threshold_leaves_room_below_linuxs_limit():
    assert 0 < MAX_MAPS <= 65_530 // 2
