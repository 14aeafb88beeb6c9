"""From a parsed OpenAI request to what the local engine runs: prompt token ids (the model's
tokenizer and chat template) and `SamplingParams`.

`parse_request` (backends/openai_wire) has already checked types and shapes; this step adds
what only this engine knows: the served model's name, its context length and vocabulary, and
the fields it cannot honour (tools, response_format, ...), which are refused by name rather
than ignored. Penalties, bias and logprobs fields are read in sampling_fields.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from fairgate.backends.base import Kind
from fairgate.backends.local.engine.admission import check_prompt_ids
from fairgate.backends.local.engine.output import RequestRejected
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.sampling.fields import read_sampling_fields
from fairgate.backends.local.sampling.grammar_compiler import StructuredCompiler
from fairgate.backends.local.sampling.structured import GrammarRequest, read_grammar_request
from fairgate.backends.local.serving.reasoning import ReasoningFormat
from fairgate.backends.local.serving.tools import ToolPlan, read_tools
from fairgate.backends.openai_wire import (
    WireError,
    WireRequest,
    bad_value,
    check_completion_fits,
    check_prompt_fits,
    completion_limit,
    parse_request,
)
from fairgate.backends.openai_wire.limits import WireLimits
from fairgate.backends.openai_wire.request import is_int


class PromptTokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def encode_chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]: ...
    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str: ...


@dataclass(slots=True)
class ModelInfo:
    """What preparing a request needs to know about the served model."""

    name: str
    max_model_len: int
    tokenizer: PromptTokenizer
    vocab_size: int | None = None  # None: token ids are checked at admission only
    grammars: StructuredCompiler | None = None  # None: structured output is refused
    tool_parser: str = "hermes"  # how the model writes tool calls (tool_parsers.PARSERS)
    reasoning: ReasoningFormat | None = None  # a reasoning model's thinking apart (reasoning.py)
    limits: WireLimits = field(default_factory=WireLimits)  # what one request may ask for


@dataclass(slots=True)
class EngineRequest:
    """A request ready for `AsyncEngine.add_request`."""

    kind: Kind
    model: str
    prompt_token_ids: list[int]
    sampling: SamplingParams
    stream: bool
    include_usage: bool
    echo_text: str | None = None  # completions with echo: the prompt text, returned first
    # Completions with a batch of prompts: every prompt's ids (the first is prompt_token_ids)
    # and echo text; n choices each.
    prompt_batch: list[list[int]] = field(default_factory=list)
    echo_batch: list[str] = field(default_factory=list)
    n: int = 1
    tools: ToolPlan | None = None  # chat with `tools`: how replies become tool calls
    continuous_usage: bool = False  # usage (running totals) on every streamed chunk
    grammar: GrammarRequest | None = None  # to compile (`compile_grammar`) into sampling.grammar
    reasoning: ReasoningFormat | None = None  # chat on a reasoning model: the thinking goes apart
    grammar_after: tuple[int | None, int] | None = None  # the grammar applies after the thinking (reasoning.py)
    # vLLM's `cache_salt` body field: this request shares cached prefixes only with requests of
    # the same salt, within its caller's own space (`LocalBackend` joins it to the header's).
    cache_salt: str | None = None


def read_for_engine(kind: Kind, body: Any, info: ModelInfo) -> WireRequest:
    """The engine server's edge: the wire check and the served model's name (the model may be
    omitted). Raises `WireError`."""
    wire = parse_request(kind, body, require_model=False, limits=info.limits)
    if wire.model is not None and wire.model != info.name:
        raise WireError(404, f"The model `{wire.model}` does not exist. This server serves `{info.name}`.",
                        "model_not_found", "model")
    return wire


def parse_for_engine(kind: Kind, body: Any, info: ModelInfo) -> EngineRequest:
    """`read_for_engine`, `prepare`, and its grammar compiled here (callers off the event loop).
    Raises `WireError` on anything this engine cannot serve."""
    prepared = prepare(read_for_engine(kind, body, info), info)
    if prepared.grammar is not None and info.grammars is not None:
        prepared.sampling.grammar = info.grammars.compile(prepared.grammar)
    return prepared


async def compile_grammar(prepared: EngineRequest, info: ModelInfo) -> None:
    """The request's grammar compiled off the event loop, within the compiler's time cap."""
    if prepared.grammar is not None and info.grammars is not None:
        prepared.sampling.grammar = await info.grammars.compile_async(prepared.grammar)


def prepare(wire: WireRequest, info: ModelInfo) -> EngineRequest:
    """Tokenize and build sampling for an already parsed request (any model name: the gateway
    routed it here). The fields only this engine reads (tools, grammars, logprobs, penalties)
    come from the body as sent and are checked here, against the served model."""
    body = wire.body
    if wire.has_stream_options and not wire.stream:
        raise bad_value("stream_options is only allowed when stream is true", "stream_options")
    _refuse_unsupported(wire.kind, body)
    plan, tool_grammar = read_tools(body, info.tool_parser) if wire.kind == "chat" else (None, None)
    if wire.kind == "chat":
        batch = [_chat_prompt(wire, info, plan.tools if plan else None)]
    else:
        batch = [_completion_prompt(p, info) for p in (wire.prompts or [wire.prompt])]
    sampling = _sampling(wire, body, max(len(ids) for ids in batch), info)
    grammar = _grammar(read_grammar_request(body), tool_grammar, info)
    # Draft verification samples from the raw distribution: requests whose logits are processed
    # (penalties, bias, min_p/min_tokens, grammars) or who want logprobs run unspeculated.
    if sampling.needs_processing or grammar is not None or sampling.min_p > 0 \
            or sampling.logprobs is not None or sampling.prompt_logprobs is not None or wire.speculative is False:
        sampling.speculative = False
    echoes: list[str] = []
    if wire.kind == "completion" and body.get("echo"):
        longest = max(len(ids) for ids in batch)
        if longest > info.limits.max_echo_tokens:
            raise bad_value(f"`echo` returns the prompt; this one has {longest} tokens, at most "
                            f"{info.limits.max_echo_tokens} may be echoed", "echo")
        echoes = [p if isinstance(p, str) else info.tokenizer.decode(ids)
                  for p, ids in zip(wire.prompts or [wire.prompt], batch, strict=True)]
    reasoning = info.reasoning if wire.kind == "chat" else None
    if reasoning is not None and reasoning.keeps_special_tokens:
        sampling.skip_special_tokens = False  # its parser reads the markers
    after = None
    if reasoning is not None and grammar is not None:
        try:
            after = reasoning.grammar_after(batch[0])
        except ValueError as exc:
            raise bad_value(f"structured output after the thinking is not possible: {exc}", grammar.param) from None
    return EngineRequest(wire.kind, wire.model or info.name, batch[0], sampling, wire.stream, wire.include_usage,
                         echoes[0] if echoes else None, batch, echoes, wire.n, plan, wire.continuous_usage, grammar,
                         reasoning, after, cache_salt=_body_salt(body))


def _grammar(fmt: GrammarRequest | None, tools: GrammarRequest | None, info: ModelInfo) -> GrammarRequest | None:
    """The grammar of a structured-output or forced-tool request (None: free text), compiled later."""
    if fmt is not None and tools is not None:
        raise bad_value("a forced tool call and response_format cannot be combined", "tool_choice")
    grammar = fmt or tools
    if grammar is None:
        return None
    if info.grammars is None:
        raise bad_value("structured output is not available on this engine", grammar.param)
    return grammar


# Every field this engine reads or may accept as sent, per endpoint; anything else is refused by
# name (vLLM ignores unknown fields with a log line; a client then silently gets other output).
# Accepted without effect on the output: `user`, `metadata`, `prompt_cache_key`,
# `safety_identifier` (bookkeeping), `parallel_tool_calls` true, `store` false, `service_tier` auto/default.
_COMMON_FIELDS = frozenset({
    "model", "stream", "stream_options", "n", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
    "seed", "max_tokens", "max_completion_tokens", "frequency_penalty", "presence_penalty", "repetition_penalty",
    "logit_bias", "logprobs", "top_logprobs", "min_tokens", "ignore_eos", "response_format", "guided_json",
    "guided_regex", "guided_choice", "structured_outputs", "speculative", "best_of", "user", "metadata", "store",
    "service_tier", "prompt_cache_key", "safety_identifier", "guided_grammar", "guided_decoding_backend",
    "prompt_logprobs", "allowed_token_ids", "bad_words", "truncate_prompt_tokens", "cache_salt",
})
_KNOWN_FIELDS = {
    "chat": _COMMON_FIELDS | {"messages", "tools", "tool_choice", "parallel_tool_calls", "functions",
                              "chat_template_kwargs"},
    "completion": _COMMON_FIELDS | {"prompt", "echo", "suffix", "tools", "chat_template_kwargs"},
}


def _refuse_unknown(kind: Kind, body: dict[str, Any]) -> None:
    known = _KNOWN_FIELDS.get(kind)
    if known is None:
        return
    unknown = sorted(k for k in body if k not in known)
    if unknown:
        raise bad_value(f"`{unknown[0][:64]}` is not a parameter this engine knows; it was not ignored: remove it",
                        unknown[0][:64])
    if body.get("store") not in (None, False):
        raise bad_value("`store: true` is not supported: this engine keeps no completions", "store")
    if body.get("service_tier") not in (None, "auto", "default"):
        raise bad_value("`service_tier` other than auto or default is not supported by this engine", "service_tier")
    if body.get("parallel_tool_calls") is False:
        raise bad_value("`parallel_tool_calls: false` is not supported: this engine returns every call the model "
                        "writes", "parallel_tool_calls")


def _body_salt(body: dict[str, Any]) -> str | None:
    salt = body.get("cache_salt")
    if salt is not None and not (isinstance(salt, str) and 0 < len(salt) <= 256):
        raise bad_value("`cache_salt` must be a non-empty string of at most 256 characters", "cache_salt")
    return salt


def _refuse_unsupported(kind: Kind, body: dict[str, Any]) -> None:
    _refuse_unknown(kind, body)
    best_of = _opt(body, "best_of", int)
    if best_of is not None and best_of != 1:
        raise bad_value("best_of is not supported", "best_of")
    if kind == "completion" and body.get("suffix") not in (None, ""):
        raise bad_value("suffix is not supported", "suffix")
    if kind == "completion" and body.get("tools") is not None:
        raise bad_value("tools apply to chat completions", "tools")
    if kind == "completion" and body.get("chat_template_kwargs") is not None:
        raise bad_value("chat_template_kwargs apply to chat completions", "chat_template_kwargs")
    for name in _VLLM_UNSUPPORTED:
        if body.get(name) is not None:
            raise bad_value(f"{name} is not supported by this engine", name)


_VLLM_UNSUPPORTED = ("guided_grammar", "guided_decoding_backend", "prompt_logprobs", "allowed_token_ids", "bad_words", "truncate_prompt_tokens")


def _completion_prompt(prompt: str | list[int], info: ModelInfo) -> list[int]:
    if isinstance(prompt, str):
        if not prompt:
            raise bad_value("prompt must not be empty", "prompt")
        ids = info.tokenizer.encode(prompt)
    else:
        ids = list(prompt)
        if info.vocab_size is not None:  # before anything decodes them (echo)
            try:
                check_prompt_ids(ids, info.vocab_size)
            except RequestRejected as exc:
                raise WireError(400, str(exc), exc.code, exc.param) from None
    check_prompt_fits(len(ids), info.max_model_len, "prompt")
    return ids


_MESSAGE_FIELDS = ("name", "tool_calls", "tool_call_id", "reasoning_content")  # what templates read besides role/content


def _template_message(m: dict[str, Any], i: int) -> dict[str, Any]:
    """A message as the chat template sees it (as transformers passes it): text content, the
    tool fields kept, and OpenAI's `developer` role as `system` (what open models know)."""
    out: dict[str, Any] = {"role": "system" if m["role"] == "developer" else m["role"],
                           "content": _message_text(m.get("content"), i)}
    for key in _MESSAGE_FIELDS:
        if m.get(key) is not None:
            out[key] = m[key]
    return out


