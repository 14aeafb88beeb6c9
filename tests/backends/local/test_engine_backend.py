"""LocalBackend: the gateway's Backend protocol over an in-process engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fairgate.backends.base import Backend, GenerationRequest
from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.openai_wire import WireError as APIError


@pytest.fixture
async def backend(tiny_model_dir: Path) -> AsyncIterator[LocalBackend]:
    b = LocalBackend(AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, served_model_name="tiny")))
    yield b
    await b.aclose()


def req(rid: str, kind: str = "chat", **body) -> GenerationRequest:
    base = {"model": "tiny", "max_tokens": 6, "temperature": 0, "ignore_eos": True}
    if kind == "chat":
        base["messages"] = [{"role": "user", "content": "Merhaba"}]
    else:
        base["prompt"] = "Hello"
    return GenerationRequest.from_body(rid, kind, {**base, **body}, tenant="acme")  # type: ignore[arg-type]


async def test_complete_and_stream_agree(backend: LocalBackend) -> None:
    typed: Backend = backend  # structural check for mypy: the Backend contract
    assert typed.is_local and backend.model_name == "tiny"
    full = await backend.complete(req("a"))
    assert full["object"] == "chat.completion" and full["usage"]["completion_tokens"] == 6
    chunks = [c async for batch in backend.stream_batches(req("b")) for c in batch]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6  # usage last
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == full["choices"][0]["message"]["content"]
    comp = await backend.complete(req("c", "completion"))
    assert comp["object"] == "text_completion" and comp["choices"][0]["finish_reason"] == "length"


async def test_bad_request_raises_a_non_retryable_4xx(backend: LocalBackend) -> None:
    with pytest.raises(APIError) as err:
        await backend.complete(req("d", max_tokens=0))
    assert err.value.status == 400 and not err.value.retryable
    with pytest.raises(APIError) as err:
        async for _ in backend.stream_batches(req("e", "completion", prompt=[1, 10**6])):
            pass
    assert err.value.status == 400 and err.value.code == "invalid_value"


async def test_leaving_a_stream_early_frees_the_request(backend: LocalBackend) -> None:
    gen = backend.stream_batches(req("f", max_tokens=200))
    await gen.__anext__()
    await gen.__anext__()
    await gen.aclose()
    full = await backend.complete(req("g"))  # the engine still serves
    assert full["usage"]["completion_tokens"] == 6
    assert backend.engine.num_unfinished == 0


async def test_closed_engine_is_a_retryable_503(tiny_model_dir: Path) -> None:
    b = LocalBackend(AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, served_model_name="tiny")))
    await b.aclose()
    with pytest.raises(APIError) as err:
        await b.complete(req("h"))
    assert err.value.status == 503 and err.value.retryable


async def _generated_while_unread(backend: LocalBackend, since: int, unread: int) -> None:
    """Wait (not reading the stream) until the engine generated `unread` tokens past `since`."""
    for _ in range(3000):
        if backend.engine.stats().generation_tokens - since >= unread:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the engine generated nothing while the stream went unread")


@pytest.mark.parametrize("n", [1, 3])
async def test_a_cut_stream_is_billed_by_what_the_engine_generated(backend: LocalBackend, n: int) -> None:
    """Tokens generated after the consumer's last read, queued for it when it left, are counted:
    the request's usage settles at the engine's own count once the abort lands."""
    before = backend.engine.stats().generation_tokens
    request = req(f"cut-{n}", max_tokens=200, n=n)
    gen = backend.stream_batches(request)
    await gen.__anext__()  # the role chunk
    await gen.__anext__()  # a first token
    read = request.used.completion_tokens or 0
    await _generated_while_unread(backend, before, read + 8 * n)
    await gen.aclose()
    assert request.used.settled is not None
    await asyncio.wait_for(request.used.settled.wait(), 10)
    generated = backend.engine.stats().generation_tokens - before
    assert request.used.completion_tokens == generated and generated >= read + 8 * n
    assert backend.engine.num_unfinished == 0
