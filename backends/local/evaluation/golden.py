"""Golden sets: JSONL items with a prompt and the expected answer, and the check of an output.

One JSON object per line:
    {"id": "py-def", "prompt": "def __init__(self", "exact": "):", "stop": ["\\n"]}
    {"id": "tr-1", "prompt": "Dosya bulunamadı", "regex": "^\\\\s*\\\\S"}
    {"id": "j", "prompt": "...", "json_schema": {"type": "object", "required": ["a"]}}
Exactly one of `exact` (the completion, whitespace-stripped, equals it), `contains` (the
completion holds it as a substring), `regex` (re.search matches the completion) or `json_schema` (the completion starts with a JSON value valid under
the schema). Optional: `max_tokens` (default of the run), `stop` (strings that end the
completion, not included in it), `id`. Blank lines and lines starting with `#` are skipped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

KINDS = ("exact", "contains", "regex", "json_schema")


class GoldenSetError(ValueError):
    """A golden set line is not a valid item (the message names the file and line)."""


@dataclass(slots=True)
class GoldenItem:
    id: str
    prompt: str
    kind: str  # one of KINDS
    expected: Any  # str for exact/contains/regex, a JSON schema dict for json_schema
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)

    def check(self, completion: str) -> bool:
        """Does `completion` (the generated text after the prompt, cut at a stop) pass?"""
        if self.kind == "exact":
            expected: str = self.expected  # a string for every kind but json_schema (parse_item)
            return completion.strip() == expected.strip()
        if self.kind == "contains":
            return self.expected in completion
        if self.kind == "regex":
            return re.search(self.expected, completion) is not None
        try:
            value, _ = json.JSONDecoder().raw_decode(completion.lstrip())
        except json.JSONDecodeError:
            return False
        return jsonschema.Draft202012Validator(self.expected).is_valid(value)


def parse_item(obj: Any, where: str) -> GoldenItem:
    if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str):
        raise GoldenSetError(f"{where}: need an object with a string 'prompt'")
    kinds = [k for k in KINDS if k in obj]
    if len(kinds) != 1:
        raise GoldenSetError(f"{where}: need exactly one of {', '.join(KINDS)}")
    kind, expected = kinds[0], obj[kinds[0]]
    if kind == "json_schema":
        if not isinstance(expected, dict):
            raise GoldenSetError(f"{where}: json_schema must be an object")
        try:
            jsonschema.Draft202012Validator.check_schema(expected)
        except jsonschema.SchemaError as e:
            raise GoldenSetError(f"{where}: invalid JSON schema: {e.message}") from None
    elif not isinstance(expected, str):
        raise GoldenSetError(f"{where}: {kind} must be a string")
    elif kind == "regex":
        try:
            re.compile(expected)
        except re.error as e:
            raise GoldenSetError(f"{where}: invalid regex: {e}") from None
    stop = obj.get("stop", [])
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise GoldenSetError(f"{where}: stop must be a non-empty string or a list of them")
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise GoldenSetError(f"{where}: max_tokens must be a positive integer")
    return GoldenItem(str(obj.get("id", where)), obj["prompt"], kind, expected, max_tokens, stop)


def load_golden(path: str | Path) -> list[GoldenItem]:
    path = Path(path)
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path.name}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise GoldenSetError(f"{where}: not JSON: {e.msg}") from None
        items.append(parse_item(obj, where))
    if not items:
        raise GoldenSetError(f"{path}: no items")
    return items


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """The text before the earliest stop string, and whether one was found."""
    cuts = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[: min(cuts)], True) if cuts else (text, False)
