"""kernels/native/openmp.py: the loading thread's OpenMP pool is released, so the engine thread's is the
only one and libgomp does not throttle its barriers into futex sleeps (a step's ~100 parallel
regions would each put both threads to sleep and wake them again)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
import torch

from fairgate.backends.local.engine import AsyncEngine, EngineConfig
from fairgate.backends.local.types import SamplingParams
from fairgate.kernels.native import openmp
from tests.helpers.tiny_models import make_tiny_model

pytestmark = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or openmp._libgomp() is None, reason="needs libgomp and 2+ CPUs")


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


def _voluntary_switches(tid: int) -> int:
    for line in Path(f"/proc/self/task/{tid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches")


def test_engine_thread_barriers_do_not_sleep(tmp_path: Path) -> None:
    """Steps of a model big enough that its linears run on both threads: with the loading
    thread's pool released, the engine thread waits at barriers by spinning, not by sleeping
    (throttled it sleeps several times per layer, dozens of times per step)."""
    model = make_tiny_model(tmp_path / "m", hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=4)
    torch.set_num_threads(2)
    torch.randn(1 << 20).mul(2).sum()  # this (loading) thread runs parallel work first
    engine = AsyncEngine(EngineConfig(str(model), max_num_seqs=4, num_kv_blocks=64))

    async def run() -> tuple[int, int]:
        params = SamplingParams(max_tokens=48, temperature=0.0, ignore_eos=True)
        async for _ in engine.add_request("warm", list(range(5, 40)), params):
            pass
        tid = engine._thread.native_id
        assert tid is not None
        before = _voluntary_switches(tid)
        steps = engine.stats().steps
        async for _ in engine.add_request("r", list(range(7, 70)), params):
            pass
        return _voluntary_switches(tid) - before, engine.stats().steps - steps

    try:
        switches, steps = asyncio.run(run())
    finally:
        asyncio.run(engine.aclose())
    assert steps >= 48
    # the engine thread blocks on its command queue between requests and may sleep at a
    # barrier when the other thread is preempted; far fewer than one sleep per step
    assert switches < steps // 2, (switches, steps)
