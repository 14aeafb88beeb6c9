"""Scheduler with speculative drafts: one ragged chunk per verify, budgets, rollback, caching, VTC."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.scheduler.request import SchedRequest
from tests.scheduler.test_scheduler import RecordingQueue, make, req, shape
from tests.scheduler.test_scheduler_properties import HASHES, QUEUES, Harness, op


def decode_ready(s, *prompts: tuple[str, int]) -> list[SchedRequest]:
    """Admit requests with n-token prompts and run one step (their prefills): they decode next."""
    reqs = [req(rid, n, start=100 * i) for i, (rid, n) in enumerate(prompts)]  # no shared prefix
    for r in reqs:
        s.add_request(r)
    plan = s.schedule()
    s.update_from_output(plan, {c.request_id: 7 for c in plan.chunks if c.sample})
    assert all(r.num_computed_tokens == r.num_tokens - 1 for r in reqs)
    return reqs


def test_a_request_with_drafts_is_one_chunk_of_one_plus_k_next_to_plain_decodes() -> None:
    s = make(block_size=4, max_num_batched_tokens=64)
    a, b = decode_ready(s, ("a", 5), ("b", 6))
    a.spec_token_ids = [10, 11, 12]
    plan = s.schedule()
    assert shape(plan) == [("a", 4, True), ("b", 1, True)]
    assert [c.num_spec_tokens for c in plan.chunks] == [3, 0] and plan.num_batched_tokens == 5
    assert plan.chunks[0].start_pos == 5 and len(plan.chunks[0].block_table) == 3  # positions 5..8
    # two drafts accepted, then a correction token: 3 kept, the rejected position is uncomputed
    s.update_from_output(plan, {"a": [10, 11, 99], "b": 8})
    assert a.output_token_ids == [7, 10, 11, 99] and a.num_computed_tokens == 5 + 1 + 2
    assert a.num_tokens - a.num_computed_tokens == 1 and a.spec_token_ids == []
    assert b.output_token_ids == [7, 8] and b.num_computed_tokens == 7


def test_drafts_are_trimmed_to_the_budget_the_max_tokens_and_the_context() -> None:
    s = make(block_size=4, max_num_batched_tokens=64)
    (a,) = decode_ready(s, ("a", 5))  # max_tokens 8, one generated
    a.spec_token_ids = list(range(20, 30))
    plan = s.schedule()
    # a verify yields up to k + 1 tokens: 8 - 1 generated leaves room for 6 drafts + 1
    assert plan.chunks[0].num_spec_tokens == 6 and a.spec_token_ids == list(range(20, 26))
    s2 = make(block_size=4, max_num_batched_tokens=3)
    (b,) = decode_ready(s2, ("b", 2))
    b.spec_token_ids = [1, 2, 3, 4]
    plan = s2.schedule()
    assert shape(plan) == [("b", 3, True)] and plan.chunks[0].num_spec_tokens == 2


def test_drafts_never_preempt_anyone() -> None:
    # 3 blocks of 4: a holds 2 (5 prompt + 1), b holds 1; a's 4 drafts need a third block of a's
    s = make(num_blocks=3, block_size=4, max_num_batched_tokens=64)
    a, _ = decode_ready(s, ("a", 5), ("b", 3))
    a.spec_token_ids = [1, 2, 3]  # positions 5..8 need block 3: none free
    plan = s.schedule()
    assert plan.preempted == [] and shape(plan) == [("a", 1, True), ("b", 1, True)]
    assert plan.chunks[0].num_spec_tokens == 0 and a.spec_token_ids == []


def test_rejected_drafts_are_never_hashed_into_the_prefix_cache() -> None:
    s = make(block_size=4, max_num_batched_tokens=64)
    (a,) = decode_ready(s, ("a", 3))  # 3 prompt + 1 output: block 0 full, computed 3
    a.spec_token_ids = [50, 51, 52, 53]  # positions 4..7 fill block 1 with drafts
    plan = s.schedule()
    s.update_from_output(plan, {"a": [60]})  # the first draft is rejected
    table = s.kv.block_table("a")
    assert a.num_computed_tokens == 4 and s.kv.cached_tokens_of(table[0]) == (0, 1, 2, 7)
    assert s.kv.cached_tokens_of(table[1]) is None  # held unverified drafts: not cached


def test_the_fair_queue_is_charged_for_the_tokens_kept() -> None:
    queue = RecordingQueue()
    s = make(block_size=4, max_num_batched_tokens=64, queue=queue)
    (a,) = decode_ready(s, ("a", 5))
    a.spec_token_ids = [1, 2, 3, 4]
    s.update_from_output(s.schedule(), {"a": [1, 9]})  # one accepted + one sampled
    assert queue.charges == [("prefill", "a", 5), ("decode", "a", 1), ("decode", "a", 2)]


def test_preemption_clears_the_drafts() -> None:
    s = make(num_blocks=3, block_size=4, max_num_batched_tokens=64)
    a, b = decode_ready(s, ("a", 4), ("b", 7))  # a: 1 block, its decode needs a 2nd; b: 2 blocks
    b.spec_token_ids = [1]
    a.spec_token_ids = [2]
    plan = s.schedule()
    # a's draft is dropped first (no block for it); a still needs one for its plain decode, and
    # the queue's victim (equal arrival times: a itself) is preempted, which ends the step;
    # b keeps its draft for the next one
    assert plan.preempted == ["a"] and a.spec_token_ids == [] and a.num_computed_tokens == 0
    assert shape(plan) == [] and b.spec_token_ids == [1]
    plan = s.schedule()
    assert shape(plan) == [("b", 2, True)] and plan.chunks[0].num_spec_tokens == 1


class SpecHarness(Harness):
    """The property harness with drafts: every decode guesses `k` tokens, `accept` survive."""

    def __init__(self, hash_fn, queue, k: int, accept: int) -> None:
        super().__init__(hash_fn, queue)
        self.k, self.accept = k, accept

    def step(self, token: int) -> None:
        for r in self.s.running:
            if r.num_computed_tokens == r.num_tokens - 1:
                r.spec_token_ids = [token + 10 + j for j in range(self.k)]
        plan = self.s.schedule()
        assert plan.num_batched_tokens == sum(c.num_tokens for c in plan.chunks) <= 5
        kept: dict[str, int | list[int]] = {}
        for chunk in plan.chunks:
            r = self.s.requests[chunk.request_id]
            k = chunk.num_spec_tokens
            drafts = r.spec_token_ids[:k]
            self.run_chunk(r, chunk.num_tokens, chunk.block_table, drafts)
            if chunk.sample:
                a = min(self.accept, k)
                kept[chunk.request_id] = drafts[:a] + [token] if k else token
        self.s.update_from_output(plan, kept)
        for r in list(self.s.running):
            if r.num_tokens >= 12 or len(r.output_token_ids) >= r.max_tokens:
                self.s.finish_request(r.request_id)

    def run_chunk(self, r: SchedRequest, num: int, table: list[int], drafts: list[int] | None = None) -> None:
        # The simulated KV of draft positions is computed from the drafts, like the real one.
        saved = r.output_token_ids
        r.output_token_ids = saved + (drafts or [])
        try:
            super().run_chunk(r, num, table)
        finally:
            r.output_token_ids = saved


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(op, max_size=40), k=st.integers(1, 4), accept=st.integers(0, 4))
def test_random_mixes_with_drafts_keep_the_pool_consistent_and_leak_nothing(ops, k: int, accept: int) -> None:
    for hash_name, queue_name in (("sha256", "fcfs"), ("constant", "fair")):
        SpecHarness(HASHES[hash_name], QUEUES[queue_name](), k, accept).run(ops)
