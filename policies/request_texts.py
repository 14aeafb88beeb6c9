"""Everything in an OpenAI request body that will reach a backend, as text the detectors can read.

Checking only message contents would let personal data out through the rest of the body: tool
call arguments, tool results, `name`, `user`, tool descriptions, stop strings. So the whole body
is walked and every string and number (and any key holding digits or '@') is collected, in order (so a value split across two messages is
still adjacent). Parts the text detectors cannot read (images, audio, files, token-id prompts)
make the request "opaque": the caller must treat it as sensitive (fail closed).
"""

from __future__ import annotations

from typing import Any

# Keys whose string values are protocol vocabulary, not user data.
_VOCABULARY = frozenset({"model", "role", "type", "object", "finish_reason", "tool_choice", "detail",
                         "format", "reasoning_effort", "service_tier"})
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
_MAX_DEPTH = 32


def inspectable_texts(body: dict[str, Any]) -> tuple[list[str], bool]:
    """Return (strings in body order, opaque). `opaque` is True when some part cannot be read
    as text: a non-text content part, a token-id prompt, or nesting too deep to walk."""
    out: list[str] = []
    opaque = _walk(body, out, 0)
    return out, opaque


def _walk(node: Any, out: list[str], depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return True
    opaque = False
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and kind not in _TEXT_PART_TYPES and _is_content_part(node):
            opaque = True  # image_url, input_audio, file, ...: nothing a text detector can read
        for key, value in node.items():
            if not key.isalpha() and any(c.isdigit() or c == "@" for c in key):
                # A key holding digits or '@' may be data (metadata maps); plain protocol keys
                # are skipped so message contents stay adjacent for split-value detection.
                out.append(key)
            if key in _VOCABULARY and isinstance(value, str):
                continue
            if key == "prompt" and isinstance(value, list) and value and not isinstance(value[0], str):
                opaque = True  # token ids
                continue
            opaque = _walk(value, out, depth + 1) or opaque
    elif isinstance(node, list):
        for item in node:
            opaque = _walk(item, out, depth + 1) or opaque
    elif isinstance(node, str):
        if node:
            out.append(node)
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out.append(str(node))  # a national ID sent as a JSON number is still one
    return opaque


def _is_content_part(node: dict[str, Any]) -> bool:
    # A content part carries its payload under a key named like its type ("image_url": {...});
    # tool definitions ({"type": "function", "function": {...}}) are text and walked normally.
    kind = node["type"]
    return kind in node and kind not in ("function", "json_schema")
