"""OpenAI request bodies in, OpenAI response / chunk / error bodies out, for the local engine.

Parsing validates every field the engine reads and turns the body into prompt token ids plus
`SamplingParams`; anything wrong raises `APIError` carrying the HTTP status and the OpenAI
error body. Fields this engine cannot honour (n > 1, logprobs, tools, ...) are refused with a
clear message rather than ignored. Formatting builds the response, chunk and usage dicts.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from backends.base import BackendError
from backends.local.output import RequestOutput, Usage
from backends.local.types import SamplingParams

Kind = Literal["chat", "completion"]


class APIError(BackendError):
    """A request the engine will not serve, with its OpenAI error body. Never retryable:
    the same body fails the same way on every backend of this kind."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message, status=status, retryable=status >= 500)
        self.type = type
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(str(self), self.type, self.code, self.param)


def error_body(message: str, type: str, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "code": code, "param": param}}


class PromptTokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def encode_chat(self, messages: list[dict[str, Any]]) -> list[int]: ...


@dataclass(slots=True)
class ModelInfo:
    """What parsing needs to know about the served model."""

    name: str
    max_model_len: int
    tokenizer: PromptTokenizer


@dataclass(slots=True)
class ParsedRequest:
    kind: Kind
    model: str
    prompt_token_ids: list[int]
    sampling: SamplingParams
    stream: bool
    include_usage: bool


# ---------------------------------------------------------------------- parsing
def parse_request(kind: Kind, body: Any, info: ModelInfo) -> ParsedRequest:
    """Validate an OpenAI body; raise `APIError` on anything this engine cannot serve."""
    if not isinstance(body, dict):
        raise APIError("the request body must be a JSON object")
    model = _opt(body, "model", str)
    if model is not None and model != info.name:
        raise APIError(
            f"The model `{model}` does not exist. This server serves `{info.name}`.",
            status=404,
            code="model_not_found",
            param="model",
        )
    stream = bool(_opt(body, "stream", bool))
    options = _opt(body, "stream_options", dict)
    if options is not None and not stream:
        raise APIError("stream_options is only allowed when stream is true", param="stream_options")
    include_usage = bool(options and _opt(options, "include_usage", bool, "stream_options.include_usage"))
    _refuse_unsupported(kind, body)

    ids = _chat_prompt(body, info) if kind == "chat" else _completion_prompt(body, info)
    sampling = _sampling(body, kind, len(ids), info.max_model_len)
    return ParsedRequest(kind, model or info.name, ids, sampling, stream, include_usage)


def _refuse_unsupported(kind: Kind, body: dict[str, Any]) -> None:
    n = _opt(body, "n", int)
    if n is not None and n != 1:
        raise APIError("only n=1 is supported; send one request per completion", param="n")
    best_of = _opt(body, "best_of", int)
    if best_of is not None and best_of != 1:
        raise APIError("best_of is not supported", param="best_of")
    logprobs = body.get("logprobs")
    if logprobs not in (None, False) or body.get("top_logprobs") not in (None, 0):
        raise APIError("logprobs are not supported by this engine", param="logprobs")
    if kind == "completion":
        if body.get("echo"):
            raise APIError("echo is not supported", param="echo")
        if body.get("suffix") not in (None, ""):
            raise APIError("suffix is not supported", param="suffix")
    if body.get("tools") or body.get("functions"):
        raise APIError("tool calling is not supported by this engine", param="tools")
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise APIError("only response_format {\"type\": \"text\"} is supported", param="response_format")
    for name in ("presence_penalty", "frequency_penalty"):
        value = _opt(body, name, float)
        if value:
            raise APIError(f"{name} is not supported (only 0)", param=name)


def _completion_prompt(body: dict[str, Any], info: ModelInfo) -> list[int]:
    if "prompt" not in body or body["prompt"] is None:
        raise APIError("prompt is required", param="prompt")
    prompt = body["prompt"]
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise APIError("prompt must not be empty", param="prompt")
        ids = info.tokenizer.encode(prompt)
    elif isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
        ids = list(prompt)
    elif isinstance(prompt, list) and not prompt:
        raise APIError("prompt must not be empty", param="prompt")
    elif isinstance(prompt, list) and all(isinstance(p, str | list) for p in prompt):
        raise APIError("batched prompts are not supported; send one prompt per request", param="prompt")
    else:
        raise APIError("prompt must be a string or a list of token ids", param="prompt")
    _check_prompt_len(len(ids), info.max_model_len, "prompt")
    return ids


