"""Property tests: random add / step / finish / abort mixes on a tiny pool.

A simulated runner writes, for every computed position, which (salt, token prefix) the KV in
that slot was computed from, and before each chunk checks every position the chunk attends to.
So a prefix-cache hit on a wrong block (other tokens, other context, other tenant) fails here,
whatever hash function is used, including ones that collide on purpose.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairgate.backends.local.kv_cache.block_manager import BlockManager, HashFn, sha256_block_hash
from fairgate.scheduler.fair_preemption import FairPreemption, FairPreemptionConfig
from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.queue import FCFSQueue, WaitQueue
from fairgate.scheduler.request import RequestStatus, SchedRequest
from fairgate.scheduler.scheduler import Scheduler, SchedulerConfig

BLOCK = 2
NUM_BLOCKS = 6
MAX_LEN = NUM_BLOCKS * BLOCK  # the engine's max_model_len: finished at this length
PREFIXES = ([1, 2, 3, 4, 5, 6], [1, 2, 3, 9, 9, 9], [7, 7, 7, 7, 7, 7])
SALTS = ("x", "y")

HASHES: dict[str, HashFn] = {
    "sha256": sha256_block_hash,
    "constant": lambda parent, tokens, extra: 0,
    "no_parent": lambda parent, tokens, extra: (tokens, extra),
    "no_salt": lambda parent, tokens, extra: (parent, tokens),
}

op = st.one_of(
    # Few distinct prompts, so prefixes are shared and whole prompts repeat often.
    st.tuples(st.just("add"), st.integers(0, 2), st.sampled_from([2, 3, 4, 6]), st.lists(st.integers(0, 1), max_size=2), st.integers(0, 1), st.integers(0, 2)),
    st.tuples(st.just("step"), st.integers(0, 2)),
    st.tuples(st.just("finish"), st.integers(0, 7)),
    st.tuples(st.just("abort"), st.integers(0, 7)),
)


class Harness:
    def __init__(self, hash_fn: HashFn, queue: WaitQueue, preempt: FairPreemptionConfig | None = None) -> None:
        self.bm = BlockManager(NUM_BLOCKS, BLOCK, hash_fn=hash_fn)
        policy = FairPreemption(queue, preempt) if preempt is not None and isinstance(queue, FairQueue) else None
        self.s = Scheduler(SchedulerConfig(max_num_seqs=3, max_num_batched_tokens=5), self.bm, queue, policy)
        self.kv: dict[int, tuple[str | None, tuple[int, ...]]] = {}  # slot -> what it holds
        self.n = 0

    def add(self, prefix: int, keep: int, suffix: list[int], salt: int, priority: int) -> None:
        self.n += 1
        tokens = PREFIXES[prefix][:keep] + suffix
        self.s.add_request(SchedRequest(
            f"r{self.n}", tokens, 4, tenant=SALTS[salt], priority=priority,
            arrival_time=float(self.n), cache_salt=SALTS[salt],
        ))

    def step(self, token: int) -> None:
        plan = self.s.schedule()
        assert plan.num_batched_tokens == sum(c.num_tokens for c in plan.chunks) <= 5
        assert len({c.request_id for c in plan.chunks}) == len(plan.chunks)
        assert all(c.num_tokens >= 1 for c in plan.chunks)  # a sampled token needs logits
        for chunk in plan.chunks:
            self.run_chunk(self.s.requests[chunk.request_id], chunk.num_tokens, chunk.block_table)
        self.s.update_from_output(plan, {c.request_id: token for c in plan.chunks if c.sample})
        for r in list(self.s.running):
            if r.num_tokens >= MAX_LEN or len(r.output_token_ids) >= r.max_tokens:
                self.s.finish_request(r.request_id)

    def run_chunk(self, r: SchedRequest, num: int, table: list[int]) -> None:
        tokens = r.all_token_ids
        start = r.num_computed_tokens
        assert len(table) * BLOCK >= start + num
        for p in range(start, start + num):
            block = table[p // BLOCK]
            assert self.bm.ref_count(block) == 1 and self.bm.cached_tokens_of(block) is None
            self.kv[block * BLOCK + p % BLOCK] = (r.cache_salt, tuple(tokens[: p + 1]))
        for p in range(start + num):  # everything this chunk's attention reads
            assert self.kv.get(table[p // BLOCK] * BLOCK + p % BLOCK) == (r.cache_salt, tuple(tokens[: p + 1]))

    def pick(self, i: int) -> str | None:
        ids = sorted(self.s.requests)
        return ids[i % len(ids)] if ids else None

    def check(self) -> None:
        bm, s = self.bm, self.s
        tables = {r.request_id: bm.block_table(r.request_id) for r in s.running}
        for rid, req in s.requests.items():
            assert (req.status is RequestStatus.RUNNING) == (rid in tables)
            if rid not in tables:
                assert bm.block_table(rid) == [] and req.num_computed_tokens == 0
        assert len(s.running) <= 3
        refs = Counter(b for t in tables.values() for b in t)
        free = bm.free_block_ids()
        assert len(free) == len(set(free)) and set(free).isdisjoint(refs)
        assert len(free) + len(refs) == NUM_BLOCKS
        for b in range(NUM_BLOCKS):
            assert bm.ref_count(b) == refs.get(b, 0)
        owner: dict[int, tuple[SchedRequest, int]] = {}
        for rid, table in tables.items():
            r = s.requests[rid]
            tokens = r.all_token_ids
            assert len(table) * BLOCK >= r.num_computed_tokens
            for i, b in enumerate(table):
                cached = bm.cached_tokens_of(b)
                if cached is not None:
                    assert cached == tuple(tokens[i * BLOCK : (i + 1) * BLOCK])
                    assert (i + 1) * BLOCK <= r.num_computed_tokens
                if b in owner:  # shared: only a cached block, at the same place, same prefix
                    other, j = owner[b]
                    assert cached is not None and i == j and other.cache_salt == r.cache_salt
                    assert other.all_token_ids[: (i + 1) * BLOCK] == tokens[: (i + 1) * BLOCK]
                owner[b] = (r, i)

    def run(self, ops: list[tuple]) -> None:
        """Apply `ops` (drawn from `op`), checking the invariants after each, then drain."""
        for o in ops:
            if o[0] == "add":
                self.add(*o[1:])
            elif o[0] == "step":
                self.step(o[1])
            else:
                rid = self.pick(o[1])
                if rid is not None:
                    (self.s.finish_request if o[0] == "finish" else self.s.abort_request)(rid)
            self.check()
        self.drain()

    def drain(self) -> None:
        for _ in range(200):
            if not self.s.has_unfinished_requests():
                break
            self.step(0)
            self.check()
        assert not self.s.has_unfinished_requests(), "the planner stopped making progress"
        assert self.bm.check_pool_whole() and self.bm.num_tracked_requests == 0


QUEUES = {"fcfs": FCFSQueue, "fair": FairQueue, "fair+preempt": FairQueue}
# Fairness preemption with tight bounds, so it fires often. A gap > 0 guarantees progress: a
# request taken back needs its tenant to fall behind by the gap again, which only new service does
# (with the constant hash nothing is cached, so every resume recomputes everything).
EAGER = FairPreemptionConfig(min_gap=2.0, min_run_tokens=2)


@pytest.mark.parametrize(
    ("hash_name", "queue_name"),
    [(name, "fcfs") for name in sorted(HASHES)]
    + [("sha256", "fair"), ("constant", "fair"), ("sha256", "fair+preempt"), ("constant", "fair+preempt")],
)
@settings(max_examples=60, deadline=None)
@given(ops=st.lists(op, max_size=40))
def test_random_mixes_keep_the_pool_consistent(hash_name: str, queue_name: str, ops: list[tuple]) -> None:
    Harness(HASHES[hash_name], QUEUES[queue_name](), EAGER if queue_name == "fair+preempt" else None).run(ops)
