"""What the engine hands back per request, and the per-request stop / detokenize bookkeeping.

`OutputTracker` runs on the engine thread: it turns sampled token ids into text, decides when a
request stops (eos, stop ids, stop strings, max_tokens, max_model_len) and produces
`RequestOutput` deltas. Text that could be the start of a stop string is held back until it
is clear it is not; the stop string itself is never returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from fairgate.backends.local.engine.types import SamplingParams, TokenLogprobs

FinishReason = Literal["stop", "length", "abort", "error"]


class RequestRejected(ValueError):
    """The engine refused a request at admission; the message is safe to show the client.

    `code` is an OpenAI-style error code (e.g. "context_length_exceeded"), `param` the field.
    """

    def __init__(self, message: str, code: str = "invalid_value", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param


@dataclass(slots=True)
class EngineStats:
    """Counters and gauges for metrics; cumulative counters never go down."""

    running: int = 0
    waiting: int = 0
    kv_blocks_used: int = 0
    kv_blocks_total: int = 0
    prefix_cache_queries: int = 0  # prompt tokens looked up
    prefix_cache_hits: int = 0  # prompt tokens found
    preemptions: int = 0  # every cause
    fairness_preemptions: int = 0  # of them: a slot given to an under-served tenant
    recomputed_tokens: int = 0  # computed again by resumed requests (not found in the prefix cache)
    fairness_recomputed_tokens: int = 0  # of them: by requests preempted for fairness
    steps: int = 0
    tokens_computed: int = 0  # prompt + decode tokens run through the model
    busy_seconds: float = 0.0  # wall time inside the forward pass (runner.execute)
    generation_tokens: int = 0
    sampled_seqs: int = 0  # sequences that sampled a token, summed over steps (/ steps: mean batch)
    startup_seconds: float = 0.0  # building the engine: model load, KV pool, warm-up
    requests_added: int = 0
    requests_aborted: int = 0
    requests_failed: int = 0
    # Speculative decoding: verifies run, draft tokens verified, drafts accepted, accepted
    # drafts by position (index j: verifies whose draft j + 1 was accepted), steps the off
    # switch ran without drafts, seconds proposing, seconds of the steps that verified.
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_by_position: list[int] = field(default_factory=list)
    spec_off_steps: int = 0
    spec_propose_seconds: float = 0.0
    spec_verify_seconds: float = 0.0


@dataclass(slots=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from the prefix cache

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(slots=True)
class RequestOutput:
    """One delta of a request's stream: tokens and text new since the previous delta.

    The last delta has `finished` True and a `finish_reason`; `error` is set only when the
    engine failed the request ("error"), and `usage` is always the running total.
    """

    request_id: str
    token_ids: list[int]
    text: str
    usage: Usage
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None  # the stop string or stop token id that matched
    error: str | None = None
    logprobs: list[TokenLogprobs] | None = None  # one per token in token_ids, when asked
    # With echo: one per prompt token (the first None), in the first delta only.
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    embedding: list[float] | None = None  # `SamplingParams.pool`: the prompt's mean hidden state, last delta

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def merge(self, later: RequestOutput) -> None:
        """Fold a later delta into this one (a slow consumer gets fewer, bigger deltas)."""
        self.token_ids.extend(later.token_ids)
        self.text += later.text
        self.usage = later.usage
        self.finish_reason = later.finish_reason
        self.stop_reason = later.stop_reason
        self.error = later.error
        if later.logprobs is not None:
            self.logprobs = (self.logprobs or []) + later.logprobs
        if later.prompt_logprobs is not None:
            self.prompt_logprobs = later.prompt_logprobs
        if later.embedding is not None:
            self.embedding = later.embedding


class IncrementalDecoder(Protocol):
    """`backends.local.model.tokenizer.IncrementalDetokenizer`."""

    def add(self, token_id: int) -> str:
        """Feed one generated token id; return the text that became complete with it."""
        ...

    def flush(self) -> str:
        """At the end: whatever is still held back (an incomplete character)."""
        ...


@dataclass(slots=True)
class OutputTracker:
    """Per-request state on the engine thread: text so far and the stop checks."""

    request_id: str
    sampling: SamplingParams
    num_prompt_tokens: int
    max_tokens: int  # already capped so prompt + max_tokens <= max_model_len
    eos_token_ids: frozenset[int]
    decoder: IncrementalDecoder | None  # None: token ids only, no text
    num_tokens_seen: int = 0
    held_text: str = ""  # decoded but not yet returned (could start a stop string)
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None
    _max_stop_len: int = field(default=0)
    # position -> entry, filled as prefill chunks run (kept over a recompute); sent once.
    _prompt_logprobs: dict[int, TokenLogprobs] = field(default_factory=dict)
    _prompt_logprobs_sent: bool = False
    # `pool`: the sum of the prompt's hidden rows so far and the next position it expects
    _pool_sum: Any = None
    _pool_next: int = 0

    def __post_init__(self) -> None:
        self._max_stop_len = max((len(s) for s in self.sampling.stop), default=0)

    def add_prompt_logprobs(self, entries: dict[int, TokenLogprobs]) -> None:
        """Record prompt-token logprobs a prefill chunk computed (first computation wins)."""
        for pos, entry in entries.items():
            self._prompt_logprobs.setdefault(pos, entry)

    def add_pooled(self, start_pos: int, total: Any, rows: int) -> None:
        """Add a prefill chunk's summed hidden rows; a recompute (start 0 again) starts over."""
        if start_pos == 0:
            self._pool_sum, self._pool_next = total, rows
        elif start_pos == self._pool_next and self._pool_sum is not None:
            self._pool_sum = self._pool_sum + total
            self._pool_next += rows

    def process(self, new_token_ids: list[int], cached_tokens: int,
                logprobs: list[TokenLogprobs] | None = None) -> RequestOutput:
        """Account for newly sampled tokens (and their logprobs, when asked); return the delta
        (maybe empty) to emit."""
        emitted_ids: list[int] = []
        text = ""
        for token_id in new_token_ids:
            if self.finish_reason is not None:
                break  # tokens after a stop (e.g. a speculative tail) are dropped
            self.num_tokens_seen += 1
            emitted_ids.append(token_id)
            if self._stops_on_token(token_id):
                break
            if self.decoder is not None:
                text += self._add_text(self.decoder.add(token_id))
            if self.finish_reason is None and self.num_tokens_seen >= self.max_tokens:
                self.finish_reason = "length"
        if self.finish_reason is not None:
            if self.decoder is not None and not isinstance(self.stop_reason, str):
                text += self._add_text(self.decoder.flush())
            text += self.held_text  # nothing can complete a stop string any more
            self.held_text = ""
        out = self._output(emitted_ids, text, cached_tokens)
        if logprobs is not None:
            out.logprobs = logprobs[: len(emitted_ids)]
        if self.sampling.pool and out.finished and self._pool_next == self.num_prompt_tokens:
            out.embedding = (self._pool_sum / self.num_prompt_tokens).tolist()
        if self.sampling.prompt_logprobs is not None and not self._prompt_logprobs_sent:
            self._prompt_logprobs_sent = True
            out.prompt_logprobs = [None, *(self._prompt_logprobs.get(p) for p in range(1, self.num_prompt_tokens))]
        return out

    def finish(self, reason: FinishReason, cached_tokens: int, error: str | None = None) -> RequestOutput:
        """Close the stream from outside (abort or engine error); flushes nothing held."""
        self.finish_reason = reason
        out = self._output([], "", cached_tokens)
        out.error = error
        return out

    def _stops_on_token(self, token_id: int) -> bool:
        if token_id in self.sampling.stop_token_ids:
            self.finish_reason, self.stop_reason = "stop", token_id
            return True
        if not self.sampling.ignore_eos and token_id in self.eos_token_ids:
            self.finish_reason, self.stop_reason = "stop", None
            return True
        return False

    def _add_text(self, piece: str) -> str:
        """Append decoded text; return what can be released now."""
        if not self._max_stop_len:
            return piece
        # A new match can only end inside the new piece, so only look back that far.
        pending = self.held_text + piece
        search_from = max(0, len(self.held_text) - self._max_stop_len + 1)
        hit = -1
        for stop in self.sampling.stop:
            i = pending.find(stop, search_from)
            if i != -1 and (hit == -1 or i < hit):
                hit, matched = i, stop
        if hit != -1:
            self.finish_reason, self.stop_reason = "stop", matched
            self.held_text = ""
            return pending[:hit]
        keep = _partial_stop_suffix(pending, self.sampling.stop)
        self.held_text = pending[len(pending) - keep :] if keep else ""
        return pending[: len(pending) - keep]

    def _output(self, token_ids: list[int], text: str, cached_tokens: int) -> RequestOutput:
        return RequestOutput(
            request_id=self.request_id,
            token_ids=token_ids,
            text=text,
            usage=Usage(self.num_prompt_tokens, self.num_tokens_seen, cached_tokens),
            finish_reason=self.finish_reason,
            stop_reason=self.stop_reason,
        )


def _partial_stop_suffix(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stop string."""
    best = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:n]):
                best = n
                break
    return best


