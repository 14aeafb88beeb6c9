"""An OpenAI-compatible server as a `Backend`: external APIs, vLLM, TGI, another fairgate.

One shared keep-alive `httpx.AsyncClient` per gateway. Retries with backoff on 429/5xx and
connection errors, but only before the first byte reached the caller; a small circuit breaker
per backend stops hammering an upstream that keeps failing. The upstream API key is held in a
private attribute and kept out of repr, logs and errors.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from backends.base import BackendError, GenerationRequest

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class CircuitBreaker:
    """Open after `threshold` consecutive failures; after `cooldown_s` let one trial through."""

    def __init__(self, threshold: int = 5, cooldown_s: float = 10.0) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.failures = 0
        self.opened_at: float | None = None

    def allow(self) -> bool:
        if self.opened_at is None:
            return True
        if time.monotonic() - self.opened_at >= self.cooldown_s:
            self.opened_at = time.monotonic()  # half-open: this caller is the one trial
            return True
        return False

    def success(self) -> None:
        self.failures = 0
        self.opened_at = None

    def failure(self) -> None:
        self.failures += 1
        if self.failures >= self.threshold:
            self.opened_at = time.monotonic()


class OpenAICompatBackend:
    def __init__(self, name: str, base_url: str, client: httpx.AsyncClient, *, model: str | None = None,
                 api_key: str | None = None, is_local: bool = False, timeout_s: float = 60.0,
                 max_retries: int = 2, backoff_s: float = 0.05,
                 breaker: CircuitBreaker | None = None) -> None:
        self.name = name
        self.is_local = is_local
        self.model = model
        self._base = base_url.rstrip("/")
        self._client = client
        self._headers = {"content-type": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(timeout_s, connect=min(5.0, timeout_s))
        self._max_retries = max_retries
        self._backoff_s = backoff_s
        self.breaker = breaker or CircuitBreaker()

    def __repr__(self) -> str:
        return f"OpenAICompatBackend(name={self.name!r}, base_url={self._base!r}, is_local={self.is_local})"

    def _prepare(self, request: GenerationRequest, stream: bool) -> tuple[str, bytes]:
        body = dict(request.body)
        if self.model:
            body["model"] = self.model
        if stream:
            body["stream"] = True
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        else:
            body.pop("stream_options", None)
            body["stream"] = False
        path = "/chat/completions" if request.kind == "chat" else "/completions"
        return self._base + path, orjson.dumps(body)

    def _request_headers(self, request: GenerationRequest) -> dict[str, str]:
        # a local backend (a fairgate engine server) schedules by tenant and priority class:
        # tell it who asks; external APIs never see tenant ids
        if not self.is_local:
            return self._headers
        extra = {"x-tenant": request.tenant, "x-priority": request.priority}
        if request.cache_salt:
            extra["x-cache-salt"] = request.cache_salt
        return {**self._headers, **extra}

    async def _send(self, url: str, payload: bytes, stream: bool,
                    headers: dict[str, str] | None = None) -> httpx.Response:
        """POST with retries; returns a response with a 2xx status (body not yet read if stream)."""
        last: BackendError | None = None
        for attempt in range(self._max_retries + 1):
            if not self.breaker.allow():
                raise BackendError(f"backend {self.name} is unavailable (circuit open)", 503, True)
            if attempt:
                await asyncio.sleep(self._backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random()))
            try:
                req = self._client.build_request("POST", url, content=payload, headers=headers or self._headers,
                                                 timeout=self._timeout)
                resp = await self._client.send(req, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError,
                    httpx.ReadError, httpx.WriteError, httpx.PoolTimeout) as exc:
                self.breaker.failure()
                last = BackendError(f"backend {self.name} unreachable: {type(exc).__name__}", 502, True)
                continue
            except httpx.TimeoutException:
                self.breaker.failure()
                raise BackendError(f"backend {self.name} timed out", 504, True) from None
            if resp.status_code < 400:
                self.breaker.success()
                return resp
            await resp.aread()
            await resp.aclose()
            message = _upstream_message(resp)
            if resp.status_code in RETRY_STATUSES:
                self.breaker.failure()
                last = BackendError(f"backend {self.name} answered {resp.status_code}: {message}",
                                    resp.status_code, True)
                continue
            # the request itself is bad (400, 401, 404...): no retry, no fallback
            self.breaker.success()
            raise BackendError(f"backend {self.name} refused the request: {message}", resp.status_code, False)
        assert last is not None
        raise last

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        url, payload = self._prepare(request, stream=False)
        resp = await self._send(url, payload, stream=False, headers=self._request_headers(request))
        try:
            return orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise BackendError(f"backend {self.name} sent invalid JSON", 502, True) from None

    async def stream(self, request: GenerationRequest) -> AsyncIterator[dict[str, Any]]:
        url, payload = self._prepare(request, stream=True)
        resp = await self._send(url, payload, stream=True, headers=self._request_headers(request))
        try:
            async for line in resp.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    yield orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise BackendError(f"backend {self.name} sent an invalid chunk", 502, False) from None
        except httpx.HTTPError as exc:
            raise BackendError(f"backend {self.name} stream broke: {type(exc).__name__}", 502, False) from None
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        return None  # the shared client belongs to the gateway


def _upstream_message(resp: httpx.Response) -> str:
    """The upstream's error message, short; never echoes request headers."""
    try:
        err = orjson.loads(resp.content).get("error")
        msg = err.get("message") if isinstance(err, dict) else str(err)
    except Exception:
        msg = resp.text
    return (msg or resp.reason_phrase)[:300]
