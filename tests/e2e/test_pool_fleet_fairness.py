"""Fleet-wide fairness of a pool's fair queue (`pool_fair_slots`, issue 36): two gateway instances
sharing PostgreSQL and Redis, skewed ingress (tenant A, weight 3, only at gateway 1; tenant B,
weight 1, only at gateway 2), both backlogged on one pool of two loopback replicas: the served
tokens go about 3:1 (two per-gateway queues would serve 1:1), and afterwards no slot, waiter or
demand is left in either gateway or in Redis. With Redis gone mid-backlog, the waiting requests
go on in local order and every one is answered."""

from __future__ import annotations

import asyncio
import contextlib
import json

import httpx
import redis

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import upgrade
from tests.gateway.harness import (
    ADMIN_TOKEN,
    REDIS_URL,
    Admin,
    GatewayThread,
    pg_database,
    redis_prefix,
)
from tests.helpers.redis_server import redis_server
from tests.helpers.rows import wait_for
from tests.helpers.upstream import UpstreamServer

TOKENS = 6
BODY = {"model": "pool", "messages": [{"role": "user", "content": "hi"}], "max_tokens": TOKENS, "stream": True}


async def _one(c: httpx.AsyncClient, url: str, key: str) -> tuple[int, int]:
    """(status, content chunks streamed)."""
    async with c.stream("POST", url + "/v1/chat/completions", json=BODY,
                        headers={"authorization": f"Bearer {key}"}) as r:
        tokens = 0
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                choices = json.loads(line[6:]).get("choices") or [{}]
                tokens += bool(choices[0].get("delta", {}).get("content"))
        return r.status_code, tokens


def _pool(admin: Admin, replicas: list[UpstreamServer]) -> None:
    r = admin.client.post("/admin/pools", json={"name": "pool", "kind": "local", "model": "up-model", "replicas": [
        {"name": f"r{i}", "base_url": up.base_url} for i, up in enumerate(replicas)]})
    assert r.status_code == 201, r.text


def _settings(url: str, redis_url: str, prefix: str) -> Settings:
    # 2 replicas x 2 slots: 4 requests out at once, fleet-wide
    return Settings(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False, redis_url=redis_url,
                    redis_prefix=prefix, pool_fair_slots=2, metrics_tenant_labels=True)


def test_two_gateways_with_skewed_ingress_serve_three_to_one():
    with contextlib.ExitStack() as es:
        replicas = [es.enter_context(UpstreamServer()) for _ in range(2)]
        for up in replicas:
            up.behaviour.token_delay_s = 0.05  # 6 chunks: ~0.3 s per request
        url = es.enter_context(pg_database())
        upgrade(url)
        prefix = es.enter_context(redis_prefix())
        g1 = es.enter_context(GatewayThread(_settings(url, REDIS_URL, prefix)))
        g2 = es.enter_context(GatewayThread(_settings(url, REDIS_URL, prefix)))
        admin = Admin(g1.url)
        es.callback(admin.close)
        _pool(admin, replicas)
        a, b = admin.tenant(weight=3.0)["id"], admin.tenant(weight=1.0)["id"]
        key_a, key_b = admin.key(a)["key"], admin.key(b)["key"]
        assert asyncio.run(_burst([(g2.url, key_b)]))[0] == (200, TOKENS)  # g2 has the pool and weights
        wait_for(lambda: g2.state.fairness_weights.get(a) == 3.0, timeout=10)
        assert g1.state.fairness_weights == g2.state.fairness_weights  # the counters charge the same weights

        order: list[str] = []
        served = {"a": 0, "b": 0}

        async def both() -> None:
            async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=200)) as c:
                async def run(tenant: str, gw: str, key: str) -> None:
                    status, tokens = await _one(c, gw, key)
                    assert status == 200 and tokens == TOKENS
                    order.append(tenant)
                    # past the start (the first gateway to ask takes the idle pool: work-conserving,
                    # then the counters alternate), while both are still backlogged (40 each)
                    if 8 < len(order) <= 40:
                        served[tenant] += tokens

                await asyncio.gather(*(run("a", g1.url, key_a) for _ in range(40)),
                                     *(run("b", g2.url, key_b) for _ in range(40)))

        asyncio.run(both())
        ratio = served["a"] / max(served["b"], 1)
        assert 2.0 <= ratio <= 4.5, (ratio, order[:40])
        pools = [gw.state.backends["pool"] for gw in (g1, g2)]
        assert pools[0].gate.waited > 0 and pools[1].gate.waited > 0  # the fleet's queue held them
        # and placed them: every replica took requests from both gateways on the fleet's slots
        assert all(r.routed.get("fair_queue", 0) > 0 for pool in pools for r in pool.replicas.values())

        clock = g1.state.pool_clock
        assert clock is not None
        for pool in pools:  # nothing leaked (settled just after the last byte)
            wait_for(lambda pool=pool: pool.gate.in_flight == 0 and pool.gate.waiting == 0, timeout=10)
        wait_for(lambda: g1.call(clock.slots_in_use("pool")) == 0, timeout=10)
        r = redis.Redis.from_url(REDIS_URL)
        wait_for(lambda: not list(r.scan_iter(f"{prefix}:{{pool:pool}}:demand:*")), timeout=10)
        counters = g1.call(clock.counters("pool"))
        r.close()
        assert counters[a] > 0 and counters[b] > 0
        # the fleet counter per tenant on /metrics (tenant labels allowed here)
        text = httpx.get(g2.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text
        assert f'fairgate_pool_fair_counter{{pool="pool",tenant="{b}"}}' in text
        # and each of its requests' time at the fair queue: b's 40 (and the first one) came through g2
        count = f'fairgate_pool_fair_wait_seconds_count{{pool="pool",tenant="{b}"}}'
        assert [line for line in text.splitlines() if line.startswith(count)] == [f"{count} 41.0"]


async def _burst(calls: list[tuple[str, str]]) -> list[tuple[int, int]]:
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=200)) as c:
        return await asyncio.gather(*(_one(c, u, k) for u, k in calls))


def test_a_redis_outage_lets_the_waiting_requests_go_on_in_local_order(tmp_path):
    with contextlib.ExitStack() as es:
        up = es.enter_context(UpstreamServer())
        up.behaviour.token_delay_s = 0.1  # 6 chunks: ~0.6 s per request
        url = es.enter_context(pg_database())
        upgrade(url)
        redis_proc = contextlib.ExitStack()  # closed mid-test: Redis gone
        es.callback(redis_proc.close)
        srv = redis_proc.enter_context(redis_server(tmp_path))
        gw = es.enter_context(GatewayThread(_settings(url, srv.url, "outage")))
        admin = Admin(gw.url)
        es.callback(admin.close)
        _pool(admin, [up, up])
        key = admin.key(admin.tenant()["id"])["key"]
        pool = gw.state.backends["pool"]

        async def backlog() -> list[tuple[int, int]]:
            task = asyncio.ensure_future(_burst([(gw.url, key)] * 16))  # 4 out, 12 waiting at the gate
            while pool.gate.waiting < 8:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(redis_proc.close)  # Redis gone while they wait
            return await task

        answers = asyncio.run(backlog())
        assert answers == [(200, TOKENS)] * 16
        assert pool.gate.fallbacks >= 1
        wait_for(lambda: pool.gate.in_flight == 0 and pool.gate.waiting == 0 and pool.gate.local.in_flight == 0,
                 timeout=10)
