"""Fairness preemption: an under-served tenant takes a slot back, within bounds, at little cost."""

from __future__ import annotations

from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.scheduler.fair_preemption import FairPreemption, FairPreemptionConfig
from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.fairness import FairnessConfig
from fairgate.scheduler.plan import StepPlan
from fairgate.scheduler.queue import FCFSQueue, WaitQueue
from fairgate.scheduler.request import RequestStatus, SchedRequest
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig

BLOCK = 4


LEVEL = FairnessConfig(active_lead=0.0)  # the VTC paper's lift: a returning tenant starts level

class ChargeBook(FairQueue):
    """The fair queue, also recording the prompt tokens charged to each request."""

    def __init__(self) -> None:
        super().__init__()
        self.prompt_charged: dict[str, int] = {}

    def on_prefill(self, request: SchedRequest, num_tokens: int) -> None:
        self.prompt_charged[request.request_id] = self.prompt_charged.get(request.request_id, 0) + num_tokens
        super().on_prefill(request, num_tokens)


class RecordingPreemption(FairPreemption):
    """The policy, also recording (victim, tokens run since admission, counter gap) per pick."""

    def __init__(self, queue: FairQueue, config: FairPreemptionConfig) -> None:
        super().__init__(queue, config)
        self.picks: list[tuple[str, int, float]] = []

    def choose(self, waiting: SchedRequest, running: list[SchedRequest]) -> SchedRequest | None:
        victim = super().choose(waiting, running)
        if victim is not None:
            rank = waiting.priority
            gap = self.queue.counter(victim.tenant, rank) - self.queue.counter(waiting.tenant, rank)
            self.picks.append((victim.request_id, victim.num_computed_tokens - victim.computed_at_admission, gap))
        return victim


def make(
    preempt: bool = True, queue: WaitQueue | None = None, gap: float = 8.0, quantum: int = 4,
    slot_share: bool = False, **cfg: int
) -> Scheduler:
    """The counter-gap rule alone unless `slot_share` (the slot-share rule's own tests ask); a
    returning tenant lifted level (no active lead), so the steps the gap takes to grow count."""
    queue = queue if queue is not None else FairQueue(LEVEL)
    policy = None
    if preempt and isinstance(queue, FairQueue):
        config = FairPreemptionConfig(min_gap=gap, min_run_tokens=quantum, slot_share=slot_share)
        policy = RecordingPreemption(queue, config)
    limits = {"max_num_seqs": 2, "max_num_batched_tokens": 64, **cfg}
    return Scheduler(SchedulerConfig(**limits), BlockManager(256, BLOCK), queue, policy)


def req(rid: str, tenant: str, n: int = 8, max_tokens: int = 50, arrival: float = 0.0) -> SchedRequest:
    start = int.from_bytes(rid.encode(), "big") << 6  # disjoint prompts: no prefix sharing (n <= 64)
    return SchedRequest(rid, list(range(start, start + n)), max_tokens, tenant=tenant, arrival_time=arrival)


def step(s: Scheduler) -> StepPlan:
    plan = s.schedule()
    s.update_from_output(plan, {c.request_id: 7 for c in plan.chunks if c.sample})
    for r in list(s.running):
        if len(r.output_token_ids) >= r.max_tokens:
            s.finish_request(r.request_id)
    return plan


def steps_until_scheduled(s: Scheduler, rid: str, limit: int = 200) -> tuple[int, list[StepPlan]]:
    plans = []
    for i in range(limit):
        plans.append(step(s))
        if any(c.request_id == rid for c in plans[-1].chunks):  # first admission or resume
            return i, plans
    raise AssertionError(f"{rid} not admitted in {limit} steps")


def flood_then_light(s: Scheduler, warmup: int = 3) -> SchedRequest:
    """Flood f1..f3 on 2 slots (f1, f2 run), `warmup` steps, then light l1 arrives."""
    for i in (1, 2, 3):
        s.add_request(req(f"f{i}", "flood", arrival=float(i)))
    for _ in range(warmup):
        step(s)
    light = req("l1", "light", max_tokens=4, arrival=10.0)
    s.add_request(light)
    return light


