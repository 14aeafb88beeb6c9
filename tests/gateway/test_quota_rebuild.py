"""Budgets survive a Redis that comes back empty (issue 35): the gateway rebuilds each tenant's
daily and monthly tokens and monthly cost from the usage rows before it admits again, so a
restart never grants a second budget. A private redis-server, restarted on its port with no data."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
import redis
from sqlalchemy import func, select

from fairgate.gateway.quota import BudgetUse, QuotaDenied, ScopeLimits
from fairgate.gateway.quota.memory import MemoryQuotaStore
from fairgate.gateway.quota.redis_store import RedisQuotaStore
from fairgate.gateway.store.tables import UsageRecord
from tests.gateway.harness import REDIS_URL, GatewayThread
from tests.helpers.redis_server import missing_reason, redis_server


def chat(url: str, key: str, max_tokens: int = 60) -> httpx.Response:
    return httpx.post(url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": "up", "max_tokens": max_tokens,
                            "messages": [{"role": "user", "content": "one two three four five six"}]})


def used_by_sql(gw, tenant_id: str, rows: int) -> tuple[int, float]:
    """The tenant's tokens and cost by its usage rows, once all `rows` are written (a row is
    queued as its request settles, just after the answer went out)."""
    deadline = time.monotonic() + 10
    while True:
        assert gw.call(gw.state.usage.flush())
        with gw.state.sessions() as s:
            n, tokens, cost = s.execute(select(func.count(), func.sum(UsageRecord.total_tokens),
                                               func.sum(UsageRecord.cost))
                                        .where(UsageRecord.tenant_id == tenant_id)).one()
        if n >= rows or time.monotonic() > deadline:
            assert n == rows
            return int(tokens or 0), float(cost or 0.0)
        time.sleep(0.05)


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_a_redis_restart_grants_no_second_budget(make_gateway, tmp_path, db) -> None:
    with redis_server(tmp_path) as srv:
        gw, admin = make_gateway(db=db, redis_url=srv.url, redis_prefix="rebuild")
        admin.client.patch("/admin/backends/up", json={"input_cost_per_mtok": 1000.0, "output_cost_per_mtok": 1000.0})
        capped, roomy = admin.tenant(), admin.tenant()
        admin.quota(capped["id"], daily_tokens=600)
        admin.quota(roomy["id"], monthly_tokens=100_000, monthly_cost=1000.0)
        capped_key, roomy_key = admin.key(capped["id"])["key"], admin.key(roomy["id"])["key"]
        statuses = [chat(gw.url, capped_key).status_code for _ in range(12)]
        assert 200 in statuses and statuses[-1] == 429
        assert chat(gw.url, roomy_key).status_code == 200
        spent, _ = used_by_sql(gw, capped["id"], statuses.count(200))
        roomy_spent, roomy_cost = used_by_sql(gw, roomy["id"], 1)
        assert 0 < spent <= 600 and roomy_cost > 0

    with redis_server(tmp_path, port=srv.port) as again:  # the same port, no data
        assert again.admin().dbsize() == 0
        refused = chat(gw.url, capped_key)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "daily_tokens" or "daily_tokens" in refused.text
        assert used_by_sql(gw, capped["id"], statuses.count(200))[0] == spent  # nothing more got through
        counters = gw.call(gw.state.quota.counters(f"t:{capped['id']}"))
        assert counters["daily_tokens"] == spent and counters["monthly_tokens"] == spent
        # a tenant with budget left goes on, its month counted from the rows it already had
        assert chat(gw.url, roomy_key).status_code == 200
        now_spent, now_cost = used_by_sql(gw, roomy["id"], 2)
        counters = gw.call(gw.state.quota.counters(f"t:{roomy['id']}"))
        assert counters["monthly_tokens"] == now_spent > roomy_spent
        assert counters["monthly_cost"] == pytest.approx(now_cost * 1_000_000, abs=2)


def test_a_restarted_single_process_gateway_grants_no_second_budget(make_gateway, upstream) -> None:
    gw, admin = make_gateway()  # no Redis: the in-process store, gone with the process
    tenant = admin.tenant()
    admin.quota(tenant["id"], daily_tokens=600)
    key = admin.key(tenant["id"])["key"]
    statuses = [chat(gw.url, key).status_code for _ in range(12)]
    assert statuses[-1] == 429
    spent, _ = used_by_sql(gw, tenant["id"], statuses.count(200))
    settings = gw.state.settings
    gw.__exit__(None, None, None)
    with GatewayThread(settings) as again:
        refused = chat(again.url, key)
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "daily_tokens"
        counters = again.call(again.state.quota.counters(f"t:{tenant['id']}"))
        assert counters["daily_tokens"] == spent


@pytest.fixture(params=["memory", "redis"])
async def store_with_rows(request):
    """(store, the tenant ids it asked the rows about); tenant "a" used 550 tokens today."""
    asked: list[str] = []

    async def rows(tenant_id: str) -> dict[str, BudgetUse]:
        asked.append(tenant_id)
        return {"t:a": BudgetUse(550, 900, 2_000_000), "k:ka": BudgetUse(500, 500, 0)}

    if request.param == "memory":
        store: MemoryQuotaStore | RedisQuotaStore = MemoryQuotaStore(budgets=rows)
    else:
        store = RedisQuotaStore(REDIS_URL, prefix=f"fgtest-rebuild-{uuid.uuid4().hex[:8]}", budgets=rows)
    yield store, asked
    if isinstance(store, RedisQuotaStore):
        r = redis.Redis.from_url(REDIS_URL)
        keys = list(r.scan_iter(f"{store.base('t:a').split(':{')[0]}:*"))
        if keys:
            r.delete(*keys)
        r.close()
    await store.aclose()


async def test_a_store_rebuilds_a_tenants_budgets_once_and_never_lowers_a_counter(store_with_rows) -> None:
    store, asked = store_with_rows
    v = await store.config_bus().version()
    capped = [ScopeLimits("t:a", daily_tokens=600), ScopeLimits("k:ka")]
    with pytest.raises(QuotaDenied) as denied:
        await store.reserve("r1", capped, 60, 0.0, v)
    assert denied.value.limit == "daily_tokens"
    await store.reserve("r2", capped, 50, 0.0, v)
    key_counters = (await store.counters("k:ka", "t:a") if isinstance(store, RedisQuotaStore)
                    else await store.counters("k:ka"))
    assert (await store.counters("t:a"))["daily_tokens"] == 600 and key_counters["monthly_tokens"] == 550
    assert (await store.counters("t:a"))["monthly_cost"] == 2_000_000
    await store.reserve("r3", [ScopeLimits("t:b")], 10, 0.0, v)  # no budget: the rows are not read
    assert asked == ["a"]
    if isinstance(store, RedisQuotaStore):  # the marker gone (evicted): rebuilt, nothing lowered
        r = redis.Redis.from_url(REDIS_URL)
        assert r.delete(*r.keys(store.base("t:a") + ":seeded:*")) == 1
        r.close()
        with pytest.raises(QuotaDenied):
            await store.reserve("r4", capped, 1, 0.0, v)
        assert asked == ["a", "a"] and (await store.counters("t:a"))["daily_tokens"] == 600


async def test_a_request_in_flight_when_redis_lost_its_budgets_is_charged_when_it_settles() -> None:
    """Its reservation went with Redis and the rows the rebuild read do not have it yet: settling
    it charges what it used, once; an expired reservation (no rebuild since) is not charged again."""

    async def rows(tenant_id: str) -> dict[str, BudgetUse]:
        return {"t:a": BudgetUse(100, 100, 0)}

    store = RedisQuotaStore(REDIS_URL, prefix=f"fgtest-inflight-{uuid.uuid4().hex[:8]}", budgets=rows)
    r = redis.Redis.from_url(REDIS_URL)
    try:
        v = await store.config_bus().version()
        capped = [ScopeLimits("t:a", daily_tokens=10_000)]
        await store.reserve("in-flight", capped, 500, 0.0, v)
        assert (await store.counters("t:a"))["daily_tokens"] == 600  # rows 100 + reserved 500
        r.delete(*r.scan_iter(store.base("t:a") + ":*"))  # Redis restarted empty
        time.sleep(0.002)  # the rebuild's clock moves past the reservation's
        await store.reserve("after", capped, 50, 0.0, await store.config_bus().version())  # rebuilds: 100 + 50
        assert (await store.counters("t:a"))["daily_tokens"] == 150
        assert await store.settle("in-flight", 40, 0.0)  # used 40: charged now
        assert await store.settle("after", 50, 0.0)
        assert (await store.counters("t:a"))["daily_tokens"] == 190
        assert not await store.settle("in-flight", 40, 0.0)  # once
        await store.reserve("expires", capped, 70, 0.0, v)
        r.delete(store.base("t:a") + ":r:expires")  # its TTL ran out: the 70 reserved stay counted
        await store.settle("expires", 30, 0.0)
        assert (await store.counters("t:a"))["daily_tokens"] == 260
    finally:
        keys = list(r.scan_iter(f"{store.base('t:a').split(':{')[0]}:*"))
        if keys:
            r.delete(*keys)
        r.close()
        await store.aclose()
