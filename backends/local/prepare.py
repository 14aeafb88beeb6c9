"""From a parsed OpenAI request to what the local engine runs: prompt token ids (the model's
tokenizer and chat template) and `SamplingParams`.

`parse_request` (backends/openai_wire) has already checked types and shapes; this step adds
what only this engine knows: the served model's name, its context length, and the fields it
cannot honour (n > 1, logprobs, tools, ...), which are refused by name rather than ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from backends.base import Kind
from backends.local.types import SamplingParams
from backends.openai_wire import (
    WireError,
    WireRequest,
    bad_value,
    check_completion_fits,
    check_prompt_fits,
    completion_room,
    parse_request,
)
from backends.openai_wire.request import is_int


class PromptTokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def encode_chat(self, messages: list[dict[str, Any]]) -> list[int]: ...


@dataclass(slots=True)
class ModelInfo:
    """What preparing a request needs to know about the served model."""

    name: str
    max_model_len: int
    tokenizer: PromptTokenizer


@dataclass(slots=True)
class EngineRequest:
    """A request ready for `AsyncEngine.add_request`."""

    kind: Kind
    model: str
    prompt_token_ids: list[int]
    sampling: SamplingParams
    stream: bool
    include_usage: bool


def parse_for_engine(kind: Kind, body: Any, info: ModelInfo) -> EngineRequest:
    """The engine server's whole reading of a body: the wire check, the served model's name,
    then `prepare`. Raises `WireError` on anything this engine cannot serve."""
    wire = parse_request(kind, body, require_model=False)
    if wire.model is not None and wire.model != info.name:
        raise WireError(404, f"The model `{wire.model}` does not exist. This server serves `{info.name}`.",
                        "model_not_found", "model")
    return prepare(wire, body, info)


def prepare(wire: WireRequest, body: dict[str, Any], info: ModelInfo) -> EngineRequest:
    """Tokenize and build sampling for an already parsed request (any model name: the gateway
    routed it here)."""
    if wire.has_stream_options and not wire.stream:
        raise bad_value("stream_options is only allowed when stream is true", "stream_options")
    _refuse_unsupported(wire.kind, body)
    ids = _chat_prompt(wire, info) if wire.kind == "chat" else _completion_prompt(wire, info)
    sampling = _sampling(wire, body, len(ids), info.max_model_len)
    return EngineRequest(wire.kind, wire.model or info.name, ids, sampling, wire.stream, wire.include_usage)


def _refuse_unsupported(kind: Kind, body: dict[str, Any]) -> None:
    best_of = _opt(body, "best_of", int)
    if best_of is not None and best_of != 1:
        raise bad_value("best_of is not supported", "best_of")
    if body.get("logprobs") not in (None, False) or body.get("top_logprobs") not in (None, 0):
        raise bad_value("logprobs are not supported by this engine", "logprobs")
    if kind == "completion":
        if body.get("echo"):
            raise bad_value("echo is not supported", "echo")
        if body.get("suffix") not in (None, ""):
            raise bad_value("suffix is not supported", "suffix")
    if body.get("tools") or body.get("functions"):
        raise bad_value("tool calling is not supported by this engine", "tools")
    fmt = body.get("response_format")
    if fmt is not None and fmt != {"type": "text"}:
        raise bad_value("only response_format {\"type\": \"text\"} is supported", "response_format")
    for name in ("presence_penalty", "frequency_penalty"):
        if body.get(name):
            raise bad_value(f"{name} is not supported (only 0)", name)


def _completion_prompt(wire: WireRequest, info: ModelInfo) -> list[int]:
    if isinstance(wire.prompt, str):
        if not wire.prompt:
            raise bad_value("prompt must not be empty", "prompt")
        ids = info.tokenizer.encode(wire.prompt)
    else:
        ids = list(wire.prompt)
    check_prompt_fits(len(ids), info.max_model_len, "prompt")
    return ids


def _chat_prompt(wire: WireRequest, info: ModelInfo) -> list[int]:
    clean = [{"role": m["role"], "content": _message_text(m.get("content"), i)}
             for i, m in enumerate(wire.messages)]
    try:
        ids = info.tokenizer.encode_chat(clean)
    except Exception as exc:  # noqa: BLE001 - template errors (e.g. raise_exception) are the client's
        raise bad_value(f"could not apply the chat template: {exc}", "messages") from None
    check_prompt_fits(len(ids), info.max_model_len, "messages")
    return list(ids)


def _message_text(content: Any, i: int) -> str:
    """The parser accepted the shape; the engine reads text parts only."""
    if content is None or isinstance(content, str):
        return content or ""
    if not all(part.get("type") == "text" and isinstance(part.get("text"), str) for part in content):
        raise bad_value(f"messages[{i}].content: only text parts are supported", "messages")
    return "".join(part["text"] for part in content)


def _sampling(wire: WireRequest, body: dict[str, Any], n_prompt: int, max_model_len: int) -> SamplingParams:
    max_tokens = wire.max_tokens
    if max_tokens is None:
        max_tokens = completion_room(max_model_len, n_prompt)
    check_completion_fits(n_prompt, max_tokens, max_model_len)
    if wire.temperature is not None and not 0 <= wire.temperature <= 2:
        raise bad_value("temperature must be between 0 and 2", "temperature")
    if wire.top_p is not None and not 0 < wire.top_p <= 1:
        raise bad_value("top_p must be in (0, 1]", "top_p")
    if wire.top_k is not None and wire.top_k < -1:
        raise bad_value("top_k must be -1 (off), 0 (off) or positive", "top_k")
    if not all(wire.stop):
        raise bad_value("stop must be a non-empty string or a list of them", "stop")
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(is_int(t) and t >= 0 for t in stop_ids):
        raise bad_value("stop_token_ids must be a list of token ids", "stop_token_ids")
    _opt(body, "user", str)  # accepted and ignored
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=1.0 if wire.temperature is None else wire.temperature,
        top_p=1.0 if wire.top_p is None else wire.top_p,
        top_k=max(wire.top_k or 0, 0),
        seed=wire.seed,
        stop=list(wire.stop),
        stop_token_ids=list(stop_ids),
        ignore_eos=bool(_opt(body, "ignore_eos", bool)),
    )


def _opt(body: dict[str, Any], name: str, kind: type) -> Any:
    """An engine-only field's value if present and of the right JSON type, None if absent."""
    v = body.get(name)
    if v is None:
        return None
    ok = {int: is_int(v), float: (is_int(v) or isinstance(v, float)) and math.isfinite(v),
          bool: isinstance(v, bool), str: isinstance(v, str)}[kind]
    if not ok:
        names = {int: "an integer", float: "a number", bool: "a boolean", str: "a string"}
        raise bad_value(f"{name} must be {names[kind]}", name)
    return v
