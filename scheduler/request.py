"""The scheduler's view of one request: token counts and bookkeeping, no tensors."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# Priority classes, highest first. A request's `priority` is the rank (0 = highest).
PRIORITY_CLASSES: tuple[str, ...] = ("interactive", "standard", "batch")
PRIORITY_RANKS: dict[str, int] = {name: rank for rank, name in enumerate(PRIORITY_CLASSES)}


def priority_rank(priority: str | int) -> int:
    """Map a class name or rank to a rank; unknown names raise ValueError."""
    if isinstance(priority, int):
        if not 0 <= priority < len(PRIORITY_CLASSES):
            raise ValueError(f"priority rank out of range: {priority}")
        return priority
    try:
        return PRIORITY_RANKS[priority]
    except KeyError:
        raise ValueError(f"unknown priority class: {priority!r}") from None


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(slots=True, eq=False)
class SchedRequest:
    """A request as the planner sees it.

    Every request tracks how many of its tokens already have KV in the cache
    (`num_computed_tokens`); that one counter covers chunked prefill, prefix-cache
    hits and recompute after preemption.
    """

    request_id: str
    prompt_token_ids: list[int]
    max_tokens: int
    tenant: str = "default"
    priority: int = 1
    arrival_time: float = 0.0
    cache_salt: str | None = None
    output_token_ids: list[int] = field(default_factory=list)
    num_computed_tokens: int = 0
    num_cached_tokens: int = 0  # prompt tokens served from the prefix cache at admission
    status: RequestStatus = RequestStatus.WAITING
    num_preemptions: int = 0
    # Prompt tokens already charged to the tenant's fair-share counter: a high-water mark, so
    # recompute after a preemption is free but the rest of a prompt cut off mid-prefill is not.
    num_prompt_charged: int = 0
    # `num_computed_tokens` when last (re)admitted: what it has run since is its run quantum.
    computed_at_admission: int = 0
    # `num_computed_tokens` when last preempted (what a resume recomputes, less cache hits)
    # and why: "kv" (blocks ran out) or "fairness" (a slot went to an under-served tenant).
    computed_at_preemption: int = 0
    preempt_cause: str = ""
    # Draft tokens a proposer guessed to follow the last token; the next step verifies them
    # (up to what its budget allows) and clears the list. Empty: a plain one-token decode.
    spec_token_ids: list[int] = field(default_factory=list)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: the length the KV cache must cover."""
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids
