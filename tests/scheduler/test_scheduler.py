"""Scheduler: budgets, chunked prefill, decode-first order, admission, preemption, abort."""

from __future__ import annotations

from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.scheduler.plan import StepPlan
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import RequestStatus, SchedRequest
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig


class RecordingQueue(FCFSQueue):
    """FCFS that also records the service charged to it."""

    def __init__(self) -> None:
        super().__init__()
        self.charges: list[tuple[str, str, int]] = []

    def on_prefill(self, request: SchedRequest, num_tokens: int) -> None:
        self.charges.append(("prefill", request.request_id, num_tokens))

    def on_decode(self, request: SchedRequest, num_tokens: int) -> None:
        self.charges.append(("decode", request.request_id, num_tokens))


def make(num_blocks: int = 64, block_size: int = 4, queue: FCFSQueue | None = None, **cfg: int) -> Scheduler:
    return Scheduler(SchedulerConfig(**cfg), BlockManager(num_blocks, block_size), queue)


def req(rid: str, n: int, start: int = 0, arrival: float = 0.0, priority: int = 1) -> SchedRequest:
    return SchedRequest(rid, list(range(start, start + n)), 8, arrival_time=arrival, priority=priority, cache_salt="s")


def step(s: Scheduler, token: int = 7) -> StepPlan:
    plan = s.schedule()
    s.update_from_output(plan, {c.request_id: token for c in plan.chunks if c.sample})
    return plan


def shape(plan: StepPlan) -> list[tuple[str, int, bool]]:
    return [(c.request_id, c.num_tokens, c.sample) for c in plan.chunks]


def test_chunked_prefill_across_steps_within_the_budget() -> None:
    s = make(max_num_batched_tokens=8)
    a = req("a", 20)
    s.add_request(a)
    p1 = s.schedule()
    assert shape(p1) == [("a", 8, False)] and p1.chunks[0].block_table == [0, 1]
    assert p1.num_batched_tokens == 8 and p1.chunks[0].start_pos == 0
    s.update_from_output(p1, {})
    p2 = step(s)
    assert shape(p2) == [("a", 8, False)] and p2.chunks[0].block_table == [0, 1, 2, 3]
    p3 = s.schedule()
    assert shape(p3) == [("a", 4, True)] and p3.chunks[0].block_table == [0, 1, 2, 3, 4]
    s.update_from_output(p3, {"a": 99})
    assert a.num_computed_tokens == 20 and a.output_token_ids == [99]
    assert shape(step(s)) == [("a", 1, True)]  # decode the sampled token
    assert a.num_computed_tokens == 21 and a.output_token_ids == [99, 7]


def test_budget_is_shared_and_admission_stops_at_it() -> None:
    s = make(max_num_batched_tokens=10)
    for rid, n in (("a", 6), ("b", 6), ("c", 6)):
        s.add_request(req(rid, n, start=100 * len(s.requests)))
    plan = s.schedule()
    assert shape(plan) == [("a", 6, True), ("b", 4, False)]
    assert plan.num_batched_tokens == 10
    assert s.num_running == 2 and s.num_waiting == 1


def test_decodes_go_before_unfinished_prefills() -> None:
    s = make(max_num_batched_tokens=8, long_prefill_token_threshold=4)
    s.add_request(req("long", 30))
    s.add_request(req("short", 2, start=500))
    assert shape(step(s)) == [("long", 4, False), ("short", 2, True)]
    s.config.max_num_batched_tokens = 4  # tight budget: the decode still gets its token
    assert shape(step(s)) == [("short", 1, True), ("long", 3, False)]
    assert [r.request_id for r in s.running] == ["long", "short"]  # admission order kept


def test_decodes_rotate_when_they_outnumber_the_budget() -> None:
    s = make(max_num_batched_tokens=3)
    for i in range(3):
        s.add_request(req(f"r{i}", 1, start=10 * i))
    step(s)
    s.config.max_num_batched_tokens = 2
    assert [c.request_id for c in step(s).chunks] == ["r0", "r1"]
    assert [c.request_id for c in step(s).chunks] == ["r2", "r0"]
    assert [c.request_id for c in step(s).chunks] == ["r1", "r2"]


