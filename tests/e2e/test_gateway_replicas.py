"""Two `fairgate serve` processes sharing one PostgreSQL and one Redis: limits are exact across
replicas under concurrency, the usage table agrees with what was served, and a key revoked on
one replica is refused at once on the other."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import psycopg
import pytest

from fairgate.backends.openai_wire import parse_request
from fairgate.gateway.store.db import upgrade
from tests.gateway.harness import (
    ADMIN_TOKEN,
    REDIS_URL,
    Admin,
    GatewayProcess,
    pg_database,
    redis_prefix,
)
from tests.helpers.upstream import UpstreamServer

MAX_TOKENS = 4
BODY = {"model": "up", "messages": [{"role": "user", "content": "count to four"}], "max_tokens": MAX_TOKENS}


@pytest.fixture(scope="module")
def fleet():
    with contextlib.ExitStack() as es:
        # the upstream reports exactly the gateway's prompt bound, so reserved == used
        up = es.enter_context(UpstreamServer())
        up.behaviour.prompt_tokens_of = lambda body: parse_request("chat", body).prompt_tokens_bound
        url = es.enter_context(pg_database())
        upgrade(url)
        prefix = es.enter_context(redis_prefix())
        env = {"FAIRGATE_DATABASE_URL": url, "FAIRGATE_REDIS_URL": REDIS_URL, "FAIRGATE_REDIS_PREFIX": prefix,
               "FAIRGATE_ADMIN_TOKEN": ADMIN_TOKEN, "FAIRGATE_EMBEDDED_ENGINE": "false",
               "FAIRGATE_USAGE_FLUSH_INTERVAL_S": "0.02"}
        a = es.enter_context(GatewayProcess(env))
        b = es.enter_context(GatewayProcess(env))
        admin = Admin(a.url)
        es.callback(admin.close)
        admin.backend("up", up.base_url, model="up-model")
        yield a, b, admin, url


async def blast(urls: list[str], key: str, n: int) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=400)
    async with httpx.AsyncClient(timeout=60, limits=limits) as c:
        h = {"authorization": f"Bearer {key}"}
        return await asyncio.gather(*(c.post(urls[i % len(urls)] + "/v1/chat/completions", headers=h, json=BODY)
                                      for i in range(n)))


def usage_of(db_url: str, tenant_id: str, expect: int) -> tuple[int, int]:
    import time

    deadline = time.time() + 30
    while True:
        with psycopg.connect(db_url) as conn:
            n, total = conn.execute("SELECT count(*), coalesce(sum(total_tokens), 0) FROM usage_records "
                                    "WHERE tenant_id = %s", (tenant_id,)).fetchone()
        if n >= expect or time.time() > deadline:
            return n, total
        time.sleep(0.1)


def test_requests_per_minute_exact_across_replicas(fleet):
    a, b, admin, db_url = fleet
    t = admin.tenant()
    admin.quota(t["id"], requests_per_minute=100)
    key = admin.key(t["id"])["key"]
    responses = asyncio.run(blast([a.url, b.url], key, 300))
    ok = [r for r in responses if r.status_code == 200]
    limited = [r for r in responses if r.status_code == 429]
    assert len(ok) == 100 and len(limited) == 200, (a.log_tail(), b.log_tail())
    assert {r.json()["error"]["code"] for r in limited} == {"requests_per_minute"}
    assert all(int(r.headers["retry-after"]) >= 1 for r in limited)
    served_tokens = sum(r.json()["usage"]["total_tokens"] for r in ok)
    assert usage_of(db_url, t["id"], 100) == (100, served_tokens)


def test_token_budget_exact_across_replicas(fleet):
    a, b, admin, db_url = fleet
    per_request = parse_request("chat", dict(BODY)).prompt_tokens_bound + MAX_TOKENS
    budget = 50 * per_request
    t = admin.tenant()
    admin.quota(t["id"], daily_tokens=budget)
    key = admin.key(t["id"])["key"]
    responses = asyncio.run(blast([a.url, b.url], key, 300))
    ok = [r for r in responses if r.status_code == 200]
    assert len(ok) == 50
    assert {r.json()["error"]["code"] for r in responses if r.status_code != 200} == {"daily_tokens"}
    assert usage_of(db_url, t["id"], 50) == (50, budget)


def test_revocation_is_immediate_on_every_replica(fleet):
    a, b, admin, db_url = fleet
    t = admin.tenant()
    k = admin.key(t["id"])
    h = {"authorization": f"Bearer {k['key']}"}
    for gw in (a, b):  # both replicas now hold the key in their caches
        assert httpx.post(gw.url + "/v1/chat/completions", headers=h, json=BODY).status_code == 200
    assert admin.client.delete(f"/admin/keys/{k['prefix']}").status_code == 200  # through replica a
    r = httpx.post(b.url + "/v1/chat/completions", headers=h, json=BODY)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    assert httpx.get(b.url + "/v1/models", headers=h).status_code == 401
    tenant_b = Admin(b.url)
    assert tenant_b.client.get(f"/admin/tenants/{t['id']}").json()["id"] == t["id"]
    tenant_b.close()
