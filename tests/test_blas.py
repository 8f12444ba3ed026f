"""distla/_core/blas.py: the OpenBLAS thread limit under simulated CPU devices.

It is visible and can be lifted.
"""

import logging

import numpy as np
import threadpoolctl

import distla
from distla._core import blas as _blas


def _blas_threads():
    return {p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"}


def test_limit_is_logged_lifted_and_set_again(caplog):
    # conftest runs 8 CPU devices in this process: distla limits OpenBLAS once
    distla.limit_cpu_blas(False)
    before = _blas_threads()
    assert _blas._limiter is None
    try:
        with caplog.at_level(logging.INFO, logger="distla"):
            distla.limit_cpu_blas(True)  # several CPU devices here: set at once
        assert _blas_threads() == {1}
        assert "distla.limit_cpu_blas(False)" in caplog.text
        assert _blas.ENV_VAR in caplog.text
        distla.limit_cpu_blas(False)  # lifted: the previous limits come back
        assert _blas_threads() == before
        _blas.single_thread_lapack_for_cpu_devices()  # and distla does not set it again
        assert _blas_threads() == before
    finally:
        distla.limit_cpu_blas(True)
    assert _blas_threads() == {1}


def test_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv(_blas.ENV_VAR, "0")
    monkeypatch.setattr(_blas, "_enabled", None)  # as in a fresh process
    assert not _blas._wanted()
    monkeypatch.setenv(_blas.ENV_VAR, "1")
    monkeypatch.setattr(_blas, "_enabled", None)
    assert _blas._wanted()


def test_distla_still_runs_without_the_limit():
    distla.limit_cpu_blas(False)
    try:
        mesh = distla.make_mesh((2, 4))
        rng = np.random.default_rng(0)
        a = (rng.standard_normal((40, 40)) + 40 * np.eye(40)).astype(np.float32)
        x = distla.linalg.solve(distla.shard(a, mesh), distla.shard(np.ones(40, np.float32), mesh))
        np.testing.assert_allclose(a @ np.asarray(x), np.ones(40), rtol=1e-4, atol=1e-4)
        assert _blas._limiter is None  # the call did not set the limit again
    finally:
        distla.limit_cpu_blas(True)
    assert _blas_threads() == {1}


def test_every_blas_thread_gives_the_threads_back_until_the_last_block_ends():
    distla.limit_cpu_blas(True)
    assert _blas_threads() == {1}
    original = _blas._limiter.get_original_num_threads()["blas"]
    with _blas.every_blas_thread():
        assert _blas_threads() == {original}
        with _blas.every_blas_thread():  # nested (or another thread's): one lift
            assert _blas_threads() == {original}
        assert _blas_threads() == {original}
    assert _blas_threads() == {1}
    distla.limit_cpu_blas(False)  # no limit: a no-op
    try:
        before = _blas_threads()
        with _blas.every_blas_thread():
            assert _blas_threads() == before
        assert _blas_threads() == before
    finally:
        distla.limit_cpu_blas(True)


def test_the_eager_one_device_plan_runs_with_every_blas_thread(monkeypatch):
    """Called eagerly, the one-device plan computes on one device while the others wait:
    its LAPACK call runs inside every_blas_thread, and the limit is back afterwards."""
    from distla._core import one_device
    from distla._core import plan as _plan

    seen = []
    lift = _blas.every_blas_thread

    def recording():
        seen.append(_blas_threads())
        return lift()

    monkeypatch.setattr(one_device, "every_blas_thread", recording)
    mesh = distla.make_mesh((2, 4))
    a = (np.random.default_rng(0).standard_normal((48, 48)) + 48 * np.eye(48)).astype(np.float32)
    with _plan.budget(2**20):
        x = distla.linalg.solve(distla.shard(a, mesh), distla.shard(np.ones(48, np.float32), mesh))
    np.testing.assert_allclose(a @ np.asarray(x), np.ones(48), rtol=1e-4, atol=1e-4)
    assert seen == [{1}] and _blas_threads() == {1}


def test_the_hessenberg_one_device_plan_keeps_one_blas_thread(monkeypatch):
    """gehrd's panel is a BLAS-2 product per column, a barrier of OpenBLAS's threads each:
    its eager one-device plan keeps the one-thread limit (2 threads took 7-42 s at
    n = 1024 on the loaded test bed, 1 thread 0.6-0.8 s), while solve's lifts it."""
    import distla.scipy.linalg as sla
    from distla._core import one_device

    lifts = []
    lift = _blas.every_blas_thread

    def recording():
        lifts.append(_blas_threads())
        return lift()

    monkeypatch.setattr(one_device, "every_blas_thread", recording)
    mesh = distla.make_mesh((2, 4))
    a = np.random.default_rng(0).standard_normal((48, 48)).astype(np.float32)
    x = distla.shard(a, mesh)
    h, q = sla.hessenberg(x, calc_q=True, plan="one_device")
    h, q = np.asarray(h), np.asarray(q)
    np.testing.assert_allclose(q @ h @ q.T, a, atol=1e-4)
    assert lifts == [] and _blas_threads() == {1}
    distla.linalg.solve(x + 48 * np.eye(48, dtype=np.float32), x, plan="one_device")
    assert lifts == [{1}] and _blas_threads() == {1}
