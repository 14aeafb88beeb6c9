"""Integers the quota path cannot hold (issue 18): refused with a 400 before anything is
reserved, clamped where they are only "more than any limit"; the reserve script writes nothing
unless it admits; reservations renewed by their live replica, released when it stops."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
import redis.asyncio as aioredis

from fairgate.gateway.quota import MAX_AMOUNT, UNLIMITED, QuotaDenied, ScopeLimits
from fairgate.gateway.quota.redis_store import RESERVE
from tests.gateway.harness import REDIS_URL, quota_store


@pytest.fixture(params=["memory", "redis"])
async def short_ttl_store(request):
    async with quota_store(request.param, reservation_ttl_s=1) as s:
        yield s


def test_limits_beyond_the_store_are_unlimited_not_doubles():
    limits = ScopeLimits("t:x", daily_tokens=10**20, monthly_tokens=3_000_000_000, monthly_cost=1e308)
    assert limits.as_ints() == (UNLIMITED, UNLIMITED, UNLIMITED, UNLIMITED, 3_000_000_000, UNLIMITED)
    assert ScopeLimits("t:x", monthly_cost=float("inf")).as_ints()[5] == UNLIMITED


async def test_huge_amounts_are_clamped_and_still_refused_by_a_finite_limit(short_ttl_store):
    store = short_ttl_store
    v = await store.config_bus().version()
    await store.reserve("big", [ScopeLimits("t:a", max_concurrent=3, requests_per_minute=10)], 10**17, 1e308, v)
    assert (await store.counters("t:a"))["daily_tokens"] == MAX_AMOUNT
    with pytest.raises(QuotaDenied) as denied:
        await store.reserve("big2", [ScopeLimits("t:b", daily_tokens=10**12)], 10**17, 0.0, v)
    assert denied.value.limit == "daily_tokens"
    assert await store.settle("big", 5, 0.0)
    c = await store.counters("t:a")
    assert (c["concurrent"], c["daily_tokens"], c["monthly_cost"]) == (0, 5, 0)


async def test_the_reserve_script_writes_nothing_it_does_not_admit():
    prefix = f"test-quota-{uuid.uuid4().hex[:10]}"
    r = aioredis.Redis.from_url(REDIS_URL)
    try:
        script = r.register_script(RESERVE)
        scope = ["t:a", 10, 1000, 3, -1, -1, -1]
        # a double where an integer belongs: refused before the first write
        keys = [f"{prefix}:{{t:a}}", f"{prefix}:ver"]  # the tenant's slot, the config version
        out = await script(keys=keys, args=["-", "r1", "0", 1000, "20261201", "202612", "1e+17", 0, 1, *scope])
        assert out[0] == 3
        # the second scope is over its limit: the first one's counters stay untouched
        full = ["k:b", -1, -1, 0, -1, -1, -1]
        out = await script(keys=keys, args=["-", "r2", "0", 1000, "20261201", "202612", 5, 0, 2, *scope, *full])
        assert out[:3] == [1, b"max_concurrent", b"k:b"]
        assert [k async for k in r.scan_iter(f"{prefix}:*")] == []
    finally:
        await r.aclose()


async def test_a_live_replica_renews_its_slots_and_a_dead_one_loses_them(short_ttl_store):
    store = short_ttl_store
    v = await store.config_bus().version()
    one = [ScopeLimits("t:c", max_concurrent=1)]
    await store.reserve("held", one, 1, 0.0, v)
    await asyncio.sleep(2.5)  # 2.5 TTLs: only the heartbeat keeps it
    with pytest.raises(QuotaDenied):
        await store.reserve("other", one, 1, 0.0, v)
    await store.heartbeat.aclose()  # the replica "dies": nobody renews any more
    await asyncio.sleep(1.5)
    await store.reserve("other", one, 1, 0.0, v)
    assert (await store.counters("t:c"))["concurrent"] == 1


@pytest.mark.parametrize("redis", [False, True])
def test_max_tokens_beyond_the_counters_is_a_400_and_reserves_nothing(make_gateway, redis):
    gw, admin = make_gateway(redis=redis)
    t = admin.tenant()
    admin.quota(t["id"], max_concurrent=3, requests_per_minute=100)
    key = admin.key(t["id"])["key"]
    h = {"authorization": f"Bearer {key}"}
    msg = [{"role": "user", "content": "hi"}]
    for _ in range(3):
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h, json={"model": "up", "messages": msg,
                                                                          "max_tokens": 10**17})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert (err["param"], err["code"]) == ("max_tokens", "invalid_value") and "at most 2147483647" in err["message"]
    assert gw.call(gw.state.quota.counters(f"t:{t['id']}"))["requests"] == 0
    for _ in range(3):
        assert httpx.post(gw.url + "/v1/chat/completions", headers=h,
                          json={"model": "up", "messages": msg, "max_tokens": 2}).status_code == 200


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_quota_admin_values_fit_their_columns_or_are_a_400(make_gateway, db):
    gw, admin = make_gateway(db=db)
    t = admin.tenant()
    ok = admin.client.put(f"/admin/tenants/{t['id']}/quota", json={"monthly_tokens": 3_000_000_000})
    assert ok.status_code == 200 and ok.json()["monthly_tokens"] == 3_000_000_000
    assert admin.client.get(f"/admin/tenants/{t['id']}/quota").json()["monthly_tokens"] == 3_000_000_000
    for body, param in (({"daily_tokens": 1e20}, "daily_tokens"), ({"monthly_cost": 1e308}, "monthly_cost"),
                        ({"max_concurrent": 2**63}, "max_concurrent")):
        r = admin.client.put(f"/admin/tenants/{t['id']}/quota", json=body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == param and err["message"].startswith(f"{param}: ") and err["code"] == "invalid_value"
    key = admin.key(t["id"])["key"]
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "up", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert r.status_code == 200


@pytest.mark.parametrize("redis", [False, True])
def test_a_stored_cost_budget_beyond_the_counters_is_no_limit_not_a_503(make_gateway, redis):
    from sqlalchemy import update

    from fairgate.gateway.store.tables import QuotaPolicy

    gw, admin = make_gateway(redis=redis)
    t = admin.tenant()
    admin.quota(t["id"], monthly_cost=5.0)
    with gw.state.sessions.begin() as s:  # written by an older version or by hand: not through the API
        s.execute(update(QuotaPolicy).where(QuotaPolicy.tenant_id == t["id"]).values(monthly_cost=1e308))
    key = admin.key(t["id"])["key"]  # the key's creation bumps the config version: limits reload
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "up", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
    assert r.status_code == 200, r.text
