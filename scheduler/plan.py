"""What one engine step runs: plain values the model runner turns into tensors."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.request import SchedRequest


@dataclass(slots=True)
class ScheduledChunk:
    """Compute KV for `num_tokens` tokens of `request`, from `request.num_computed_tokens` on.

    `block_table` (a copy) covers every position up to `num_computed_tokens + num_tokens - 1`.
    `sample` is True when the chunk reaches the request's last known token, so the runner
    samples one new token from the logits at its last position.
    """

    request: SchedRequest
    num_tokens: int
    block_table: list[int]
    sample: bool

    @property
    def start_pos(self) -> int:
        return self.request.num_computed_tokens


@dataclass(slots=True)
class StepPlan:
    """All work of one step. `preempted` requests lost their KV and went back to the queue."""

    chunks: list[ScheduledChunk] = field(default_factory=list)
    preempted: list[SchedRequest] = field(default_factory=list)
    num_batched_tokens: int = 0

    @property
    def is_empty(self) -> bool:
        return not self.chunks
