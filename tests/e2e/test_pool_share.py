"""A tenant's fleet-wide share cap on a pool (`tenant_pool_share`): two gateway instances sharing
PostgreSQL and Redis (a single Redis, and a three-node Redis Cluster) hold one tenant to its
share of the pool's in-flight capacity together; other tenants still get in; slots come back
when requests end."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

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
from tests.helpers.redis_cluster import missing_reason, redis_cluster
from tests.helpers.rows import wait_for
from tests.helpers.upstream import UpstreamServer

# 2 replicas x 4 slots = capacity 8; a quarter of it: 2 requests in flight per tenant, fleet-wide
SHARE, SLOTS = 0.25, 4
BODY = {"model": "pool", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True}


async def _burst(urls: list[str], key: str, n: int) -> list[tuple[int, str]]:
    async def one(i: int) -> tuple[int, str]:
        async with c.stream("POST", urls[i % len(urls)] + "/v1/chat/completions", json=BODY,
                            headers={"authorization": f"Bearer {key}"}) as r:
            body = (await r.aread()).decode()
            return r.status_code, body

    async with httpx.AsyncClient(timeout=60) as c:
        return await asyncio.gather(*(one(i) for i in range(n)))


@pytest.mark.parametrize("redis_kind", ["redis", "cluster"])
def test_two_gateways_hold_a_tenant_to_its_pool_share(tmp_path, redis_kind):
    if redis_kind == "cluster" and missing_reason():
        pytest.skip(missing_reason())
    with contextlib.ExitStack() as es:
        up = es.enter_context(UpstreamServer())
        up.behaviour.token_delay_s = 0.15  # 8 chunks: each stream holds its slot ~1.2 s
        url = es.enter_context(pg_database())
        upgrade(url)
        if redis_kind == "cluster":
            redis_url, cluster = es.enter_context(redis_cluster(tmp_path / "rc"))[0], True
        else:
            redis_url, cluster = REDIS_URL, False
        settings = dict(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False, redis_url=redis_url,
                        redis_prefix=es.enter_context(redis_prefix()), redis_cluster=cluster,
                        tenant_pool_share=SHARE, pool_replica_slots=SLOTS)
        a = es.enter_context(GatewayThread(Settings(**settings)))
        b = es.enter_context(GatewayThread(Settings(**settings)))
        admin = Admin(a.url)
        es.callback(admin.close)
        r = admin.client.post("/admin/pools", json={"name": "pool", "kind": "local", "model": "up-model", "replicas": [
            {"name": "r1", "base_url": up.base_url}, {"name": "r2", "base_url": up.base_url}]})
        assert r.status_code == 201, r.text
        tenants = [admin.tenant()["id"] for _ in range(2)]
        keys = [admin.key(t)["key"] for t in tenants]
        urls = [a.url, b.url]
        for u in urls:  # both gateways serve the pool (b learns it from the config version)
            assert asyncio.run(_burst([u], keys[1], 1))[0][0] == 200
        def drained(tenant: str) -> None:  # both gateways see the fleet-wide count fall to 0: nothing leaked
            for gw in (a, b):  # (settlement runs just after the last byte went out)
                gate = gw.state.pool_share
                assert gate is not None
                wait_for(lambda gw=gw, gate=gate: gw.call(gate.in_flight("pool", tenant)) == 0, timeout=10)


        drained(tenants[1])

        async def two_tenants():
            return await asyncio.gather(_burst(urls, keys[0], 6), _burst(urls, keys[1], 2))

        first, other = asyncio.run(two_tenants())
        codes = sorted(code for code, _ in first)
        assert codes == [200, 200, 429, 429, 429, 429], first  # 2 of 6 across both gateways
        refused = next(body for code, body in first if code == 429)
        assert '"code":"tenant_pool_share"' in refused.replace(" ", "")
        assert [code for code, _ in other] == [200, 200]  # another tenant has its own share
        assert all("data: [DONE]" in body for code, body in first if code == 200)

        drained(tenants[0])
        # the slots came back at settlement: the tenant gets its two again
        again = sorted(code for code, _ in asyncio.run(_burst(urls, keys[0], 2)))
        assert again == [200, 200]
        drained(tenants[0])
