"""The ASGI endpoint behind /v1/chat/completions and /v1/completions: non-streaming and SSE.

A stream cut by the client is noticed by a watcher on `receive()`, which cancels the handler;
the handler then settles and records usage up to the cut, like any other ending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from backends.base import BackendError
from gateway.errors import ApiError, send_error
from gateway.request_path import (
    JSON_HEADERS,
    SSE_HEADERS,
    Admitted,
    admit,
    allowed_backends,
    finish,
    for_backend,
    no_backend_error,
)

log = logging.getLogger("fairgate.request")


class CompletionsEndpoint:
    def __init__(self, kind: str) -> None:
        self.kind = kind

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        state = scope["app"].state
        try:
            adm = await admit(state, self.kind, scope, receive)
        except ApiError as err:
            await send_error(send, err)
            return
        except Exception as exc:  # e.g. the key store or Redis is down: nothing was reserved
            log.warning("admission failed (%s)", type(exc).__name__)
            await send_error(send, ApiError(503, "The gateway cannot admit requests right now; retry.",
                                            "service_unavailable", headers={"retry-after": "1"}))
            return
        if adm.parsed.stream:
            await stream(state, adm, receive, send)
        else:
            await complete(state, adm, send)


def _headers(adm: Admitted, base: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    # the gateway's own time so far: everything since arrival except waiting on backends
    adm.overhead_ms = max(time.perf_counter() - adm.t0 - adm.backend_s, 0.0) * 1000
    return [*base, (b"x-request-id", adm.rid.encode()), (b"x-fairgate-priority", adm.priority.encode()),
            (b"x-fairgate-overhead-ms", b"%.3f" % adm.overhead_ms)]


async def complete(state: Any, adm: Admitted, send: Any) -> None:
    err: BackendError | None = None
    for backend in allowed_backends(adm):
        started = time.perf_counter()
        try:
            result = await backend.complete(for_backend(adm.gen, backend))
        except BackendError as exc:
            err = exc
            if exc.retryable:
                continue
            break
        except Exception as exc:  # a backend bug must still end in one settle and one record
            err = BackendError(f"backend {backend.name} failed: {type(exc).__name__}", 502, True)
            continue
        finally:
            adm.backend_s += time.perf_counter() - started
        result["model"] = adm.parsed.model
        result["id"] = adm.rid  # the id usage records and logs know it by
        body = orjson.dumps(result)
        adm.ttft = time.perf_counter()
        await send({"type": "http.response.start", "status": 200,
                    "headers": _headers(adm, [*JSON_HEADERS, (b"content-length", str(len(body)).encode())])})
        await send({"type": "http.response.body", "body": body})
        # settling after the response went out keeps it off the client's latency
        await finish(state, adm, "finished", backend.name, 200, result.get("usage"))
        return
    api_err = no_backend_error(adm, err)
    await send_error(send, api_err)
    await finish(state, adm, "failed", None, api_err.status, None)


def _count_and_strip(chunk: dict[str, Any], kind: str) -> int:
    """1 if the chunk carries generated text (≈ one token per chunk for engines), else 0."""
    for choice in chunk.get("choices") or ():
        piece = (choice.get("delta") or {}).get("content") if kind == "chat" else choice.get("text")
        if piece:
            return 1
    return 0


async def _one_by_one(gen: AsyncIterator[dict[str, Any]]) -> AsyncIterator[list[dict[str, Any]]]:
    try:
        async for chunk in gen:
            yield [chunk]
    finally:
        await gen.aclose()  # e.g. the local engine aborts the request when its stream closes


def _batches(backend: Any, request: Any) -> AsyncIterator[list[dict[str, Any]]]:
    fast = getattr(backend, "stream_batches", None)
    return fast(request) if fast is not None else _one_by_one(backend.stream(request))


async def stream(state: Any, adm: Admitted, receive: Any, send: Any) -> None:
    err: BackendError | None = None
    gen = first = used = None
    for backend in allowed_backends(adm):
        candidate = _batches(backend, for_backend(adm.gen, backend))
        started = time.perf_counter()
        try:
            first = await anext(candidate)
        except StopAsyncIteration:
            first = None
        except BackendError as exc:  # nothing was sent yet, so a fallback may still serve it
            err = exc
            await candidate.aclose()
            if exc.retryable:
                continue
            break
        finally:
            adm.backend_s += time.perf_counter() - started
        gen, used = candidate, backend
        break
    if gen is None or used is None:
        api_err = no_backend_error(adm, err)
        await send_error(send, api_err)
        await finish(state, adm, "failed", None, api_err.status, None)
        return

    task = asyncio.current_task()
    assert task is not None
    flags = {"done": False, "disconnected": False}

    async def watch() -> None:
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                if not flags["done"]:
                    flags["disconnected"] = True
                    task.cancel()
                return

    watcher = asyncio.get_running_loop().create_task(watch())
    include_usage = adm.parsed.include_usage
    usage: dict[str, Any] | None = None
    seen = 0
    status, http_status = "finished", 200
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _headers(adm, SSE_HEADERS)})
        batch = first
        while batch is not None:
            out = []
            for chunk in batch:
                if chunk.get("usage"):
                    usage = chunk["usage"]
                if not include_usage:
                    chunk.pop("usage", None)
                if chunk.get("choices") or include_usage:
                    seen += _count_and_strip(chunk, adm.kind)
                    chunk["id"] = adm.rid
                    chunk["model"] = adm.parsed.model
                    out.append(b"data: " + orjson.dumps(chunk) + b"\n\n")
            if out:  # what arrived together leaves together: one write, not one per chunk
                await send({"type": "http.response.body", "body": b"".join(out), "more_body": True})
                if adm.ttft is None:
                    adm.ttft = time.perf_counter()
            batch = await anext(gen, None)
        flags["done"] = True
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})
    except asyncio.CancelledError:
        if not flags["disconnected"]:
            status = "cancelled"
            raise
        task.uncancel()  # the client left: finish quietly and record usage up to the cut
        status, http_status = "disconnected", 499
    except BackendError as exc:  # after bytes went out: report in-band, no fallback
        status, http_status = "failed", exc.status
        flags["done"] = True
        body = orjson.dumps({"error": {"message": str(exc), "type": "server_error", "code": "upstream_error"}})
        await send({"type": "http.response.body", "body": b"data: " + body + b"\n\ndata: [DONE]\n\n",
                    "more_body": False})
    finally:
        flags["done"] = True
        watcher.cancel()
        await gen.aclose()
        await finish(state, adm, status, used.name, http_status, usage, seen)
