"""One reading of an OpenAI request body, shared by the gateway and the engine server.

`parse_request` checks every field either side reads (types, shapes, n) by hand — no
pydantic on the hot path — and returns a `WireRequest`: the one value that travels from the
edge to the backend (backends.base.GenerationRequest.wire), holding the body as sent. Fields it
does not know pass through untouched in that body; what a particular backend cannot honour is
refused by that backend (e.g. backends/local/serving/prepare.py).

`prompt_tokens_bound` is a cheap upper bound on the prompt's tokens for the quota reservation:
byte-level BPE tokenizers never make more tokens than UTF-8 bytes, plus a few template tokens
per message. It over-reserves; settlement reconciles with the backend's count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import orjson

from fairgate.backends.base import Kind
from fairgate.backends.openai_wire.errors import WireError, bad_value
from fairgate.backends.openai_wire.fields import check_fields
from fairgate.backends.openai_wire.limits import WireLimits

TEMPLATE_TOKENS_PER_MESSAGE = 8
TEMPLATE_TOKENS_BASE = 16
LIMITS = WireLimits()  # the defaults; a server passes its own (backends/openai_wire/limits.py)

# Enum-typed fields of the API: anything else in them is refused by name, not forwarded (a
# client's free text in a `role` would leave with the request).
ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
PART_TYPES = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
_ENUMS = {
    "reasoning_effort": frozenset({"none", "minimal", "low", "medium", "high"}),
    "service_tier": frozenset({"auto", "default", "flex", "scale", "priority"}),
}
_NUMBER_FIELDS = ("temperature", "top_p", "frequency_penalty", "presence_penalty")
_INT_FIELDS = ("seed", "top_k", "logprobs", "top_logprobs")
_TYPED = frozenset(_NUMBER_FIELDS + _INT_FIELDS + tuple(_ENUMS))  # what _check_types reads
_TEXT_FORMAT = {"type": "text"}


@dataclass(slots=True)
class WireRequest:
    """The validated fields of one body, and the body itself as the client sent it (what only a
    particular backend reads, and what an OpenAI-compatible upstream is sent). Later stages read
    the fields, never the body's copies of them. The repr leaves out everything that holds prompt
    text."""

    kind: Kind
    model: str | None  # None only where the model may be omitted (the engine server)
    stream: bool
    include_usage: bool
    has_stream_options: bool
    max_tokens: int | None
    max_tokens_field: str  # which field carries it: "max_tokens" or "max_completion_tokens"
    texts: list[str] = field(repr=False)  # message contents / prompt text: classification, the bound
    prompt_tokens_bound: int
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)  # chat only
    prompt: str | list[int] = field(default="", repr=False)  # completion: the first (or only) prompt
    prompts: list[str | list[int]] = field(default_factory=list, repr=False)  # completion: every prompt
    n: int = 1  # choices per prompt
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list, repr=False)
    continuous_usage: bool = False  # stream_options.continuous_usage_stats (vLLM): usage on every chunk
    # fairgate's `"speculative": false` opts the request out of speculative decoding on our
    # engines (None: the engine decides); other backends see the field as sent.
    speculative: bool | None = None
    # what a backend must declare it can honour (gateway.request.admission.check_capabilities)
    uses_tools: bool = False  # `tools` or the older `functions`
    structured_output: bool = False  # a `response_format` other than text
    wants_logprobs: bool = False
    body: dict[str, Any] = field(default_factory=dict, repr=False)  # as sent; never edited
    # admission: the upstream body carries `max_tokens` (the client asked for it, or a key's
    # limit caps it); otherwise it only bounds our own engines (OpenAI's reasoning models
    # refuse `max_tokens`)
    send_max_tokens: bool = False

    @property
    def num_choices(self) -> int:
        """Choices in the response: n per prompt (a batch of prompts for completions)."""
        return self.n * max(1, len(self.prompts))

    @property
    def is_batched(self) -> bool:
        """More than one prompt, or one prompt given as token ids (`prompt: [[ids]]` included)."""
        return len(self.prompts) > 1

    @property
    def has_token_prompt(self) -> bool:
        return any(not isinstance(p, str) for p in self.prompts)


MAX_TOKENS = 2**31 - 1  # no model generates more; fits every token column and quota counter


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def parse_request(kind: Kind, body: Any, *, require_model: bool = True, limits: WireLimits = LIMITS) -> WireRequest:
    """Validate an OpenAI chat or completion body; raise `WireError` (400) on a missing or
    wrongly typed field, or one past `limits`."""
    if not isinstance(body, dict):
        raise WireError(400, "The request body must be a JSON object.", "invalid_json")
    model = _model(body, require_model)
    if kind == "chat":
        messages, texts, extra = _messages(body.get("messages"))
        prompts: list[str | list[int]] = []
    else:
        messages = []
        prompts, texts, extra = _prompts(body.get("prompt"))
    stream, include_usage, continuous_usage = _stream(body)
    max_field = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(max_field)
    if max_tokens is not None and (not is_int(max_tokens) or max_tokens < 1):
        raise bad_value(f"`{max_field}` must be a positive integer", "max_tokens")
    if max_tokens is not None and max_tokens > MAX_TOKENS:  # what the quota counters can hold exactly
        raise bad_value(f"`{max_field}` is {max_tokens}; it must be at most {MAX_TOKENS}", "max_tokens")
    n = _choices(body, len(prompts), limits)
    _check_types(body)
    check_fields(kind, body, limits)  # logprobs, sampling extensions, tools, structured output
    _check_logprob_entries(kind, body, n * max(1, len(prompts)), limits)
    speculative = body.get("speculative")
    if speculative is not None and not isinstance(speculative, bool):
        raise bad_value("`speculative` must be a boolean", "speculative")
    bound = TEMPLATE_TOKENS_BASE * max(1, len(prompts)) + extra + sum(map(len, map(str.encode, texts)))
    response_format = body.get("response_format")
    return WireRequest(
        kind, model, stream, include_usage, body.get("stream_options") is not None, max_tokens, max_field,
        texts, bound, messages, prompts[0] if prompts else "", prompts, n, _float(body, "temperature"),
        _float(body, "top_p"), body.get("top_k"), body.get("seed"), _stop(body.get("stop")), continuous_usage,
        speculative, bool(body.get("tools") or body.get("functions")),
        bool(response_format) and response_format != _TEXT_FORMAT,
        body.get("logprobs") not in (None, False) or bool(body.get("top_logprobs")), body)


def _choices(body: dict[str, Any], prompts: int, limits: WireLimits) -> int:
    """`n`, within the limits on choices, prompts and `best_of`."""
    if prompts > limits.max_prompts:
        raise bad_value(f"`prompt` holds {prompts} prompts; at most {limits.max_prompts} per request", "prompt")
    n = body.get("n", 1)
    if n is None:
        n = 1
    if not is_int(n) or not 1 <= n <= limits.max_n:
        raise bad_value(f"`n` must be an integer between 1 and {limits.max_n}", "n")
    if n * max(1, prompts) > limits.max_n:
        raise bad_value(f"n x prompts must be at most {limits.max_n} choices", "n")
    best_of = body.get("best_of")
    if best_of is not None and (not is_int(best_of) or not 1 <= best_of <= limits.max_best_of):
        raise bad_value(f"`best_of` must be an integer between 1 and {limits.max_best_of}", "best_of")
    return int(n)


def _check_logprob_entries(kind: Kind, body: dict[str, Any], choices: int, limits: WireLimits) -> None:
    """Alternatives per token x choices: what each generated token adds to the response."""
    param = "top_logprobs" if kind == "chat" else "logprobs"
    per_token: Any = body.get(param)
    if is_int(per_token) and per_token * choices > limits.max_logprob_entries:
        raise bad_value(f"`{param}` x choices is {per_token} x {choices}; at most "
                        f"{limits.max_logprob_entries} logprobs per token", param)


def _model(body: dict[str, Any], required: bool) -> str | None:
    model = body.get("model")
    if model is None and not required:
        return None
    if not isinstance(model, str) or not model:
        raise bad_value("`model` is required and must be a string", "model")
    return model


def _messages(messages: Any) -> tuple[list[dict[str, Any]], list[str], int]:
    """The messages, their texts, and the bound's extra tokens (template, non-text parts)."""
    if not isinstance(messages, list) or not messages:
        raise bad_value("`messages` must be a non-empty list of message objects", "messages")
    texts: list[str] = []
    extra = 0
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise bad_value(f"messages[{i}] must be an object with a string `role`", "messages")
        if m["role"] not in ROLES:
            raise bad_value(f"messages[{i}].role must be one of {', '.join(sorted(ROLES))}", "messages")
        extra += _content_texts(m.get("content"), i, texts) + TEMPLATE_TOKENS_PER_MESSAGE
        if "tool_calls" in m:
            extra += len(orjson.dumps(m["tool_calls"]))
    return messages, texts, extra