def test_a_sample_without_a_token_is_redone_next_step() -> None:
    s = make()
    a = req("a", 5)
    s.add_request(a)
    s.update_from_output(s.schedule(), {})  # the engine produced no token for a
    assert a.num_computed_tokens == 4 and a.output_token_ids == []
    plan = s.schedule()
    assert shape(plan) == [("a", 1, True)] and plan.chunks[0].start_pos == 4


def test_max_num_seqs_limits_running_requests() -> None:
    s = make(max_num_seqs=2)
    for i in range(3):
        s.add_request(req(f"r{i}", 3, start=10 * i))
    assert [c.request_id for c in step(s).chunks] == ["r0", "r1"]
    assert s.num_running == 2 and s.num_waiting == 1
    s.finish_request("r0")
    assert shape(step(s)) == [("r1", 1, True), ("r2", 3, True)]


def test_without_chunked_prefill_a_prompt_waits_for_a_whole_budget() -> None:
    s = make(max_num_batched_tokens=8, enable_chunked_prefill=False)
    s.add_request(req("a", 5))
    s.add_request(req("b", 5, start=50))
    assert shape(step(s)) == [("a", 5, True)]
    assert shape(step(s)) == [("a", 1, True), ("b", 5, True)]


def test_long_prefill_threshold_lets_prompts_share_a_step() -> None:
    s = make(max_num_batched_tokens=16, long_prefill_token_threshold=4)
    s.add_request(req("a", 10))
    s.add_request(req("b", 10, start=50))
    assert shape(step(s)) == [("a", 4, False), ("b", 4, False)]
    assert shape(step(s)) == [("a", 4, False), ("b", 4, False)]
    assert shape(step(s)) == [("a", 2, True), ("b", 2, True)]


def test_admission_watermark_keeps_blocks_for_running_decodes() -> None:
    s = make(num_blocks=5, block_size=2, admission_watermark_blocks=2)
    s.add_request(req("a", 3))
    s.add_request(req("b", 3, start=10))
    assert shape(step(s)) == [("a", 3, True)]  # b's 2 blocks would leave 1 < 2 free
    assert s.num_waiting == 1 and s.kv.num_free_blocks == 3
    s.config.admission_watermark_blocks = 1
    assert shape(step(s)) == [("a", 1, True), ("b", 3, True)]
    s = make(num_blocks=3, block_size=2, admission_watermark_blocks=2)
    s.add_request(req("c", 5))
    assert shape(step(s)) == [("c", 5, True)]  # alone: admitted even below the watermark


def test_cached_prefix_counts_as_computed_and_is_not_charged() -> None:
    q = RecordingQueue()
    s = make(queue=q, max_num_batched_tokens=64)
    s.add_request(req("a", 10))
    step(s)
    step(s)
    s.finish_request("a")
    b = req("b", 12)  # shares a's first 10 tokens: 2 full blocks
    s.add_request(b)
    plan = s.schedule()
    assert shape(plan) == [("b", 4, True)] and plan.chunks[0].start_pos == 8
    assert plan.chunks[0].block_table[:2] == [0, 1]
    assert b.num_cached_tokens == 8 and b.status is RequestStatus.RUNNING
    s.update_from_output(plan, {"b": 5})
    assert q.charges == [("prefill", "a", 10), ("decode", "a", 1), ("decode", "a", 1),
                         ("prefill", "b", 4), ("decode", "b", 1)]
    assert s.kv.prefix_cache_hits == 8


def test_every_prompt_token_is_charged_once_including_a_one_token_tail() -> None:
    q = RecordingQueue()
    s = make(queue=q, max_num_batched_tokens=8)
    s.add_request(req("a", 9))
    step(s)
    step(s)
    step(s)
    assert q.charges == [("prefill", "a", 8), ("prefill", "a", 1), ("decode", "a", 1),
                         ("decode", "a", 1)]


