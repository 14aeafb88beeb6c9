"""Where things are in JSON text that may still be growing: the end of a value, and the name and
arguments of a tool-call object `{"name": ..., "arguments": {...}}`.

Streaming a tool call needs this: its arguments are sent as they are generated, so the reply's
raw text is read before it parses. The same reading gives the arguments' exact text (as the model
wrote it) for the non-streaming response, so a streamed call accumulates to the same string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

_DELIMITERS = frozenset(",}] \t\n\r")
_WS = frozenset(" \t\n\r")
ARGUMENT_KEYS = ("arguments", "parameters")  # OpenAI / Hermes write arguments, Llama 3 parameters


def string_end(text: str, i: int) -> int | None:
    """The index after the string starting at text[i] == '"' (None: not closed yet)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
        elif c == '"':
            return j + 1
        else:
            j += 1
    return None


def value_end(text: str, i: int) -> int | None:
    """The index after the JSON value starting at text[i] (None: it may still grow)."""
    c = text[i]
    if c == '"':
        return string_end(text, i)
    if c not in "{[":
        j = i
        while j < len(text) and text[j] not in _DELIMITERS:
            j += 1
        return j if j < len(text) else None
    depth, j = 0, i
    while j < len(text):
        c = text[j]
        if c == '"':
            end = string_end(text, j)
            if end is None:
                return None
            j = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return None


def skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


@dataclass(slots=True)
class CallScan:
    """What a (maybe partial) call object shows so far. Spans index the scanned text."""

    name: str | None = None  # once its string is complete
    args_start: int | None = None  # where the arguments value begins
    args_end: int | None = None  # where it ends (None: still growing, or absent)
    end: int | None = None  # after the object's closing brace (None: not closed yet)
    broken: bool = False  # not a call object (a parse error, not just an early end)


def scan_call(text: str, start: int) -> CallScan:
    """Read the call object at text[start] == '{' as far as it goes."""
    scan = CallScan()
    i = start + 1
    while True:
        i = skip_ws(text, i)
        if i >= len(text):
            return scan
        if text[i] == "}":
            scan.end = i + 1
            return scan
        if text[i] == ",":
            i += 1
            continue
        key_end = string_end(text, i) if text[i] == '"' else None
        if text[i] != '"':
            scan.broken = True
            return scan
        if key_end is None:
            return scan
        key = json.loads(text[i:key_end])
        i = skip_ws(text, key_end)
        if i >= len(text):
            return scan
        if text[i] != ":":
            scan.broken = True
            return scan
        i = skip_ws(text, i + 1)
        if i >= len(text):
            return scan
        end = value_end(text, i)
        _note(scan, key, text, i, end)
        if end is None:
            return scan
        i = end


def _note(scan: CallScan, key: str, text: str, start: int, end: int | None) -> None:
    if key == "name" and end is not None and text[start] == '"':
        scan.name = json.loads(text[start:end])
    elif key in ARGUMENT_KEYS and (scan.args_start is None or key == "arguments"):
        scan.args_start, scan.args_end = start, end


def raw_arguments(text: str) -> str | None:
    """The exact text of a complete call object's arguments object (None: absent, or not an
    object/array, e.g. arguments given as a JSON string)."""
    start = skip_ws(text, 0)
    if start >= len(text) or text[start] != "{":
        return None
    scan = scan_call(text, start)
    if scan.args_start is None or scan.args_end is None or text[scan.args_start] not in "{[":
        return None
    return text[scan.args_start : scan.args_end]