def test_a_light_request_takes_a_flood_slot_within_bounded_steps() -> None:
    s = make()
    queue = s.queue
    assert isinstance(queue, FairQueue)
    flood_then_light(s)
    # lifted level with the backlogged flooder: no gap yet, so no preemption yet
    assert queue.counter("light") == queue.counter("flood") == 2 * 8 + 3 * 2 * 2
    waited, plans = steps_until_scheduled(s, "l1")
    # the gap grows by 2 slots x 2 (output weight) per step: min_gap 8 after two steps
    assert waited == 2 and [p.preempted for p in plans] == [[], [], ["f2"]]
    f2 = s.requests["f2"]
    assert f2.status is RequestStatus.PREEMPTED and f2.preempt_cause == "fairness"
    assert (s.num_preemptions, s.num_fairness_preemptions) == (1, 1)
    assert f2.computed_at_preemption == 12 and f2.computed_at_admission == 0
    # its full blocks (3 x 4 tokens) stayed cached: the resume finds them all
    assert s.kv.get_computed_tokens(f2) == 12
    # f2 waits at its tenant's head, ahead of f3
    assert queue.peek() is f2 and s.kv.block_table("f2") == []


def test_without_fairness_preemption_the_light_request_waits_for_a_flood_request() -> None:
    s = make(preempt=False)
    flood_then_light(s)
    waited, plans = steps_until_scheduled(s, "l1")
    # f1 samples its 50th token in overall step 49; l1 gets its slot in step 50
    assert waited == 50 - 3 and not any(p.preempted for p in plans)


def test_fcfs_queue_never_preempts_for_fairness() -> None:
    s = make(queue=FCFSQueue())
    assert s.fair_preemption is None
    flood_then_light(s)
    waited, _ = steps_until_scheduled(s, "l1")
    assert waited > 40 and s.num_preemptions == 0


def test_a_resume_recomputes_only_the_last_partial_block() -> None:
    s = make()
    flood_then_light(s, warmup=4)  # one step later: f2 is preempted mid-block
    steps_until_scheduled(s, "l1")
    f2 = s.requests["f2"]
    assert f2.computed_at_preemption == 13 and s.num_recomputed_tokens == 0
    waited, _ = steps_until_scheduled(s, "f2")  # back when l1 (4 tokens) finishes
    # resumed at 8 prompt + 6 sampled tokens: 3 full blocks found cached, the 13th token is
    # redone (and the 14th computed for the first time; that step samples the 15th)
    assert waited == 3 and f2.num_tokens == 15 and f2.computed_at_admission == 12
    assert s.num_fairness_recomputed_tokens == s.num_recomputed_tokens == 1
    while s.has_unfinished_requests():
        step(s)
    assert s.kv.check_pool_whole() and s.num_fairness_preemptions == 1


def test_bounds_hold_under_a_long_flood_and_nothing_leaks() -> None:
    queue = ChargeBook()
    s = make(queue=queue, max_num_seqs=3, max_num_batched_tokens=24, long_prefill_token_threshold=4)
    policy = s.fair_preemption
    assert isinstance(policy, RecordingPreemption)
    prompts: dict[str, int] = {}
    for t in range(300):
        if t < 200:  # the flooder: a request every step; light: one every 12 steps
            r = req(f"f{t}", "flood", n=16, max_tokens=12, arrival=float(t))
            s.add_request(r)
            prompts[r.request_id] = 16
            if t % 12 == 0:
                r = req(f"l{t}", "light", n=8, max_tokens=6, arrival=t + 0.5)
                s.add_request(r)
                prompts[r.request_id] = 8
        plan = step(s)
        assert len(plan.preempted) <= 1  # at most one fairness preemption a step (no KV pressure here)
    while s.has_unfinished_requests():
        step(s)
    picks = policy.picks
    assert picks and len(picks) == s.num_fairness_preemptions == s.num_preemptions
    num_light = sum(1 for rid in prompts if rid.startswith("l"))
    assert len(picks) <= num_light  # each light admission takes at most one slot back
    for victim, ran, gap in picks:
        assert victim.startswith("f") and ran >= 4 and gap >= 8.0
    # a prompt cut off mid-prefill is charged once, in full, across its admissions
    assert queue.prompt_charged == prompts
    assert s.kv.check_pool_whole() and s.kv.num_tracked_requests == 0


