"""kernels/native/openmp.py: the loading thread's OpenMP pool is released, so the engine thread's is the
only one and libgomp does not throttle its barriers into futex sleeps (a step's ~100 parallel
regions would each put both threads to sleep and wake them again)."""

from __future__ import annotations

import asyncio
import ctypes
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine.async_engine import (
    AsyncEngine,
    EngineConfig,
)
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.kernels.native import openmp
from tests.helpers.tiny_models import make_tiny_model

pytestmark = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or openmp._libgomp() is None, reason="needs libgomp and 2+ CPUs")


PR_SET_NAME = 15  # prctl: this thread's name
LOADER = "fg-test-loader"


def tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def settled(expect: int, timeout: float = 5.0) -> int:
    deadline = time.time() + timeout
    while tasks() != expect and time.time() < deadline:
        time.sleep(0.01)
    return tasks()


def test_release_pool_ends_the_calling_threads_workers() -> None:
    seen: dict[str, int] = {}

    def work() -> None:
        torch.set_num_threads(2)
        a = torch.randn(1 << 20)
        seen["before"] = tasks()
        (a * 2 + 1).sum()  # a parallel region in this thread: libgomp makes it a pool
        seen["with_pool"] = tasks()
        seen["released"] = int(openmp.release_pool())
        seen["after"] = settled(seen["before"])

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen["with_pool"] == seen["before"] + 1, seen  # one worker for 2 threads
    assert seen["released"] == 1
    assert seen["after"] == seen["before"], seen


def _set_thread_name(name: bytes) -> None:
    """This OS thread's name (Linux `comm`); threads it creates from now on inherit it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NAME)")


def _named(name: str) -> int:
    """How many of this process's threads carry `name`."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            count += Path(f"/proc/self/task/{tid}/comm").read_text().strip() == name
        except OSError:  # the thread ended while we looked
            pass
    return count


def _settled_named(name: str, expect: int, timeout: float = 10.0) -> int:
    deadline = time.time() + timeout
    while _named(name) != expect and time.time() < deadline:
        time.sleep(0.01)
    return _named(name)


def test_engine_thread_barriers_do_not_sleep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """libgomp throttles barriers into sleeps when its pools' threads outnumber the CPUs; the
    engine keeps them spinning by releasing the loading thread's pool once the model is loaded,
    so the engine thread's is the only one. Checked without timing: the engine calls the libgomp
    control (`omp_pause_resource_all`) from the loading thread, and that thread's workers (named
    after it, as Linux names a new thread after the one that creates it) are gone afterwards
    while the engine steps on its own pool."""
    model = make_tiny_model(tmp_path / "m", hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=4)
    from fairgate.backends.local.engine import async_engine as engine_module

    calls: list[tuple[int, bool]] = []

    def spy() -> bool:
        released = openmp.release_pool()
        calls.append((threading.get_ident(), released))
        return released

    monkeypatch.setattr(engine_module, "release_pool", spy)
    seen: dict[str, object] = {}

    def load() -> None:  # a fresh loading thread: its pool is the only one named LOADER
        torch.set_num_threads(2)
        _set_thread_name(LOADER.encode())
        torch.randn(1 << 20).mul(2).sum()  # parallel work first: libgomp makes this thread a pool
        seen["workers_before"] = _named(LOADER) - 1
        _set_thread_name(b"fg-test-owner")  # the engine's threads are named after this, not LOADER
        seen["engine"] = AsyncEngine(EngineConfig(str(model), max_num_seqs=4, num_kv_blocks=64))
        seen["loader"] = threading.get_ident()
        seen["workers_after"] = _settled_named(LOADER, 0)

    loader = threading.Thread(target=load)
    loader.start()
    loader.join()
    engine = seen["engine"]
    assert isinstance(engine, AsyncEngine)

    async def run() -> int:
        params = SamplingParams(max_tokens=48, temperature=0.0, ignore_eos=True)
        steps = engine.stats().steps
        async for _ in engine.add_request("r", list(range(7, 70)), params):
            pass
        return engine.stats().steps - steps

    try:
        steps = asyncio.run(run())
    finally:
        asyncio.run(engine.aclose())
    assert seen["workers_before"] == 1  # the loading thread had a pool (one worker for 2 threads)
    assert calls == [(seen["loader"], True)]  # released by libgomp, in the loading thread
    assert seen["workers_after"] == 0  # and its worker is gone: the engine thread's pool is alone
    assert steps >= 48
