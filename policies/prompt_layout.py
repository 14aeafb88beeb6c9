"""Fingerprints of a prompt's head, so `fairgate advise` can tell a cache-missing prompt layout
from prompts that simply differ.

A prefix cache hits only on a byte-identical start. A per-request value early in the prompt (a
timestamp, a request id) before a long shared system prompt makes every prompt start
differently, and the cache misses everything after it. Two short hashes of the first
`HEAD_CHARS` characters of the request's texts show this without storing any text:

- `exact`: SHA-256 of the head as sent (all messages but the last);
- `shape`: the same head with every digit replaced by `#` (a timestamp, a numeric id; a
  str.translate, ~10x cheaper than a regex over the head).

Many requests on one `shape` but on many distinct `exact` heads: the prompts are the same
apart from digits near their start — a layout the cache cannot reuse. Neither hash can be
turned back into the text (12 hex characters of SHA-256 over a 1 KB head).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HEAD_CHARS = 1024
_DIGITS = str.maketrans("0123456789", "##########")


def head_fingerprint(texts: Sequence[str]) -> tuple[str, str]:
    """(exact, shape) hashes of the head of `texts` (messages in order, or the prompt); ("", "")
    for an empty prompt. With several messages the last one (the request's own question) is
    left out: the head is the context the requests could share."""
    if len(texts) > 1:
        texts = texts[:-1]
    parts: list[str] = []
    size = 0
    for t in texts:  # join only what the head needs (a prompt can be megabytes)
        parts.append(t[:HEAD_CHARS - size])
        size += len(parts[-1]) + 1
        if size >= HEAD_CHARS:
            break
    head = "\n".join(parts)[:HEAD_CHARS]
    if not head:
        return "", ""
    shape = head.translate(_DIGITS)
    exact = _h(head)
    return exact, exact if shape == head else _h(shape)  # no digit in the head: one hash


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