def _chat_prompt(body: dict[str, Any], info: ModelInfo) -> list[int]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise APIError("messages must be a list of message objects", param="messages")
    if not messages:
        raise APIError("messages must not be empty", param="messages")
    clean: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise APIError(f"messages[{i}] must be an object with a string role", param="messages")
        clean.append({"role": message["role"], "content": _message_text(message.get("content"), i)})
    try:
        ids = info.tokenizer.encode_chat(clean)
    except Exception as exc:  # noqa: BLE001 - template errors (e.g. raise_exception) are the client's
        raise APIError(f"could not apply the chat template: {exc}", param="messages") from None
    _check_prompt_len(len(ids), info.max_model_len, "messages")
    return list(ids)


def _message_text(content: Any, i: int) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise APIError(f"messages[{i}].content: only text parts are supported", param="messages")
            parts.append(part["text"])
        return "".join(parts)
    raise APIError(f"messages[{i}].content must be a string or a list of text parts", param="messages")


def _check_prompt_len(n: int, max_model_len: int, param: str) -> None:
    if n >= max_model_len:
        raise APIError(
            f"This model's maximum context length is {max_model_len} tokens, but the prompt has "
            f"{n} tokens, which leaves no room for a completion. Please shorten the prompt.",
            code="context_length_exceeded",
            param=param,
        )


def _sampling(body: dict[str, Any], kind: Kind, n_prompt: int, max_model_len: int) -> SamplingParams:
    max_tokens = _opt(body, "max_completion_tokens", int) if kind == "chat" else None
    if max_tokens is None:
        max_tokens = _opt(body, "max_tokens", int)
    room = max_model_len - n_prompt
    if max_tokens is None:
        max_tokens = room
    elif max_tokens < 1:
        raise APIError("max_tokens must be at least 1", code="invalid_value", param="max_tokens")
    elif max_tokens > room:
        raise APIError(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {n_prompt + max_tokens} tokens ({n_prompt} in the prompt, {max_tokens} "
            "for the completion). Please reduce the prompt or max_tokens.",
            code="context_length_exceeded",
            param="max_tokens",
        )
    temperature = _opt(body, "temperature", float)
    if temperature is not None and not 0 <= temperature <= 2:
        raise APIError("temperature must be between 0 and 2", code="invalid_value", param="temperature")
    top_p = _opt(body, "top_p", float)
    if top_p is not None and not 0 < top_p <= 1:
        raise APIError("top_p must be in (0, 1]", code="invalid_value", param="top_p")
    top_k = _opt(body, "top_k", int)
    if top_k is not None and top_k < -1:
        raise APIError("top_k must be -1 (off), 0 (off) or positive", code="invalid_value", param="top_k")
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise APIError("stop must be a non-empty string or a list of them", param="stop")
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(_is_int(t) and t >= 0 for t in stop_ids):
        raise APIError("stop_token_ids must be a list of token ids", param="stop_token_ids")
    _opt(body, "user", str)  # accepted and ignored
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=1.0 if temperature is None else temperature,
        top_p=1.0 if top_p is None else top_p,
        top_k=max(top_k or 0, 0),
        seed=_opt(body, "seed", int),
        stop=list(stop),
        stop_token_ids=list(stop_ids),
        ignore_eos=bool(_opt(body, "ignore_eos", bool)),
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt(body: dict[str, Any], name: str, kind: type, label: str | None = None) -> Any:
    """The field's value if present and of the right JSON type, None if absent or null."""
    v = body.get(name)
    if v is None:
        return None
    ok = {
        int: _is_int(v),
        float: (_is_int(v) or isinstance(v, float)) and math.isfinite(v),
        bool: isinstance(v, bool),
        str: isinstance(v, str),
        dict: isinstance(v, dict),
    }[kind]
    if not ok:
        names = {int: "an integer", float: "a number", bool: "a boolean", str: "a string", dict: "an object"}
        raise APIError(f"{label or name} must be {names[kind]}", param=label or name)
    return float(v) if kind is float else v


# ---------------------------------------------------------------------- formatting
def usage_dict(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
    }


def response_id(kind: Kind, request_id: str) -> str:
    return ("chatcmpl-" if kind == "chat" else "cmpl-") + request_id


def full_response(kind: Kind, request_id: str, model: str, out: RequestOutput) -> dict[str, Any]:
    """The non-streaming response for a finished, merged output."""
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


def chunk(
    kind: Kind,
    request_id: str,
    model: str,
    created: int,
    text: str | None,
    finish_reason: str | None = None,
    first: bool = False,
) -> dict[str, Any]:
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


def usage_chunk(kind: Kind, request_id: str, model: str, created: int, usage: Usage) -> dict[str, Any]:
    """The final `include_usage` chunk: empty choices, usage set."""
    return {
        "id": response_id(kind, request_id),
        "object": "chat.completion.chunk" if kind == "chat" else "text_completion",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_dict(usage),
    }
