"""The continuous-batching scheduler: plans each engine step.

Each step: running requests first (decodes before unfinished prefills, each decode one token,
a prefill one chunk), then admissions in the wait queue's order, all under a token budget,
`max_num_seqs` and the free KV blocks. A running request that cannot get a block preempts a
victim the queue picks (recompute: its KV is dropped, its tokens so far are re-prefilled later).

Fairness lives in the `WaitQueue`: the planner only calls `peek/pop/push_front`,
`choose_victim`, `service_key` (running prefill chunks of the least-served tenants get the
budget first) and the charging hooks: `on_prefill(request, n)` when a prefill chunk is
scheduled, for the n prompt tokens it computes for the first time (a cached prefix and recompute
after preemption are free); `on_decode(request, n)` for the n tokens a step generated, in
`update_from_output`. An optional `FairPreemption` (fair_preemption.py) lets an under-served
waiting request take a running request's slot when admission stalls. Preemptions are counted
by cause ("kv", "fairness") with the tokens their resumes recomputed. Plain Python.

Speculative decoding (vLLM v1 style). A decoding request whose `spec_token_ids` hold k draft
tokens is scheduled as one ragged chunk of 1 + k positions (its last token and the drafts),
next to plain decodes and prefills, under the same token budget; `allocate_slots` covers all
of them, and `num_computed_tokens` counts them while the step runs. Afterwards only the
verified part stays computed: the last token and the a accepted drafts (the step also samples
one new token), so the k - a rejected positions are simply uncomputed again and later steps
rewrite their KV slots. Because `cache_full_blocks` only hashes blocks full of *computed*
tokens, a block holding unverified drafts is never put into the prefix cache. Drafts never
preempt anyone: when their slots do not fit, the request decodes one plain token instead.
Fairness charge: the VTC counter is charged for what the request keeps (the a accepted drafts
plus the sampled token, exactly what a plain engine would have charged for those tokens);
rejected draft positions are the engine's own bet and, like recompute, charged to nobody, so a
tenant's share never depends on whether speculation ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fairgate.scheduler.fair_preemption import FairPreemption
from fairgate.scheduler.kv import KVCacheManager
from fairgate.scheduler.plan import NewRequest, ScheduledChunk, StepPlan
from fairgate.scheduler.queue import FCFSQueue, WaitQueue
from fairgate.scheduler.request import RequestStatus, SchedRequest


@dataclass(slots=True)
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 512
    max_model_len: int = 8192
    enable_chunked_prefill: bool = True
    # Caps one request's prefill chunk so a long prompt shares a step with others (0 = off).
    long_prefill_token_threshold: int = 0
    # Blocks an admission must leave free, so running decodes can grow without preempting the
    # request just admitted (its prefill would be wasted). 0 = admit while anything fits.
    admission_watermark_blocks: int = 0

    def __post_init__(self) -> None:
        if self.max_num_seqs < 1 or self.max_num_batched_tokens < 1 or self.max_model_len < 1:
            raise ValueError("scheduler limits must be positive")


# request id -> its chunk while a step is planned
_Scheduled = dict[str, ScheduledChunk]


class Scheduler:
    """Plans steps; the engine runs them and reports back.

    Engine loop: `plan = schedule()` -> run the plan -> `update_from_output(plan, sampled)`
    -> check stop conditions -> `finish_request()` for the finished ones. The plan holds ids
    and counts only; the scheduler keeps the request objects (`requests`).
    """

    def __init__(
        self,
        config: SchedulerConfig,
        kv: KVCacheManager,
        queue: WaitQueue | None = None,
        fair_preemption: FairPreemption | None = None,
    ) -> None:
        self.config = config
        self.kv = kv
        self.queue: WaitQueue = queue if queue is not None else FCFSQueue()
        self.fair_preemption = fair_preemption  # None: preempt for KV blocks only
        self.running: list[SchedRequest] = []  # in admission order
        self.requests: dict[str, SchedRequest] = {}  # every unfinished request
        # Cumulative, for metrics: preemptions of any cause, those for fairness, and the tokens
        # resumes recomputed (computed before the preemption, not found in the prefix cache).
        self.num_preemptions = 0
        self.num_fairness_preemptions = 0
        self.num_recomputed_tokens = 0
        self.num_fairness_recomputed_tokens = 0
        self._decode_offset = 0  # round-robin start when decodes outnumber the token budget

    # ------------------------------------------------------------------ bookkeeping
    @property
    def num_waiting(self) -> int:
        return len(self.queue)

    @property
    def num_running(self) -> int:
        return len(self.running)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def add_request(self, request: SchedRequest) -> None:
        """Queue a new request; a duplicate id raises ValueError."""
        if request.request_id in self.requests:
            raise ValueError(f"duplicate request id {request.request_id!r}")
        request.status = RequestStatus.WAITING
        self.requests[request.request_id] = request
        self.queue.push(request)

    def abort_request(self, request_id: str) -> SchedRequest | None:
        """Drop a waiting or running request and free its blocks now. None if unknown."""
        request = self.requests.get(request_id)
        if request is None:
            return None
        self._retire(request)
        return request

    def finish_request(self, request_id: str) -> None:
        """Retire a request that met a stop condition; unknown ids are ignored."""
        request = self.requests.get(request_id)
        if request is not None:
            self._retire(request)

    def _retire(self, request: SchedRequest) -> None:
        del self.requests[request.request_id]
        if request.status is RequestStatus.RUNNING:
            self.running.remove(request)
        else:
            self.queue.remove(request.request_id)
        self.kv.free(request)
        request.status = RequestStatus.FINISHED

    # ------------------------------------------------------------------ the step
    def schedule(self) -> StepPlan:
        """Plan one step: running requests first, then admissions, under the token budget."""
        scheduled: _Scheduled = {}
        plan = StepPlan()
        budget = self._schedule_running(self.config.max_num_batched_tokens, scheduled, plan.preempted)
        # Admissions. None after a KV preemption: the pool is already short of blocks.
        if not plan.preempted:
            budget = self._admit(budget, scheduled, plan.new_requests)
            if self.fair_preemption is not None and len(self.queue):
                budget = self._take_slots_back(self.fair_preemption, budget, scheduled, plan)
        plan.chunks = list(scheduled.values())
        plan.num_batched_tokens = self.config.max_num_batched_tokens - budget
        return plan

    def _schedule_running(self, budget: int, scheduled: _Scheduled, preempted: list[str]) -> int:
        """One chunk per running request while the budget lasts, preempting for blocks."""
        threshold = self.config.long_prefill_token_threshold
        kv = self.kv
        for request, remaining in self._running_order(budget):
            if budget == 0:
                break
            if request.status is not RequestStatus.RUNNING:
                continue  # preempted earlier in this step
            num_spec = self._num_spec(request, budget) if remaining == 1 and request.spec_token_ids else 0
            num_new = remaining + num_spec
            if threshold and num_new > threshold and not num_spec:
                num_new = threshold
            if num_new > budget:
                num_new = budget
            while not kv.allocate_slots(request, num_new):
                if num_spec:  # never preempt anyone for a guess: decode one plain token
                    num_spec, num_new = 0, 1
                    request.spec_token_ids.clear()
                    continue
                victim = self.queue.choose_victim(self.running)
                budget += self._preempt(victim, scheduled, "kv")
                preempted.append(victim.request_id)
                if victim is request:
                    break
            else:
                budget -= num_new
                start = request.num_computed_tokens
                if start < len(request.prompt_token_ids):
                    self._charge_prefill(request, num_new)
                rid = request.request_id
                scheduled[rid] = ScheduledChunk(
                    rid, start, num_new, list(kv.block_table(rid)), num_new - num_spec == remaining, num_spec
                )
                continue
            break  # the request preempted itself: nothing else can be made to fit
        return budget

    def _num_spec(self, request: SchedRequest, budget: int) -> int:
        """How many of the request's drafts this step verifies (trims the rest): within the
        budget, the context limit and its max_tokens (a verify yields up to 1 + k tokens)."""
        k = min(
            len(request.spec_token_ids),
            budget - 1,
            self.config.max_model_len - request.num_tokens,
            request.max_tokens - len(request.output_token_ids) - 1,
        )
        k = max(k, 0)
        del request.spec_token_ids[k:]
        return k

    def _running_order(self, budget: int) -> list[tuple[SchedRequest, int]]:
        """Running requests with their uncomputed tokens: decodes first, then prefills that
        are mid-way, so a long prompt never delays a token."""
        decoding: list[tuple[SchedRequest, int]] = []
        prefilling: list[tuple[SchedRequest, int]] = []
        for request in self.running:
            remaining = (
                len(request.prompt_token_ids) + len(request.output_token_ids)
                - request.num_computed_tokens
            )
            if remaining == 1:
                decoding.append((request, 1))
            elif remaining > 1:
                prefilling.append((request, remaining))
        # least-served first (stable: equal keys keep admission order)
        prefilling.sort(key=lambda item: self.queue.service_key(item[0]))
        if len(decoding) > budget:  # rotate, or the same tail of `running` would always wait
            k = self._decode_offset % len(decoding)
            decoding = decoding[k:] + decoding[:k]
            self._decode_offset = k + budget
        return decoding + prefilling

    def _admit(self, budget: int, scheduled: _Scheduled, new: list[NewRequest]) -> int:
        kv, queue = self.kv, self.queue
        chunked = self.config.enable_chunked_prefill
        threshold = self.config.long_prefill_token_threshold if chunked else 0
        watermark = self.config.admission_watermark_blocks
        block_size = kv.block_size
        while budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = queue.peek()
            if request is None:
                break
            num_cached = kv.get_computed_tokens(request)
            num_new = request.num_tokens - num_cached
            if threshold and num_new > threshold:
                num_new = threshold
            if num_new > budget:
                if not chunked:
                    break
                num_new = budget
            # Conservative: counts cached blocks as if they came from the free queue too. With
            # nothing running there is nothing to protect, and waiting could stall forever.
            if (
                watermark
                and self.running
                and kv.num_free_blocks - watermark < -(-(num_cached + num_new) // block_size)
            ):
                break
            request.num_computed_tokens = num_cached
            if not kv.allocate_slots(request, num_new):
                request.num_computed_tokens = 0
                break  # strict queue order: the head waits for blocks, nobody skips it
            if queue.pop() is not request:
                raise RuntimeError("WaitQueue.pop() must return what peek() returned")
            if request.status is RequestStatus.WAITING:  # count a hit once, not per resume
                request.num_cached_tokens = num_cached
                new.append(NewRequest(request.request_id, request.tenant, request.priority, request.arrival_time))
            else:
                self._count_recompute(request, num_cached)
            request.computed_at_admission = num_cached
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            self._charge_prefill(request, num_new)
            rid = request.request_id
            sample = num_cached + num_new == request.num_tokens
            scheduled[rid] = ScheduledChunk(rid, num_cached, num_new, list(kv.block_table(rid)), sample)
            budget -= num_new
        return budget

    def _charge_prefill(self, request: SchedRequest, num_new: int) -> None:
        # Charge prompt tokens computed for the first time only: a cached prefix is free, and
        # so is recompute after a preemption (the planner's choice, not the tenant's use). A
        # prompt cut off mid-prefill is charged for the rest when it resumes: the high-water
        # mark, not "was it ever preempted", decides.
        start = max(request.num_computed_tokens, request.num_prompt_charged)
        end = min(request.num_computed_tokens + num_new, request.num_prompt_tokens)
        if end > start:
            request.num_prompt_charged = end
            self.queue.on_prefill(request, end - start)

    def _take_slots_back(self, policy: FairPreemption, budget: int, scheduled: _Scheduled, plan: StepPlan) -> int:
        """Admission stalled with requests waiting: preempt up to `max_per_step` running
        requests the fairness policy picks, each time admitting again, so the under-served
        request gets the freed slot (and budget, and blocks) in this very step."""
        for _ in range(policy.config.max_per_step):
            waiting = self.queue.peek()
            if waiting is None:
                break
            victim = policy.choose(waiting, self.running)
            if victim is None:
                break
            budget += self._preempt(victim, scheduled, "fairness")
            plan.preempted.append(victim.request_id)
            budget = self._admit(budget, scheduled, plan.new_requests)
        return budget

    def _preempt(self, victim: SchedRequest, scheduled: _Scheduled, cause: str) -> int:
        """Recompute-preempt `victim`; returns the budget its withdrawn chunk gives back.

        Its blocks lose this reference but stay cached (`kv.free`): the full ones are found
        again as a prefix hit when it resumes, unless evicted meanwhile."""
        self.running.remove(victim)
        self.kv.free(victim)
        victim.computed_at_preemption = victim.num_computed_tokens
        victim.preempt_cause = cause
        victim.num_computed_tokens = 0
        victim.spec_token_ids.clear()
        victim.status = RequestStatus.PREEMPTED
        victim.num_preemptions += 1
        self.num_preemptions += 1
        if cause == "fairness":
            self.num_fairness_preemptions += 1
        self.queue.push_front(victim)
        chunk = scheduled.pop(victim.request_id, None)
        return chunk.num_tokens if chunk is not None else 0

    def _count_recompute(self, request: SchedRequest, num_cached: int) -> None:
        """A preempted request resumes with `num_cached` tokens found in the prefix cache: what
        it had computed beyond them is computed again."""
        recomputed = max(0, request.computed_at_preemption - num_cached)
        self.num_recomputed_tokens += recomputed
        if request.preempt_cause == "fairness":
            self.num_fairness_recomputed_tokens += recomputed

    def update_from_output(self, plan: StepPlan, sampled: Mapping[str, int | list[int]]) -> None:
        """Advance each chunk's request by its tokens, append sampled tokens, cache full blocks.

        `sampled` holds one token per sampling chunk, or for a chunk with k drafts the list of
        accepted drafts plus the token sampled after them (1 to k + 1 tokens). A request
        aborted or finished while the step ran is skipped. A chunk that should have sampled but
        got no token leaves its last token uncomputed, so the next step redoes it and samples
        again (its KV is rewritten with the same values)."""
        kv, queue, requests = self.kv, self.queue, self.requests
        for chunk in plan.chunks:
            request = requests.get(chunk.request_id)
            # gone (finished, aborted) or not running (a new request under a reused id)
            if request is None or request.status is not RequestStatus.RUNNING:
                continue
            request.num_computed_tokens += chunk.num_tokens
            if chunk.sample:
                got = sampled.get(request.request_id)
                if got is None:
                    request.num_computed_tokens -= 1 + chunk.num_spec_tokens
                else:
                    tokens = [got] if isinstance(got, int) else got
                    if not 1 <= len(tokens) <= chunk.num_spec_tokens + 1:
                        raise RuntimeError(f"{chunk.request_id}: {len(tokens)} tokens for {chunk.num_spec_tokens} drafts")
                    # Rejected drafts are not computed: later steps rewrite their slots.
                    request.num_computed_tokens -= chunk.num_spec_tokens + 1 - len(tokens)
                    request.output_token_ids.extend(tokens)
                    queue.on_decode(request, len(tokens))
            if chunk.num_spec_tokens:
                request.spec_token_ids.clear()  # consumed: the proposer guesses afresh
            kv.cache_full_blocks(request)
