"""The engine schedules with the fair queue by default, and new weights steer its next steps."""

from __future__ import annotations

from pathlib import Path

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.scheduler.fair_queue import FairQueue
from tests.helpers.fair_order import completion_order


def named(*names: str) -> list[tuple[str, str]]:
    return [(n, n[0]) for n in names]  # tenant = first letter


async def test_default_queue_is_fair_and_weights_steer_the_next_admissions(
    tiny_model_dir: Path,
) -> None:
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_seqs=1))
    try:
        queue = eng.scheduler.queue
        assert isinstance(queue, FairQueue)
        # equal weights: the tenants alternate, a's earlier arrivals win the ties
        order = await completion_order(eng, named("a1", "a2", "b1", "b2"), 20)
        assert order == ["a1", "b1", "a2", "b2"]
        assert queue.counter("a") == queue.counter("b")
        assert eng.set_fairness({"b": 4.0})
        # b now pays a quarter per token: it gets two admissions before a's second
        order = await completion_order(eng, named("a3", "a4", "b3", "b4"), 80)
        assert order == ["a3", "b3", "b4", "a4"]
        assert queue.version == 1 and queue.weight_of("b") == 4.0
        assert queue.weight_of("a") == queue.weight_of("never-seen") == 1.0  # the default
    finally:
        await eng.aclose()
