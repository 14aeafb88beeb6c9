"""Adaptive k and the off switch, from measured step costs (no model, no timing of this machine)."""

from __future__ import annotations

import pytest

from fairgate.backends.local.engine.output import EngineStats
from fairgate.backends.local.speculative.policy import (
    Acceptance,
    SpeculativeDecoder,
    StepTimesByBatch,
    expected_tokens,
)
from fairgate.backends.local.speculative.proposers import NgramProposer, ProposalRequest
from fairgate.scheduler.plan import ScheduledChunk, StepPlan
from fairgate.scheduler.request import SchedRequest


def decoder_with(batch: int, plain: float, draft: float) -> SpeculativeDecoder:
    spec = SpeculativeDecoder(NgramProposer(), num_tokens=4)
    for _ in range(3):
        spec.costs.observe(batch, 0, plain * batch)  # plain steps: seconds per sequence
    for _ in range(3):  # verify steps, two drafts per sequence
        spec.costs.observe(batch, 2 * batch, plain * batch + draft * 2 * batch)
    return spec


def acceptance(rate: float) -> Acceptance:
    return Acceptance(accepted=rate * 100, rejected=(1 - rate) * 100, verifies=100)


def test_step_costs_are_medians_per_batch_bucket() -> None:
    costs = StepTimesByBatch()
    for seconds in (0.004, 0.004, 0.040, 0.005):  # one step delayed 10x by another process
        costs.observe(1, 0, seconds)
    assert costs.bucket(1).plain == 0.005  # the median of 4, 4, 5, 40 ms (upper middle)
    costs.observe(1, 4, 0.006)  # 4 drafts added 2 ms over the ~4-5 ms plain step
    costs.observe(1, 4, 0.006)
    costs.observe(1, 4, 0.100)
    assert costs.bucket(1).draft == (0.006 - 0.005) / 4  # the delayed verify is ignored
    assert costs.bucket(64).plain is None and costs.bucket(3) is costs.bucket(2)  # buckets 2-3


def test_batch_one_with_good_guesses_drafts_the_cap() -> None:
    spec = decoder_with(1, plain=0.004, draft=0.0002)
    assert spec.choose_k([acceptance(0.8), acceptance(0.5)], 1) == [4, 4]
    assert spec.choose_k([acceptance(0.02)], 1) == [0]  # guesses nearly always wrong: none


def test_a_large_batch_turns_speculation_off() -> None:
    # at batch 64 a sequence's share of a plain step (0.5 ms) is about what a draft costs
    spec = decoder_with(64, plain=0.0005, draft=0.00045)
    assert spec.choose_k([acceptance(0.8)] * 64, 64) == [0] * 64


def test_proposing_costs_are_medians_per_batch_bucket() -> None:
    spec = decoder_with(1, plain=0.004, draft=0.0002)
    for _ in range(3):  # a step of 16 costs 4.8 ms: a row adds ~0.05 ms to the 4 ms of one
        spec.costs.observe(16, 0, 0.0003 * 16)
    for _ in range(3):
        spec.costs.observe(16, 2 * 16, 0.0003 * 16 + 0.00005 * 2 * 16)
    # A draft model's round costs ~5 ms per draft token alone; the first proposal also caught
    # it up on a whole prompt (50 ms), which the median leaves out.
    spec.costs.bucket(1).propose_samples.extend([0.05, 0.005, 0.005])
    assert spec.costs.bucket(1).propose == 0.005
    assert spec.choose_k([acceptance(0.8)], 1) == [0]  # more than a plain step per guess: off
    # In a batch of 16 the same rounds cost 16x less per draft token: speculating pays there.
    spec.costs.bucket(16).propose_samples.extend([0.0003, 0.0001, 0.0001])
    ks = spec.choose_k([acceptance(0.8)] * 16, 16)
    assert len(set(ks)) == 1 and ks[0] > 0


def test_unmeasured_buckets_measure_plain_first_then_ramp_drafts() -> None:
    spec = SpeculativeDecoder(NgramProposer(), num_tokens=4)
    assert spec.choose_k([Acceptance()], 1) == [0]
    for _ in range(3):
        spec.costs.observe(1, 0, 0.004)
    assert spec.choose_k([Acceptance(), Acceptance()], 1) == [1, 1]  # k goes round 1 .. cap
    spec.costs.observe(1, 1, 0.005)
    assert spec.choose_k([Acceptance()] * 5, 1) == [2, 2, 2, 2, 0]  # four requests measure


