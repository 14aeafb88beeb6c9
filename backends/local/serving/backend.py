"""`LocalBackend`: the gateway's `Backend` over an in-process `AsyncEngine`.

The engine server (`server.py`) serves through this same class, so the gateway's embedded
engine and a `fairgate engine` process give the same answers for the same body.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncGenerator
from typing import Any

from fairgate.backends.base import Capabilities, Chunk, GenerationRequest, TokenDecoder
from fairgate.backends.local.engine.async_engine import AsyncEngine
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.output import EngineStats, RequestOutput, RequestRejected
from fairgate.backends.local.engine.stream import RequestStream
from fairgate.backends.local.sampling.grammar_compiler import StructuredCompiler
from fairgate.backends.local.sampling.structured import GrammarState
from fairgate.backends.local.serving.choice_format import ChoiceFormatter
from fairgate.backends.local.serving.choices import (
    Choice,
    UsageTally,
    plan_choices,
    run_choices,
    total_usage,
)
from fairgate.backends.local.serving.embeddings import embed
from fairgate.backends.local.serving.prepare import (
    EngineRequest,
    ModelInfo,
    compile_grammar,
    prepare,
)
from fairgate.backends.local.serving.reasoning import ReasoningFormat
from fairgate.backends.openai_wire import (
    WireError,
    WireLimits,
    chunk,
    full_response,
    parse_limit_overrides,
    usage_chunk,
    usage_dict,
)

CAPABILITIES = Capabilities(tenant_scheduling=True, cache_salt=True, logprobs=True, tools=True,
                            response_format=True, n=True, batched_prompts=True, embeddings=True)


class LocalBackend:
    """Generates with an engine in this process. `is_local`: personal data may come here."""

    is_local = True
    capabilities = CAPABILITIES
    breaker = None  # no upstream: the engine is in this process

    def __init__(self, engine: AsyncEngine, name: str = "local", model_name: str | None = None) -> None:
        self.engine = engine
        self.name = name
        self.model_name = model_name or engine.config.served_model_name or _folder_name(engine.config.model)
        config = engine.config
        vocab = engine.tokenizer.get_vocab() if hasattr(engine.tokenizer, "get_vocab") else None
        reasoning = ReasoningFormat.of(config.reasoning_parser, vocab) if config.reasoning_parser else None
        self.info = ModelInfo(self.model_name, engine.max_model_len, engine.tokenizer, engine.vocab_size,
                              _grammar_compiler(engine), config.tool_call_parser, reasoning,
                              parse_limit_overrides(config.request_limits, WireLimits()))

    @property
    def context_length(self) -> int:
        return self.engine.max_model_len

    @property
    def token_decoder(self) -> TokenDecoder:
        """The served model's tokenizer (a `backends.base.TokenDecoder`): the gateway reads
        token-id prompts with it."""
        return self.engine.tokenizer

    @classmethod
    def from_config(cls, config: EngineConfig, name: str = "local") -> LocalBackend:
        return cls(AsyncEngine(config), name=name)

    # ------------------------------------------------------------------ Backend contract
    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        return await self.complete_prepared(await self.prepare(request), request)

    async def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        batches = self.stream_prepared(await self.prepare(request), request, include_usage=True)
        try:
            async for batch in batches:
                yield batch
        finally:
            await batches.aclose()  # leaving early aborts the engine request now, not at GC

    async def embed(self, request: GenerationRequest) -> dict[str, Any]:
        """Mean-pooled, L2-normalised hidden states of each input (backends/local/serving/embeddings.py)."""
        return await embed(self, request)

    async def usage_of(self, request_id: str) -> dict[str, Any] | None:
        return None  # in this process: a gateway that died took this engine with it

    async def aclose(self) -> None:
        if self.info.grammars is not None:
            self.info.grammars.close()
        await self.engine.aclose()

    # ------------------------------------------------------------------ engine control
    def set_fairness(self, weights: dict[str, float], version: int | None = None) -> bool:
        """Per-tenant fairness weights for the engine's fair queue (False: stale version)."""
        return self.engine.set_fairness(weights, version)

    def stats(self) -> EngineStats:
        return self.engine.stats()

    # ------------------------------------------------------------------ building blocks
    async def prepare(self, request: GenerationRequest) -> EngineRequest:
        """Tokenize, build sampling and compile the grammar (off the loop); raises `WireError`
        (4xx) before any work is queued. The body's model name is not checked: whoever routed
        the request here chose this model."""
        prepared = prepare(request.wire, self.info)
        await compile_grammar(prepared, self.info)
        return prepared

    async def complete_prepared(self, prepared: EngineRequest, request: GenerationRequest) -> dict[str, Any]:
        choices = self._choices(prepared, request)
        tally = UsageTally(choices, request.used)
        finals: dict[int, RequestOutput] = {}
        async for choice, delta in run_choices(choices, lambda c: self._start(c, prepared, request), tally):
            tally.add(choice, delta)
            if choice.index in finals:
                finals[choice.index].merge(delta)
            else:
                finals[choice.index] = delta
        for out in finals.values():
            _raise_if_failed(out)
        fmt = ChoiceFormatter(prepared, self.engine.tokenizer.decode)
        response = full_response(prepared.kind, request.request_id, request.model or prepared.model,
                                 finals[0])
        response["choices"] = [fmt.full_choice(c, finals[c.index], finals) for c in choices]
        if len(choices) > 1:
            response["usage"] = usage_dict(total_usage(choices, finals))
        if prepared.reasoning is not None:
            response["usage"]["completion_tokens_details"] = {"reasoning_tokens": fmt.total_reasoning_tokens}
        return response

    async def stream_prepared(
        self, prepared: EngineRequest, request: GenerationRequest, include_usage: bool
    ) -> AsyncGenerator[list[Chunk], None]:
        """Chunks, one batch per engine delta; the usage chunk (empty choices) comes last when
        `include_usage` (with `continuous_usage_stats`, every chunk also carries the running
        usage, as vLLM does). An engine failure mid-stream raises `WireError` (5xx) after the
        chunks sent so far."""
        kind, rid, model = prepared.kind, request.request_id, request.model or prepared.model
        created = int(time.time())
        choices = self._choices(prepared, request)
        tally = UsageTally(choices, request.used)
        continuous = include_usage and prepared.continuous_usage
        fmt = ChoiceFormatter(prepared, self.engine.tokenizer.decode)
        finals: dict[int, RequestOutput] = {}
        deltas = run_choices(choices, lambda c: self._start(c, prepared, request), tally)
        try:
            if kind == "chat":
                roles = [_indexed(chunk(kind, rid, model, created, "", first=True), c.index) for c in choices]
                if continuous:
                    for piece in roles:
                        piece["usage"] = usage_dict(tally)
                yield roles
            async for choice, delta in deltas:
                _raise_if_failed(delta)
                tally.add(choice, delta)
                batch = fmt.stream_pieces(choice, delta, rid, model, created)
                if continuous:
                    for piece in batch:
                        piece["usage"] = usage_dict(tally)
                if delta.finished:
                    finals[choice.index] = delta
                    if include_usage and len(finals) == len(choices):
                        usage = total_usage(choices, finals) if len(choices) > 1 else delta.usage
                        batch.append(usage_chunk(kind, rid, model, created, usage))
                        if prepared.reasoning is not None:
                            batch[-1]["usage"]["completion_tokens_details"] = {
                                "reasoning_tokens": fmt.total_reasoning_tokens}
                if batch:
                    yield batch
        finally:
            await deltas.aclose()

    def _choices(self, prepared: EngineRequest, request: GenerationRequest) -> list[Choice]:
        return plan_choices(request.request_id, prepared.prompt_batch or [prepared.prompt_token_ids], prepared.n,
                            prepared.sampling)

    def _start(self, choice: Choice, prepared: EngineRequest, request: GenerationRequest) -> RequestStream:
        # Prompt logprobs need every prompt position computed: no prefix-cache hits from other
        # requests (a salt of the request's own, as vLLM turns the cache off); its own choices
        # still share the blocks.
        salt = request.cache_salt
        if prepared.cache_salt is not None:
            # the body's salt narrows the caller's own space, never reaches another's: no header
            # value (a tenant's salt) can hold the separator, a control character
            salt = f"{salt or ''}\x1f{prepared.cache_salt}"
        if prepared.sampling.prompt_logprobs is not None:
            salt = f"prompt-logprobs-{request.request_id}"
        sampling = choice.sampling
        if sampling.grammar is not None:  # each choice walks the grammar on its own
            sampling = dataclasses.replace(sampling, grammar_state=GrammarState(sampling.grammar, prepared.grammar_after))
        try:
            return self.engine.add_request(
                choice.request_id,
                choice.prompt_token_ids,
                sampling,
                tenant=request.tenant,
                priority=request.priority,
                cache_salt=salt,
            )
        except RequestRejected as exc:
            raise WireError(400, str(exc), exc.code, exc.param) from None
        except RuntimeError as exc:  # the engine is closed (shutting down): try another backend
            raise WireError(503, str(exc), "engine_unavailable") from None


def _grammar_compiler(engine: AsyncEngine) -> StructuredCompiler | None:
    """The engine's grammar compiler; None when the tokenizer cannot tell its vocabulary."""
    tok = engine.tokenizer
    if not hasattr(tok, "to_json") or not hasattr(tok, "get_vocab"):
        return None
    return StructuredCompiler(tok.to_json(), tok.get_vocab(), engine.vocab_size, engine.eos_token_ids,
                              lambda ids: tok.decode(ids, skip_special_tokens=False),
                              engine.config.grammar_timeout_s, engine.config.grammar_cache_bytes)


def _indexed(piece: Chunk, index: int) -> Chunk:
    piece["choices"][0]["index"] = index
    return piece


def _raise_if_failed(out: RequestOutput) -> None:
    if out.finish_reason == "error":
        raise WireError(500, out.error or "engine error", "engine_error")
    if out.finish_reason == "abort":
        raise WireError(503, out.error or "the request was aborted", "aborted")  # e.g. "engine shut down"


def _folder_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or path