def _content_texts(content: Any, i: int, texts: list[str]) -> int:
    """Append one message's texts; return the bytes to count for its non-text parts."""
    if content is None:
        return 0
    if isinstance(content, str):
        texts.append(content)
        return 0
    if not isinstance(content, list):
        raise bad_value(f"messages[{i}].content must be a string, a list of parts, or null", "messages")
    extra = 0
    for part in content:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise bad_value(f"messages[{i}].content parts must be objects with a type", "messages")
        if part["type"] not in PART_TYPES:
            raise bad_value(f"messages[{i}].content part type must be one of {', '.join(sorted(PART_TYPES))}",
                            "messages")
        if part["type"] == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            extra += len(orjson.dumps(part))
    return extra


def _prompts(prompt: Any) -> tuple[list[str | list[int]], list[str], int]:
    """The prompts (each text or token ids), their texts, and the bound's extra tokens.

    A string or a list of ids is one prompt; a list of strings or of id lists is a batch."""
    if prompt is None:
        raise bad_value("`prompt` is required", "prompt")
    if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and all(is_int(t) for t in prompt)):
        prompt = [prompt]
    if not isinstance(prompt, list) or not prompt:
        raise bad_value("`prompt` must be a non-empty string, list of token ids, or list of those", "prompt")
    prompts: list[str | list[int]] = []
    texts: list[str] = []
    extra = 0
    for i, p in enumerate(prompt):
        if isinstance(p, str):
            texts.append(p)
        elif isinstance(p, list) and p and all(is_int(t) for t in p):
            extra += len(p)  # token ids count themselves
        else:
            raise bad_value(f"prompt[{i}] must be a string or a non-empty list of token ids", "prompt")
        prompts.append(p)
    return prompts, texts, extra


