"""A real, instant OpenAI-compatible server on loopback that records what reached it.

    with UpstreamServer() as up:           # uvicorn on port 0 in a thread
        up.base_url                        # "http://127.0.0.1:<port>/v1"
        up.received                        # every request body, in arrival order
        up.behaviour.fail_next = [503, 503]  # answer the next two requests with these statuses
        up.behaviour.fail_if = lambda body, headers: 500 if headers.get("x-tenant") == "a" else None
        up.behaviour.fail_headers = [(b"retry-after", b"2")]  # sent with every injected failure

Answers are deterministic: the completion is `max_tokens` words "w0 w1 ...", one word per
streamed chunk (default 8 when no max_tokens), and usage counts prompt words with
`prompt_tokens_of` (override it to match the gateway's estimate). Run as a process for benches:
`python -m tests.helpers.upstream --port 0` prints "PORT <n>" and serves without recording.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn

from tests.helpers.app_thread import wait_started

DEFAULT_COMPLETION_TOKENS = 8


def words_of(body: dict[str, Any]) -> int:
    """Whitespace-separated words in the prompt or the messages' string contents."""
    if "messages" in body:
        return sum(len(str(m.get("content") or "").split()) for m in body["messages"])
    prompt = body.get("prompt", "")
    return sum(len(str(p).split()) for p in (prompt if isinstance(prompt, list) else [prompt]))


@dataclass
class UpstreamBehaviour:
    token_delay_s: float = 0.0  # pause before each streamed chunk
    # a stream opens with the `role` chunk at once, then waits this long for its first token
    first_token_delay_s: float = 0.0
    # a whole answer comes after this long, saying (as our engine server does, x-fairgate-ttft-ms)
    # that its first token came after `first_token_delay_s`
    answer_delay_s: float = 0.0
    fail_next: list[int] = field(default_factory=list)  # statuses for the next requests
    prompt_tokens_of: Callable[[dict[str, Any]], int] = words_of
    record: bool = True
    require_key: str | None = None  # when set, other Authorization values get 401
    stats: dict[str, Any] | None = None  # GET /stats answers this (an engine server's), else 404
    metrics_waiting: int = 0  # GET /metrics reports this many requests in the server's own queue
    stream_headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # added to streamed answers
    # a status for the requests it picks (body, lower-cased headers), after `fail_next`
    fail_if: Callable[[dict[str, Any], dict[str, str]], int | None] | None = None
    fail_headers: list[tuple[bytes, bytes]] = field(default_factory=list)  # added to injected failures


