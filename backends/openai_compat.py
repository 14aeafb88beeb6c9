"""An OpenAI-compatible server as a `Backend`: external APIs, vLLM, TGI, another fairgate.

Calls go over the gateway's shared keep-alive `HTTP1Pool` (backends/http1.py). Retries with
backoff on 429/5xx and connection errors (waiting out the upstream's Retry-After), but only
before the first byte reached the caller; a circuit breaker per backend (backends/breaker.py)
stops hammering an upstream that keeps failing, for the tenant whose requests fail or, in an
outage, for everybody. The upstream API key is held in a private header blob and kept out of
repr, logs and errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
from collections.abc import AsyncGenerator
from typing import Any

import orjson

from fairgate.backends.base import BackendError, Capabilities, Chunk, GenerationRequest
from fairgate.backends.breaker import Breaker, BreakerPolicy, Outcome, State, Ticket, Transition
from fairgate.backends.http1 import HTTP1Pool, HTTPError, Response, ResponseTooLarge
from fairgate.backends.http_transport import Transport, header_block, origin_for
from fairgate.backends.liveness import LivenessWatch
from fairgate.backends.openai_wire import WireError
from fairgate.backends.openai_wire.responses import response_id
from fairgate.backends.upstream_answer import first_token_at, retry_after_s, upstream_error

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 5.0  # an upstream asking for a longer pause is not retried within the request
# a fairgate engine server (or a vLLM we feed): it schedules by tenant and salts caches
LOCAL_ENGINE = Capabilities(tenant_scheduling=True, cache_salt=True, embeddings=True)
EXTERNAL = Capabilities(embeddings=True)  # OpenAI-compatible APIs serve /v1/embeddings
log = logging.getLogger("fairgate.backends")


def log_transition(backend: str, t: Transition) -> None:
    """One log line per state change (the backend and tenant ids only, never a request)."""
    who = f"backend {backend}" + (f" tenant {t.tenant}" if t.tenant is not None else "")
    open_for = f", open for {t.open_for_s:g} s" if t.new is State.OPEN else ""
    log.log(logging.WARNING if t.tenant is None else logging.INFO, "%s circuit %s -> %s (%s%s)",
            who, t.old.name.lower(), t.new.name.lower(), t.reason, open_for)


REQUEST_FAULTS = frozenset({400, 404, 413, 422})  # the client's request, as the upstream read it


def outcome_of(status: int, retry_after: float | None) -> Outcome:
    """What an upstream's error status says about the upstream (not about the request)."""
    if status == 429:
        return Outcome.BACKOFF if retry_after is not None else Outcome.FAULT
    return Outcome.FAULT if status >= 500 else Outcome.ANSWERED


