"""What one engine step runs: plain values (ids, positions, counts, block ids), no live objects.

Like vLLM v1's `SchedulerOutput`: the planner keeps its own request objects; a plan only says
what to compute, so it can be logged, compared in tests or sent to another process as is. It
never holds prompts or generated text (its repr is safe to log).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ScheduledChunk:
    """Compute KV for positions `start_pos .. start_pos + num_tokens - 1` of one request."""

    request_id: str  # the request this chunk advances
    start_pos: int  # tokens before it already have KV in the cache (the request's computed count)
    num_tokens: int  # 1 for a decode; up to the token budget for a prefill chunk
    block_table: list[int]  # a copy of its block ids, covering every position the chunk reaches
    sample: bool  # the chunk reaches the request's last known token: sample one from its logits
    # Its last `num_spec_tokens` positions are draft tokens to verify (speculative decoding):
    # the runner returns the accepted drafts plus one token; rejected positions stay uncomputed.
    num_spec_tokens: int = 0


@dataclass(slots=True)
class NewRequest:
    """A request scheduled for the first time: its queue time ends in this step (metrics)."""

    request_id: str  # the request admitted
    tenant: str  # whose request it is
    priority: int  # its priority rank (0 = highest class)
    arrival_time: float  # `time.monotonic()` when the engine accepted it


@dataclass(slots=True)
class StepPlan:
    """All work of one step; the runner turns `chunks` into tensors."""

    chunks: list[ScheduledChunk] = field(default_factory=list)  # decodes, prefills, admissions
    preempted: list[str] = field(default_factory=list)  # ids that lost their KV and went back to the queue
    new_requests: list[NewRequest] = field(default_factory=list)  # admitted for the first time
    num_batched_tokens: int = 0  # sum of the chunks' num_tokens (under the step's token budget)

    @property
    def is_empty(self) -> bool:
        return not self.chunks

    def __repr__(self) -> str:
        chunks = ", ".join(
            f"{c.request_id}@{c.start_pos}+{c.num_tokens}" + (f"(spec {c.num_spec_tokens})" if c.num_spec_tokens else "")
            for c in self.chunks
        )
        return f"StepPlan([{chunks}], tokens={self.num_batched_tokens}, preempted={self.preempted})"
