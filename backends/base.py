"""The protocol every backend speaks to the gateway.

The gateway has already authenticated, reserved quota, classified and routed the request;
a backend only generates. Bodies and chunks are OpenAI JSON (dicts), so the local engine,
an external API and another fairgate look the same to the gateway.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


class BackendError(Exception):
    """A backend could not serve the request.

    `status` is the HTTP status to show the client (or that the upstream answered);
    `retryable` says whether a fallback backend may be tried.
    """

    def __init__(self, message: str, status: int = 502, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(slots=True)
class GenerationRequest:
    """One request as handed to a backend.

    `body` is the validated OpenAI request body (chat: `messages`; completion: `prompt`),
    with `model` already rewritten to the backend's own model name.
    """

    request_id: str
    kind: Literal["chat", "completion"]
    body: dict[str, Any]
    tenant: str = "default"
    priority: str = "standard"
    cache_salt: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


class Backend(Protocol):
    """A place that generates tokens.

    `is_local` is True only for backends on the company's own hardware (the in-process
    engine, fairgate engine servers); personal data may go only to those.
    """

    name: str
    is_local: bool

    async def complete(self, request: GenerationRequest) -> dict[str, Any]:
        """Return the full OpenAI response object (non-streaming), with `usage`."""
        ...

    def stream(self, request: GenerationRequest) -> AsyncIterator[dict[str, Any]]:
        """Yield OpenAI chunk objects; the last one carries `usage` (include_usage is forced)."""
        ...

    async def aclose(self) -> None: ...