class OpenAICompatBackend:
    """`model`: the name sent upstream (None: the client's). `is_local`: a fairgate engine
    server on company hardware, which also schedules by tenant and keeps cache salts apart."""

    context_length: int | None = None  # not known for an upstream API
    # A fairgate engine server keeps what a request named by X-Request-Id used, so a request
    # cut short here is billed exactly (backends/local/engine/request_ledger.py); vLLM does not.
    keeps_request_ledger = True

    def __init__(self, name: str, base_url: str, pool: HTTP1Pool, *, model: str | None = None,
                 api_key: str | None = None, is_local: bool = False, timeout_s: float = 60.0,
                 max_retries: int = 2, backoff_s: float = 0.05,
                 breaker: Breaker | None = None, transport: Transport | None = None) -> None:
        self.name = name
        self.is_local = is_local
        self.model = model
        self._base = base_url.rstrip("/")
        self.transport = transport or Transport()  # proxy, TLS, extra headers and query, size cap
        self._origin = origin_for(self._base, self.transport)
        self._pool = pool
        self._headers = header_block(api_key, self.transport)
        self._timeout = timeout_s
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        # a probe's answer arrives within the head timeout (retries and their pauses included)
        policy = BreakerPolicy(probe_timeout_s=(max_retries + 1) * (timeout_s + MAX_RETRY_AFTER_S))
        self.breaker = breaker or Breaker(policy, on_change=lambda t: log_transition(name, t))
        self.capabilities = LOCAL_ENGINE if is_local else EXTERNAL
        # our own hardware: a hang is noticed in seconds (an external API has its timeout)
        self.liveness = LivenessWatch(name, pool, self._origin, self._headers) if is_local else None
        self.token_decoder = None  # token-id prompts to another server are read as unreadable

    @property
    def model_name(self) -> str | None:
        return self.model

    @property
    def base_url(self) -> str:
        return self._base

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(name={self.name!r}, base_url={self._base!r}, is_local={self.is_local})"

    def _prepare(self, request: GenerationRequest, stream: bool) -> tuple[str, bytes]:
        wire = request.wire
        body = dict(wire.body)
        if self.model:
            body["model"] = self.model
        if not self.is_local:  # fairgate's own opt-out; an external API would refuse the field
            body.pop("speculative", None)
        if wire.max_tokens is not None:
            if wire.send_max_tokens:  # asked, or a key's limit: the bound admission reserved
                body[wire.max_tokens_field] = wire.max_tokens
            elif self.is_local and wire.max_tokens_field not in body:
                body["max_tokens"] = wire.max_tokens  # our engine servers: the reserved bound
        if stream:
            body["stream"] = True
            opts = {**(body.get("stream_options") or {}), "include_usage": True}
            if self.is_local:  # our engines and vLLM: usage on every chunk, exact when a stream is cut
                opts["continuous_usage_stats"] = True
            body["stream_options"] = opts
        else:
            body.pop("stream_options", None)
            body["stream"] = False
        path = "/chat/completions" if request.kind == "chat" else "/completions"
        return path, orjson.dumps(body)

    def _request_headers(self, request: GenerationRequest) -> bytes:
        # A local backend (a fairgate engine server) schedules by tenant and priority class,
        # so tell it who asks; external APIs never see tenant ids. Values go into raw header
        # bytes: anything but printable ASCII is dropped (no header injection).
        if not self.is_local:
            return self._headers
        extra = b""
        for name, value in (("X-Tenant", request.tenant), ("X-Priority", request.priority),
                            ("X-Cache-Salt", request.cache_salt), ("X-Request-Id", request.request_id)):
            if value and value.isascii() and value.isprintable():
                extra += f"{name}: {value}\r\n".encode()
        return self._headers + extra

    async def _send(self, path: str, payload: bytes, headers: bytes, tenant: str) -> Response:
        """POST with retries; returns a 2xx response whose body is not read yet."""
        ticket = self.breaker.admit(tenant)
        if not ticket.allowed:
            raise self._refusal(ticket)
        try:
            return await self._attempts(ticket, path, payload, headers)
        finally:
            self.breaker.release(ticket)  # a probe whose client left frees its slot

    def _refusal(self, ticket: Ticket) -> WireError:
        """A 503 with Retry-After; retryable: a fallback backend may take the request."""
        wait, headers = f"{ticket.retry_in_s:.1f}", {"retry-after": str(max(1, math.ceil(ticket.retry_in_s)))}
        if ticket.scope == "tenant":
            return WireError(503, f"backend {self.name} is backing off this tenant's requests for {wait} s (its "
                             "recent requests failed upstream, or the upstream asked to wait)", "upstream_backoff",
                             headers=headers, retryable=True)
        return WireError(503, f"backend {self.name} is unavailable (circuit open, next try in {wait} s)",
                         "circuit_open", headers=headers, retryable=True)

    async def _attempts(self, ticket: Ticket, path: str, payload: bytes, headers: bytes) -> Response:
        last: BackendError | None = None
        wait: float | None = None  # the upstream's Retry-After, when it gave one
        for attempt in range(self._max_retries + 1):
            if attempt:
                await asyncio.sleep(wait if wait is not None else
                                    self._backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random()))
                if self.breaker.holds(ticket.tenant):
                    break  # an outage, this tenant's failures or a Retry-After meanwhile: no more tries
            try:
                resp = await self._pool.post(self._origin, path, headers, payload, self._timeout)
            except HTTPError as exc:
                self.breaker.record(ticket, Outcome.FAULT)
                if exc.before_response:
                    last = BackendError(f"backend {self.name} unreachable: {exc}", 502, True)
                    continue
                # the upstream may have started work: do not resend here, a fallback may try
                raise BackendError(f"backend {self.name} failed: {exc}", 504 if exc.timeout else 502, True,
                                   code=exc.code) from None
            if resp.status < 300:
                self.breaker.record(ticket, Outcome.SUCCESS)
                return resp
            error, wait = await self._refused(ticket, resp)
            if not error.retryable:
                raise error
            last = error
            if wait is not None and wait > MAX_RETRY_AFTER_S:
                break  # longer than a request should wait here: a fallback, or the client, retries
        assert last is not None
        raise last

    async def _refused(self, ticket: Ticket, resp: Response) -> tuple[BackendError, float | None]:
        """The error for a non-2xx answer (retryable for 429/5xx) and its Retry-After, recorded."""
        if resp.status < 400:  # never taken as an answer; never followed to a new host
            resp.close()
            self.breaker.record(ticket, Outcome.ANSWERED)
            where = resp.headers.get(b"location", b"?").decode("latin-1")[:200]
            return BackendError(f"backend {self.name} answered a redirect ({resp.status} to {where}); redirects "
                                "are not followed: set the backend's base_url to the final address", 502, False,
                                code="upstream_redirect"), None
        try:
            data = await resp.read(self.transport.max_event_bytes)
        except HTTPError:
            data = b""
        message, code, param = upstream_error(data, resp.status)
        wait = retry_after_s(resp.headers.get(b"retry-after"))
        self.breaker.record(ticket, outcome_of(resp.status, wait), wait)
        if resp.status in RETRY_STATUSES:
            return BackendError(f"backend {self.name} answered {resp.status}: {message}", resp.status, True), wait
        # the request itself is bad (400, 401, 404...): no retry, no fallback; the client learns
        # which field and why as the upstream said it
        # (the request's own faults only: an upstream 401 is about our key, not the client's)
        own = resp.status in REQUEST_FAULTS
        return BackendError(f"backend {self.name} refused the request: {message}", resp.status, False,
                            code=code if own else None, param=param if own else None), None

    def _late_fault(self, tenant: str) -> None:
        """The upstream failed after its head (a reset, a stall): that success was a fault."""
        self.breaker.record(Ticket(True, tenant), Outcome.BROKEN)

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        path, payload = self._prepare(request, stream=False)
        return await self._json_answer(request, path, payload)

    async def embed(self, request: GenerationRequest) -> dict[str, Any]:
        """POST /embeddings upstream with the client's body (the upstream's model name)."""
        body = dict(request.wire.body)
        if self.model:
            body["model"] = self.model
        result = await self._json_answer(request, "/embeddings", orjson.dumps(body))
        result.pop("id", None)  # embeddings responses carry no id
        return result

    async def _json_answer(self, request: GenerationRequest, path: str, payload: bytes) -> dict[str, Any]:
        if self.liveness is not None:
            self.liveness.started()
        try:
            return await self._read_answer(request, path, payload)
        finally:
            if self.liveness is not None:
                self.liveness.ended()

    async def _read_answer(self, request: GenerationRequest, path: str, payload: bytes) -> dict[str, Any]:
        try:
            sent = time.perf_counter()
            resp = await self._send(path, payload, self._request_headers(request), request.tenant)
            request.used.first_token_at = first_token_at(resp, sent) if self.is_local else None
            try:
                async with asyncio.timeout(self._timeout):  # the whole body: a trickle ends too
                    data = await resp.read(self.transport.max_response_bytes)
            except TimeoutError:
                self._late_fault(request.tenant)
                raise BackendError(f"backend {self.name} did not finish its response within {self._timeout:g} s",
                                   504, True, code="upstream_timeout") from None
            except ResponseTooLarge as exc:  # answered, and paid for: no fallback repeats it
                raise BackendError(f"backend {self.name} sent a response too large: {exc}", 502, False,
                                   code=exc.code) from None
            except HTTPError as exc:
                self._late_fault(request.tenant)
                raise BackendError(f"backend {self.name} failed mid-response: {exc}", 502, True) from None
            finally:
                resp.close()  # cut before the end: the connection goes, so the upstream notices
        except asyncio.CancelledError:  # our client left: closing the connection aborted the work
            if self.is_local and self.keeps_request_ledger:
                await self._read_cut_usage(request)
            raise
        try:
            result: Any = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise BackendError(f"backend {self.name} sent invalid JSON", 502, True) from None
        if not isinstance(result, dict):
            raise BackendError(f"backend {self.name} sent a response that is not an object", 502, True)
        rid, model = _identity(request)
        if rid is not None:
            result["id"], result["model"] = rid, model
        return result

    async def _read_cut_usage(self, request: GenerationRequest) -> None:
        """Ask our engine server what the request we just hung up on used (into `request.used`)."""
        request.used.note(await self.usage_of(request.request_id))

    async def usage_of(self, request_id: str, timeout_s: float = 3.0) -> dict[str, Any] | None:
        """What the request sent with X-Request-Id `request_id` used, as our engine server's
        ledger keeps it once the request ended; None from any other upstream, or when unknown."""
        if not (self.is_local and self.keeps_request_ledger):
            return None
        with contextlib.suppress(HTTPError, TimeoutError, orjson.JSONDecodeError, AttributeError):
            async with asyncio.timeout(timeout_s):
                resp = await self._pool.post(self._origin, f"/requests/{request_id}/usage", self._headers,
                                             b"", timeout_s, method="GET")
                data = await resp.read(2**20)
            if resp.status == 200:
                usage = orjson.loads(data).get("usage")
                return usage if isinstance(usage, dict) else None
        return None

    async def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        """The chunks as they arrive, grouped by network read, so the gateway can forward
        whatever came in one packet with one write."""
        path, payload = self._prepare(request, stream=True)
        if self.liveness is not None:
            self.liveness.started()
        try:
            async for batch in self._read_stream(request, path, payload):
                yield batch
        finally:
            if self.liveness is not None:
                self.liveness.ended()

    async def _read_stream(self, request: GenerationRequest, path: str,
                           payload: bytes) -> AsyncGenerator[list[Chunk], None]:
        resp = await self._send(path, payload, self._request_headers(request), request.tenant)
        rid, model = _identity(request)
        keep_usage = request.wire.continuous_usage  # the client asked for it itself
        buf = b""
        loop = asyncio.get_running_loop()
        last_event = loop.time()
        max_line = self.transport.max_event_bytes
        try:
            async for data in resp.iter_bytes():
                buf += data
                *lines, buf = buf.split(b"\n")
                if len(buf) > max_line:  # one event without an end: bounded, not buffered forever
                    raise ResponseTooLarge(max_line, "stream event")
                if lines:
                    last_event = loop.time()
                elif loop.time() - last_event > self._timeout:  # bytes, but no event: a trickle
                    raise HTTPError(f"no complete event for {self._timeout:g} s", False, timeout=True)
                batch: list[dict[str, Any]] = []
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue
                    item = line[5:].strip()
                    if item == b"[DONE]":
                        if batch:
                            yield batch
                        await resp.finish()  # the body's end: the connection is kept for the next request
                        return
                    chunk = self._chunk(item)
                    usage = chunk.get("usage")
                    if usage:
                        request.used.note(usage)  # exact counts if the stream is cut after this
                        if chunk.get("choices") and not keep_usage:
                            del chunk["usage"]
                    if rid is not None:
                        chunk["id"], chunk["model"] = rid, model  # the gateway's names, set once
                    batch.append(chunk)
                if batch:
                    yield batch
        except HTTPError as exc:
            if not isinstance(exc, ResponseTooLarge):  # too much is no outage
                self._late_fault(request.tenant)
            raise BackendError(f"backend {self.name} stream broke: {exc}", 504 if exc.timeout else 502, False,
                               code=exc.code) from None
        finally:
            resp.close()

    def _chunk(self, item: bytes) -> Chunk:
        try:
            chunk = orjson.loads(item)
        except orjson.JSONDecodeError:
            chunk = None
        if not isinstance(chunk, dict):
            raise BackendError(f"backend {self.name} sent an invalid chunk", 502, False)
        return chunk

    async def aclose(self) -> None:
        if self.liveness is not None:
            await self.liveness.aclose()  # the shared pool belongs to the gateway


def _identity(request: GenerationRequest) -> tuple[str | None, str | None]:
    """The response id and model name the client sees, when the gateway gave them."""
    if request.model is None:
        return None, None
    return response_id(request.kind, request.request_id), request.model
