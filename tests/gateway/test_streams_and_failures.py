"""Streams cut by the client, backend failures and fallbacks, usage writes while the DB is down:
every admitted request ends in exactly one settle and one usage row."""

from __future__ import annotations

import socket

import httpx
from sqlalchemy import select, text

from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.gateway.request.routing import RouteDecision, Router
from fairgate.gateway.store.tables import UsageRecord
from tests.helpers.rows import wait_for


def rows(gw) -> list[UsageRecord]:
    with gw.state.sessions() as s:
        return list(s.scalars(select(UsageRecord)))


def test_client_disconnect_mid_stream_records_usage_up_to_the_cut(make_gateway, upstream):
    gw, admin = make_gateway(redis=True)
    t = admin.tenant()
    admin.quota(t["id"], max_concurrent=5)
    key = admin.key(t["id"])["key"]
    upstream.behaviour.token_delay_s = 0.05
    cancelled_before = upstream.app.cancelled_streams
    try:
        with httpx.Client(timeout=30) as c, c.stream(
                "POST", gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                json={"model": "up", "messages": [{"role": "user", "content": "tell me"}], "max_tokens": 200,
                      "stream": True}) as r:
            got = 0
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    got += 1
                if got == 3:
                    break  # leaving the block closes the connection mid-stream
        wait_for(lambda: gw.state.usage.written == 1)
    finally:
        upstream.behaviour.token_delay_s = 0.0
    (row,) = rows(gw)
    assert row.status == "disconnected" and row.stream and row.usage_estimated
    assert 3 <= row.completion_tokens < 200
    wait_for(lambda: upstream.app.cancelled_streams == cancelled_before + 1)  # upstream was closed too
    c = gw.call(gw.state.quota.counters(f"t:{t['id']}"))
    assert c["concurrent"] == 0  # the slot came back
    assert c["daily_tokens"] == row.prompt_tokens + row.completion_tokens  # reconciled, not 200


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


class FixedRoute(Router):
    """A real (if tiny) routing policy: always the given backends, in order."""

    def __init__(self, backends, sensitive: bool = False) -> None:
        super().__init__({b.name: b for b in backends})
        self.order = backends
        self.sensitive = sensitive

    async def decide(self, request):
        return RouteDecision(list(self.order), self.sensitive, reason="test")


def test_fallback_on_retryable_error_before_first_byte(make_gateway, upstream):
    gw, admin = make_gateway()
    key = admin.key(admin.tenant()["id"])["key"]
    dead = OpenAICompatBackend("dead", _dead_url(), gw.state.upstream_pool, max_retries=0)
    gw.state.router = FixedRoute([dead, gw.state.backends["up"]])
    h = {"authorization": f"Bearer {key}"}
    body = {"model": "up", "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
    r = httpx.post(gw.url + "/v1/chat/completions", headers=h, json=body)
    assert r.status_code == 200
    r = httpx.post(gw.url + "/v1/chat/completions", headers=h, json={**body, "stream": True})
    assert r.status_code == 200 and '"content":"w0"' in r.text and '"content":" w1"' in r.text
    wait_for(lambda: gw.state.usage.written == 2)
    assert sorted(row.backend for row in rows(gw)) == ["up", "up"]


def test_sensitive_request_never_reaches_a_non_local_backend(make_gateway, upstream):
    gw, admin = make_gateway()
    key = admin.key(admin.tenant()["id"])["key"]
    gw.state.router = FixedRoute([gw.state.backends["up"]], sensitive=True)  # a router bug
    before = len(upstream.received)
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "up", "messages": [{"role": "user", "content": "TCKN 10000000146"}]})
    assert r.status_code == 503 and "local" in r.json()["error"]["code"]
    assert len(upstream.received) == before
    wait_for(lambda: gw.state.usage.written == 1)
    assert rows(gw)[0].status == "failed"


def test_upstream_failure_is_reported_and_recorded(make_gateway, upstream):
    gw, admin = make_gateway()
    key = admin.key(admin.tenant()["id"])["key"]
    upstream.behaviour.fail_next[:] = [500, 500, 500]
    r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                   json={"model": "up", "messages": [{"role": "user", "content": "x"}]})
    upstream.behaviour.fail_next.clear()
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"
    wait_for(lambda: gw.state.usage.written == 1)
    assert rows(gw)[0].status == "failed" and rows(gw)[0].total_tokens == 0


def test_usage_is_retried_while_the_table_is_unavailable(make_gateway):
    gw, admin = make_gateway(usage_flush_interval_s=0.01)
    key = admin.key(admin.tenant()["id"])["key"]
    with gw.state.db.begin() as conn:
        conn.execute(text("ALTER TABLE usage_records RENAME TO usage_records_away"))
    h = {"authorization": f"Bearer {key}"}
    for _ in range(3):
        r = httpx.post(gw.url + "/v1/chat/completions", headers=h,
                       json={"model": "up", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1})
        assert r.status_code == 200  # the request path does not wait for the database
    wait_for(lambda: gw.state.usage.failures >= 2)
    with gw.state.db.begin() as conn:
        conn.execute(text("ALTER TABLE usage_records_away RENAME TO usage_records"))
    wait_for(lambda: gw.state.usage.written == 3, timeout=30)
    assert len(rows(gw)) == 3 and len({r.request_id for r in rows(gw)}) == 3


def test_quota_store_down_fails_closed_with_503(tmp_path):
    from fairgate.gateway.settings import Settings
    from tests.gateway.harness import ADMIN_TOKEN, GatewayThread

    dead = _dead_url().split("//")[1].split("/")[0]
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=f"sqlite:///{tmp_path}/down.db",
                        embedded_engine=False, redis_url=f"redis://{dead}/0")
    with GatewayThread(settings) as gw:
        r = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": "Bearer fg-anything"},
                       json={"model": "up", "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 503 and r.json()["error"]["code"] == "service_unavailable"
        assert r.headers["retry-after"] == "1"
        assert rows(gw) == []
