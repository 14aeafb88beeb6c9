"""`fairgate engine` as a real process on loopback, driven by the openai client and httpx."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from fairgate.kernels.plan import OPERATIONS
from tests.helpers.engine_proc import engine_server

SECRET = "s3cret"


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path) -> Iterator[str]:
    with engine_server(
        tiny_model_dir, "--served-model-name", "tiny", "--num-kv-blocks", "64", "--max-model-len", "256",
        "--max-num-batched-tokens", "64", "--control-secret", SECRET,
    ) as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server + "/v1", api_key="unused", max_retries=0, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def http(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=60) as c:
        yield c


def wait_drained(http: httpx.Client) -> dict:
    for _ in range(400):
        stats = http.get("/stats").json()
        if stats["running"] == 0 and stats["waiting"] == 0 and stats["kv_blocks_used"] == 0:
            return stats
        time.sleep(0.05)
    raise AssertionError(f"engine did not drain: {stats}")


def test_models_and_health(client: openai.OpenAI, http: httpx.Client) -> None:
    assert [m.id for m in client.models.list().data] == ["tiny"]
    health = http.get("/health").json()
    assert health["status"] == "ok" and set(health) == {"status", "step_costs"}  # the measured cost weights


def test_stats_name_the_kernel_each_operation_runs(http: httpx.Client) -> None:
    # chosen once when the runner started (the same lines are logged then); this box has a C compiler
    kernels = http.get("/stats").json()["kernels"]
    assert list(kernels) == list(OPERATIONS)
    assert kernels["decode_attention"].startswith("native: cpu_attention.c built for ")
    assert all(": " in why for why in kernels.values())


def test_completion_stream_equals_non_stream(client: openai.OpenAI) -> None:
    args = dict(model="tiny", prompt="The quick brown fox", max_tokens=12, temperature=0,
                extra_body={"ignore_eos": True})
    whole = client.completions.create(**args)
    assert whole.choices[0].finish_reason == "length"
    assert whole.usage.completion_tokens == 12 and whole.usage.prompt_tokens > 0
    chunks = list(client.completions.create(stream=True, stream_options={"include_usage": True}, **args))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 12
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_and_non_stream(client: openai.OpenAI) -> None:
    args = dict(model="tiny", messages=[{"role": "user", "content": "Merhaba!"}], max_tokens=10,
                temperature=0, seed=1, extra_body={"ignore_eos": True})
    whole = client.chat.completions.create(**args)
    msg = whole.choices[0].message
    assert msg.role == "assistant" and whole.choices[0].finish_reason == "length"
    chunks = list(client.chat.completions.create(stream=True, **args))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == msg.content
    assert all(c.usage is None for c in chunks)  # no include_usage: no usage chunk
    assert chunks[-1].choices[0].finish_reason == "length"


def test_stop_string_through_the_server(client: openai.OpenAI) -> None:
    base = client.completions.create(model="tiny", prompt="Hello", max_tokens=20, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    stop = base[4:7]
    out = client.completions.create(model="tiny", prompt="Hello", max_tokens=20, temperature=0,
                                    stop=[stop], extra_body={"ignore_eos": True})
    assert out.choices[0].text == base[: base.index(stop)] and out.choices[0].finish_reason == "stop"


def test_tenant_header_salts_the_prefix_cache(http: httpx.Client) -> None:
    body = {"model": "tiny", "prompt": list(range(20, 60)), "max_tokens": 1}
    first = http.post("/v1/completions", json=body, headers={"X-Tenant": "acme"}).json()
    again = http.post("/v1/completions", json=body, headers={"X-Tenant": "acme"}).json()
    other = http.post("/v1/completions", json=body, headers={"X-Tenant": "globex", "X-Priority": "batch"}).json()
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    assert other["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


BAD = [
    # (path, raw body or json, headers, status, code)
    ("/v1/chat/completions", b"{not json", {}, 400, "invalid_json"),
    ("/v1/chat/completions", b'{"model": "tiny", "messages": "\xff\xfe"}', {}, 400, "invalid_encoding"),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": 5}]}, {}, 400, None),
    ("/v1/chat/completions", {"model": "tiny", "messages": [], "max_tokens": 3}, {}, 400, None),
    ("/v1/chat/completions", {"model": "nope", "messages": [{"role": "user", "content": "x"}]}, {}, 404, "model_not_found"),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "n": 0}, {}, 400, None),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "logprobs": 1}, {}, 400, None),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, {}, 400, "invalid_value"),
    ("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}]}, {"X-Priority": "vip"}, 400, "invalid_value"),
    ("/v1/completions", {"model": "tiny", "prompt": ""}, {}, 400, None),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": "5"}, {}, 400, None),
    ("/v1/completions", {"model": "tiny", "prompt": list(range(3, 300))}, {}, 400, "context_length_exceeded"),
    ("/v1/completions", {"model": "tiny", "prompt": [5, 6], "max_tokens": 255}, {}, 400, "context_length_exceeded"),
    ("/v1/completions", {"model": "tiny", "prompt": [5, 100000]}, {}, 400, "invalid_value"),
    ("/v1/completions", {"model": "tiny", "prompt": "x", "stream": True, "max_tokens": 0}, {}, 400, "invalid_value"),
    ("/v1/completions", b"[1, 2]", {}, 400, None),
    ("/v1/completions", b"x" * (5 * 1024 * 1024), {}, 413, "body_too_large"),
]


@pytest.mark.parametrize(("path", "body", "headers", "status", "code"), BAD)
def test_bad_input_gets_an_openai_error(http: httpx.Client, path, body, headers, status, code) -> None:
    if isinstance(body, bytes):
        r = http.post(path, content=body, headers={"content-type": "application/json", **headers})
    else:
        r = http.post(path, json=body, headers=headers)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert isinstance(err["message"], str) and err["message"] and err["type"] and "code" in err
    if code is not None:
        assert err["code"] == code


def test_openai_client_sees_typed_errors_and_engine_keeps_serving(client: openai.OpenAI, http: httpx.Client) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="tiny", prompt="x", max_tokens=1000)
    assert err.value.code == "context_length_exceeded"
    assert http.get("/v1/nowhere").status_code == 404
    assert http.get("/v1/nowhere").json()["error"]["message"]
    out = client.completions.create(model="tiny", prompt="still alive?", max_tokens=3)
    assert out.usage.completion_tokens >= 1
    wait_drained(http)


def test_stream_disconnect_aborts_and_frees_blocks(server: str, http: httpx.Client) -> None:
    body = {"model": "tiny", "prompt": list(range(30, 90)), "max_tokens": 190, "stream": True, "ignore_eos": True}
    before = http.get("/stats").json()["requests_aborted"]
    with httpx.Client(base_url=server, timeout=60) as c, c.stream("POST", "/v1/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["choices"][0]["finish_reason"] is None
    # The connection is closed; the engine must abort the request and free its blocks.
    stats = wait_drained(http)
    assert stats["requests_aborted"] == before + 1


def test_control_fairness_requires_the_secret(http: httpx.Client) -> None:
    body = {"weights": {"acme": 2.0}, "version": 3}
    assert http.put("/control/fairness", json=body).status_code == 401
    r = http.put("/control/fairness", json=body, headers={"Authorization": f"Bearer {SECRET}"})
    assert r.status_code == 200 and r.json() == {"weights": {"acme": 2.0}, "version": 3}
    bad = http.put("/control/fairness", json={"weights": {"acme": -1}}, headers={"X-Control-Secret": SECRET})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "weights"
