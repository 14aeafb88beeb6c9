"""AsyncEngine lifecycle: aborts and disconnects free blocks, failed steps stay contained,
no leaks under thousands of requests, per-tenant cache salt, fairness weights."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.engine.types import RunnerInput, SamplingParams
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.scheduler.fair_queue import FairQueue


def greedy(max_tokens: int, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **kw)


async def wait_idle(engine: AsyncEngine) -> None:
    """Until every request has left the engine (its thread then waits on its command queue)."""
    for _ in range(2000):
        if engine.num_unfinished == 0 and not engine.scheduler.has_unfinished_requests():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"engine not idle: {engine.num_unfinished} unfinished")


async def test_abort_frees_blocks_at_once(tiny_model_dir: Path) -> None:
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32))
    try:
        stream = eng.add_request("long", list(range(5, 45)), greedy(200))
        first = await stream.__anext__()
        assert first.token_ids and not first.finished
        assert eng.stats().kv_blocks_used >= 3
        await stream.aclose()
        await wait_idle(eng)
        assert eng.block_manager.check_pool_whole()
        assert eng.stats().requests_aborted == 1
        # An explicit abort by id works the same, and ends the stream with "abort".
        stream = eng.add_request("long-2", list(range(5, 45)), greedy(200))
        await stream.__anext__()
        eng.abort("long-2")
        finals = [d async for d in stream if d.finished]
        assert [d.finish_reason for d in finals] == ["abort"]
        await wait_idle(eng)
        assert eng.block_manager.check_pool_whole()
    finally:
        await eng.aclose()


async def test_cancelled_consumer_aborts(tiny_model_dir: Path) -> None:
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32))
    try:
        got_one = asyncio.Event()

        async def consume() -> None:
            async for _ in eng.add_request("c", list(range(5, 25)), greedy(400)):
                got_one.set()

        task = asyncio.create_task(consume())
        await got_one.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_idle(eng)
        assert eng.block_manager.check_pool_whole()
    finally:
        await eng.aclose()


POISON = 7  # a prompt holding this id makes the faulty runner raise


class FaultyRunner(ModelRunner):
    """The real runner, failing any step that carries a poisoned prompt (fault injection)."""

    def execute(self, inputs: list[RunnerInput]) -> list[int | None]:
        if any(POISON in i.token_ids for i in inputs):
            raise RuntimeError("injected fault")
        return super().execute(inputs)


async def test_failed_step_fails_only_its_requests(tiny_model_dir: Path) -> None:
    runner = FaultyRunner(tiny_model_dir, num_kv_blocks=64)
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), max_num_batched_tokens=64), runner=runner)
    try:
        ok = await eng.generate([1, 2, 3, 4], greedy(5))
        bad = await eng.generate([1, 2, POISON, 4], greedy(5))
        assert bad.finish_reason == "error" and bad.error
        assert eng.stats().requests_failed == 1
        await wait_idle(eng)
        assert eng.block_manager.check_pool_whole()
        again = await eng.generate([1, 2, 3, 4], greedy(5))
        assert again.token_ids == ok.token_ids
    finally:
        await eng.aclose()


@pytest.mark.parametrize("kv_cache_dtype", ["auto", "int8", "int4"])
async def test_no_leaks_under_thousands_of_requests_aborts_and_disconnects(
    tiny_model_dir: Path, kv_cache_dtype: str
) -> None:
    # 24 blocks x 16 = 384 tokens for up to 32 sequences of up to ~70 tokens: preemption.
    eng = AsyncEngine(
        EngineConfig(str(tiny_model_dir), num_kv_blocks=24, max_num_seqs=32, max_num_batched_tokens=128,
                     kv_cache_dtype=kv_cache_dtype)
    )
    rng = random.Random(0)
    outcomes = {"done": 0, "aborted": 0, "left": 0, "dropped": 0}
    reference = await eng.generate([1, 2, 3, 4, 5], greedy(6))

    async def one(i: int) -> None:
        ids = [rng.randrange(3, eng.vocab_size) for _ in range(rng.randrange(4, 60))]
        sampling = SamplingParams(
            max_tokens=rng.randint(1, 8), temperature=rng.choice([0.0, 0.8]), seed=i, ignore_eos=rng.random() < 0.5
        )
        fate = rng.random()
        stream = eng.add_request(f"r{i}", ids, sampling, tenant=f"t{i % 5}")
        if fate < 0.1:  # aborted by id before or after the first token
            if rng.random() < 0.5:
                await stream.__anext__()
            eng.abort(f"r{i}")
            async for _ in stream:
                pass
            outcomes["aborted"] += 1
        elif fate < 0.2:  # the client goes away mid-stream
            await stream.__anext__()
            await stream.aclose()
            outcomes["left"] += 1
        elif fate < 0.25:  # the consumer drops the stream without closing it
            del stream
            outcomes["dropped"] += 1
        else:
            deltas = [d async for d in stream]
            last = deltas[-1]
            assert last.finished and last.finish_reason in ("stop", "length")
            assert 1 <= last.usage.completion_tokens <= sampling.max_tokens
            outcomes["done"] += 1

    try:
        for wave in range(10):  # 10 waves of 200 concurrent requests
            await asyncio.gather(*(one(wave * 200 + i) for i in range(200)))
        await wait_idle(eng)
        assert eng.block_manager.check_pool_whole()
        stats = eng.stats()
        assert stats.preemptions > 0, "the pool was meant to be small enough to preempt"
        assert stats.running == 0 and stats.waiting == 0 and stats.kv_blocks_used == 0
        assert sum(outcomes.values()) == 2000 and min(outcomes.values()) > 0
        again = await eng.generate([1, 2, 3, 4, 5], greedy(6))
        assert again.token_ids == reference.token_ids
    finally:
        await eng.aclose()


async def test_prefix_cache_is_salted_per_tenant(tiny_model_dir: Path) -> None:
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64))
    try:
        prompt = list(range(10, 60))  # 50 tokens: 3 full blocks
        a1 = await eng.generate(prompt, greedy(2), tenant="acme")
        a2 = await eng.generate(prompt, greedy(2), tenant="acme")
        b1 = await eng.generate(prompt, greedy(2), tenant="globex")
        assert a1.usage.cached_tokens == 0
        assert a2.usage.cached_tokens == 48
        assert b1.usage.cached_tokens == 0  # another tenant never hits acme's blocks
        shared = await eng.generate(prompt, greedy(2), tenant="globex", cache_salt="acme")
        assert shared.usage.cached_tokens == 48  # an explicit salt opts into sharing
        assert a2.token_ids == a1.token_ids == b1.token_ids
        stats = eng.stats()
        assert stats.prefix_cache_hits >= 96 and stats.prefix_cache_queries >= 4 * 48
    finally:
        await eng.aclose()


async def test_set_fairness_reaches_the_fair_queue(tiny_model_dir: Path) -> None:
    queue = FairQueue()
    eng = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32), wait_queue=queue)
    try:
        eng.set_fairness({"acme": 3.0, "globex": 1.0}, version=5)
        await eng.generate([1, 2, 3], greedy(2), tenant="acme")  # a step after the command
        assert queue.version == 5 and queue.weight_of("acme") == 3.0
        assert eng.fairness_weights == {"acme": 3.0, "globex": 1.0} and eng.fairness_version == 5
        assert not eng.set_fairness({"acme": 1.0}, version=4)  # stale: ignored
        await eng.generate([1, 2, 3], greedy(1))
        assert queue.version == 5 and queue.weight_of("acme") == 3.0
    finally:
        await eng.aclose()


async def test_a_float16_kv_cache_from_the_cli_flags_serves_like_the_float32_one(tiny_model_dir: Path) -> None:
    from fairgate.gateway.cli import build_parser

    args = build_parser().parse_args(["engine", "--model", str(tiny_model_dir), "--kv-cache-dtype", "float16",
                                      "--num-kv-blocks", "32"])
    engines = [AsyncEngine(EngineConfig.from_args(args)), AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=32))]
    try:
        assert str(engines[0].runner.kv_cache.dtype) == "torch.float16"
        assert str(engines[1].runner.kv_cache.dtype) == "torch.float32"
        outs = [await e.generate(list(range(5, 30)), greedy(12)) for e in engines]
        assert len(outs[0].token_ids) == 12
        assert outs[0].token_ids == outs[1].token_ids  # the tiny model's margins outlast 16-bit rounding
    finally:
        for e in engines:
            await e.aclose()
