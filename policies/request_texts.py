"""Everything in an OpenAI request body that will reach a backend, as text the detectors can read.

Checking only message contents would let personal data out through the rest of the body: tool
call arguments, tool results, `name`, `user`, tool descriptions, stop strings. So the whole body
is walked and every string and number (and any key holding digits or '@') is collected, in order (so a value split across two messages is
still adjacent). Parts the text detectors cannot read (images, audio, files) make the request
"opaque": the caller must treat it as sensitive (fail closed). Token-id prompts (completions
`prompt`, embeddings `input`: a list of ids or of id lists) are set apart: they are readable once
the model's tokenizer turns them back into text, and opaque to a caller that cannot do that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Keys whose string values are protocol vocabulary, not user data.
_VOCABULARY = frozenset({"model", "role", "type", "object", "finish_reason", "tool_choice", "detail",
                         "format", "reasoning_effort", "service_tier"})
_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text", "refusal"})
_MAX_DEPTH = 32
_TOKEN_FIELDS = ("prompt", "input")  # top-level fields that may hold token ids


@dataclass(slots=True)
class RequestTexts:
    """What of a request body the detectors can read."""

    texts: list[str] = field(repr=False)  # every string and number, in body order
    opaque: bool = False  # a part no detector can read: non-text content, nesting too deep
    token_prompts: list[list[int]] = field(default_factory=list, repr=False)  # text once detokenised


def readable_parts(body: dict[str, Any]) -> RequestTexts:
    """The body's texts, whether something in it is unreadable, and its token-id prompts."""
    parts = RequestTexts([])
    parts.opaque = _walk(body, parts.texts, 0, parts.token_prompts)
    return parts


def inspectable_texts(body: dict[str, Any]) -> tuple[list[str], bool]:
    """Return (strings in body order, opaque). `opaque` is True when some part cannot be read
    as text: a non-text content part, a token-id prompt, or nesting too deep to walk."""
    parts = readable_parts(body)
    return parts.texts, parts.opaque or bool(parts.token_prompts)


def _has_ids(value: Any) -> bool:
    return isinstance(value, list) and any(not isinstance(p, str) for p in value)


def _prompt_parts(value: list[Any], out: list[str], tokens: list[list[int]]) -> bool:
    """A top-level prompt list holding ids: one id list, or a batch of texts and id lists
    (texts to `out`, id lists to `tokens`). True (opaque) for anything else in it."""
    if all(_is_id(t) for t in value):
        tokens.append(value)
        return False
    opaque = False
    for p in value:
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, list) and p and all(_is_id(t) for t in p):
            tokens.append(p)
        else:
            opaque = True
    return opaque


def _is_id(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _walk(node: Any, out: list[str], depth: int, tokens: list[list[int]] | None = None) -> bool:
    """Collect `node`'s texts into `out`; True when part of it is unreadable. `tokens` (the
    top level only) receives the token-id prompts."""
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
            if key in _TOKEN_FIELDS and tokens is not None and _has_ids(value):
                opaque = _prompt_parts(value, out, tokens) or opaque
                continue
            if key == "prompt" and isinstance(value, list) and value and not isinstance(value[0], str):
                opaque = True  # nested token ids: nothing a detector can read
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
