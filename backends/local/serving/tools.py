"""`tools` and `tool_choice` for the local engine: validation, what the chat template gets, and
the grammar that enforces `required` / a named function.

`auto` lets the model answer or call (its output is parsed by the engine's `--tool-call-parser`);
`none` renders the tools but never parses a call; `required` and a named function are enforced
by structured decoding: the reply is one JSON object `{"name": ..., "arguments": ...}` whose
arguments match that function's parameter schema, so the call always parses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fairgate.backends.local.sampling.structured import GrammarRequest
from fairgate.backends.local.serving.tool_parsers import PARSERS, ToolCall, parse_forced
from fairgate.backends.openai_wire import bad_value


@dataclass(slots=True)
class ToolPlan:
    """How one request uses tools."""

    tools: list[dict[str, Any]]  # as the client sent them (the template's `tools`)
    mode: str  # "auto" | "none" | "required" | "named"
    parser: str  # the engine's --tool-call-parser

    @property
    def parses(self) -> bool:
        return self.mode != "none"

    def parse(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """(content, calls) of a finished reply."""
        if self.mode == "none":
            return text, []
        if self.mode in ("required", "named"):
            return None, parse_forced(text)  # the grammar's JSON is the call, never content
        return PARSERS[self.parser](text)


def read_tools(body: dict[str, Any], parser: str) -> tuple[ToolPlan | None, GrammarRequest | None]:
    """The request's tool plan and, for required / named, the grammar that enforces it."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if body.get("functions") is not None:
        raise bad_value("`functions` is deprecated and not supported; send `tools`", "functions")
    if tools is None:
        if choice not in (None, "none"):
            raise bad_value("tool_choice needs `tools`", "tool_choice")
        return None, None
    if not isinstance(tools, list) or not tools:
        raise bad_value("tools must be a non-empty list of function tools", "tools")
    params = {}
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise bad_value(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}", "tools")
        schema = fn.get("parameters", {"type": "object"})
        if not isinstance(schema, dict):
            raise bad_value(f"tools[{i}].function.parameters must be a JSON schema object", "tools")
        params[fn["name"]] = schema or {"type": "object"}
    mode, names = _mode(choice, params)
    plan = ToolPlan(tools, mode, parser)
    if mode not in ("required", "named"):
        return plan, None
    options = [{"type": "object", "properties": {"name": {"const": n}, "arguments": params[n]},
                "required": ["name", "arguments"], "additionalProperties": False} for n in names]
    schema = options[0] if len(options) == 1 else {"anyOf": options}
    return plan, GrammarRequest("json", schema, "tool_choice")


def _mode(choice: Any, params: dict[str, dict[str, Any]]) -> tuple[str, list[str]]:
    if choice is None or choice == "auto":
        return "auto", list(params)
    if choice in ("none", "required"):
        return choice, list(params)
    fn = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise bad_value('tool_choice must be "none", "auto", "required" or {"type": "function", '
                        '"function": {"name": ...}}', "tool_choice")
    if fn["name"] not in params:
        raise bad_value(f"tool_choice names `{fn['name']}`, which is not in tools", "tool_choice")
    return "named", [fn["name"]]