def test_abort_of_a_preempted_request_and_of_its_taker_leaks_nothing() -> None:
    s = make()
    flood_then_light(s)
    steps_until_scheduled(s, "l1")
    assert s.abort_request("f2") is not None  # waiting, preempted
    assert s.abort_request("l1") is not None  # running, took f2's slot
    while s.has_unfinished_requests():
        step(s)
    assert s.kv.check_pool_whole() and s.kv.num_tracked_requests == 0


def test_a_lower_class_gives_way_unless_it_is_owed_reserved_share() -> None:
    s = make(gap=1000.0)  # same-class preemption effectively off: only class order acts
    queue = s.queue
    assert isinstance(queue, FairQueue)
    for i in (1, 2):
        s.add_request(SchedRequest(f"b{i}", list(range(10 * i, 10 * i + 8)), 50, tenant="batch", priority=2,
                                    arrival_time=float(i)))
    for _ in range(2):
        step(s)
    s.add_request(SchedRequest("i1", list(range(500, 508)), 4, tenant="inter", priority=0, arrival_time=5.0))
    plan = step(s)
    assert plan.preempted == ["b2"] and [n.request_id for n in plan.new_requests] == ["i1"]
    assert not queue.is_owed(2)


def test_prefill_chunks_of_the_least_served_tenant_get_the_budget_first() -> None:
    def second_step(queue: WaitQueue) -> list[tuple[str, int]]:
        queue.set_weights({"b": 2.0})
        s = make(preempt=False, queue=queue, max_num_batched_tokens=6, long_prefill_token_threshold=4)
        s.add_request(req("a", "a", n=12))
        s.add_request(req("b", "b", n=12, arrival=1.0))
        first = step(s)
        assert [(c.request_id, c.num_tokens) for c in first.chunks] == [("a", 4), ("b", 2)]
        return [(c.request_id, c.num_tokens) for c in step(s).chunks]

    # a was charged 4, b 2 / weight 2 = 1: b is less served and goes first
    assert second_step(FairQueue(LEVEL)) == [("b", 4), ("a", 2)]
    assert second_step(FCFSQueue()) == [("a", 4), ("b", 2)]  # no counters: admission order


# ---- the slot-share rule: a tenant holding no slot against another holding all of them ----


def flood_backlog_then_light(s: Scheduler) -> None:
    """f1, f2 run on the 2 slots for 3 steps with f3, f4 waiting; then light's l1 arrives (the
    shorter line, so the queue's next pick on a tie)."""
    for i in (1, 2, 3, 4):
        s.add_request(req(f"f{i}", "flood", arrival=float(i)))
    for _ in range(3):
        step(s)
    s.add_request(req("l1", "light", max_tokens=4, arrival=10.0))


def test_slot_share_lets_a_lifted_light_request_in_at_once() -> None:
    s = make(slot_share=True)
    queue = s.queue
    assert isinstance(queue, FairQueue)
    flood_backlog_then_light(s)
    assert queue.counter("light") == queue.counter("flood")  # level: the gap rule cannot act
    waited, plans = steps_until_scheduled(s, "l1")
    assert waited == 0 and plans[0].preempted == ["f2"]
    policy = s.fair_preemption
    assert isinstance(policy, RecordingPreemption) and policy.picks == [("f2", 10, 0.0)]
    # without the rule, the same arrivals wait for the gap to pass the dead band
    s = make()
    flood_backlog_then_light(s)
    assert steps_until_scheduled(s, "l1")[0] == 2


