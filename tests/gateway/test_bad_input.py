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


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
# Every field issue 14 added, malformed (wrong type, out of range): (path, extra body fields, param).
NEW_FIELDS = [
    ("chat", {"logprobs": 1}, "logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", {"logprobs": True, "top_logprobs": "3"}, "top_logprobs"),
    ("chat", {"top_logprobs": 2}, "top_logprobs"),
    ("completions", {"logprobs": 21}, "logprobs"),
    ("completions", {"logprobs": -1}, "logprobs"),
    ("completions", {"logprobs": True}, "logprobs"),
    ("completions", {"echo": "yes"}, "echo"),
    ("chat", {"presence_penalty": 2.5}, "presence_penalty"),
    ("chat", {"frequency_penalty": -3}, "frequency_penalty"),
    ("chat", {"frequency_penalty": "x"}, "frequency_penalty"),
    ("chat", {"repetition_penalty": 0}, "repetition_penalty"),
    ("chat", {"repetition_penalty": "high"}, "repetition_penalty"),
    ("chat", {"min_p": 1.5}, "min_p"),
    ("chat", {"min_tokens": -1}, "min_tokens"),
    ("chat", {"min_tokens": 2.5}, "min_tokens"),
    ("chat", {"stop_token_ids": [1, "2"]}, "stop_token_ids"),
    ("chat", {"stop_token_ids": 7}, "stop_token_ids"),
    ("chat", {"logit_bias": {"12": 101}}, "logit_bias"),
    ("chat", {"logit_bias": {"12": -100.5}}, "logit_bias"),
    ("chat", {"logit_bias": {"abc": 1}}, "logit_bias"),
    ("chat", {"logit_bias": [12]}, "logit_bias"),
    ("chat", {"tools": "f"}, "tools"),
    ("chat", {"tools": [], "tool_choice": "required"}, "tool_choice"),
    ("chat", {"tools": [{"type": "function", "function": {"name": ""}}]}, "tools"),
    ("chat", {"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools"),
    ("chat", {"tool_choice": "required"}, "tool_choice"),
    ("chat", {"tools": [TOOL], "tool_choice": "always"}, "tool_choice"),
    ("chat", {"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
    ("chat", {"response_format": {"type": "yaml"}}, "response_format"),
    ("chat", {"response_format": "json"}, "response_format"),
    ("chat", {"response_format": {"type": "json_schema", "json_schema": {"schema": 3}}}, "response_format"),
    ("chat", {"guided_json": 5}, "guided_json"),
    ("chat", {"guided_regex": ""}, "guided_regex"),
    ("chat", {"guided_choice": ["a", 1]}, "guided_choice"),
    ("chat", {"guided_choice": []}, "guided_choice"),
    ("chat", {"structured_outputs": "json"}, "structured_outputs"),
    ("chat", {"n": 129}, "n"),
    ("completions", {"prompt": [[1, 2], [3, "x"]]}, "prompt"),
    ("completions", {"prompt": []}, "prompt"),
]


def _new_field_body(path: str, extra: dict) -> tuple[str, dict]:
    base = {"model": "up", "max_tokens": 2}
    base.update({"messages": MSG} if path == "chat" else {"prompt": "hi"})
    return f"/v1/{'chat/completions' if path == 'chat' else 'completions'}", {**base, **extra}


@pytest.mark.parametrize(("path", "extra", "param"), NEW_FIELDS, ids=[f"{p}-{i}" for i, (_, _, p) in enumerate(NEW_FIELDS)])
def test_new_fields_bad_input_is_a_400_naming_the_field(env, upstream, path, extra, param):
    gw, admin, t, key = env
    before = len(upstream.received)
    route, body = _new_field_body(path, extra)
    r = post(gw, key, body, path=route)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]
    assert len(upstream.received) == before


def test_new_fields_refusals_reserve_and_record_nothing(env, upstream):
    import asyncio

    gw, admin, t, key = env
    for path, extra, _ in NEW_FIELDS:
        route, body = _new_field_body(path, extra)
        assert post(gw, key, body, path=route).status_code == 400
    c = asyncio.run_coroutine_threadsafe(gw.state.quota.counters(f"t:{t['id']}"), gw.server_loop).result(10)
    assert c["requests"] == 0 and c["daily_tokens"] == 0 and c["concurrent"] == 0
    assert gw.call(gw.state.usage.flush())
    assert gw.state.usage.written == 0


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


def test_max_tokens_that_can_never_fit_is_a_400_not_a_429(make_gateway, upstream):
    # 2^31 - 1 passes the wire (it fits every counter) but no per-minute window can ever hold it
    gw, admin = make_gateway()
    t = admin.tenant()
    admin.quota(t["id"], tokens_per_minute=10_000)
    key = admin.key(t["id"])["key"]
    before = len(upstream.received)
    r = post(gw, key, {"model": "up", "messages": MSG, "max_tokens": 2**31 - 1})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "max_tokens" and "tokens_per_minute" in err["message"]
    assert len(upstream.received) == before
    assert post(gw, key, {"model": "up", "messages": MSG, "max_tokens": 5}).status_code == 200


def test_deeply_nested_metadata_is_a_400_naming_it(make_gateway, upstream):
    gw, admin = make_gateway()
    t = admin.tenant()
    key = admin.key(t["id"])["key"]
    deep: dict = {}
    for _ in range(900):
        deep = {"a": deep}
    before = len(upstream.received)
    r = post(gw, key, {"model": "up", "messages": MSG, "metadata": deep})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "metadata" and err["code"] == "invalid_value"
    assert len(upstream.received) == before
    shallow: dict = {}
    for _ in range(20):
        shallow = {"a": shallow}
    assert post(gw, key, {"model": "up", "messages": MSG, "metadata": {"k": "v"}, "x": shallow}).status_code == 200
