"""Logprobs as OpenAI returns them, from the engine's `TokenLogprobs`.

Completions (the legacy object): `{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`,
with `echo` the prompt tokens first and the first prompt token's entries null (vLLM and OpenAI do
the same). Chat: `{"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal"}`.
A token's string is its own decoding with special tokens kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fairgate.backends.local.engine.types import TokenLogprobs

Decode = Callable[[list[int], bool], str]


class TokenText:
    """Token id -> its text, memoised for one response."""

    def __init__(self, decode: Decode) -> None:
        self._decode = decode
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        text = self._cache.get(token_id)
        if text is None:
            text = self._cache[token_id] = self._decode([token_id], False)
        return text


def completion_logprobs(text: TokenText, token_ids: Sequence[int], entries: Sequence[TokenLogprobs | None],
                        text_offset: int = 0) -> dict[str, Any]:
    """The legacy completions logprobs object for `token_ids` (entries aligned; None = no logprob)."""
    tokens: list[str] = []
    token_lps: list[float | None] = []
    tops: list[dict[str, float] | None] = []
    offsets: list[int] = []
    for token_id, entry in zip(token_ids, entries, strict=True):
        piece = text(token_id)
        tokens.append(piece)
        offsets.append(text_offset)
        text_offset += len(piece)
        if entry is None:
            token_lps.append(None)
            tops.append(None)
            continue
        token_lps.append(entry.logprob)
        top = {text(i): lp for i, lp in zip(entry.top_ids, entry.top_logprobs, strict=True)}
        top.setdefault(piece, entry.logprob)  # OpenAI always lists the chosen token
        tops.append(top)
    return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops, "text_offset": offsets}


def merge_completion_logprobs(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Echoed prompt logprobs followed by the completion's, offsets already continuous."""
    return {key: first[key] + second[key] for key in first}


def chat_logprobs(text: TokenText, entries: Sequence[TokenLogprobs]) -> dict[str, Any]:
    """The chat `logprobs` object: one content entry per generated token."""
    content = []
    for e in entries:
        piece = text(e.token_id)
        content.append({
            "token": piece, "logprob": e.logprob, "bytes": list(piece.encode()),
            "top_logprobs": [
                {"token": text(i), "logprob": lp, "bytes": list(text(i).encode())}
                for i, lp in zip(e.top_ids, e.top_logprobs, strict=True)
            ],
        })
    return {"content": content, "refusal": None}
