"""Checks on an OpenAI request body, by hand (no pydantic on the hot path), and a cheap
upper bound on its prompt tokens for the quota reservation.

The bound: byte-level BPE tokenizers never make more tokens than UTF-8 bytes, plus a few
template tokens per message. It over-reserves; settle reconciles with the backend's count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.errors import ApiError

TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS_BASE = 16

_NUMBER_FIELDS = ("temperature", "top_p", "frequency_penalty", "presence_penalty")
_INT_FIELDS = ("seed", "top_k", "logprobs", "top_logprobs")


@dataclass(slots=True)
class ParsedRequest:
    model: str
    stream: bool
    include_usage: bool
    max_tokens: int | None
    max_tokens_field: str  # which field carries it: "max_tokens" or "max_completion_tokens"
    texts: list[str]
    prompt_tokens_bound: int


MAX_TOKENS = 2**31 - 1  # no model generates more; fits every token column and quota counter


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, "invalid_value" if param else "invalid_request", param)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _max_tokens(body: dict[str, Any]) -> tuple[str, int | None]:
    """Which field carries the limit, and its value (None: not given)."""
    field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(field)
    if max_tokens is not None and (not _is_int(max_tokens) or max_tokens < 1):
        raise _bad(f"`{field}` must be a positive integer", field)
    if max_tokens is not None and max_tokens > MAX_TOKENS:  # what the quota counters can hold exactly
        raise _bad(f"`{field}` is {max_tokens}; it must be at most {MAX_TOKENS}", field)
    return field, max_tokens


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "We could not parse the JSON body of your request.", "invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
    return body


def _content_texts(content: Any, i: int) -> tuple[list[str], int]:
    """Texts of one message's content, and bytes to count for non-text parts."""
    if content is None:
        return [], 0
    if isinstance(content, str):
        return [content], 0
    if isinstance(content, list):
        texts, extra = [], 0
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise _bad(f"messages[{i}].content parts must be objects with a type", f"messages[{i}].content")
            if part["type"] == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                extra += len(orjson.dumps(part))
        return texts, extra
    raise _bad(f"messages[{i}].content must be a string, a list of parts, or null", f"messages[{i}].content")


def validate(kind: str, body: dict[str, Any]) -> ParsedRequest:
    """Raise ApiError(400) on a missing or wrongly typed field; unknown fields pass through."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("`model` is required and must be a string", "model")
    texts: list[str] = []
    extra = TEMPLATE_TOKENS_BASE
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _bad("`messages` must be a non-empty list", "messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise _bad(f"messages[{i}] must be an object with a string `role`", f"messages[{i}]")
            t, e = _content_texts(m.get("content"), i)
            texts += t
            extra += e + TEMPLATE_TOKENS_PER_MESSAGE
            if "tool_calls" in m:
                extra += len(orjson.dumps(m["tool_calls"]))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            texts.append(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            if len(prompt) > 1:
                raise _bad("only one prompt per request is supported", "prompt")
            texts += prompt
        elif isinstance(prompt, list) and prompt and all(_is_int(p) for p in prompt):
            extra += len(prompt)  # token ids count themselves
        else:
            raise _bad("`prompt` must be a string or a list of token ids", "prompt")
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise _bad("`stream` must be a boolean", "stream")
    opts = body.get("stream_options")
    if opts is not None and not (isinstance(opts, dict) and isinstance(opts.get("include_usage", False), bool)):
        raise _bad("`stream_options` must be an object with a boolean include_usage", "stream_options")
    field, max_tokens = _max_tokens(body)
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("only n=1 is supported", "n")
    for name in _NUMBER_FIELDS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise _bad(f"`{name}` must be a number", name)
    for name in _INT_FIELDS:
        v = body.get(name)
        if v is not None and not _is_int(v) and not (name == "logprobs" and isinstance(v, bool)):
            raise _bad(f"`{name}` must be an integer", name)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (
            isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise _bad("`stop` must be a string or a list of strings", "stop")
    bound = extra + sum(len(t.encode()) for t in texts)
    return ParsedRequest(model, stream, bool(opts and opts.get("include_usage")), max_tokens, field,
                         texts, bound)
