"""The size of what a grammar engine would compile, bounded where the body is read.

Compiling a grammar costs time and memory that grow with it: 80k `guided_choice` options or a
5,000-property schema held an engine for minutes. These are cheap counts (no compilation), so a
request past one is a 400 naming the field before anything is reserved, whatever backend it
would go to; the engine adds a time cap on the compilation itself
(backends/local/sampling/grammar_compiler.py).
"""

from __future__ import annotations

from typing import Any

import orjson

from fairgate.backends.openai_wire.errors import bad_value
from fairgate.backends.openai_wire.limits import WireLimits


def check_grammar_sizes(body: dict[str, Any], limits: WireLimits) -> None:
    """Raise a 400 naming the first grammar field past `limits`; a field of the wrong shape is
    left to the shape checks (backends/openai_wire/fields.py)."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        _schema(fmt["json_schema"].get("schema"), "response_format", limits)
    _schema(body.get("guided_json"), "guided_json", limits)
    _regex(body.get("guided_regex"), "guided_regex", limits)
    _choices(body.get("guided_choice"), "guided_choice", limits)
    so = body.get("structured_outputs")
    if isinstance(so, dict):
        _schema(so.get("json"), "structured_outputs", limits)
        _regex(so.get("regex"), "structured_outputs", limits)
        _choices(so.get("choice"), "structured_outputs", limits)
    tools = body.get("tools")
    if isinstance(tools, list) and tools:  # a forced call compiles every tool's parameters
        functions = [t.get("function") for t in tools if isinstance(t, dict)]
        _schema([f.get("parameters") for f in functions if isinstance(f, dict)], "tools", limits)


def _schema(schema: Any, param: str, limits: WireLimits) -> None:
    if schema is None:
        return
    size = len(schema) if isinstance(schema, str) else len(orjson.dumps(schema))
    if size > limits.max_grammar_bytes:
        raise bad_value(f"`{param}`: the schema is {size} bytes; at most {limits.max_grammar_bytes}", param)
    if isinstance(schema, str):  # vLLM's guided_json may be the schema's text
        try:
            schema = orjson.loads(schema)
        except orjson.JSONDecodeError:
            return  # not a schema: the engine's 400 says so
    count = count_properties(schema)
    if count > limits.max_schema_properties:
        raise bad_value(f"`{param}`: the schema has {count} properties; at most {limits.max_schema_properties}",
                        param)


def count_properties(schema: Any) -> int:
    """Properties declared anywhere in a schema (each becomes grammar rules)."""
    count = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                count += len(props)
            stack.extend(v for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, dict | list))
    return count


def _regex(regex: Any, param: str, limits: WireLimits) -> None:
    if isinstance(regex, str) and len(regex) > limits.max_regex_chars:
        raise bad_value(f"`{param}`: the regex is {len(regex)} characters; at most {limits.max_regex_chars}", param)


def _choices(options: Any, param: str, limits: WireLimits) -> None:
    if not isinstance(options, list):
        return
    if len(options) > limits.max_guided_choices:
        raise bad_value(f"`{param}` has {len(options)} choices; at most {limits.max_guided_choices}", param)
    size = sum(len(c) for c in options if isinstance(c, str))
    if size > limits.max_grammar_bytes:
        raise bad_value(f"`{param}`: the choices are {size} characters; at most {limits.max_grammar_bytes}", param)
