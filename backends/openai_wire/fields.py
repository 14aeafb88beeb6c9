"""The shapes and ranges of the fields agents and evaluators add to a body (logprobs, sampling
extensions, tools, structured output), checked where every request is read.

The gateway reads each body once before it reserves anything, so a malformed field is a 400
naming it with nothing reserved, whatever backend the request would have gone to. Ranges are
OpenAI's where it defines one (penalties ±2, logit_bias ±100, top_logprobs 0-20) and vLLM's
otherwise (min_p 0-1, repetition_penalty > 0); what needs the model (token ids inside its
vocabulary, a schema the grammar engine can compile, tighter engine limits) is the engine's check
(backends/local/sampling/fields.py, tools.py, structured.py).
"""

from __future__ import annotations

import math
from typing import Any

from fairgate.backends.base import Kind
from fairgate.backends.openai_wire.errors import WireError, bad_value
from fairgate.backends.openai_wire.grammar_bounds import check_grammar_sizes
from fairgate.backends.openai_wire.limits import WireLimits

MAX_LOGPROBS = 20
MAX_BIAS = 100.0
_FORMATS = ("text", "json_object", "json_schema")


# Every field the checks below read: a body holding none of them (most chats) has nothing to check.
_CHECKED = frozenset({
    "presence_penalty", "frequency_penalty", "min_p", "repetition_penalty", "min_tokens", "stop_token_ids",
    "logit_bias", "logprobs", "top_logprobs", "echo", "tools", "tool_choice", "response_format", "guided_json",
    "guided_regex", "guided_choice", "structured_outputs",
})


def check_fields(kind: Kind, body: dict[str, Any], limits: WireLimits) -> None:
    """Raise `WireError` (400) naming the first malformed field or one past `limits`; absent
    fields pass."""
    if _CHECKED.isdisjoint(body):
        return
    for name, lo, hi in (("presence_penalty", -2.0, 2.0), ("frequency_penalty", -2.0, 2.0), ("min_p", 0.0, 1.0)):
        v = _number(body, name)
        if v is not None and not lo <= v <= hi:
            raise bad_value(f"`{name}` must be between {lo:g} and {hi:g}", name)
    rep = _number(body, "repetition_penalty")
    if rep is not None and rep <= 0:
        raise bad_value("`repetition_penalty` must be greater than 0", "repetition_penalty")
    min_tokens = body.get("min_tokens")
    if min_tokens is not None and (not _is_int(min_tokens) or min_tokens < 0):
        raise bad_value("`min_tokens` must be a non-negative integer", "min_tokens")
    ids = body.get("stop_token_ids")
    if ids is not None and (not isinstance(ids, list) or not all(_is_int(t) and t >= 0 for t in ids)):
        raise bad_value("`stop_token_ids` must be a list of token ids", "stop_token_ids")
    _logit_bias(body.get("logit_bias"), limits.max_logit_bias)
    _logprobs(kind, body)
    check_grammar_sizes(body, limits)  # first: counts before any walk over 80k choices
    _tools(body.get("tools"), body.get("tool_choice"), limits.max_tools)
    _structured(body)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(body: dict[str, Any], name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise bad_value(f"`{name}` must be a number", name)
    return float(v)


def _logit_bias(bias: Any, most: int) -> None:
    if bias is None:
        return
    if not isinstance(bias, dict):
        raise bad_value("`logit_bias` must be an object of token id -> bias", "logit_bias")
    if len(bias) > most:
        raise bad_value(f"`logit_bias` has {len(bias)} entries; at most {most}", "logit_bias")
    for key, value in bias.items():
        if not (isinstance(key, str) and key.isdigit()):
            raise bad_value(f"`logit_bias` key {key!r} is not a token id", "logit_bias")
        if isinstance(value, bool) or not isinstance(value, int | float) or not -MAX_BIAS <= value <= MAX_BIAS:
            raise bad_value("`logit_bias` values must be numbers between -100 and 100", "logit_bias")


def _logprobs(kind: Kind, body: dict[str, Any]) -> None:
    """Chat: `logprobs` a boolean, `top_logprobs` 0-20 with it. Completions: `logprobs` 0-20,
    `echo` a boolean."""
    lp = body.get("logprobs")
    if kind == "chat":
        if lp is not None and not isinstance(lp, bool):
            raise bad_value("`logprobs` must be a boolean", "logprobs")
        top = body.get("top_logprobs")
        if top is not None:
            if not _is_int(top) or not 0 <= top <= MAX_LOGPROBS:
                raise bad_value(f"`top_logprobs` must be an integer between 0 and {MAX_LOGPROBS}", "top_logprobs")
            if not lp:
                raise bad_value("`top_logprobs` requires `logprobs` to be true", "top_logprobs")
        return
    if lp is not None and (not _is_int(lp) or not 0 <= lp <= MAX_LOGPROBS):
        raise bad_value(f"`logprobs` must be an integer between 0 and {MAX_LOGPROBS}", "logprobs")
    echo = body.get("echo")
    if echo is not None and not isinstance(echo, bool):
        raise bad_value("`echo` must be a boolean", "echo")


def _tools(tools: Any, choice: Any, most: int) -> None:
    if tools is None or tools == []:  # an empty list is passed on as sent (the engine refuses it)
        if choice not in (None, "none"):
            raise bad_value("`tool_choice` needs `tools`", "tool_choice")
        return
    if not isinstance(tools, list):
        raise bad_value("`tools` must be a list of function tools", "tools")
    if len(tools) > most:
        raise bad_value(f"`tools` has {len(tools)} tools; at most {most}", "tools")
    names = set()
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise bad_value(f'tools[{i}] must be {{"type": "function", "function": {{"name": ...}}}}', "tools")
        if not isinstance(fn.get("parameters", {}), dict):
            raise bad_value(f"tools[{i}].function.parameters must be a JSON schema object", "tools")
        names.add(fn["name"])
    if choice is None or choice in ("none", "auto", "required"):
        return
    fn = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise bad_value('`tool_choice` must be "none", "auto", "required" or {"type": "function", '
                        '"function": {"name": ...}}', "tool_choice")
    if fn["name"] not in names:
        raise bad_value(f"`tool_choice` names `{fn['name']}`, which is not in tools", "tool_choice")


def _structured(body: dict[str, Any]) -> None:
    fmt = body.get("response_format")
    if fmt is not None:
        if not isinstance(fmt, dict) or fmt.get("type") not in _FORMATS:
            raise bad_value('`response_format.type` must be "text", "json_object" or "json_schema"',
                            "response_format")
        spec = fmt.get("json_schema")
        if fmt["type"] == "json_schema" and (not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict)):
            raise bad_value("`response_format.json_schema` must be an object with a `schema` object",
                            "response_format")
    _check(body.get("guided_json"), isinstance(body.get("guided_json"), dict | str), "guided_json")
    regex = body.get("guided_regex")
    _check(regex, isinstance(regex, str) and bool(regex), "guided_regex")
    options = body.get("guided_choice")
    _check(options, isinstance(options, list) and bool(options) and all(isinstance(c, str) and c for c in options),
           "guided_choice")
    _check(body.get("structured_outputs"), isinstance(body.get("structured_outputs"), dict), "structured_outputs")


def _check(value: Any, ok: bool, name: str) -> None:
    if value is not None and not ok:
        raise WireError(400, f"`{name}` has the wrong type or is empty", "invalid_value", name)