def _stream(body: dict[str, Any]) -> tuple[bool, bool, bool]:
    """(stream, include_usage, continuous_usage_stats)."""
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise bad_value("`stream` must be a boolean", "stream")
    opts = body.get("stream_options")
    if opts is None:
        return bool(stream), False, False
    if not isinstance(opts, dict):
        raise bad_value("`stream_options` must be an object", "stream_options")
    flags = []
    for name in ("include_usage", "continuous_usage_stats"):
        value = opts.get(name)
        if value is not None and not isinstance(value, bool):
            raise bad_value(f"`stream_options.{name}` must be a boolean", f"stream_options.{name}")
        flags.append(bool(value))
    return bool(stream), flags[0], flags[1]


def _check_types(body: dict[str, Any]) -> None:
    if _TYPED.isdisjoint(body):
        return  # the common body: none of these fields sent
    for name in _NUMBER_FIELDS:
        v = body.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise bad_value(f"`{name}` must be a number", name)
    for name in _INT_FIELDS:
        v = body.get(name)
        if v is not None and not is_int(v) and not (name == "logprobs" and isinstance(v, bool)):
            raise bad_value(f"`{name}` must be an integer", name)
    # the sampling ranges, once, here: OpenAI's for temperature and top_p, vLLM's for top_k
    temperature, top_p, top_k = body.get("temperature"), body.get("top_p"), body.get("top_k")
    if temperature is not None and not 0 <= temperature <= 2:
        raise bad_value("temperature must be between 0 and 2", "temperature")
    if top_p is not None and not 0 < top_p <= 1:
        raise bad_value("top_p must be in (0, 1]", "top_p")
    if top_k is not None and top_k < -1:
        raise bad_value("top_k must be -1 (off), 0 (off) or positive", "top_k")
    for name, allowed in _ENUMS.items():
        v = body.get(name)
        if v is not None and v not in allowed:
            raise bad_value(f"`{name}` must be one of {', '.join(sorted(allowed))}", name)


def _float(body: dict[str, Any], name: str) -> float | None:
    v = body.get(name)
    return None if v is None else float(v)


def _stop(stop: Any) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        if not stop:
            raise bad_value("stop must be a non-empty string or a list of them", "stop")
        return [stop]
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if not all(stop):
            raise bad_value("stop must be a non-empty string or a list of them", "stop")
        return list(stop)
    raise bad_value("`stop` must be a string or a list of strings", "stop")