def test_slot_share_waits_for_the_run_quantum() -> None:
    s = make(slot_share=True, quantum=11)
    flood_backlog_then_light(s)  # f1 and f2 have run 10 tokens since admission: one step short
    waited, plans = steps_until_scheduled(s, "l1")
    assert waited == 1 and plans[0].preempted == [] and plans[1].preempted == ["f2"]


def test_slot_share_does_not_act_for_a_tenant_ahead_on_its_counter() -> None:
    s = make(slot_share=True)
    queue = s.queue
    assert isinstance(queue, FairQueue)
    for i in (1, 2):
        s.add_request(req(f"f{i}", "flood", arrival=float(i)))
    step(s)
    s.add_request(req("f3", "flood", arrival=3.0))
    queue._counters[(1, "light")] = queue.counter("flood") + 100.0  # light was served far more
    s.add_request(req("l1", "light", max_tokens=4, arrival=10.0))
    for _ in range(3):
        assert step(s).preempted == []


def test_slot_share_follows_the_weights_and_never_swings_back() -> None:
    queue = FairQueue(LEVEL)
    queue.set_weights({"light": 3.0})
    s = make(slot_share=True, queue=queue, gap=1e9, max_num_seqs=4)  # the gap rule never acts
    policy = s.fair_preemption
    assert isinstance(policy, RecordingPreemption)
    for i in range(40):
        s.add_request(req(f"f{i}", "flood", max_tokens=30, arrival=float(i)))
    for _ in range(6):
        step(s)
    for i in range(6):
        s.add_request(req(f"l{i}", "light", max_tokens=30, arrival=100.0 + i))
    held: list[int] = []
    for _ in range(40):
        step(s)
        held.append(sum(1 for r in s.running if r.tenant == "light"))
    # light's share of 4 slots at weights 3:1 is 3: it takes three, one a step, and no more;
    # the flood never takes one back while light holds no more than its share
    assert held[:4] == [1, 2, 3, 3] and max(held) == 3
    # each light admission takes at most one slot, always from the flood, never the reverse
    assert 3 <= len(policy.picks) <= 6 and all(victim.startswith("f") for victim, _, _ in policy.picks)
    while s.has_unfinished_requests():
        step(s)
    assert s.kv.check_pool_whole() and s.kv.num_tracked_requests == 0


def test_active_lead_lets_a_light_burst_past_its_slot_share_at_once() -> None:
    """A light tenant holding fewer slots than the flood falls behind it on service while its
    requests run; with the active lead it keeps that deficit (bounded) when its next request
    arrives, so a burst past its slot share takes a flood slot by the gap rule at once, where a
    level lift throws the deficit away and leaves the burst waiting at its share."""
    def third_light_waits(queue: FairQueue) -> int:
        s = make(slot_share=True, queue=queue, quantum=1, max_num_seqs=4)
        for i in range(1, 4):
            s.add_request(req(f"f{i}", "flood", arrival=float(i)))
        s.add_request(req("l1", "light", arrival=4.0))
        for i in range(4, 9):
            s.add_request(req(f"f{i}", "flood", arrival=float(i)))
        for _ in range(10):  # light holds 1 slot of 4, the flood 3: light falls behind
            step(s)
        s.add_request(req("l2", "light", arrival=20.0))
        assert steps_until_scheduled(s, "l2")[0] == 0  # within its slot share (2 of 4)
        step(s)
        s.add_request(req("l3", "light", max_tokens=4, arrival=21.0))  # past its share
        return steps_until_scheduled(s, "l3")[0]

    assert third_light_waits(FairQueue()) == 0  # the default lead: in at once
    assert third_light_waits(FairQueue(LEVEL)) >= 2  # level: the deficit is gone, it waits
