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
- `r` is in `w`'s class, of another tenant whose counter is not below `w`'s tenant's, and the
  class's slots are held out of proportion to the weights (`slot_share`): `w`'s tenant holds so
  few that one more keeps it within its weighted share of the slots in use, and `r`'s tenant
  holds so many that one fewer keeps it at or above its own. The shares count every tenant
  running or waiting in the class. This is what lets a light tenant's request in at once:
  arriving after a pause it is lifted level with the flooder (gap 0, inside the dead band),
  yet it holds no slot against the flooder's every slot. Neither side can cross its share, so
  the slot cannot swing back; or
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
    slot_share: bool = True

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
        slots = self._slot_imbalance(waiting, running) if self.config.slot_share else None
        candidates = [r for r in running if self._may_give_way(r, waiting, slots)]
        if not candidates:
            return None
        return max(candidates, key=lambda r: (r.priority, queue.counter(r.tenant, r.priority), r.arrival_time))

    def _may_give_way(self, running: SchedRequest, waiting: SchedRequest, over_share: frozenset[str] | None) -> bool:
        if running.num_computed_tokens - running.computed_at_admission < self.config.min_run_tokens:
            return False
        if running.priority != waiting.priority:
            return running.priority > waiting.priority and not self.queue.is_owed(running.priority)
        if running.tenant == waiting.tenant:
            return False
        rank = waiting.priority
        gap = self.queue.counter(running.tenant, rank) - self.queue.counter(waiting.tenant, rank)
        if gap >= self.config.min_gap:
            return True
        return over_share is not None and gap >= 0 and running.tenant in over_share

    def _slot_imbalance(self, waiting: SchedRequest, running: list[SchedRequest]) -> frozenset[str] | None:
        """The tenants that may give `waiting` a slot by the slot-share rule (holding at least
        one more than their weighted share of the class's slots in use), or None when
        `waiting`'s tenant, given one more slot, would exceed its own share."""
        rank, queue = waiting.priority, self.queue
        held: dict[str, int] = {}
        for r in running:
            if r.priority == rank:
                held[r.tenant] = held.get(r.tenant, 0) + 1
        tenants = set(held).union(queue.backlogged(rank), (waiting.tenant,))
        slots = sum(held.values())
        total = sum(queue.weight_of(t) for t in tenants)
        if held.get(waiting.tenant, 0) + 1 > slots * queue.weight_of(waiting.tenant) / total:
            return None
        return frozenset(t for t, n in held.items() if n - 1 >= slots * queue.weight_of(t) / total)
