"""Model output -> OpenAI `tool_calls`, by the format the model was trained to call tools in.

- `hermes` (Hermes / Qwen2.5): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, any
  number, text around them is the message content.
- `llama3_json` (Llama 3.1+): the whole reply is one JSON object `{"name": ..., "parameters": {...}}`
  (or `"arguments"`), or several separated by `;`.

`parse_forced` reads what structured decoding produced under `tool_choice` required or named: one
JSON call object, whatever the parser, or as much of it as `max_tokens` left (the partial call, as
the stream sent it: a client asked for a call, so it gets a call or nothing, never the JSON wrapper
as content).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from fairgate.backends.local.serving.json_scan import raw_arguments, scan_call, skip_ws


@dataclass(slots=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI returns it

    def to_openai(self, index: int | None = None) -> dict[str, Any]:
        call: dict[str, Any] = {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                                "function": {"name": self.name, "arguments": self.arguments}}
        if index is not None:
            call = {"index": index, **call}
        return call


_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def _call(obj: Any, raw: str) -> ToolCall | None:
    """The call in parsed `obj`; its arguments' text is the model's own (`raw`, the object's
    text), as a streamed call sends it, or a dump when the model wrote none."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        return ToolCall(obj["name"], args)
    return ToolCall(obj["name"], raw_arguments(raw) or json.dumps(args, ensure_ascii=False))


def parse_hermes(text: str) -> tuple[str | None, list[ToolCall]]:
    calls = []
    for m in _HERMES.finditer(text):
        try:
            call = _call(json.loads(m.group(1)), m.group(1))
        except ValueError:
            call = None
        if call is None:
            return text, []  # a malformed call: the text is content, nothing is invented
        calls.append(call)
    if not calls:
        return text, []
    rest = _HERMES.sub("", text).strip()
    return rest or None, calls


def parse_llama3_json(text: str) -> tuple[str | None, list[ToolCall]]:
    stripped = text.strip().removeprefix("<|python_tag|>")
    if not stripped.startswith("{"):
        return text, []
    calls = []
    for part in stripped.split(";"):
        try:
            call = _call(json.loads(part), part)
        except ValueError:
            return text, []
        if call is None:
            return text, []
        calls.append(call)
    return None, calls


PARSERS = {"hermes": parse_hermes, "llama3_json": parse_llama3_json}


def parse_forced(text: str) -> list[ToolCall]:
    """The one call structured decoding produced. Cut off (finish_reason length): the call as far
    as it went, its arguments' text so far, exactly what a stream of it sent (tool_stream.py);
    [] when even the name was cut."""
    try:
        call = _call(json.loads(text), text)
    except ValueError:
        call = None
    return [call] if call is not None else _partial_forced(text)


def _partial_forced(text: str) -> list[ToolCall]:
    start = skip_ws(text, 0)
    if start >= len(text) or text[start] != "{":
        return []
    scan = scan_call(text, start)
    if scan.name is None or scan.broken:
        return []
    if scan.args_start is None:
        return [ToolCall(scan.name, "")]
    if text[scan.args_start] in "{[":  # an object streams as it grows
        end = scan.args_end if scan.args_end is not None else len(text)
        return [ToolCall(scan.name, text[scan.args_start:end])]
    if scan.args_end is None:  # any other value streams only once whole
        return [ToolCall(scan.name, "")]
    value = json.loads(text[scan.args_start:scan.args_end])
    return [ToolCall(scan.name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))]
