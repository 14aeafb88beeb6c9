"""Bad input gets a clear 4xx in OpenAI's error format, and nothing is reserved or recorded."""

from __future__ import annotations

import time

import httpx
import pytest


@pytest.fixture
def env(make_gateway):
    gw, admin = make_gateway(max_body_bytes=2048)
    t = admin.tenant()
    admin.quota(t["id"], max_tokens_per_request=50, requests_per_minute=1000)
    key = admin.key(t["id"])["key"]
    return gw, admin, t, key


def post(gw, key, body=None, raw: bytes | None = None, path="/v1/chat/completions") -> httpx.Response:
    h = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    if raw is not None:
        return httpx.post(gw.url + path, headers=h, content=raw)
    return httpx.post(gw.url + path, headers=h, json=body)


MSG = [{"role": "user", "content": "hi"}]
CASES = [
    (b"{not json", 400, "invalid_json"),
    (b"[1, 2]", 400, "invalid_json"),
    ({"messages": MSG}, 400, "invalid_value"),
    ({"model": "up", "messages": "hi"}, 400, "invalid_value"),
    ({"model": "up", "messages": []}, 400, "invalid_value"),
    ({"model": "up", "messages": [{"content": "no role"}]}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "max_tokens": "ten"}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "max_tokens": 0}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "stream": "yes"}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "temperature": "hot"}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "stop": 5}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "n": 0}, 400, "invalid_value"),
    ({"model": "up", "messages": MSG, "stream_options": {"include_usage": "y"}}, 400, "invalid_value"),
    ({"model": "nope", "messages": MSG}, 404, "model_not_found"),
    ({"model": "up", "messages": MSG, "max_tokens": 51}, 400, "max_tokens_exceeded"),
    ({"model": "up", "messages": [{"role": "user", "content": "x" * 4000}]}, 413, "request_too_large"),
]


@pytest.mark.parametrize("body,status,code", CASES, ids=range(len(CASES)))
def test_bad_body(env, upstream, body, status, code):
    gw, admin, t, key = env
    before = len(upstream.received)
    r = post(gw, key, raw=body) if isinstance(body, bytes) else post(gw, key, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["message"] and err["type"]
    assert len(upstream.received) == before


def test_nothing_reserved_or_recorded_for_refusals(env, upstream):
    import asyncio

    gw, admin, t, key = env
    for body, _, _ in CASES:
        post(gw, key, raw=body) if isinstance(body, bytes) else post(gw, key, body)
    post(gw, key, {"model": "up", "prompt": 5}, path="/v1/completions")
    fut = asyncio.run_coroutine_threadsafe(gw.state.quota.counters(f"t:{t['id']}"), gw.server_loop)
    c = fut.result(10)
    assert c["requests"] == 0 and c["daily_tokens"] == 0
    assert post(gw, key, {"model": "up", "messages": MSG, "max_tokens": 1}).status_code == 200
    c = asyncio.run_coroutine_threadsafe(gw.state.quota.counters(f"t:{t['id']}"), gw.server_loop).result(10)
    assert c["requests"] == 1
    time.sleep(0.3)
    assert gw.state.usage.written == 1


def test_auth_errors(env):
    gw, admin, t, key = env
    r = httpx.post(gw.url + "/v1/chat/completions", json={"model": "up", "messages": MSG})
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
    r = post(gw, "fg-wrong", {"model": "up", "messages": MSG})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_unknown_route_and_method(env):
    gw, admin, t, key = env
    r = httpx.get(gw.url + "/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(gw.url + "/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()
