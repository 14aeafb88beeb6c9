"""The request fields behind the engine's logits processors and logprobs, read and range-checked.

`parse_request` (backends/openai_wire) has checked only JSON types of the OpenAI fields; here
each field gets its range (OpenAI's where it defines one, vLLM's otherwise), and the vLLM-only
fields (`repetition_penalty`, `min_p`, `min_tokens`) their types. Every refusal is a 400 naming
the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from fairgate.backends.base import Kind
from fairgate.backends.openai_wire import bad_value
from fairgate.backends.openai_wire.request import is_int

MAX_LOGPROBS = 20  # OpenAI's top_logprobs limit (and completions' logprobs)
MAX_BIAS = 100.0


@dataclass(slots=True)
class SamplingFields:
    """What `SamplingParams` takes beyond temperature/top-p/top-k/stop."""

    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    min_p: float = 0.0
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    echo: bool = False

    def params_kwargs(self) -> dict[str, Any]:
        """The `SamplingParams` keyword arguments these fields set (echo is the response's)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "echo"}


def read_sampling_fields(kind: Kind, body: dict[str, Any], vocab_size: int | None) -> SamplingFields:
    """Read and check the fields; raise `WireError` (400) naming the first bad one."""
    f = SamplingFields()
    for name in ("presence_penalty", "frequency_penalty"):
        v = _number(body, name)
        if v is not None:
            if not -2 <= v <= 2:
                raise bad_value(f"{name} must be between -2 and 2", name)
            setattr(f, name, v)
    rep = _number(body, "repetition_penalty")
    if rep is not None:
        if not 0 < rep <= 2:
            raise bad_value("repetition_penalty must be in (0, 2]", "repetition_penalty")
        f.repetition_penalty = rep
    min_p = _number(body, "min_p")
    if min_p is not None:
        if not 0 <= min_p <= 1:
            raise bad_value("min_p must be between 0 and 1", "min_p")
        f.min_p = min_p
    min_tokens = body.get("min_tokens")
    if min_tokens is not None:
        if not is_int(min_tokens) or min_tokens < 0:
            raise bad_value("min_tokens must be a non-negative integer", "min_tokens")
        f.min_tokens = min_tokens
    f.logit_bias = _logit_bias(body.get("logit_bias"), vocab_size)
    _logprobs(kind, body, f)
    return f


def _number(body: dict[str, Any], name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise bad_value(f"{name} must be a number", name)
    return float(v)


def _logit_bias(bias: Any, vocab_size: int | None) -> dict[int, float]:
    if bias is None:
        return {}
    if not isinstance(bias, dict):
        raise bad_value("logit_bias must be an object of token id -> bias", "logit_bias")
    out: dict[int, float] = {}
    for key, value in bias.items():
        try:
            token = int(key)
        except (TypeError, ValueError):
            raise bad_value(f"logit_bias key {key!r} is not a token id", "logit_bias") from None
        if token < 0 or (vocab_size is not None and token >= vocab_size):
            raise bad_value(f"logit_bias token id {token} is outside the vocabulary", "logit_bias")
        if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_BIAS <= value <= MAX_BIAS:
            raise bad_value("logit_bias values must be numbers between -100 and 100", "logit_bias")
        out[token] = float(value)
    return out


def _logprobs(kind: Kind, body: dict[str, Any], f: SamplingFields) -> None:
    """Chat: `logprobs` (bool) + `top_logprobs` (0-20). Completions: `logprobs` (0-20), with
    `echo` also the prompt tokens' logprobs."""
    lp = body.get("logprobs")
    if kind == "chat":
        if lp is not None and not isinstance(lp, bool):
            raise bad_value("logprobs must be a boolean", "logprobs")
        top = body.get("top_logprobs")
        if top is not None:
            if not is_int(top) or not 0 <= top <= MAX_LOGPROBS:
                raise bad_value(f"top_logprobs must be an integer between 0 and {MAX_LOGPROBS}", "top_logprobs")
            if not lp:
                raise bad_value("top_logprobs requires logprobs to be true", "top_logprobs")
        f.logprobs = (top or 0) if lp else None
        return
    if lp is not None and (not is_int(lp) or not 0 <= lp <= MAX_LOGPROBS):
        raise bad_value(f"logprobs must be an integer between 0 and {MAX_LOGPROBS}", "logprobs")
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise bad_value("echo must be a boolean", "echo")
    f.logprobs, f.echo = lp, bool(echo)
    if f.echo and lp is not None:
        f.prompt_logprobs = lp
