"""The prompt version of a request, a metrics label: which system prompt (and so which cached
prefix) it was built on. Shared by the gateway and the engine server so both label alike.

`X-Prompt-Version` when the client sends one (cleaned, capped), else a short hash of the chat
system prompt, else "none". Never the prompt text: a label is stored and shown, a hash is not
reversible for any realistic system prompt.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

HEADER = "x-prompt-version"
MAX_LEN = 64
NONE = "none"
_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")


def prompt_version(header: str | bytes | None, body: Any) -> str:
    """The label for one request. `body` is the OpenAI request body (chat or completion)."""
    if header:
        if isinstance(header, bytes):
            header = header.decode("latin-1")
        cleaned = _UNSAFE.sub("_", header.strip())[:MAX_LEN]
        if cleaned:
            return cleaned
    return system_prompt_hash(body)


def system_prompt_hash(body: Any) -> str:
    """12 hex chars of SHA-256 over the system messages' text, "none" without one."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return NONE
    h = hashlib.sha256()
    found = False
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ("system", "developer"):
            continue
        content = m.get("content")
        if isinstance(content, list):  # text parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if isinstance(content, str):
            h.update(content.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            found = True
    return h.hexdigest()[:12] if found else NONE


class LabelCap:
    """Admits at most `limit` distinct values of a client-chosen label; later ones read "other",
    so a client cannot blow up the metrics' cardinality."""

    def __init__(self, limit: int = 500) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if len(self._seen) >= self.limit:
            return "other"
        self._seen.add(value)
        return value