def test_a_verifys_fixed_cost_is_told_apart_from_its_cost_per_draft() -> None:
    costs = StepTimesByBatch()
    for _ in range(3):
        costs.observe(1, 0, 0.002)
    for k, seconds in ((1, 0.0031), (4, 0.0034), (1, 0.0031), (4, 0.0034), (2, 0.0032)):
        costs.observe(1, k, seconds)  # a verify costs 1 ms, plus 0.1 ms per draft
    fixed, per_draft = costs.bucket(1).verify or (0.0, 0.0)
    assert abs(fixed - 0.001) < 1e-9 and abs(per_draft - 0.0001) < 1e-9
    # Four guesses at a = 0.8 repay the fixed part; one guess alone would not.
    spec = SpeculativeDecoder(NgramProposer(), num_tokens=4)
    spec.costs = costs
    assert spec.choose_k([acceptance(0.8), acceptance(0.3)], 1) == [4, 0]


def test_expected_tokens() -> None:
    assert expected_tokens(0.5, 2) == 1.75 and expected_tokens(1.0, 4) == 5.0 and expected_tokens(0.0, 3) == 1.0


async def test_an_engine_exports_its_speculation_metrics(tiny_model_dir) -> None:
    from prometheus_client import CollectorRegistry

    from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
    from fairgate.backends.local.engine.metrics import EngineStatsCollector
    from fairgate.backends.local.engine.types import SamplingParams

    config = EngineConfig(str(tiny_model_dir), num_kv_blocks=32, speculative=f"draft:{tiny_model_dir}",
                          speculative_adaptive=False)
    engine = AsyncEngine(config)
    try:
        out = await engine.generate([5, 6, 7, 5, 6, 7, 5], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))
        assert len(out.token_ids) == 12
        registry = CollectorRegistry()
        registry.register(EngineStatsCollector(engine, "tiny"))
        get = registry.get_sample_value
        drafts = get("fairgate_spec_draft_tokens_total", {"model": "tiny"})
        s = engine.stats()
        # the target as its own draft: every draft accepted, 1 prefill token + 11 from verifies
        assert drafts == s.spec_draft_tokens == get("fairgate_spec_accepted_tokens_total", {"model": "tiny"}) > 0
        assert get("fairgate_spec_drafts_total", {"model": "tiny"}) == s.spec_drafts
        assert get("fairgate_spec_accepted_by_position_total", {"model": "tiny", "position": "1"}) == s.spec_drafts
        assert get("fairgate_spec_propose_seconds_total", {"model": "tiny"}) > 0
        assert get("fairgate_spec_verify_seconds_total", {"model": "tiny"}) > 0
    finally:
        await engine.aclose()


def test_the_cost_model_clock_is_cpu_time_for_a_one_thread_cpu_engine() -> None:
    import time

    from fairgate.backends.local.speculative.policy import cost_clock

    assert cost_clock("cpu", 1) is time.thread_time  # what a step did, whatever else runs
    assert cost_clock("cpu", 8) is time.perf_counter and cost_clock("cuda", 1) is time.perf_counter


