"""CPU per request of the gateway's own request path, in process and without a network: the
completions endpoint (auth, parse, route, quota, backend call, response, settle, usage row)
driven as an ASGI callable against an instant in-process backend. A low-noise companion to
bench/gateway_overhead.py, which measures the same path through real sockets and `hey`.

The in-process quota store and a SQLite file stand in for Redis and PostgreSQL, so the number
is the gateway's Python, not its I/O. The personal-data detector's share is timed apart
(`policies.sensitivity.classify`, wrapped before the gateway imports it): `*_classify_us_per_req`
and `*_us_per_req_excl_classify` tell the gateway's own path from the detector's work, so a
change to either can be judged alone. Prints a table, then one JSON line.

    python bench/gateway_hotpath.py [--requests 3000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

import httpx  # noqa: E402
import orjson  # noqa: E402

from fairgate.policies import sensitivity  # noqa: E402

CLASSIFY_CPU = [0.0]  # process CPU seconds inside classify since the last reset


def _timed(module: Any) -> None:
    """Wrap `module.classify` before the gateway imports it (its modules bind the name)."""
    inner = module.classify

    def classify(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            CLASSIFY_CPU[0] += time.process_time() - t0

    module.classify = classify


_timed(sensitivity)

from fairgate.backends.base import Capabilities, Chunk, GenerationRequest  # noqa: E402
from fairgate.backends.openai_wire import response_id  # noqa: E402
from fairgate.gateway.app import create_app  # noqa: E402
from fairgate.gateway.request.routing import Router  # noqa: E402
from fairgate.gateway.settings import Settings  # noqa: E402
from fairgate.gateway.state import state_of  # noqa: E402

PROMPT = [{"role": "user", "content": "Say hello in five words"}]
USAGE = {"prompt_tokens": 5, "completion_tokens": 8, "total_tokens": 13}


class InstantBackend:
    """Answers at once: eight one-word chunks, or the whole text."""

    name = "up"
    model_name = None
    is_local = False
    context_length = None
    capabilities = Capabilities()
    breaker = None
    token_decoder = None

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        return {"id": response_id(request.kind, request.request_id), "object": "chat.completion", "created": 0,
                "model": request.model, "usage": USAGE, "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "w0 w1 w2"}, "finish_reason": "stop"}]}

    async def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        rid = response_id(request.kind, request.request_id)
        for i in range(8):
            yield [{"id": rid, "object": "chat.completion.chunk", "created": 0, "model": request.model,
                    "choices": [{"index": 0, "delta": {"content": f" w{i}"}, "finish_reason": None}]}]
        yield [{"id": rid, "object": "chat.completion.chunk", "created": 0, "model": request.model,
                "choices": [], "usage": USAGE}]

    async def usage_of(self, request_id: str) -> dict[str, Any] | None:
        return None

    async def aclose(self) -> None:
        return None


async def measure(app: Any, key: str, stream: bool, n: int) -> tuple[float, float]:
    """Microseconds of process CPU per request, after a warm-up, and of that inside classify."""
    endpoint = next(r for r in app.routes if getattr(r, "path", "") == "/v1/chat/completions").app
    body = orjson.dumps({"model": "up", "messages": PROMPT, "max_tokens": 8, "stream": stream})
    scope = {"type": "http", "app": app, "path": "/v1/chat/completions", "method": "POST",
             "headers": [(b"authorization", f"Bearer {key}".encode()), (b"content-length", b"%d" % len(body))]}

    async def one() -> None:
        pending = [{"type": "http.request", "body": body, "more_body": False}]
        done = asyncio.Event()

        async def receive() -> dict[str, Any]:
            if pending:
                return pending.pop()
            await done.wait()  # the client stays until the answer is complete
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and message["status"] != 200:
                raise RuntimeError(f"status {message['status']}")

        await endpoint(scope, receive, send)
        done.set()

    for _ in range(min(n, 300)):
        await one()
    CLASSIFY_CPU[0] = 0.0
    t0 = time.process_time()
    for _ in range(n):
        await one()
    return (time.process_time() - t0) / n * 1e6, CLASSIFY_CPU[0] / n * 1e6


async def run(n: int) -> dict[str, float]:
    tmp = tempfile.mkdtemp(prefix="fg-hotpath-")
    settings = Settings(database_url=f"sqlite:///{tmp}/gateway.store.db", admin_token="bench", redis_url=None,
                        embedded_engine=False)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw",
                                     headers={"authorization": "Bearer bench"}) as admin:
            tenant = (await admin.post("/admin/tenants", json={"name": "bench"})).json()
            key = (await admin.post(f"/admin/tenants/{tenant['id']}/keys", json={})).json()["key"]
        state = state_of(app)
        backend = InstantBackend()
        state.backends = {"up": backend}
        state.router = Router({"up": backend}, {"up": "up"})
        out: dict[str, float] = {}
        for kind, stream in (("json", False), ("stream", True)):
            total, classify = await measure(app, key, stream, n)
            out |= {f"{kind}_us_per_req": round(total, 1), f"{kind}_classify_us_per_req": round(classify, 1),
                    f"{kind}_us_per_req_excl_classify": round(total - classify, 1)}
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    result = asyncio.run(run(args.requests))
    print(f"{'answer':8s} {'cpu us/request':>15s} {'in classify':>12s} {'the rest':>9s}")
    for kind in ("json", "stream"):
        print(f"{kind:8s} {result[f'{kind}_us_per_req']:15.1f} {result[f'{kind}_classify_us_per_req']:12.1f}"
              f" {result[f'{kind}_us_per_req_excl_classify']:9.1f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
