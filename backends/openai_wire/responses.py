"""OpenAI response, chunk and usage objects, and their server-sent-event framing.

Builders take plain values (what any engine produces), so the engine server, the gateway's
embedded engine and tests build byte-identical objects.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

import orjson

from fairgate.backends.base import Kind

SSE_DONE = b"data: [DONE]\n\n"


class UsageCounts(Protocol):
    """Token counts of one request (e.g. `backends.local.engine.output.Usage`)."""

    @property
    def prompt_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...


class FinishedText(Protocol):
    """A finished generation: its text, why it stopped, and its usage."""

    @property
    def text(self) -> str: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def stop_reason(self) -> str | int | None: ...
    @property
    def usage(self) -> UsageCounts: ...


_ID_PREFIXES = {"chat": "chatcmpl-", "completion": "cmpl-", "embedding": "embd-"}


def response_id(kind: Kind, request_id: str) -> str:
    """`chatcmpl-<id>`, `cmpl-<id>` or `embd-<id>`: the id clients, usage rows and logs know a request by."""
    return _ID_PREFIXES[kind] + request_id


def random_request_id() -> str:
    """32 random hex digits from the OS, the form of `uuid.uuid4().hex` at a fifth of its cost
    (no UUID object; nothing reads the version digit). Random, not a counter: a client must not
    learn from its ids how many requests others sent."""
    return os.urandom(16).hex()


def usage_dict(usage: UsageCounts) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def full_response(kind: Kind, request_id: str, model: str, out: FinishedText) -> dict[str, Any]:
    """The non-streaming response for a finished output."""
    if kind == "chat":
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": out.text}}
    else:
        choice = {"index": 0, "text": out.text}
    choice.update(logprobs=None, finish_reason=out.finish_reason, stop_reason=out.stop_reason)
    return {
        "id": response_id(kind, request_id),
        "object": "chat.completion" if kind == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage_dict(out.usage),
    }


def chunk(kind: Kind, request_id: str, model: str, created: int, text: str | None,
          finish_reason: str | None = None, first: bool = False) -> dict[str, Any]:
    """One streamed chunk with one choice; the chat chunk's first delta carries the role."""
    if kind == "chat":
        delta: dict[str, Any] = {"role": "assistant"} if first else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta}
    else:
        choice = {"index": 0, "text": text or ""}
    choice.update(logprobs=None, finish_reason=finish_reason)
    return {
        "id": response_id(kind, request_id),
        "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
        "created": created,
        "model": model,
        "choices": [choice],
    }


def usage_chunk(kind: Kind, request_id: str, model: str, created: int, usage: UsageCounts) -> dict[str, Any]:
    """The final `include_usage` chunk: empty choices, usage set."""
    return {
        "id": response_id(kind, request_id),
        "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_dict(usage),
    }


def chunk_text_count(chunk: dict[str, Any], kind: Kind) -> int:
    """1 if the chunk carries generated text (≈ one token per chunk for engines), else 0."""
    for choice in chunk.get("choices") or ():
        piece = (choice.get("delta") or {}).get("content") if kind == "chat" else choice.get("text")
        if piece:
            return 1
    return 0


def chunk_has_content(chunk: dict[str, Any], kind: Kind) -> bool:
    """Whether the chunk carries anything generated: text, a tool-call delta or reasoning (not
    the opening `role` chunk, which a server sends before any token exists)."""
    for choice in chunk.get("choices") or ():
        if kind != "chat":
            if choice.get("text"):
                return True
            continue
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content") or delta.get(
                "reasoning"):
            return True
    return False


def sse(obj: dict[str, Any]) -> bytes:
    """One server-sent event carrying a JSON object."""
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def sse_stream_error(message: str, code: str = "upstream_error") -> bytes:
    """A failure after the stream started: reported in-band, then the stream ends."""
    return sse({"error": {"message": message, "type": "server_error", "code": code, "param": None}}) + SSE_DONE