def test_preemption_by_recompute_and_resume_in_order() -> None:
    # 4 blocks of 2 tokens. a and b (4-token prompts) take 2 blocks each.
    s = make(num_blocks=4, block_size=2, max_num_batched_tokens=16)
    a, b = req("a", 4, arrival=1.0), req("b", 4, start=10, arrival=2.0)
    s.add_request(a)
    s.add_request(b)
    step(s, token=40)  # both prefilled, each sampled one token
    assert s.kv.num_free_blocks == 0
    plan = s.schedule()  # a's decode needs a 3rd block: b, the latest arrival, goes
    assert plan.preempted == ["b"] and shape(plan) == [("a", 1, True)]
    assert b.status is RequestStatus.PREEMPTED and b.num_computed_tokens == 0
    assert b.output_token_ids == [40] and b.num_preemptions == 1 and s.num_preemptions == 1
    assert s.queue.peek() is b and s.num_running == 1
    assert plan.chunks[0].block_table == [0, 1, 3]  # b's tail block was evicted first
    s.update_from_output(plan, {"a": 41})
    s.finish_request("a")
    plan = s.schedule()  # b re-prefills prompt + its output; its first block is still cached
    assert shape(plan) == [("b", 3, True)] and plan.chunks[0].start_pos == 2
    assert plan.chunks[0].block_table[0] == 2
    assert b.num_cached_tokens == 0  # counted only at first admission
    s.update_from_output(plan, {"b": 42})
    assert b.output_token_ids == [40, 42] and b.num_computed_tokens == 5
    assert b.status is RequestStatus.RUNNING


def test_a_request_that_is_its_own_victim_stops_the_step() -> None:
    s = make(num_blocks=3, block_size=2, max_num_batched_tokens=16)
    a, b = req("a", 3, arrival=1.0), req("b", 2, start=10, arrival=2.0)
    s.add_request(a)
    s.add_request(b)
    step(s)  # a: 4 tokens in 2 blocks, b: 3 tokens, 1 block so far
    plan = s.schedule()  # a fits; b's decode needs a block and b is the latest arrival
    assert plan.preempted == ["b"] and shape(plan) == [("a", 1, True)]
    assert s.queue.peek() is b and s.kv.block_table("b") == []


def test_victim_already_scheduled_this_step_gives_its_budget_back() -> None:
    class OldestFirst(FCFSQueue):
        def choose_victim(self, running: list[SchedRequest]) -> SchedRequest:
            return min(running, key=lambda r: r.arrival_time)

    s = make(num_blocks=4, block_size=2, queue=OldestFirst(), max_num_batched_tokens=16)
    a, b = req("a", 3, arrival=1.0), req("b", 4, start=10, arrival=2.0)
    s.add_request(a)
    s.add_request(b)
    step(s)
    plan = s.schedule()  # a decodes in its blocks, b needs one: a (already scheduled) goes
    assert plan.preempted == ["a"] and shape(plan) == [("b", 1, True)]
    assert plan.num_batched_tokens == 1 and plan.chunks[0].block_table == [2, 3, 1]


def test_abort_frees_blocks_at_once_waiting_or_running() -> None:
    s = make(num_blocks=8, block_size=4, max_num_seqs=1)
    s.add_request(req("a", 10))
    s.add_request(req("b", 10, start=50))
    plan = s.schedule()
    assert s.kv.num_free_blocks == 5
    assert s.abort_request("b") is not None and s.num_waiting == 0
    aborted = s.abort_request("a")
    assert aborted is not None and aborted.status is RequestStatus.FINISHED
    assert s.kv.num_free_blocks == 8 and s.kv.check_pool_whole()
    assert s.abort_request("a") is None
    s.update_from_output(plan, {"a": 1})  # the step finished after the abort: ignored
    assert aborted.output_token_ids == [] and not s.has_unfinished_requests()


def test_engine_loop_leaves_the_pool_whole() -> None:
    s = make(num_blocks=10, block_size=4, max_num_batched_tokens=12, max_num_seqs=3)
    for i in range(6):
        s.add_request(req(f"r{i}", 5 + i, start=100 * i, arrival=float(i)))
    for _ in range(200):
        if not s.has_unfinished_requests():
            break
        plan = step(s)
        for c in plan.chunks:
            if len(s.requests[c.request_id].output_token_ids) >= 6:
                s.finish_request(c.request_id)
    assert not s.has_unfinished_requests()
    assert s.kv.check_pool_whole() and s.kv.num_tracked_requests == 0


def test_duplicate_ids_and_bad_limits_are_refused() -> None:
    import pytest

    s = make()
    s.add_request(req("a", 3))
    with pytest.raises(ValueError):
        s.add_request(req("a", 3))
    with pytest.raises(ValueError):
        SchedulerConfig(max_num_batched_tokens=0)


def test_planner_and_block_manager_import_without_heavy_dependencies() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, scheduler.scheduler, scheduler.kv, backends.local.kv_cache.block_manager; "
        "heavy = {'torch', 'starlette', 'sqlalchemy', 'httpx', 'redis'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
