"""How much work one request may ask for: the bounds every front door checks while it reads the
body, each a 400 naming the field past it.

Defaults are OpenAI's where it publishes one (300 logit_bias entries, 128 tools, 2,048
embeddings inputs, best_of 20) and otherwise sized so that one request cannot hold a server for
seconds: `n` x prompts bounds the choices (and so what a request reserves), `top_logprobs` x
choices bounds the logprobs a response carries (128 choices x 20 alternatives x 200 tokens was a
34 MB body), `max_echo_tokens` bounds the prompt an `echo` sends back. Operators change them with
`parse_limit_overrides` (the gateway's `request_limits` setting, the engine's `--limit NAME=VALUE`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, frozen=True)
class WireLimits:
    max_n: int = 128  # choices per request: n x prompts
    max_prompts: int = 128  # prompts in one completions batch
    max_best_of: int = 20
    max_logit_bias: int = 300  # entries of logit_bias
    max_tools: int = 128
    max_embedding_inputs: int = 2048
    max_logprob_entries: int = 256  # top_logprobs (or completions' logprobs) x choices
    max_echo_tokens: int = 8192  # prompt tokens an `echo` returns (the engine counts them)
    # what a grammar engine compiles (openai_wire/grammar_bounds.py)
    max_guided_choices: int = 4096
    max_grammar_bytes: int = 256 * 1024  # a schema's JSON, or all choices together
    # in one schema (or all tools' parameters), at any depth. xgrammar's compile time grows much
    # faster than the count of optional properties (tiny vocabulary, this project's loaded
    # 2-core CPU: 100 0.2 s, 200 0.6 s, 400 4.5 s, 800 30 s), so the default stays well inside
    # the engine's grammar time cap
    max_schema_properties: int = 256
    max_regex_chars: int = 4096


def parse_limit_overrides(items: Mapping[str, Any] | Iterable[str], base: Any) -> Any:
    """`base` (a frozen limits dataclass) with the named fields changed; `items` is a mapping or
    `NAME=VALUE` strings. An unknown name or a value that is not a positive number raises
    ValueError (a typo must not pass silently)."""
    pairs = dict(items) if isinstance(items, Mapping) else dict(_pair(s) for s in items)
    fields = {f.name: f for f in dataclasses.fields(base)}
    changes: dict[str, Any] = {}
    for name, raw in pairs.items():
        if name not in fields:
            raise ValueError(f"unknown limit {name!r}; one of {', '.join(fields)}")
        kind = float if isinstance(getattr(base, name), float) else int
        value = kind(raw)
        if value <= 0:
            raise ValueError(f"limit {name} must be positive")
        changes[name] = value
    return dataclasses.replace(base, **changes)


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"a limit is NAME=VALUE, not {text!r}")
    return name.strip(), value.strip()
