"""The ASGI endpoint behind /v1/chat/completions, /v1/completions and /v1/embeddings, and the
non-streaming answer (streams: gateway/request/streaming.py).

    admit (gateway.request.admission) → first_answer (gateway.request.fallback) → send → finish (gateway.request.settlement)

Raw ASGI (no Request/Response objects, no middleware) because this is the hot path. Nothing is
reserved until the request is known to be valid, allowed and routable; once it is reserved,
exactly one settle and one usage record follow, whatever happens after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import orjson

from fairgate.backends.base import Kind
from fairgate.backends.openai_wire import WireError, send_error, send_json
from fairgate.backends.types import Receive, Scope, Send
from fairgate.gateway.observability.refusals import refusal_reason
from fairgate.gateway.request.admission import Admitted, admit
from fairgate.gateway.request.fallback import first_answer
from fairgate.gateway.request.request_log import log_refusal
from fairgate.gateway.request.settlement import finish
from fairgate.gateway.request.state import RequestState, request_state
from fairgate.gateway.request.streaming import stream

log = logging.getLogger("fairgate.request")


class CompletionsEndpoint:
    def __init__(self, kind: Kind) -> None:
        self.kind: Kind = kind

    async def admit(self, state: RequestState, scope: Scope, receive: Receive) -> Admitted:
        return await admit(state, self.kind, scope, receive)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = request_state(scope["app"])
        t0 = time.perf_counter()
        try:
            adm = await self.admit(state, scope, receive)
        except WireError as err:
            await send_error(send, err)
            route = scope.get("path", "")
            log_refusal(route, err.status, err.code, t0, err.tenant)
            state.metrics.refused(route, refusal_reason(err.status, err.code))
            return
        except Exception as exc:  # e.g. the key store or Redis is down: nothing was reserved
            log.warning("admission failed (%s)", type(exc).__name__)
            await send_error(send, WireError(503, "The gateway cannot admit requests right now; retry.",
                                             "service_unavailable", headers={"retry-after": "1"}))
            return
        if adm.kind == "embedding":
            await embed(state, adm, send)
        elif adm.parsed.stream:
            await stream(state, adm, receive, send)
        else:
            await complete(state, adm, receive, send)


async def complete(state: RequestState, adm: Admitted, receive: Receive, send: Send) -> None:
    """The whole answer; a client that disconnects while it is generating cancels the backend
    call (the engine frees the sequence) and is billed for what was generated.

    The call runs in this task; a watcher on `receive()` cancels it when the client leaves
    (one task per request, not two and an `asyncio.wait`)."""
    task = asyncio.current_task()
    assert task is not None
    cut = Cut()
    watcher = asyncio.get_running_loop().create_task(_watch(receive, cut, task))
    try:
        backend, result = await first_answer(adm, lambda b: b.complete(adm.gen))
    except asyncio.CancelledError:
        cut.done = True
        if not cut.left:  # the server is stopping: the call has ended, still settle once
            await finish(state, adm, "cancelled", adm.trying, 499, None)
            raise
        task.uncancel()  # the client left; the backend filled adm.gen.used on its way out
        await finish(state, adm, "disconnected", adm.trying, 499, None)
        return
    except WireError as err:
        cut.done = True
        await send_error(send, err)
        await finish(state, adm, "failed", None, err.status, None, code=err.code)
        return
    finally:
        cut.done = True  # from here on a disconnect cancels nothing
        watcher.cancel()
    # id and model were set by the backend (GenerationRequest)
    body = orjson.dumps(result if adm.output is None else adm.output.response(result))
    # a whole answer: its first token as the backend timed it (our engines); unknown elsewhere
    adm.ttft = adm.gen.used.first_token_at
    await send_json(send, 200, body, adm.response_headers(backend.name))
    # settling after the response went out keeps it off the client's latency
    await finish(state, adm, "finished", backend.name, 200, result.get("usage"))


@dataclass(slots=True)
class Cut:
    """Between a non-streaming call and its disconnect watcher."""

    done: bool = False  # the call has ended: a disconnect now cancels nothing
    left: bool = False  # the client left while the call ran (the watcher cancelled it)


async def _watch(receive: Receive, cut: Cut, task: asyncio.Task[Any]) -> None:
    """Cancels `task` when the client has gone (the body was read already: nothing else comes)."""
    with contextlib.suppress(Exception):  # a receive that fails: the client is gone as well
        while (await receive())["type"] != "http.disconnect":
            pass
    if not cut.done:
        cut.left = True
        task.cancel()


async def embed(state: RequestState, adm: Admitted, send: Send) -> None:
    """POST /v1/embeddings: the same admission (a sensitive input only to a local backend), no
    completion reserved; the usage row counts the input tokens."""
    try:
        backend, result = await first_answer(adm, lambda b: b.embed(adm.gen))
    except WireError as err:
        await send_error(send, err)
        await finish(state, adm, "failed", None, err.status, None, code=err.code)
        return
    body = orjson.dumps({**result, "model": adm.parsed.model})  # the name the client asked for
    await send_json(send, 200, body, adm.response_headers(backend.name))
    await finish(state, adm, "finished", backend.name, 200, result.get("usage"))
