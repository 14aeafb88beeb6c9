"""When and how far to speculate: adaptive k per request and the automatic off switch.

`SpeculativeDecoder` runs after each engine step (EngineCore.step): it records what the step
verified (acceptance, metrics), feeds the step's time into a `StepTimeModel`, then asks the
proposer for drafts for every decoding request that allows speculation and sets them on the
scheduler's requests (`SchedRequest.spec_token_ids`); the next `schedule()` verifies them in
the continuous batch.

The decision uses `StepTimesByBatch`, measured at the current batch size (buckets of powers of two,
prefill steps left out): v, the seconds one plain decode step costs per sequence (a token's
worth); F + d * k, the extra seconds a sequence verifying k drafts adds to a step (F: the
verify's fixed part, e.g. the ragged-chunk attention path and the logits rows; d: per draft
position), fitted through the per-k medians of the verify samples; and p, the proposer's
seconds per draft token at that batch size (a draft model's round costs about the same at
batch 1 and batch 16, so per token it is far cheaper in a batch). A request with measured
acceptance a (the chance a draft is accepted given the ones before it were) expects
E(a, k) = (1 - a^(k+1)) / (1 - a) tokens from k drafts, so it gets the k (0 .. cap) with the
largest saving (E - 1) * v - F - (d + p) * k, if that beats a margin of v / 10. At batch 1
a step's fixed cost makes v large and d small, so k grows to the cap when guesses are
good; at large batches a step costs about its tokens, v falls toward d and k falls to 0: that
is the off switch (the step runs plain, `spec_off_steps`). Measuring needs both kinds of
step: a bucket without plain measurements runs plain steps first, one without draft
measurements lets four of its requests speculate (two at batch 16 and up; k going round 1 ..
cap), and now and then (after 16 steps, backing off to 256 while the choice holds) a step
runs the other kind than chosen, so the estimates follow the load. Estimates are medians of
the last 16 samples (at least 3).

What keeps the samples honest and new requests measured: the first step of each row count is
no sample (oneDNN builds its kernels per row count, more than a small step costs), nor is a
request's first proposal (a draft model's catch-up over the prompt; it is priced per context
token instead, and a request's first drafts must repay it from its remaining tokens); d is at
least what one more row adds to a plain step (the slope between two measured batch sizes),
since a few drafts in a large step drown in its noise; a new request starts from the engine's
recent acceptance, and one not yet verified drafts cap / 2 once where a request accepting nine
in ten would pay, so it measures its own rate.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from fairgate.backends.local.engine.output import EngineStats
from fairgate.backends.local.speculative.proposers import ProposalRequest, Proposer
from fairgate.scheduler.plan import StepPlan
from fairgate.scheduler.request import SchedRequest

log = logging.getLogger(__name__)


@dataclass(slots=True)
class BucketCost:
    """Recent cost samples at one batch-size bucket; estimates are medians (a shared machine
    delays single steps by several times their cost, and a median ignores those)."""

    plain_samples: deque[float] = field(default_factory=lambda: deque(maxlen=16))  # s per sequence
    plain_batches: deque[int] = field(default_factory=lambda: deque(maxlen=16))  # their batch sizes
    # (drafts per speculating sequence, extra seconds per speculating sequence) of verify steps
    verify_samples: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=32))
    propose_samples: deque[float] = field(default_factory=lambda: deque(maxlen=16))  # s per draft

    @property
    def plain(self) -> float | None:
        """Seconds per sequence of a plain decode step (None until measured enough)."""
        return _median(self.plain_samples)

    @property
    def verify(self) -> tuple[float, float] | None:
        """(F, d): a sequence verifying k drafts adds F + d * k seconds to a step; a line
        through the median extra at each k seen (one k seen: all of it per draft, F = 0)."""
        if len(self.verify_samples) < 3:
            return None
        by_k: dict[int, list[float]] = {}
        for k, extra in self.verify_samples:
            by_k.setdefault(k, []).append(extra)
        points = [(k, sorted(v)[len(v) // 2]) for k, v in by_k.items()]
        mean_k = sum(k for k, _ in points) / len(points)
        mean_e = sum(e for _, e in points) / len(points)
        sxx = sum((k - mean_k) ** 2 for k, _ in points)
        if sxx == 0:
            return 0.0, mean_e / mean_k
        d = sum((k - mean_k) * (e - mean_e) for k, e in points) / sxx
        fixed = mean_e - d * mean_k
        if d < 0:  # noise: the cost did not grow with k; call it all fixed
            return mean_e, 0.0
        if fixed < 0:
            return 0.0, sum(e / k for k, e in points) / len(points)
        return fixed, d

    @property
    def draft(self) -> float | None:
        """Extra seconds one more verified draft position adds to a step (d)."""
        fit = self.verify
        return None if fit is None else fit[1]

    @property
    def propose(self) -> float:
        """Seconds the proposer spends per draft token (0 until measured: a proposal comes
        before its verify, so by the time `draft` is known this is usually too). A request's
        first proposal, which may catch a draft model up on its whole prompt, is no sample."""
        return _median(self.propose_samples) or 0.0


def _median(samples: deque[float], min_samples: int = 3) -> float | None:
    if len(samples) < min_samples:
        return None
    ordered = sorted(samples)
    return ordered[len(ordered) // 2]


class StepTimesByBatch:
    """Decode and verify step costs per batch-size bucket, from the steps the engine ran."""

    def __init__(self) -> None:
        self._buckets: dict[int, BucketCost] = {}

    def bucket(self, batch: int) -> BucketCost:
        return self._buckets.setdefault(max(batch, 1).bit_length(), BucketCost())

    def marginal(self, batch: int) -> float | None:
        """Seconds one more row adds to a plain step near `batch`: the slope between this
        bucket's median step and the nearest other measured bucket's (None until two are).
        A verified draft is such a row, so this bounds a verify's measured cost per draft from
        below where a few drafts in a large step drown in its noise."""
        here = self._point(batch.bit_length() if batch > 0 else 1)
        if here is None:
            return None
        others = sorted((abs(key - here[0]), key) for key in self._buckets if key != here[0])
        for _, key in others:
            there = self._point(key)
            if there is not None and there[1] != here[1]:
                slope = (there[2] - here[2]) / (there[1] - here[1])
                return slope if slope > 0 else None
        return None

    def _point(self, key: int) -> tuple[int, int, float] | None:
        """(bucket, median batch, median plain step seconds) of a measured bucket."""
        cost = self._buckets.get(key)
        if cost is None or cost.plain is None:
            return None
        batches = sorted(cost.plain_batches)
        b = batches[len(batches) // 2]
        return key, b, cost.plain * b

    def observe(self, batch: int, num_drafts: int, seconds: float, num_verifies: int | None = None) -> None:
        """A step of `batch` decodes (`num_drafts` draft positions among them, in `num_verifies`
        speculating sequences: by default all of them, at most one per draft) took `seconds`."""
        cost = self.bucket(batch)
        if num_drafts == 0:
            cost.plain_samples.append(seconds / batch)
            cost.plain_batches.append(batch)
            return
        plain = cost.plain
        if plain is not None:
            seqs = num_verifies or min(batch, num_drafts)
            cost.verify_samples.append((round(num_drafts / seqs), max(seconds - batch * plain, 0.0) / seqs))


@dataclass(slots=True)
class Acceptance:
    """One request's acceptance counts, decayed so the estimate follows the text's phases."""

    accepted: float = 0.5  # prior: half an accept, half a reject (estimate 0.5)
    rejected: float = 0.5
    streak: int = 0  # verifies in a row whose drafts were all accepted
    verifies: int = 0  # of this request's own drafts (0: the rate is still the prior)

    @property
    def rate(self) -> float:
        return self.accepted / (self.accepted + self.rejected)

    def update(self, num_drafts: int, num_accepted: int, decay: float = 0.8) -> None:
        self.accepted = self.accepted * decay + num_accepted
        self.rejected = self.rejected * decay + (1 if num_accepted < num_drafts else 0)
        self.streak = self.streak + 1 if num_accepted == num_drafts else 0
        self.verifies += 1


MARGIN = 0.1  # of a plain token's cost: the least expected saving worth speculating for
POPULATION_DECAY = 0.98  # the engine-wide acceptance follows about the last fifty verifies


class SpeculativeDecoder:
    """Proposes drafts between steps; `num_tokens` is the cap k on drafts per request."""

    def __init__(self, proposer: Proposer, num_tokens: int = 4, adaptive: bool = True,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if num_tokens < 1:
            raise ValueError("num_speculative_tokens must be >= 1")
        self.proposer = proposer
        self.num_tokens = num_tokens
        self.adaptive = adaptive
        self.clock = clock  # what the cost model measures steps and proposals in (cost_clock)
        self._step_started = 0.0
        self.costs = StepTimesByBatch()
        self._steps = 0  # decode steps seen, for the periodic re-measurement
        self._next_check, self._check_every, self._last_choice = 16, 16, True
        self._acceptance: dict[str, Acceptance] = {}
        self._population = Acceptance()  # every verify's, decayed slowly: new requests start from it
        self._rows_seen: set[int] = set()  # the row counts of the steps run so far
        self._proposed: set[str] = set()  # requests proposed for at least once
        self._catch_up: deque[float] = deque(maxlen=16)  # first proposals' seconds per context token

    # ------------------------------------------------------------------ per step
    def before_step(self) -> None:
        self._step_started = self.clock()

    def after_step(
        self, plan: StepPlan, kept: dict[str, int | list[int]], seconds: float,
        decoding: list[SchedRequest], batch: int, stats: EngineStats,
    ) -> None:
        """Record the step just run (`seconds` of wall time since `before_step`, for the
        metrics), then set drafts on `decoding` (the decoding requests that allow speculation,
        out of `batch` decoding requests in all)."""
        cost = seconds if self.clock is time.perf_counter else self.clock() - self._step_started
        for request_id in plan.preempted:
            self.drop(request_id)
        verified = False
        for chunk in plan.chunks:
            tokens = kept.get(chunk.request_id)
            if chunk.num_spec_tokens and isinstance(tokens, list):
                verified = True
                self._record(chunk.request_id, chunk.num_spec_tokens, len(tokens) - 1, stats)
        if verified:
            stats.spec_verify_seconds += seconds
        # Costs describe decode and verify steps; a step with a prefill chunk says nothing, nor
        # does the first step of a row count (it pays once for that shape's matmul kernels:
        # oneDNN builds them per row count, ~0.5 ms a linear, more than a whole small step).
        rows = sum(c.num_tokens for c in plan.chunks)
        first_of_shape = rows not in self._rows_seen
        self._rows_seen.add(rows)
        if plan.chunks and not first_of_shape and all(c.num_tokens == 1 + c.num_spec_tokens for c in plan.chunks):
            self.costs.observe(len(plan.chunks), sum(c.num_spec_tokens for c in plan.chunks), cost,
                               sum(1 for c in plan.chunks if c.num_spec_tokens))
        self._propose(decoding, max(batch, len(decoding)), stats)

    def drop(self, request_id: str) -> None:
        """Forget a request (finished, aborted, preempted)."""
        self._acceptance.pop(request_id, None)
        self._proposed.discard(request_id)
        self.proposer.drop(request_id)

    def choose_k(self, requests: list[Acceptance], batch: int) -> list[int]:
        """Drafts per request for a batch of `batch` decoding requests (see the module doc)."""
        cap = self.num_tokens
        if not self.adaptive:
            return [cap] * len(requests)
        self._steps += 1
        cost = self.costs.bucket(batch)
        # Measuring: a few requests draft, enough to see the cost (all of a large batch would
        # pay for guesses the bucket may not afford; a draft model first catches up on each
        # one's whole context): four, two from batch 16 on, where a step's own noise is
        # larger than their cost anyway; k going round 1 .. cap from step to step, so the
        # fit sees the fixed part apart.
        k_ramp, few = 1 + len(cost.verify_samples) % cap, 4 if batch < 16 else 2
        ramp = [k_ramp if i < few else 0 for i in range(len(requests))]
        if cost.plain is None:
            return [0] * len(requests)  # measure a plain step first
        fit = cost.verify
        if fit is None:
            return ramp  # measure what drafts cost here
        ks = self._ks(requests, cost.plain, fit[0], self.per_draft(batch))
        if self._steps >= self._next_check:  # re-measure the kind of step not chosen
            # back off while the choice stays the same: 16, 32, 64 .. 256 steps between checks
            on = any(ks)
            self._check_every = min(256, self._check_every * 2) if on == self._last_choice else 16
            self._last_choice = on
            self._next_check = self._steps + self._check_every
            return [0] * len(requests) if on else ramp
        return ks

    def per_draft(self, batch: int) -> float:
        """Seconds a draft costs at `batch` (verify plus proposal; the verify's share at least a
        plain row's, `StepTimesByBatch.marginal`); needs the bucket's verify fit."""
        cost = self.costs.bucket(batch)
        fit = cost.verify
        verify = 0.0 if fit is None else fit[1]
        return max(verify, self.costs.marginal(batch) or 0.0) + cost.propose

    def repays_catch_up(self, request: SchedRequest, acceptance: float, k: int, batch: int) -> bool:
        """Whether `request`'s first k drafts are worth the proposer reading its whole context
        (a draft model's catch-up, measured per token): the saving of a verify, over the
        verifies its remaining tokens take, must exceed it. True until catch-ups are measured."""
        per_token = _median(self._catch_up)
        cost = self.costs.bucket(batch)
        fit = cost.verify
        if per_token is None or cost.plain is None or fit is None:
            return True
        expected = expected_tokens(acceptance, k)
        saving = (expected - 1) * cost.plain - fit[0] - self.per_draft(batch) * k
        verifies = max(request.max_tokens - len(request.output_token_ids), 0) / expected
        return saving * verifies > per_token * request.num_tokens

    def _ks(self, requests: list[Acceptance], value: float, fixed: float, per_draft: float) -> list[int]:
        if per_draft >= value:  # a draft costs what a token saves: no acceptance repays one
            return [0] * len(requests)
        best: dict[float, int] = {}  # requests share rates (the prior, long streaks)
        out = []
        # where a request accepting 9 guesses in 10 would pay (not at a batch where a row of
        # verify costs what a plain row does)
        probe = max(1, self.num_tokens // 2) if self._best_k(0.9, value, fixed, per_draft) else 0
        for r in requests:
            rate = r.rate
            k = best.get(rate)
            if k is None:
                k = best[rate] = self._best_k(rate, value, fixed, per_draft)
            # A request not yet verified drafts anyway, to measure its own rate: the prior is
            # other requests' (a code edit after a chat would otherwise wait for a check step).
            out.append(k or (probe if not r.verifies else 0))
        return out

    def _best_k(self, acceptance: float, value: float, fixed: float, per_draft: float) -> int:
        # A guess must save a tenth of a token's worth at least: the estimates are medians of
        # noisy steps, and a saving inside their noise is as likely a loss.
        best, best_k = MARGIN * value, 0
        for k in range(1, self.num_tokens + 1):
            saving = (expected_tokens(acceptance, k) - 1) * value - fixed - per_draft * k
            if saving > best:
                best, best_k = saving, k
        return best_k

    # ------------------------------------------------------------------ internals
    def _record(self, request_id: str, num_drafts: int, num_accepted: int, stats: EngineStats) -> None:
        stats.spec_drafts += 1
        stats.spec_draft_tokens += num_drafts
        stats.spec_accepted_tokens += num_accepted
        by_pos = stats.spec_accepted_by_position
        if len(by_pos) < num_drafts:
            by_pos.extend([0] * (num_drafts - len(by_pos)))
        for j in range(num_accepted):
            by_pos[j] += 1
        self._acceptance.setdefault(request_id, self._prior()).update(num_drafts, num_accepted)
        self._population.update(num_drafts, num_accepted, POPULATION_DECAY)

    def _prior(self) -> Acceptance:
        """A new request's acceptance: what recent requests accepted, worth one verify. (A fixed
        prior of one half keeps a new request off wherever drafts cost a quarter of a token or
        more, and a request that never speculates never measures its own rate.)"""
        rate = self._population.rate
        return Acceptance(accepted=rate, rejected=1.0 - rate)

    def _propose(self, decoding: list[SchedRequest], batch: int, stats: EngineStats) -> None:
        for request in decoding:
            if request.spec_token_ids:
                request.spec_token_ids = []
        if not decoding:
            return
        acceptance = self._acceptance
        ks = self.choose_k([acceptance.get(r.request_id) or acceptance.setdefault(r.request_id, self._prior())
                            for r in decoding], batch)
        proposed = self._proposed
        wanted = [
            ProposalRequest(r.request_id, r.all_token_ids, k) for r, k in zip(decoding, ks, strict=True)
            if k > 0 and (r.request_id in proposed or self.repays_catch_up(r, acceptance[r.request_id].rate, k, batch))
        ]
        if not wanted:
            stats.spec_off_steps += 1
            return
        started, cost_started = time.perf_counter(), self.clock()
        try:
            drafts = self.proposer.propose(wanted)
        except Exception:  # speculation is optional: a proposer failure only costs speed
            log.exception("draft proposer failed; decoding without drafts this step")
            return
        stats.spec_propose_seconds += time.perf_counter() - started
        num_drafts = sum(len(d) for d in drafts.values())
        # A request's first proposal may read its whole prompt (a draft model's catch-up): a
        # one-off, not what a draft costs from then on.
        first = [w for w in wanted if w.request_id not in proposed]
        proposed.update(w.request_id for w in first)
        seconds = self.clock() - cost_started
        if first:  # what reading a context costs per token (an upper bound: others were drafted too)
            self._catch_up.append(seconds / sum(len(w.token_ids) for w in first))
        elif num_drafts:
            self.costs.bucket(batch).propose_samples.append(seconds / num_drafts)
        for request in decoding:
            request.spec_token_ids = drafts.get(request.request_id, [])[: self.num_tokens]


def cost_clock(device: str, threads: int) -> Callable[[], float]:
    """The clock the cost model measures in. A CPU engine computing on its own thread (one
    torch thread): that thread's CPU time, the work a step did, which other processes on a
    shared machine do not stretch (wall time there swings several-fold between identical
    steps, and the choice to speculate is a ratio of work). Otherwise (a GPU, a thread pool)
    wall time."""
    return time.thread_time if device.startswith("cpu") and threads == 1 else time.perf_counter


def expected_tokens(acceptance: float, k: int) -> float:
    """Tokens one verify of k drafts yields on average (accepted drafts plus one)."""
    if acceptance >= 1:
        return float(k + 1)
    return (1 - acceptance ** (k + 1)) / (1 - acceptance)

