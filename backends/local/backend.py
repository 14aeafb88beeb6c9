"""`LocalBackend`: the gateway's `Backend` over an in-process `AsyncEngine`.

The engine server (`server.py`) serves through this same class, so the gateway's embedded
engine and a `fairgate engine` process give the same answers for the same body.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

from backends.base import Capabilities, Chunk, GenerationRequest
from backends.local.engine import AsyncEngine
from backends.local.engine_config import EngineConfig
from backends.local.engine_stream import RequestStream
from backends.local.output import EngineStats, RequestOutput, RequestRejected
from backends.local.prepare import EngineRequest, ModelInfo, prepare
from backends.openai_wire import WireError, chunk, full_response, parse_request, usage_chunk

CAPABILITIES = Capabilities(tenant_scheduling=True, cache_salt=True, logprobs=False, tools=False)


class LocalBackend:
    """Generates with an engine in this process. `is_local`: personal data may come here."""

    is_local = True
    capabilities = CAPABILITIES

    def __init__(self, engine: AsyncEngine, name: str = "local", model_name: str | None = None) -> None:
        self.engine = engine
        self.name = name
        self.model_name = model_name or engine.config.served_model_name or _folder_name(engine.config.model)
        self.info = ModelInfo(self.model_name, engine.max_model_len, engine.tokenizer)

    @property
    def context_length(self) -> int:
        return self.engine.max_model_len

    @classmethod
    def from_config(cls, config: EngineConfig, name: str = "local") -> LocalBackend:
        return cls(AsyncEngine(config), name=name)

    # ------------------------------------------------------------------ Backend contract
    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        return await self.complete_prepared(self.prepare(request), request)

    async def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        batches = self.stream_prepared(self.prepare(request), request, include_usage=True)
        try:
            async for batch in batches:
                yield batch
        finally:
            await batches.aclose()  # leaving early aborts the engine request now, not at GC

    async def aclose(self) -> None:
        await self.engine.aclose()

    # ------------------------------------------------------------------ engine control
    def set_fairness(self, weights: dict[str, float], version: int | None = None) -> bool:
        """Per-tenant fairness weights for the engine's fair queue (False: stale version)."""
        return self.engine.set_fairness(weights, version)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    # ------------------------------------------------------------------ building blocks
    def prepare(self, request: GenerationRequest) -> EngineRequest:
        """Tokenize and build sampling; raises `WireError` (4xx) before any work is queued.
        The body's model name is not checked: whoever routed the request here chose this model."""
        wire = request.parsed or parse_request(request.kind, request.body, require_model=False)
        return prepare(wire, request.body, self.info)

    async def complete_prepared(self, prepared: EngineRequest, request: GenerationRequest) -> dict[str, Any]:
        final: RequestOutput | None = None
        async with self._start(prepared, request) as stream:
            async for delta in stream:
                if final is None:
                    final = delta
                else:
                    final.merge(delta)
        assert final is not None
        _raise_if_failed(final)
        return full_response(prepared.kind, request.request_id, request.model or prepared.model, final)

    async def stream_prepared(
        self, prepared: EngineRequest, request: GenerationRequest, include_usage: bool
    ) -> AsyncGenerator[list[Chunk], None]:
        """Chunks, one batch per engine delta; the usage chunk (empty choices) comes last when
        `include_usage`. An engine failure mid-stream raises `WireError` (5xx) after the chunks
        sent so far."""
        kind, rid, model = prepared.kind, request.request_id, request.model or prepared.model
        created = int(time.time())
        async with self._start(prepared, request) as stream:
            if kind == "chat":
                yield [chunk(kind, rid, model, created, "", first=True)]
            async for delta in stream:
                _raise_if_failed(delta)
                if not delta.finished:
                    if delta.text:
                        yield [chunk(kind, rid, model, created, delta.text)]
                    continue
                batch = [chunk(kind, rid, model, created, delta.text)] if delta.text else []
                batch.append(chunk(kind, rid, model, created, None if kind == "chat" else "", delta.finish_reason))
                if include_usage:
                    batch.append(usage_chunk(kind, rid, model, created, delta.usage))
                yield batch

    def _start(self, prepared: EngineRequest, request: GenerationRequest) -> RequestStream:
        try:
            return self.engine.add_request(
                request.request_id,
                prepared.prompt_token_ids,
                prepared.sampling,
                tenant=request.tenant,
                priority=request.priority,
                cache_salt=request.cache_salt,
            )
        except RequestRejected as exc:
            raise WireError(400, str(exc), exc.code, exc.param) from None
        except RuntimeError as exc:  # the engine is closed (shutting down): try another backend
            raise WireError(503, str(exc), "engine_unavailable") from None


def _raise_if_failed(out: RequestOutput) -> None:
    if out.finish_reason == "error":
        raise WireError(500, out.error or "engine error", "engine_error")
    if out.finish_reason == "abort":
        raise WireError(503, "the request was aborted", "aborted")


def _folder_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path
