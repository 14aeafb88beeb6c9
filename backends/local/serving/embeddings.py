"""Embeddings on the local engine: each input runs as a prefill-only engine request whose
hidden states (after the final norm) are mean-pooled over the prompt positions as its chunks
run (runner `_add_pooled`), then L2-normalised, as OpenAI's embeddings are.

Mean pooling because the engine's models are decoders without a trained pooling head; it is
what sentence-embedding recipes for such models use by default. The requests go through the
scheduler like any other (the tenant's fair share, priority, chunked prefill, preemption); each
gets a cache salt of its own, since a prefix-cache hit would skip the positions it must pool,
and samples one throwaway token to finish.
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

from fairgate.backends.base import GenerationRequest
from fairgate.backends.local.engine.output import RequestOutput, RequestRejected
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.openai_wire import WireError, WireRequest, check_prompt_fits
from fairgate.backends.openai_wire.embeddings import (
    check_dimensions,
    embeddings_response,
)

if TYPE_CHECKING:
    from fairgate.backends.local.serving.backend import LocalBackend

POOL = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, speculative=False, pool=True)


async def embed(backend: LocalBackend, request: GenerationRequest) -> dict[str, Any]:
    """The OpenAI embeddings response for `request` (kind "embedding"); `WireError` on bad input."""
    wire = request.wire
    engine = backend.engine
    check_dimensions(wire.body, engine.runner.config.hidden_size)
    prompts = [_ids(backend, p) for p in wire.prompts]
    outs = await asyncio.gather(*(_pool_one(backend, f"{request.request_id}-{i}", ids, request)
                                  for i, ids in enumerate(prompts)))
    vectors = [_normalised(out) for out in outs]
    return embeddings_response(request.model or wire.model or backend.model_name, vectors,
                               sum(len(ids) for ids in prompts), wire.body.get("encoding_format", "float"))


def _ids(backend: LocalBackend, prompt: str | list[int]) -> list[int]:
    ids = backend.engine.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
    vocab = backend.engine.vocab_size
    if vocab is not None and any(t >= vocab for t in ids):
        raise WireError(400, f"input has a token id outside the vocabulary (size {vocab})", "invalid_value", "input")
    check_prompt_fits(len(ids), backend.engine.max_model_len, "input")
    return ids


async def _pool_one(backend: LocalBackend, rid: str, ids: list[int], request: GenerationRequest) -> RequestOutput:
    try:
        stream = backend.engine.add_request(rid, ids, POOL, tenant=request.tenant, priority=request.priority,
                                            cache_salt=f"embedding-{rid}")
    except RequestRejected as exc:
        raise WireError(400, str(exc), exc.code, exc.param or "input") from None
    except RuntimeError as exc:  # the engine is closed (shutting down): try another backend
        raise WireError(503, str(exc), "engine_unavailable") from None
    final: RequestOutput | None = None
    async with stream:
        async for delta in stream:
            if final is None:
                final = delta
            else:
                final.merge(delta)
    if final is None or final.finish_reason in ("error", "abort") or final.embedding is None:
        raise WireError(503 if final and final.finish_reason == "abort" else 500,
                        (final.error if final else None) or "the embedding could not be computed", "engine_error")
    return final


def _normalised(out: RequestOutput) -> list[float]:
    vector = out.embedding or []
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def is_embedding(wire: WireRequest | None) -> bool:
    return wire is not None and wire.kind == "embedding"
