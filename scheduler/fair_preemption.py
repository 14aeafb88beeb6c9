"""Fairness preemption: take a sequence slot back from an over-served tenant.

The fair queue (fair_queue.py) only orders admissions. Once a flooder's requests hold every
slot (`max_num_seqs`) or the step budget, a light tenant's new request waits for one of them to
finish, however far apart the counters are. This policy lets the planner recompute-preempt a
running request so the queue's next pick gets its place now.

A running request `r` may give way to the waiting request `w` (the queue's next pick) when
- `r` has run at least `min_run_tokens` tokens since it was last (re)admitted (the run
  quantum: no request is preempted before its admission paid off, so a slot cannot ping-pong
  step after step), and
- `r` is in `w`'s class, of another tenant whose counter is at least `min_gap` above `w`'s
  tenant's (hysteresis: tenants within the dead band never preempt each other; the gap only
  grows past it while `w` waits and the other tenant keeps being served), or
- `r` is in a lower class that is not owed reserved share (a higher class goes first, but a
  lower class admitted on its reserved credit keeps its slot while it is owed).

Among those, the victim is the fair queue's own choice: lowest class, most-served tenant,
newest request. The planner preempts at most `max_per_step` requests per step this way.

Cheap by construction: the planner's recompute preemption drops the victim's block references
without uncaching them, so its full blocks stay in the prefix cache (salted like any other
prefix) and a resume recomputes only its last partial block, plus whatever was evicted
meanwhile. Plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.request import SchedRequest


@dataclass(frozen=True, slots=True)
class FairPreemptionConfig:
    """The bounds that keep fairness preemption from thrashing.

    `min_gap` is in counter units (weighted tokens of service: an output token costs the fair
    queue's `output_weight`, 2 by default). `min_run_tokens` counts tokens computed since the
    request's last admission (prefill, recompute and decode alike)."""

    min_gap: float = 32.0
    min_run_tokens: int = 16
    max_per_step: int = 1

    def __post_init__(self) -> None:
        if self.min_gap < 0 or self.min_run_tokens < 0 or self.max_per_step < 1:
            raise ValueError("min_gap and min_run_tokens must be >= 0, max_per_step >= 1")


class FairPreemption:
    """Picks the running request that gives its slot to an under-served waiting one."""

    def __init__(self, queue: FairQueue, config: FairPreemptionConfig | None = None) -> None:
        self.queue = queue
        self.config = config or FairPreemptionConfig()

    def choose(self, waiting: SchedRequest, running: list[SchedRequest]) -> SchedRequest | None:
        """The victim for `waiting` among `running`, or None when nobody may give way."""
        queue = self.queue
        candidates = [r for r in running if self._may_give_way(r, waiting)]
        if not candidates:
            return None
        return max(candidates, key=lambda r: (r.priority, queue.counter(r.tenant, r.priority), r.arrival_time))

    def _may_give_way(self, running: SchedRequest, waiting: SchedRequest) -> bool:
        if running.num_computed_tokens - running.computed_at_admission < self.config.min_run_tokens:
            return False
        if running.priority != waiting.priority:
            return running.priority > waiting.priority and not self.queue.is_owed(running.priority)
        if running.tenant == waiting.tenant:
            return False
        rank = waiting.priority
        gap = self.queue.counter(running.tenant, rank) - self.queue.counter(waiting.tenant, rank)
        return gap >= self.config.min_gap
