"""OpenAICompatBackend against a real loopback upstream."""

from __future__ import annotations

import pytest

from fairgate.backends.base import BackendError, GenerationRequest
from fairgate.backends.breaker import Breaker, BreakerPolicy, State
from fairgate.backends.http1 import HTTP1Pool
from fairgate.backends.openai_compat import OpenAICompatBackend
from tests.helpers.upstream import UpstreamServer


@pytest.fixture(scope="module")
def upstream():
    with UpstreamServer() as up:
        yield up


@pytest.fixture
async def client():
    pool = HTTP1Pool()
    yield pool
    await pool.aclose()


def chat(max_tokens: int = 3, tenant: str = "default", **extra) -> GenerationRequest:
    body = {"model": "public-name", "messages": [{"role": "user", "content": "hello there"}],
            "max_tokens": max_tokens, **extra}
    return GenerationRequest.from_body("r1", "chat", body, tenant=tenant)


async def test_complete_rewrites_model_and_sends_key(upstream, client):
    upstream.behaviour.fail_next.clear()
    b = OpenAICompatBackend("ext", upstream.base_url, client, model="up-model", api_key="sk-secret")
    out = await b.complete(chat())
    assert out["choices"][0]["message"]["content"] == "w0 w1 w2"
    assert out["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert upstream.received[-1]["model"] == "up-model"
    assert upstream.app.headers[-1]["authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in repr(b)


async def test_stream_forces_usage_and_yields_chunks(upstream, client):
    b = OpenAICompatBackend("ext", upstream.base_url, client)
    chunks = [c async for batch in b.stream_batches(chat(max_tokens=2)) for c in batch]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "w0 w1"
    assert chunks[-1]["usage"]["completion_tokens"] == 2
    sent = upstream.received[-1]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


async def test_streams_share_one_connection(upstream, client):
    # a stream read to its [DONE] hands its connection back: the next request goes out on it
    b = OpenAICompatBackend("ext", upstream.base_url, client)
    for _ in range(3):
        chunks = [c async for batch in b.stream_batches(chat(max_tokens=2)) for c in batch]
        assert chunks[-1]["usage"]["completion_tokens"] == 2
        idle = client._idle[b._origin]
        assert len(idle) == 1 and not client.in_flight(b._origin)
    first = idle[0]
    [c async for batch in b.stream_batches(chat(max_tokens=2)) for c in batch]
    assert client._idle[b._origin][0] is first


async def test_completion_kind_uses_completions_path(upstream, client):
    b = OpenAICompatBackend("ext", upstream.base_url, client)
    out = await b.complete(GenerationRequest.from_body("r2", "completion", {"model": "m", "prompt": "a b c", "max_tokens": 1}))
    assert out["choices"][0]["text"] == "w0" and out["usage"]["prompt_tokens"] == 3


async def test_retries_5xx_then_succeeds(upstream, client):
    upstream.behaviour.fail_next[:] = [503, 429]
    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=2, backoff_s=0.001)
    out = await b.complete(chat())
    assert out["usage"]["completion_tokens"] == 3 and upstream.behaviour.fail_next == []


async def test_gives_up_after_retries_with_retryable_error(upstream, client):
    upstream.behaviour.fail_next[:] = [500, 500, 500]
    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=2, backoff_s=0.001)
    with pytest.raises(BackendError) as e:
        await b.complete(chat())
    assert e.value.status == 500 and e.value.retryable


async def test_client_errors_are_not_retried(upstream, client):
    upstream.behaviour.fail_next[:] = [400, 400]
    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=2, backoff_s=0.001)
    with pytest.raises(BackendError) as e:
        [c async for batch in b.stream_batches(chat()) for c in batch]
    assert e.value.status == 400 and not e.value.retryable
    assert upstream.behaviour.fail_next == [400]
    upstream.behaviour.fail_next.clear()


async def test_connection_refused_backs_off_that_tenant_then_everybody(client):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    b = OpenAICompatBackend("dead", f"http://127.0.0.1:{port}/v1", client, max_retries=1, backoff_s=0.001,
                            breaker=Breaker(BreakerPolicy(tenant_min_requests=2, min_requests=4, open_s=60)))
    with pytest.raises(BackendError) as e:
        await b.complete(chat(tenant="a"))  # two refused connections: a's circuit opens
    assert e.value.retryable and e.value.status == 502
    with pytest.raises(BackendError) as e:
        await b.complete(chat(tenant="a"))
    assert (e.value.status, e.value.code, e.value.retryable) == (503, "upstream_backoff", True)
    with pytest.raises(BackendError) as e:
        await b.complete(chat(tenant="b"))  # b still goes upstream: 4 failures from 2 tenants
    assert e.value.status == 502
    with pytest.raises(BackendError) as e:
        await b.complete(chat(tenant="c"))
    assert (e.value.status, e.value.code) == (503, "circuit_open") and "circuit open" in str(e.value)
    assert (b.breaker.state, b.breaker.opened, b.breaker.tenant_opened) == (State.OPEN, 1, 2)


async def test_a_probe_closes_the_circuit_once_the_upstream_answers(upstream, client):
    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=0,
                            breaker=Breaker(BreakerPolicy(tenant_min_requests=2, open_s=0.0)))
    upstream.behaviour.fail_next[:] = [500, 502]
    for _ in range(2):
        with pytest.raises(BackendError):
            await b.complete(chat(tenant="a"))
    assert b.breaker.tenant_state("a") is State.HALF_OPEN  # open for 0 s: the next request probes
    out = await b.complete(chat(tenant="a"))
    assert out["usage"]["completion_tokens"] == 3 and b.breaker.tenant_state("a") is State.CLOSED


async def test_client_errors_and_a_cancelled_probe_trip_nothing(upstream, client):
    import asyncio

    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=0,
                            breaker=Breaker(BreakerPolicy(tenant_min_requests=2, open_s=0.0)))
    upstream.behaviour.fail_next[:] = [400, 404, 422]
    for _ in range(3):
        with pytest.raises(BackendError) as e:
            await b.complete(chat(tenant="a"))
        assert not e.value.retryable
    assert (b.breaker.tenants, b.breaker.window.failed) == ({}, 0)
    upstream.behaviour.fail_next[:] = [500, 500]
    for _ in range(2):
        with pytest.raises(BackendError):
            await b.complete(chat(tenant="a"))
    probe = asyncio.ensure_future(b.complete(chat(tenant="a")))
    await asyncio.sleep(0)  # it is admitted as the probe and waits on the upstream
    assert b.breaker.tenants["a"].probe != 0
    probe.cancel()  # the client left before any answer
    with pytest.raises(asyncio.CancelledError):
        await probe
    assert b.breaker.tenants["a"].probe == 0  # the slot is free again
    await b.complete(chat(tenant="a"))
    assert b.breaker.tenant_state("a") is State.CLOSED


async def test_retry_after_is_waited_out_then_backs_the_tenant_off(upstream, client):
    b = OpenAICompatBackend("ext", upstream.base_url, client, max_retries=1, backoff_s=0.001)
    upstream.behaviour.fail_next[:] = [503]
    upstream.behaviour.fail_headers = [(b"retry-after", b"0.3")]
    try:
        n = len(upstream.app.arrivals)
        out = await b.complete(chat(tenant="a"))
        assert out["usage"]["completion_tokens"] == 3
        first, second = upstream.app.arrivals[n:]
        assert second - first >= 0.29  # a lower bound the retry's pause guarantees
        upstream.behaviour.fail_next[:] = [429]
        upstream.behaviour.fail_headers = [(b"retry-after", b"20")]
        with pytest.raises(BackendError) as e:  # longer than a request waits: no retry here
            await b.complete(chat(tenant="a"))
        assert (e.value.status, len(upstream.app.arrivals)) == (429, n + 3)
        with pytest.raises(BackendError) as e:
            await b.complete(chat(tenant="a"))  # refused here: the upstream hears nothing
        assert (e.value.code, len(upstream.app.arrivals)) == ("upstream_backoff", n + 3)
        assert 19 < b.breaker.snapshot()["tenants"]["a"]["open_for_s"] <= 20
        await b.complete(chat(tenant="b"))  # another tenant is served
        assert b.breaker.window.failed == 1  # the 503; the 429 with Retry-After is a pause, not a failure
    finally:
        upstream.behaviour.fail_headers = []


async def test_only_local_backends_hear_the_tenant(upstream, client):
    req = GenerationRequest.from_body("r9", "chat", {"model": "m", "messages": [{"role": "user", "content": "x"}],
                                           "max_tokens": 1}, tenant="t-1", priority="batch", cache_salt="t-1")
    await OpenAICompatBackend("eng", upstream.base_url, client, is_local=True).complete(req)
    h = upstream.app.headers[-1]
    assert (h["x-tenant"], h["x-priority"], h["x-cache-salt"]) == ("t-1", "batch", "t-1")
    await OpenAICompatBackend("ext", upstream.base_url, client).complete(req)
    assert "x-tenant" not in upstream.app.headers[-1] and "x-cache-salt" not in upstream.app.headers[-1]


async def test_speculative_reaches_our_engines_only(upstream, client):
    """`"speculative": false` is fairgate's field: kept for a local engine server, dropped for an
    external API (which would refuse an unknown field)."""
    ext = OpenAICompatBackend("ext", upstream.base_url, client)
    await ext.complete(chat(speculative=False))
    assert "speculative" not in upstream.received[-1]
    local = OpenAICompatBackend("engine", upstream.base_url, client, is_local=True)
    await local.complete(chat(speculative=False))
    assert upstream.received[-1]["speculative"] is False


async def test_embed_posts_the_body_upstream(upstream, client):
    b = OpenAICompatBackend("ext", upstream.base_url, client, model="up-embed")
    out = await b.embed(GenerationRequest.from_body("e1", "embedding", {"model": "mine", "input": ["a b", "c"]}))
    assert upstream.received[-1] == {"model": "up-embed", "input": ["a b", "c"]}
    assert [d["embedding"] for d in out["data"]] == [[0.0, 2.0, 1.0], [1.0, 1.0, 1.0]]
    assert out["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
