"""The engine schedules with the fair queue by default, and new weights steer its next steps."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backends.local.engine import AsyncEngine, EngineConfig
from backends.local.types import SamplingParams
from scheduler.fair_queue import FairQueue

GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


async def completion_order(eng: AsyncEngine, names: list[str], base: int) -> list[str]:
    """Queue a blocker, then `names` (tenant = first letter) behind it; with one sequence
    slot they finish strictly in admission order."""
    order: list[str] = []

    async def run(name: str, i: int) -> None:
        prompt = [base + 10 * i + k for k in range(8)]  # distinct, under one block: no cache hits
        await eng.generate(prompt, GREEDY, request_id=name, tenant=name[0])
        order.append(name)

    blocker = asyncio.create_task(
        eng.generate([3] * 8, SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True),
                     request_id=f"z{base}", tenant="z"))
    tasks = [asyncio.create_task(run(n, i)) for i, n in enumerate(names)]
    await asyncio.gather(blocker, *tasks)
    return order


async def test_default_queue_is_fair_and_weights_steer_the_next_admissions(
    tiny_model_dir: Path,
) -> None:
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_seqs=1))
    try:
        queue = eng.scheduler.queue
        assert isinstance(queue, FairQueue)
        # equal weights: the tenants alternate, a's earlier arrivals win the ties
        assert await completion_order(eng, ["a1", "a2", "b1", "b2"], 20) == ["a1", "b1", "a2", "b2"]
        assert queue.counter("a") == queue.counter("b")
        assert eng.set_fairness({"b": 4.0})
        # b now pays a quarter per token: it gets two admissions before a's second
        assert await completion_order(eng, ["a3", "a4", "b3", "b4"], 80) == ["a3", "b3", "b4", "a4"]
        assert queue.version == 1 and queue.weight_of("b") == 4.0
        assert queue.weight_of("a") == queue.weight_of("never-seen") == 1.0  # the default
    finally:
        await eng.aclose()
