"""TTFT is the time to the first generated token (issue 37): a stream's clock stops at the
first chunk with content, not at the `role` chunk a server sends before any token exists; a
whole answer from our engine carries its first token's time (`x-fairgate-ttft-ms`). The usage
row, the request log line and the metric all say the same."""

from __future__ import annotations

import logging
import re
import time

import httpx
import pytest
from sqlalchemy import select

from fairgate.gateway.store.tables import UsageRecord
from tests.gateway.harness import ADMIN_TOKEN

DELAY_S = 0.3


def _rows(gw, tenant: str) -> list[UsageRecord]:
    assert gw.call(gw.state.usage.flush())
    with gw.state.sessions() as s:
        return list(s.scalars(select(UsageRecord).where(UsageRecord.tenant_id == tenant)
                              .order_by(UsageRecord.created_at)))


def test_a_stream_ttft_stops_at_the_first_token_not_the_role_chunk(make_gateway, upstream, caplog):
    caplog.set_level(logging.INFO, "fairgate.requests")
    upstream.behaviour.first_token_delay_s = DELAY_S
    try:
        gw, admin = make_gateway()
        tenant = admin.tenant()["id"]
        key = admin.key(tenant)["key"]
        body = {"model": "up", "max_tokens": 5, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        t0 = time.perf_counter()
        first_content = None
        with httpx.stream("POST", gw.url + "/v1/chat/completions", json=body, timeout=30,
                          headers={"authorization": f"Bearer {key}"}) as r:
            for line in r.iter_lines():
                if first_content is None and '"content"' in line:
                    first_content = (time.perf_counter() - t0) * 1000
        (row,) = _rows(gw, tenant)
    finally:
        upstream.behaviour.first_token_delay_s = 0.0
    assert first_content is not None and row.ttft_ms is not None
    # the server's clock starts after the client's and stops before the client reads the chunk
    assert DELAY_S * 1000 <= row.ttft_ms <= first_content + 1, (row.ttft_ms, first_content)
    logged = [rec.getMessage() for rec in caplog.records if rec.name == "fairgate.requests"]
    assert float(re.search(r"ttft_ms=([\d.]+)", logged[-1]).group(1)) == pytest.approx(row.ttft_ms, abs=0.1)
    metrics = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10).text
    total = float(re.search(r'fairgate_time_to_first_token_seconds_sum\{[^}]*route="/v1/chat/completions"[^}]*\} '
                            r'([\d.e+-]+)', metrics).group(1))
    assert total == pytest.approx(row.ttft_ms / 1000, abs=1e-3)


def test_a_whole_answer_from_our_engine_carries_its_first_token_time(make_gateway, tiny_model_dir):
    from tests.helpers.engine_proc import EngineProcess

    with EngineProcess(tiny_model_dir) as engine:
        body = {"max_tokens": 48, "temperature": 0, "ignore_eos": True,
                "messages": [{"role": "user", "content": "hi"}]}
        direct = httpx.post(engine.url + "/v1/chat/completions", json={**body, "model": "tiny"}, timeout=60)
        engine_ttft = float(direct.headers["x-fairgate-ttft-ms"])
        assert 0 < engine_ttft < direct.elapsed.total_seconds() * 1000
        gw, admin = make_gateway()
        admin.backend("eng", engine.url + "/v1", model="tiny", kind="local")
        tenant = admin.tenant()["id"]
        key = admin.key(tenant)["key"]
        r = httpx.post(gw.url + "/v1/chat/completions", json={**body, "model": "eng"}, timeout=60,
                       headers={"authorization": f"Bearer {key}"})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 48
        (row,) = _rows(gw, tenant)
    assert row.ttft_ms is not None and 0 < row.ttft_ms < row.latency_ms, (row.ttft_ms, row.latency_ms)


def test_a_whole_answer_ttft_is_the_engines_first_token_not_its_end(make_gateway, upstream):
    """The gateway's side of `x-fairgate-ttft-ms`, with a known timing: the first token 0.1 s
    after arrival, the whole answer after 0.6 s (the upstream plays our engine server)."""
    upstream.behaviour.first_token_delay_s, upstream.behaviour.answer_delay_s = 0.1, 0.6
    try:
        gw, admin = make_gateway()
        admin.backend("eng", upstream.base_url, model="up-model", kind="local")  # only ours are believed
        tenant = admin.tenant()["id"]
        key = admin.key(tenant)["key"]
        r = httpx.post(gw.url + "/v1/chat/completions", timeout=30, headers={"authorization": f"Bearer {key}"},
                       json={"model": "eng", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200
        (row,) = _rows(gw, tenant)
    finally:
        upstream.behaviour.first_token_delay_s = upstream.behaviour.answer_delay_s = 0.0
    assert row.latency_ms >= 600 and 100 <= row.ttft_ms < 600, (row.ttft_ms, row.latency_ms)
