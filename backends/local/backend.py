"""`LocalBackend`: the gateway's `Backend` over an in-process `AsyncEngine`.

The engine server (`server.py`) serves through this same class, so the gateway's embedded
engine and a `fairgate engine` process give the same answers for the same body.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from backends.base import GenerationRequest
from backends.local.engine import AsyncEngine
from backends.local.engine_config import EngineConfig
from backends.local.openai_api import (
    APIError,
    ModelInfo,
    ParsedRequest,
    chunk,
    full_response,
    parse_request,
    usage_chunk,
)
from backends.local.output import EngineStats, RequestOutput, RequestRejected


class LocalBackend:
    """Generates with an engine in this process. `is_local`: personal data may come here."""

    is_local = True

    def __init__(self, engine: AsyncEngine, name: str = "local", model_name: str | None = None) -> None:
        self.engine = engine
        self.name = name
        self.model_name = model_name or engine.config.served_model_name or _folder_name(engine.config.model)
        self.info = ModelInfo(self.model_name, engine.max_model_len, engine.tokenizer)

    @classmethod
    def from_config(cls, config: EngineConfig, name: str = "local") -> LocalBackend:
        return cls(AsyncEngine(config), name=name)

    # ------------------------------------------------------------------ Backend protocol
    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        return await self.complete_parsed(self.prepare(request), request)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[dict[str, Any]]:
        async for c in self.stream_parsed(self.prepare(request), request, include_usage=True):
            yield c

    async def aclose(self) -> None:
        await self.engine.aclose()

    # ------------------------------------------------------------------ engine control
    def set_fairness(self, weights: dict[str, float], version: int | None = None) -> bool:
        """Per-tenant fairness weights for the engine's fair queue (False: stale version)."""
        return self.engine.set_fairness(weights, version)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    # ------------------------------------------------------------------ building blocks
    def prepare(self, request: GenerationRequest) -> ParsedRequest:
        """Validate the body; raises `APIError` (4xx) before any work is queued."""
        return parse_request(request.kind, request.body, self.info)

    async def complete_parsed(self, parsed: ParsedRequest, request: GenerationRequest) -> dict[str, Any]:
        final: RequestOutput | None = None
        async with self._start(parsed, request) as stream:
            async for delta in stream:
                if final is None:
                    final = delta
                else:
                    final.merge(delta)
        assert final is not None
        _raise_if_failed(final)
        return full_response(parsed.kind, request.request_id, parsed.model, final)

    async def stream_parsed(
        self, parsed: ParsedRequest, request: GenerationRequest, include_usage: bool
    ) -> AsyncIterator[dict[str, Any]]:
        """Chunk dicts; the usage chunk (empty choices) comes last when `include_usage`.

        An engine failure mid-stream raises `APIError` (5xx) after the chunks sent so far."""
        kind, rid, model = parsed.kind, request.request_id, parsed.model
        created = int(time.time())
        async with self._start(parsed, request) as stream:
            if kind == "chat":
                yield chunk(kind, rid, model, created, "", first=True)
            async for delta in stream:
                _raise_if_failed(delta)
                if delta.finished:
                    if delta.text:
                        yield chunk(kind, rid, model, created, delta.text)
                    yield chunk(kind, rid, model, created, None if kind == "chat" else "", delta.finish_reason)
                    if include_usage:
                        yield usage_chunk(kind, rid, model, created, delta.usage)
                elif delta.text:
                    yield chunk(kind, rid, model, created, delta.text)

    def _start(self, parsed: ParsedRequest, request: GenerationRequest):  # -> RequestStream
        try:
            return self.engine.add_request(
                request.request_id,
                parsed.prompt_token_ids,
                parsed.sampling,
                tenant=request.tenant,
                priority=request.priority,
                cache_salt=request.cache_salt,
            )
        except RequestRejected as exc:
            raise APIError(str(exc), code=exc.code, param=exc.param) from None
        except RuntimeError as exc:  # the engine is closed (shutting down): try another backend
            raise APIError(str(exc), status=503, type="server_error", code="engine_unavailable") from None


def _raise_if_failed(out: RequestOutput) -> None:
    if out.finish_reason == "error":
        raise APIError(out.error or "engine error", status=500, type="server_error", code="engine_error")
    if out.finish_reason == "abort":
        raise APIError("the request was aborted", status=503, type="server_error", code="aborted")


def _folder_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path
