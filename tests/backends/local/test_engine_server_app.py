"""The engine server app driven at the ASGI level, for what loopback HTTP cannot time exactly:
a non-streaming client that disconnects while its request is generating."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.server import build_app


def http_scope(path: str, body: bytes) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80),
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }


async def test_non_stream_disconnect_aborts_the_request(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, served_model_name="tiny"))
    app = build_app(LocalBackend(engine), close_backend=False)
    body = json.dumps({"model": "tiny", "prompt": [5, 6, 7], "max_tokens": 400, "ignore_eos": True}).encode()
    gone = asyncio.Event()
    first = True

    async def receive() -> dict[str, Any]:
        nonlocal first
        if first:
            first = False
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    try:
        task = asyncio.create_task(app(http_scope("/v1/completions", body), receive, send))
        while engine.stats().generation_tokens == 0:
            await asyncio.sleep(0.005)
        gone.set()
        await task
        assert sent[0]["status"] == 499
        while engine.num_unfinished:
            await asyncio.sleep(0.005)
        stats = engine.stats()
        assert stats.requests_aborted == 1 and stats.generation_tokens < 400
        assert engine.block_manager.check_pool_whole()
    finally:
        await engine.aclose()


async def _post(app: Any, path: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    body = json.dumps(payload).encode()
    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(http_scope(path, body), receive, send)
    raw = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(raw)


async def test_echo_of_token_ids_outside_the_vocabulary_is_a_400(tiny_model_dir: Path) -> None:
    # echo decoded the prompt before the vocabulary check: a plain-text 500 the gateway counted
    # as an upstream fault
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=16, served_model_name="tiny"))
    app = build_app(LocalBackend(engine), close_backend=False)
    try:
        for ids in ([-1], [99999999999], [5, engine.vocab_size]):
            status, body = await _post(app, "/v1/completions", {"prompt": ids, "echo": True, "max_tokens": 1})
            assert status == 400, body
            assert body["error"]["param"] == "prompt" and body["error"]["type"] == "invalid_request_error"
        status, body = await _post(app, "/v1/completions", {"prompt": [5, 6], "echo": True, "max_tokens": 1})
        assert status == 200 and body["choices"][0]["text"].startswith(engine.tokenizer.decode([5, 6]))
    finally:
        await engine.aclose()


async def test_the_body_cache_salt_separates_prefix_caches_within_the_callers_space(tiny_model_dir: Path) -> None:
    """vLLM's `cache_salt` body field (the shared peers client sends it on every pass): requests
    with the same salt share cached prefixes, another salt or none does not, and a bad one is a
    400 naming it."""
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, block_size=4, served_model_name="tiny"))
    app = build_app(LocalBackend(engine), close_backend=False)
    prompt = list(range(5, 25))  # five full blocks

    async def hits(**extra: Any) -> int:
        before = engine.stats().prefix_cache_hits
        status, body = await _post(app, "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": 2,
                                                            **extra})
        assert status == 200, body
        return engine.stats().prefix_cache_hits - before

    try:
        assert await hits(cache_salt="run-1") == 0
        assert await hits(cache_salt="run-1") >= 16  # the same salt: the prompt's full blocks
        assert await hits(cache_salt="run-2") == 0
        assert await hits() == 0  # no salt: the caller's unsalted space, apart from every body salt
        for bad in ("", 7, "x" * 257):
            status, body = await _post(app, "/v1/completions", {"model": "tiny", "prompt": prompt, "cache_salt": bad})
            assert status == 400 and body["error"]["param"] == "cache_salt"
        assert engine.block_manager.check_pool_whole()
    finally:
        await engine.aclose()
