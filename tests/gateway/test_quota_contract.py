"""One contract, two stores: the in-process store and the Redis Lua store behave the same."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from fairgate.gateway.quota import QuotaDenied, ScopeLimits, StaleConfig
from tests.gateway.harness import quota_store


@pytest.fixture(params=["memory", "redis"])
async def store(request):
    async with quota_store(request.param, reservation_ttl_s=60) as s:
        yield s


def rid() -> str:
    return uuid.uuid4().hex


async def refusal(store, lim: list[ScopeLimits], tokens: int = 10, cost: float = 0.0) -> QuotaDenied:
    """The QuotaDenied a reserve of `tokens` (and `cost`) under `lim` must raise."""
    with pytest.raises(QuotaDenied) as e:
        await store.reserve(rid(), lim, tokens, cost, 0)
    return e.value


async def test_requests_per_minute_admits_exactly_the_limit(store):
    lim = [ScopeLimits("t:a", requests_per_minute=3)]
    for _ in range(3):
        await store.reserve(rid(), lim, 10, 0.0, 0)
    e = await refusal(store, lim)
    assert e.limit == "requests_per_minute" and e.scope == "tenant"
    assert 1 <= e.retry_after_s <= 60


async def test_settling_does_not_give_back_a_request_slot(store):
    lim = [ScopeLimits("t:a", requests_per_minute=1)]
    r = rid()
    await store.reserve(r, lim, 10, 0.0, 0)
    assert await store.settle(r, 5, 0.0)
    await refusal(store, lim)


async def test_denial_in_one_scope_reserves_in_none(store):
    lims = [ScopeLimits("t:a", daily_tokens=1000), ScopeLimits("k:b", daily_tokens=50)]
    e = await refusal(store, lims, 60)
    assert e.limit == "daily_tokens" and e.scope == "key"
    assert (await store.counters("t:a"))["daily_tokens"] == 0
    await store.reserve(rid(), lims, 50, 0.0, 0)
    assert (await store.counters("t:a"))["daily_tokens"] == 50


async def test_settle_reconciles_tokens_and_is_idempotent(store):
    lim = [ScopeLimits("t:a", tokens_per_minute=100, daily_tokens=100, monthly_tokens=100)]
    r = rid()
    await store.reserve(r, lim, 80, 0.0, 0)
    e = await refusal(store, lim, 30)
    assert e.limit == "tokens_per_minute"
    assert await store.settle(r, 20, 0.0) is True
    assert await store.settle(r, 20, 0.0) is False  # a second settle changes nothing
    c = await store.counters("t:a")
    assert (c["tokens"], c["daily_tokens"], c["monthly_tokens"]) == (20, 20, 20)
    await store.reserve(rid(), lim, 80, 0.0, 0)
    await refusal(store, lim, 1)


async def test_concurrency_slot_is_freed_by_settle(store):
    lim = [ScopeLimits("k:x", max_concurrent=2)]
    a, b = rid(), rid()
    await store.reserve(a, lim, 1, 0.0, 0)
    await store.reserve(b, lim, 1, 0.0, 0)
    e = await refusal(store, lim, 1)
    assert e.limit == "max_concurrent"
    await store.settle(a, 1, 0.0)
    await store.reserve(rid(), lim, 1, 0.0, 0)
    assert (await store.counters("k:x"))["concurrent"] == 2


async def test_monthly_cost_budget(store):
    lim = [ScopeLimits("t:c", monthly_cost=1.0)]
    r = rid()
    await store.reserve(r, lim, 10, 0.75, 0)
    e = await refusal(store, lim, 10, 0.5)
    assert e.limit == "monthly_cost"
    await store.settle(r, 10, 0.25)
    await store.reserve(rid(), lim, 10, 0.5, 0)
    assert (await store.counters("t:c"))["monthly_cost"] == 750_000


async def test_stale_version_is_refused_until_reloaded(store):
    v = await store.config_bus().version()
    assert await store.config_bus().bump() == v + 1
    with pytest.raises(StaleConfig):
        await store.reserve(rid(), [ScopeLimits("t:a")], 1, 0.0, v)
    await store.reserve(rid(), [ScopeLimits("t:a")], 1, 0.0, v + 1)


async def test_concurrent_reservations_never_exceed_budget(store):
    lim = [ScopeLimits("t:z", daily_tokens=500, requests_per_minute=1000)]

    async def one() -> bool:
        try:
            await store.reserve(rid(), lim, 7, 0.0, 0)
            return True
        except QuotaDenied:
            return False

    results = await asyncio.gather(*(one() for _ in range(200)))
    assert sum(results) == 500 // 7
    assert (await store.counters("t:z"))["daily_tokens"] == (500 // 7) * 7
