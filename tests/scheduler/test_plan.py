"""StepPlan: plain values only; its repr names ids and counts, never tokens."""

from __future__ import annotations

from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.scheduler.plan import NewRequest, ScheduledChunk, StepPlan
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig


def test_a_plan_holds_ids_positions_counts_and_block_ids() -> None:
    s = Scheduler(SchedulerConfig(max_num_batched_tokens=4), BlockManager(8, 2), FCFSQueue())
    s.add_request(SchedRequest("a", [901, 902, 903, 904, 905], 3, tenant="acme", priority=0, arrival_time=2.5))
    plan = s.schedule()
    assert plan.chunks == [ScheduledChunk("a", 0, 4, [0, 1], False)]
    assert plan.new_requests == [NewRequest("a", "acme", 0, 2.5)]
    assert plan.preempted == [] and plan.num_batched_tokens == 4
    s.update_from_output(plan, {})
    plan = s.schedule()  # the plan of the last prompt token; the first one is unchanged
    assert plan.chunks == [ScheduledChunk("a", 4, 1, [0, 1, 2], True)] and plan.new_requests == []


def test_the_repr_never_prints_tokens() -> None:
    plan = StepPlan([ScheduledChunk("r1", 16, 1, [3, 4], True)], ["r2"], [], 1)
    assert repr(plan) == "StepPlan([r1@16+1], tokens=1, preempted=['r2'])"
