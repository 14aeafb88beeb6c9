"""The contract every backend keeps with the gateway.

The gateway has already authenticated, parsed, reserved quota, classified and routed the
request; a backend only generates. Responses and chunks are OpenAI JSON objects (dicts) that
already carry the gateway's response id and the model name the client asked for, so the gateway
forwards them without rewriting. The local engine, an external API and another fairgate look the
same to the gateway.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from fairgate.backends.breaker import Breaker
    from fairgate.backends.openai_wire.request import WireRequest

Kind = Literal["chat", "completion", "embedding"]
Chunk = dict[str, Any]


class BackendError(Exception):
    """A backend could not serve the request.

    `status` is the HTTP status to show the client (or that the upstream answered);
    `retryable` says whether a fallback backend may be tried; `code` and `param` are the
    OpenAI error code and offending field when the backend knows them; `headers` go out with
    the client's error (a breaker's Retry-After).
    """

    def __init__(self, message: str, status: int = 502, retryable: bool = True, *,
                 code: str | None = None, param: str | None = None, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.code = code
        self.param = param
        self.headers = headers or {}


@dataclass(slots=True, frozen=True)
class Capabilities:
    """What a backend honours beyond plain text generation."""

    tenant_scheduling: bool = False  # schedules by tenant and priority class (X-Tenant, X-Priority)
    cache_salt: bool = False  # keeps tenants' prefix caches apart (X-Cache-Salt)
    logprobs: bool = True  # returns logprobs when asked
    tools: bool = True  # tool / function calling
    response_format: bool = True  # structured output (json_object / json_schema)
    n: bool = True  # several choices per request
    batched_prompts: bool = True  # completions with a list of prompts
    embeddings: bool = False  # POST /v1/embeddings (`Backend.embed`)


@dataclass(slots=True)
class UsageSoFar:
    """What a backend has used for one request so far, kept current while it generates, so a
    request cut short (the client left, the upstream broke) is billed by what happened rather
    than by an estimate. None: not known (e.g. an external API that reports usage only at the end)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # generated (streams: handed to the gateway) so far
    # when the first token was generated (time.perf_counter() in this process), where the backend
    # can tell: the in-process engine, or our engine servers' `x-fairgate-ttft-ms` on a whole answer
    first_token_at: float | None = None
    # set once the counts are final: a request cut short is settled when the engine's abort has
    # landed and its own count of what it generated is in (None: final when the request ends)
    settled: asyncio.Event | None = None

    def note(self, usage: dict[str, Any] | None) -> None:
        """Take the counts from an OpenAI usage object (a chunk's or a response's)."""
        if not usage:
            return
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if isinstance(prompt, int) and prompt >= 0:
            self.prompt_tokens = prompt
        if isinstance(completion, int) and completion >= 0:
            self.completion_tokens = completion


@dataclass(slots=True)
class GenerationRequest:
    """One request as handed to a backend.

    `wire` is the request as validated once at the edge (openai_wire.request.WireRequest): its
    fields are what every stage reads, its `body` what the client sent (fields only a particular
    backend reads, and what an OpenAI-compatible upstream is forwarded). `request_id` is the
    bare id: responses are `chatcmpl-<id>` / `cmpl-<id>`. `model` is the name responses carry
    (what the client asked for); each backend sends its own model name upstream. `used` is
    what the backend has used so far (read when the request is cut short).
    """

    request_id: str
    wire: WireRequest
    tenant: str = "default"
    priority: str = "standard"
    cache_salt: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    used: UsageSoFar = field(default_factory=UsageSoFar)  # kept current by the backend

    @property
    def kind(self) -> Kind:
        return self.wire.kind

    @classmethod
    def from_body(cls, request_id: str, kind: Kind, body: dict[str, Any], **fields: Any) -> GenerationRequest:
        """For callers without an edge of their own (tests, benches, a library user): parse
        `body` as the gateway's edge does (the model may be omitted). Raises `WireError`."""
        from fairgate.backends.openai_wire.embeddings import parse_embeddings
        from fairgate.backends.openai_wire.request import parse_request

        wire = parse_embeddings(body, require_model=False) if kind == "embedding" \
            else parse_request(kind, body, require_model=False)
        return cls(request_id, wire, **fields)


@runtime_checkable
class TokenDecoder(Protocol):
    """A model's token ids back to its text (e.g. `backends.local.model.tokenizer.Tokenizer`). A
    backend that holds its model's tokenizer offers one as `token_decoder`, so the gateway can
    classify a token-id prompt as text instead of treating it as unreadable."""

    @property
    def vocab_size(self) -> int: ...
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...


class Backend(Protocol):
    """A place that generates tokens.

    `is_local` is True only for backends on the company's own hardware (the in-process
    engine, fairgate engine servers); personal data may go only to those. `context_length` is
    prompt + completion tokens the model takes (None: unknown, e.g. an external API).
    """

    @property
    def name(self) -> str: ...

    @property
    def model_name(self) -> str | None:
        """The model this backend serves / sends upstream (None: the client's name as is)."""
        ...

    @property
    def is_local(self) -> bool: ...

    @property
    def context_length(self) -> int | None: ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def breaker(self) -> Breaker | None:
        """The circuit breaker guarding this backend's upstream (health, admin and metrics read
        it); None where there is no upstream of its own (the in-process engine, a pool, whose
        replicas each have one)."""
        ...

    @property
    def token_decoder(self) -> TokenDecoder | None:
        """The served model's tokenizer where this backend holds it (the gateway reads token-id
        prompts with it), else None."""
        ...

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        """The full OpenAI response object (non-streaming), with `usage`."""
        ...

    def stream_batches(self, request: GenerationRequest) -> AsyncGenerator[list[Chunk], None]:
        """OpenAI chunk objects in batches (what arrived together leaves together); a chunk
        with `usage` comes last whatever the client asked. Closing the iterator ends the work."""
        ...

    async def embed(self, request: GenerationRequest) -> dict[str, Any]:
        """The OpenAI embeddings response (kind "embedding"), with `usage`; a backend without
        `capabilities.embeddings` raises `BackendError` (the gateway never sends it one)."""
        ...

    async def usage_of(self, request_id: str) -> dict[str, Any] | None:
        """What the request this gateway named `request_id` (its X-Request-Id) used, as the
        backend still knows it: OpenAI's usage object from our engine servers' ledger; None
        where the backend keeps no such ledger. A restarted gateway bills the requests its
        killed predecessor left out with it (gateway/request/orphans.py)."""
        ...

    async def aclose(self) -> None: ...
