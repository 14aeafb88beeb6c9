"""The streamed (SSE) answer: open a stream on the first backend that answers, forward its
batches, settle at the end however it ends.

A stream cut by the client is noticed by a watcher on `receive()`, which cancels the handler;
the handler then settles and records usage up to the cut, like any other ending.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

from fairgate.backends.base import Backend, BackendError, Chunk, Kind
from fairgate.backends.openai_wire import (
    SSE_DONE,
    WireError,
    chunk_has_content,
    chunk_text_count,
    send_error,
    sse,
    sse_stream_error,
)
from fairgate.backends.openai_wire.responses_output import ResponsesOutput
from fairgate.backends.types import Receive, Send
from fairgate.gateway.request.admission import Admitted
from fairgate.gateway.request.fallback import first_answer
from fairgate.gateway.request.settlement import finish
from fairgate.gateway.request.state import RequestState

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
Batches = AsyncGenerator[list[Chunk], None]


@dataclass(slots=True)
class StreamProgress:
    """One stream's state between the forwarding loop, the disconnect watcher and settlement."""

    include_usage: bool
    done: bool = False  # no more bytes will be sent: a disconnect now is no cut
    disconnected: bool = False
    usage: dict[str, Any] | None = None  # the backend's usage, whether the client asked or not
    text_chunks: int = 0  # chunks that carried text: the completion estimate without usage
    content: bool = False  # a chunk with something generated went out (TTFT stops there, not at `role`)
    status: str = "finished"
    http_status: int = 200

    def frame(self, batch: list[Chunk], kind: Kind, output: ResponsesOutput | None = None) -> bytes:
        """The SSE bytes for one batch (`output`: another API's events, e.g. Responses);
        notes usage and text on the way."""
        out = []
        if not self.content:
            self.content = any(chunk_has_content(c, kind) for c in batch)
        if output is not None:
            for chunk in batch:
                self.usage = chunk.get("usage") or self.usage
                self.text_chunks += chunk_text_count(chunk, kind) if chunk.get("choices") else 0
            return output.frame(batch)
        for chunk in batch:
            usage = chunk.get("usage")
            if usage:
                self.usage = usage
            if chunk.get("choices"):
                self.text_chunks += chunk_text_count(chunk, kind)
                if usage and not self.include_usage:  # rare: usage riding on a text chunk
                    chunk = {k: v for k, v in chunk.items() if k != "usage"}
                out.append(sse(chunk))
            elif self.include_usage:
                out.append(sse(chunk))
        return b"".join(out)


async def open_stream(backend: Backend, adm: Admitted) -> tuple[Batches, list[Chunk] | None]:
    """The backend's stream and its first batch (errors before it may still fall back)."""
    batches = backend.stream_batches(adm.gen)
    try:
        return batches, await anext(batches, None)
    except BaseException:
        await batches.aclose()
        raise


async def stream(state: RequestState, adm: Admitted, receive: Receive, send: Send) -> None:
    try:
        backend, (batches, first) = await first_answer(adm, lambda b: open_stream(b, adm))
    except WireError as err:
        await send_error(send, err)
        await finish(state, adm, "failed", None, err.status, None, code=err.code)
        return
    progress = StreamProgress(adm.parsed.include_usage)
    task = asyncio.current_task()
    assert task is not None
    watcher = asyncio.get_running_loop().create_task(_watch_disconnect(receive, progress, task))
    try:
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*SSE_HEADERS, *adm.response_headers(backend.name)]})
        await _forward(adm, progress, first, batches, send)
    except asyncio.CancelledError:
        if not progress.disconnected:
            progress.status = "cancelled"
            raise
        task.uncancel()  # the client left: finish quietly and record usage up to the cut
        progress.status, progress.http_status = "disconnected", 499
    except BackendError as exc:  # after bytes went out: report in-band, no fallback
        progress.status, progress.http_status, progress.done = "failed", exc.status, True
        error = (sse_stream_error(str(exc), exc.code or "upstream_error") if adm.output is None
                 else adm.output.failed(str(exc), exc.status))  # Responses: `response.failed`
        await send({"type": "http.response.body", "body": error, "more_body": False})
    finally:
        progress.done = True
        watcher.cancel()
        await batches.aclose()
        await finish(state, adm, progress.status, backend.name, progress.http_status, progress.usage,
                     progress.text_chunks)


async def _forward(adm: Admitted, progress: StreamProgress, batch: list[Chunk] | None, batches: Batches,
                   send: Send) -> None:
    while batch is not None:
        body = progress.frame(batch, adm.kind, adm.output)
        if body:  # what arrived together leaves together: one write, not one per chunk
            await send({"type": "http.response.body", "body": body, "more_body": True})
            if adm.ttft is None and progress.content:  # the first token out, not the `role` chunk
                adm.ttft = time.perf_counter()
        batch = await anext(batches, None)
    progress.done = True
    end = SSE_DONE if adm.output is None else adm.output.end()
    await send({"type": "http.response.body", "body": end, "more_body": False})


async def _watch_disconnect(receive: Receive, progress: StreamProgress, task: asyncio.Task[Any]) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            if not progress.done:
                progress.disconnected = True
                task.cancel()
            return
