"""Prefix caching through the real AsyncEngine: greedy outputs with the cache equal those
without it (prefix ending mid-block, chunked prefill after a hit, blocks evicted and
recomputed), cached tokens reported in usage, and tenants isolated unless they share a salt."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.engine.types import SamplingParams

BLOCK = 16


def greedy(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)


def ids(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 500) for _ in range(n)]


def make(model: Path, cache: bool, **kw) -> AsyncEngine:
    return AsyncEngine(EngineConfig(str(model), enable_prefix_caching=cache, **kw))


@pytest.fixture(scope="module")
def engines(tiny_model_dir: Path) -> Iterator[tuple[AsyncEngine, AsyncEngine]]:
    # A small step budget: the part after a cached prefix is itself prefilled in chunks.
    on = make(tiny_model_dir, True, num_kv_blocks=64, max_num_batched_tokens=24)
    off = make(tiny_model_dir, False, num_kv_blocks=64, max_num_batched_tokens=24)
    yield on, off
    on.close()
    off.close()


async def test_prefix_ending_mid_block_gives_the_same_greedy_tokens(engines) -> None:
    on, off = engines
    system = ids(1, 2 * BLOCK + 7)  # 39 tokens: two full blocks and 7 into the third
    prompts = [system + ids(100 + i, 5 + 3 * i) for i in range(4)]
    cached = []
    for p in prompts:
        hit = await on.generate(p, greedy(10), tenant="t1")
        ref = await off.generate(p, greedy(10), tenant="t1")
        assert hit.token_ids == ref.token_ids
        assert hit.usage.prompt_tokens == ref.usage.prompt_tokens == len(p)
        assert ref.usage.cached_tokens == 0
        cached.append(hit.usage.cached_tokens)
    # Only the full blocks of the shared part are shared; the first request found nothing.
    assert cached == [0, 2 * BLOCK, 2 * BLOCK, 2 * BLOCK]


async def test_repeated_prompt_hits_all_full_blocks_but_the_last_token(engines) -> None:
    on, off = engines
    p = ids(2, 3 * BLOCK)  # exactly three blocks: the last token must still be computed
    first = await on.generate(p, greedy(6), tenant="t1")
    again = await on.generate(p, greedy(6), tenant="t1")
    ref = await off.generate(p, greedy(6), tenant="t1")
    assert first.token_ids == again.token_ids == ref.token_ids
    assert (first.usage.cached_tokens, again.usage.cached_tokens) == (0, 2 * BLOCK)


async def test_generated_tokens_are_cached_for_a_follow_up_turn(engines) -> None:
    on, off = engines
    p = ids(3, 20)
    first = await on.generate(p, greedy(30), tenant="t1")
    follow = p + first.token_ids + ids(4, 9)  # the next turn repeats the answer
    hit = await on.generate(follow, greedy(8), tenant="t1")
    ref = await off.generate(follow, greedy(8), tenant="t1")
    assert hit.token_ids == ref.token_ids
    # 20 + 30 tokens ran through the model (the last sampled one was never fed back): 3 blocks.
    assert hit.usage.cached_tokens == 3 * BLOCK


async def test_evicted_blocks_are_recomputed_with_the_same_outputs(tiny_model_dir: Path) -> None:
    # 8 blocks of 16: one long request evicts most of what an earlier one left cached.
    on = make(tiny_model_dir, True, num_kv_blocks=8)
    off = make(tiny_model_dir, False, num_kv_blocks=8)
    try:
        a = ids(10, 2 * BLOCK + 8)
        a_ref = (await off.generate(a, greedy(8), tenant="t")).token_ids
        first = await on.generate(a, greedy(8), tenant="t")
        assert first.token_ids == a_ref and first.usage.cached_tokens == 0
        # Released in LRU order, A's tail block goes before its head: B (7 blocks) takes the
        # 6 uncached ones and A's second block, so A keeps only its first block.
        b = ids(11, 100)
        b_out = await on.generate(b, greedy(8), tenant="t")
        assert b_out.token_ids == (await off.generate(b, greedy(8), tenant="t")).token_ids
        evicted = on.block_manager.num_evictions
        assert evicted >= 1
        partial = await on.generate(a, greedy(8), tenant="t")
        assert partial.token_ids == a_ref and partial.usage.cached_tokens == BLOCK
        # C needs every block: A's prefix is gone entirely and is recomputed from scratch.
        c = ids(12, 120)
        c_out = await on.generate(c, greedy(7), tenant="t")
        assert c_out.token_ids == (await off.generate(c, greedy(7), tenant="t")).token_ids
        cold = await on.generate(a, greedy(8), tenant="t")
        assert cold.token_ids == a_ref and cold.usage.cached_tokens == 0
        assert on.block_manager.num_evictions > evicted
        assert on.block_manager.num_used_blocks == 0
    finally:
        on.close()
        off.close()


async def test_mixed_concurrent_traffic_under_pressure_matches_uncached(tiny_model_dir: Path) -> None:
    import asyncio

    # 12 blocks for 10 concurrent requests sharing two prefixes: hits, evictions, preemptions.
    on = make(tiny_model_dir, True, num_kv_blocks=12, max_num_batched_tokens=32)
    off = make(tiny_model_dir, False, num_kv_blocks=64)
    try:
        shared = [ids(20, 40), ids(21, 25)]
        prompts = [shared[i % 2] + ids(30 + i, 3 + i) for i in range(10)]
        refs = [(await off.generate(p, greedy(12), tenant="t")).token_ids for p in prompts]
        for _ in range(2):
            outs = await asyncio.gather(*(on.generate(p, greedy(12), tenant="t") for p in prompts))
            assert [o.token_ids for o in outs] == refs
        assert on.block_manager.prefix_cache_hits > 0 and on.block_manager.num_evictions > 0
        assert on.block_manager.num_used_blocks == 0
    finally:
        on.close()
        off.close()


async def test_tenants_do_not_share_cache_unless_salted_into_one_group(engines) -> None:
    on, _ = engines
    p = ids(5, 3 * BLOCK + 4)
    a1 = await on.generate(p, greedy(4), tenant="alice")
    b1 = await on.generate(p, greedy(4), tenant="bob")
    a2 = await on.generate(p, greedy(4), tenant="alice")
    assert (a1.usage.cached_tokens, b1.usage.cached_tokens, a2.usage.cached_tokens) == (0, 0, 3 * BLOCK)
    assert a1.token_ids == b1.token_ids == a2.token_ids
    # An admin-made shared group: both tenants pass the same salt and share the prefix.
    q = ids(6, 3 * BLOCK + 4)
    a3 = await on.generate(q, greedy(4), tenant="alice", cache_salt="group:g")
    b3 = await on.generate(q, greedy(4), tenant="bob", cache_salt="group:g")
    b4 = await on.generate(q, greedy(4), tenant="bob")  # bob's own salt: not the group's blocks
    assert (a3.usage.cached_tokens, b3.usage.cached_tokens, b4.usage.cached_tokens) == (0, 3 * BLOCK, 0)