class UpstreamApp:
    """Raw ASGI (no framework) so it stays faster than anything put in front of it."""

    def __init__(self, behaviour: UpstreamBehaviour | None = None) -> None:
        self.behaviour = behaviour or UpstreamBehaviour()
        self.received: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []  # with `queries`: where each recorded request went
        self.queries: list[bytes] = []
        self.completed_streams = 0
        self.cancelled_streams = 0
        self.arrivals: list[float] = []  # time.monotonic() of every recorded request

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await self._http(scope, receive, send, await _read_all(receive))

    async def _http(self, scope: dict, receive: Callable, send: Callable, raw: bytes) -> None:
        path = scope["path"]
        hdrs = {k.decode(): v.decode() for k, v in scope["headers"]}
        b = self.behaviour
        if path == "/stats":  # as our engine server answers a pool's load probe (b.stats: the whole answer)
            return await _json(send, 200, b.stats if b.stats is not None else
                               {"kv_blocks_used": 0, "kv_blocks_total": 100, "waiting": 0})
        if path == "/metrics":  # as vLLM answers a `vllm` pool's load probe
            return await send_text(send, f"vllm:kv_cache_usage_perc 0.0\nvllm:num_requests_waiting {b.metrics_waiting}\n")
        if path.endswith("/models"):
            return await _json(send, 200, {"object": "list", "data": [{"id": "up-model", "object": "model"}]})
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return await _json(send, 400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
        if b.record:
            self.received.append(body)
            self.headers.append(hdrs)
            self.arrivals.append(time.monotonic())
            self.paths.append(path)
            self.queries.append(scope.get("query_string", b""))
        if b.require_key and hdrs.get("authorization") != f"Bearer {b.require_key}":
            return await _json(send, 401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
        status = b.fail_next.pop(0) if b.fail_next else b.fail_if(body, hdrs) if b.fail_if else None
        if status is not None:
            return await _json(send, status, {"error": {"message": f"injected {status}", "type": "server_error"}},
                               b.fail_headers)
        if path.endswith("/embeddings"):  # one 3-float vector per input: [index, words, 1.0]
            inputs = body.get("input")
            items = [inputs] if isinstance(inputs, str) else list(inputs or [])
            data = [{"object": "embedding", "index": i, "embedding": [float(i), float(len(str(x).split())), 1.0]}
                    for i, x in enumerate(items)]
            tokens = sum(len(str(x).split()) for x in items)
            return await _json(send, 200, {"object": "list", "data": data, "model": body.get("model", "up-model"),
                                           "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
        chat = path.endswith("/chat/completions")
        n = body.get("max_completion_tokens") or body.get("max_tokens") or DEFAULT_COMPLETION_TOKENS
        words = [f"w{i}" for i in range(int(n))]
        usage = {"prompt_tokens": b.prompt_tokens_of(body), "completion_tokens": len(words)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        model = body.get("model", "up-model")
        rid = f"up-{len(self.received)}"
        if not body.get("stream"):
            extra = []
            if b.answer_delay_s:
                await asyncio.sleep(b.answer_delay_s)
                extra = [(b"x-fairgate-ttft-ms", b"%.1f" % (b.first_token_delay_s * 1000))]
            text = " ".join(words)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
                      if chat else {"index": 0, "text": text, "finish_reason": "length"})
            obj = "chat.completion" if chat else "text_completion"
            return await _json(send, 200, {"id": rid, "object": obj, "created": int(time.time()),
                                           "model": model, "choices": [choice], "usage": usage}, extra)
        await self._stream(receive, send, body, chat, words, usage, rid)

    async def _stream(self, receive: Callable, send: Callable, body: dict[str, Any], chat: bool,
                      words: list[str], usage: dict[str, int], rid: str) -> None:
        b = self.behaviour
        model = body.get("model", "up-model")
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), *b.stream_headers]})
        obj = "chat.completion.chunk" if chat else "text_completion"
        cut = asyncio.Event()

        async def watch() -> None:  # uvicorn drops sends after a disconnect; notice it here
            while (await receive())["type"] != "http.disconnect":
                pass
            cut.set()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            if chat and b.first_token_delay_s:  # as engines do: the role before any token exists
                await _event(send, {"id": rid, "object": obj, "model": model,
                                    "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
                await asyncio.sleep(b.first_token_delay_s)
            for i, w in enumerate(words):
                if b.token_delay_s:
                    await asyncio.sleep(b.token_delay_s)
                if cut.is_set():
                    self.cancelled_streams += 1
                    return
                piece = w if i == 0 else " " + w
                choice = ({"index": 0, "delta": {"content": piece}, "finish_reason": None} if chat
                          else {"index": 0, "text": piece, "finish_reason": None})
                await _event(send, {"id": rid, "object": obj, "model": model, "choices": [choice]})
            last = ({"index": 0, "delta": {}, "finish_reason": "length"} if chat
                    else {"index": 0, "text": "", "finish_reason": "length"})
            await _event(send, {"id": rid, "object": obj, "model": model, "choices": [last]})
            if (body.get("stream_options") or {}).get("include_usage"):
                await _event(send, {"id": rid, "object": obj, "model": model, "choices": [], "usage": usage})
            await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
            self.completed_streams += 1
        finally:
            watcher.cancel()


async def _read_all(receive: Callable) -> bytes:
    chunks = []
    while True:
        msg = await receive()
        chunks.append(msg.get("body", b""))
        if not msg.get("more_body"):
            return b"".join(chunks)


async def send_text(send: Callable, text: str) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": text.encode()})


async def _json(send: Callable, status: int, obj: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None) -> None:
    data = orjson.dumps(obj)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": data})


async def _event(send: Callable, obj: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": b"data: " + orjson.dumps(obj) + b"\n\n", "more_body": True})


class UpstreamServer:
    """UpstreamApp under uvicorn on 127.0.0.1:<free port>, in a background thread. `tls`:
    uvicorn's ssl_* options (ssl_certfile, ssl_keyfile, ssl_ca_certs, ssl_cert_reqs): https://."""

    def __init__(self, behaviour: UpstreamBehaviour | None = None, tls: dict[str, Any] | None = None) -> None:
        self.app = UpstreamApp(behaviour)
        self._scheme = "https" if tls else "http"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="error",
                                access_log=False, lifespan="on", **(tls or {}))
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def behaviour(self) -> UpstreamBehaviour:
        return self.app.behaviour

    @property
    def received(self) -> list[dict[str, Any]]:
        return self.app.received

    def start(self) -> UpstreamServer:
        self._thread.start()
        wait_started(self._server, self._thread, 20, "upstream server")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"{self._scheme}://127.0.0.1:{self.port}/v1"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> UpstreamServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="instant OpenAI-compatible upstream")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = UpstreamApp(UpstreamBehaviour(record=False))
    config = uvicorn.Config(app, log_level="error", access_log=False, loop="uvloop", http="httptools")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