class _Clock:
    """The cost clock, advanced by hand: each step and proposal takes what the test says."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _CountingProposer(NgramProposer):
    def __init__(self, clock: _Clock, seconds: dict[str, float]) -> None:
        super().__init__()
        self.clock, self.seconds, self.calls = clock, seconds, 0

    def propose(self, requests: list[ProposalRequest]) -> dict[str, list[int]]:
        self.calls += 1
        first = self.calls == 1
        self.clock.now += self.seconds["first" if first else "again"]
        return {r.request_id: [5] * r.num_tokens for r in requests}


def _decode_step(spec: SpeculativeDecoder, clock: _Clock, seconds: float, request: SchedRequest,
                 drafts: int = 0) -> None:
    spec.before_step()
    clock.now += seconds
    chunk = ScheduledChunk(request.request_id, 100, 1 + drafts, [0], True, drafts)
    kept = {request.request_id: [5] * (1 + drafts) if drafts else 5}
    spec.after_step(StepPlan([chunk], num_batched_tokens=1 + drafts), kept, seconds, [request], 1, EngineStats())


def test_a_row_counts_first_step_and_a_requests_first_proposal_are_not_cost_samples() -> None:
    clock = _Clock()
    proposer = _CountingProposer(clock, {"first": 0.050, "again": 0.001})  # the first caught up on a prompt
    spec = SpeculativeDecoder(proposer, num_tokens=2, clock=clock)
    request = SchedRequest("a", list(range(100)), 50)
    _decode_step(spec, clock, 0.030, request)  # the first one-row step: 30 ms of one-off kernel setup
    for _ in range(4):
        _decode_step(spec, clock, 0.004, request)
    cost = spec.costs.bucket(1)
    assert list(cost.plain_samples) == pytest.approx([0.004] * 4)
    _decode_step(spec, clock, 0.004, request)  # measuring drafts now: a proposal after each step
    _decode_step(spec, clock, 0.004, request)
    assert proposer.calls >= 3 and len(cost.propose_samples) == proposer.calls - 1
    assert max(cost.propose_samples) < 0.002  # the 50 ms catch-up is left out


def test_a_new_request_starts_from_the_engines_recent_acceptance() -> None:
    spec = SpeculativeDecoder(NgramProposer(), num_tokens=4)
    stats = EngineStats()
    for n in range(40):  # earlier requests: three of four guesses accepted, then a miss
        spec._record(f"old{n}", 4, 3, stats)
    prior = spec._prior()
    assert 0.7 < prior.rate < 0.8 and prior.accepted + prior.rejected == 1.0  # worth one verify
    # Where a guess costs 60% of a token, the fixed one-half prior would keep it off.
    for _ in range(3):
        spec.costs.observe(1, 0, 0.003)
    for _ in range(3):
        spec.costs.observe(1, 2, 0.003 + 2 * 0.0018)
    half = Acceptance(verifies=3)  # measured at one half
    assert spec.choose_k([half], 1) == [0] and spec.choose_k([Acceptance(prior.accepted, prior.rejected, verifies=3)],
                                                             1) == [1]


def test_a_request_not_yet_verified_drafts_to_measure_its_own_rate() -> None:
    spec = decoder_with(1, plain=0.004, draft=0.0012)  # a guess costs 30% of a token
    assert spec.choose_k([acceptance(0.2)], 1) == [0]  # measured: too poor to pay
    assert spec.choose_k([Acceptance(accepted=0.2, rejected=0.8)], 1) == [2]  # a prior of 0.2: probe
    assert spec.choose_k([acceptance(0.8), Acceptance(accepted=0.2, rejected=0.8)], 1)[1] == 2
    # where no acceptance repays a draft, nothing probes either
    off = decoder_with(64, plain=0.0005, draft=0.0006)
    assert off.choose_k([Acceptance()] * 3, 64) == [0, 0, 0]


def test_a_drafts_cost_is_at_least_a_plain_rows() -> None:
    # Two drafting sequences in a step of 64 add less than its noise: the verify fit says
    # drafts are free. Plain steps of 32 and 64 say a row costs 0.1 ms: that is the floor.
    spec = SpeculativeDecoder(NgramProposer(), num_tokens=4)
    for _ in range(3):
        spec.costs.observe(32, 0, 0.0032 + 32 * 0.0001)
        spec.costs.observe(64, 0, 0.0032 + 64 * 0.0001)
    for _ in range(3):
        spec.costs.observe(64, 4, 0.0032 + 64 * 0.0001, num_verifies=2)
    assert spec.costs.bucket(64).draft == 0.0 and abs(spec.costs.marginal(64) - 0.0001) < 1e-9
    assert spec.choose_k([acceptance(0.6)] * 64, 64) == [0] * 64  # 0.6 x 0.15 ms < 0.1 ms + margin
    assert spec.costs.marginal(1) is None  # one measured bucket alone has no slope


def test_a_new_request_drafts_only_if_its_remaining_tokens_repay_the_catch_up() -> None:
    spec = decoder_with(1, plain=0.004, draft=0.0002)
    spec._catch_up.extend([0.0001] * 3)  # reading a context costs 0.1 ms a token
    long_prompt = SchedRequest("a", list(range(400)), 4)  # 40 ms to read, 4 tokens to go
    assert not spec.repays_catch_up(long_prompt, 0.8, 4, 1)
    assert spec.repays_catch_up(SchedRequest("b", list(range(40)), 200), 0.8, 4, 1)