# what the template gets from the request itself: `chat_template_kwargs` may not replace them
_TEMPLATE_OWN = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})


def template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """`chat_template_kwargs` (vLLM's): extra variables for the chat template, e.g.
    {"enable_thinking": false} for Qwen3. Keys are template variable names."""
    extra = body.get("chat_template_kwargs")
    if extra is None:
        return {}
    if not isinstance(extra, dict) or not all(isinstance(k, str) and k.isidentifier() for k in extra):
        raise bad_value("chat_template_kwargs must be an object whose keys are template variable names",
                        "chat_template_kwargs")
    taken = sorted(_TEMPLATE_OWN & set(extra))
    if taken:
        raise bad_value(f"chat_template_kwargs may not set `{taken[0]}`: the request sets it", "chat_template_kwargs")
    return dict(extra)


def _chat_prompt(wire: WireRequest, info: ModelInfo, tools: list[dict[str, Any]] | None) -> list[int]:
    clean = [_template_message(m, i) for i, m in enumerate(wire.messages)]
    extra = template_kwargs(wire.body)
    if tools:
        extra["tools"] = tools
    try:
        ids = info.tokenizer.encode_chat(clean, **extra)
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


def _sampling(wire: WireRequest, body: dict[str, Any], n_prompt: int, info: ModelInfo) -> SamplingParams:
    max_tokens = completion_limit(wire.max_tokens, info.max_model_len, n_prompt)
    check_completion_fits(n_prompt, max_tokens, info.max_model_len)
    # temperature, top_p, top_k and stop were range-checked by the wire parser
    stop_ids = body.get("stop_token_ids") or []
    if not isinstance(stop_ids, list) or not all(is_int(t) and t >= 0 for t in stop_ids):
        raise bad_value("stop_token_ids must be a list of token ids", "stop_token_ids")
    _opt(body, "user", str)  # accepted and ignored
    extra = read_sampling_fields(wire.kind, body, info.vocab_size)
    if extra.min_tokens > max_tokens:
        raise bad_value("min_tokens must not exceed max_tokens", "min_tokens")
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=1.0 if wire.temperature is None else wire.temperature,
        top_p=1.0 if wire.top_p is None else wire.top_p,
        top_k=max(wire.top_k or 0, 0),
        seed=wire.seed,
        stop=list(wire.stop),
        stop_token_ids=list(stop_ids),
        ignore_eos=bool(_opt(body, "ignore_eos", bool)),
        **extra.params_kwargs(),
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
