"""Draft proposers for speculative decoding: one interface, n-gram prompt lookup here.

A proposer guesses up to k tokens that follow a sequence; the target model verifies them in
the next step (spec_verify.py), so a wrong guess costs time, never correctness. Proposers see
only the request's own tokens: a proposal built from another tenant's text would leak it
through timing and content, so nothing here is shared across requests. The draft-model
proposer (draft_proposer.py) implements the same protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class ProposalRequest:
    """One sequence that wants drafts this step."""

    request_id: str
    token_ids: list[int]  # prompt + output so far (every token is verified)
    num_tokens: int  # at most this many drafts (k >= 1)


class Proposer(Protocol):
    """Guesses continuations. Called on the engine thread, once per step, batched."""

    def propose(self, requests: list[ProposalRequest]) -> dict[str, list[int]]:
        """Drafts per request id (0 .. num_tokens of them; missing = no guess)."""
        ...

    def drop(self, request_id: str) -> None:
        """Forget per-request state (finished, aborted or preempted)."""
        ...


class NgramProposer:
    """Prompt lookup decoding: find the sequence's last n tokens earlier in the sequence
    (its prompt or its own output) and propose the tokens that followed them there.

    Tries n = max_n down to min_n and takes the most recent earlier match; stateless.
    Input-grounded tasks (extraction, code edits, summaries quoting the source) copy long
    spans of the prompt, which is where this pays.
    """

    def __init__(self, min_n: int = 1, max_n: int = 3) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError("need 1 <= min_n <= max_n")
        self.min_n, self.max_n = min_n, max_n

    def propose(self, requests: list[ProposalRequest]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for req in requests:
            drafts = self.lookup(req.token_ids, req.num_tokens)
            if drafts:
                out[req.request_id] = drafts
        return out

    def drop(self, request_id: str) -> None:
        return None  # nothing kept per request

    def lookup(self, tokens: list[int], k: int) -> list[int]:
        """k tokens that followed the latest earlier occurrence of the longest suffix ([] if none)."""
        length = len(tokens)
        for n in range(min(self.max_n, length - 1), self.min_n - 1, -1):
            suffix = tokens[length - n :]
            first = suffix[0]
            # Latest start first (the suffix itself excluded): recent text predicts best.
            for i in range(length - n - 1, -1, -1):
                if tokens[i] == first and tokens[i : i + n] == suffix:
                    return _copy_forward(tokens, i + n, k)
        return []


def _copy_forward(tokens: list[int], start: int, k: int) -> list[int]:
    """k tokens copied from `start` on; a copy that reaches the end continues from its own
    output (LZ77-style overlap), so a period-p repetition yields k guesses, not p."""
    out: list[int] = []
    length = len(tokens)
    for j in range(start, start + k):
        out.append(tokens[j] if j < length else out[j - length])
    return out
