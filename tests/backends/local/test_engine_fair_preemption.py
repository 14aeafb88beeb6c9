"""Fairness preemption in the real engine: exact greedy outputs, no leaks, counted by cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.core import EngineCore
from fairgate.backends.local.engine.factory import build_engine_parts
from fairgate.backends.local.engine.metrics import _preemption_counters
from fairgate.backends.local.engine.output import EngineStats, OutputTracker
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.kv_cache.block_manager import BlockManager
from fairgate.gateway.cli import build_parser
from fairgate.scheduler.fair_preemption import FairPreemption, FairPreemptionConfig
from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.queue import FCFSQueue
from fairgate.scheduler.request import SchedRequest

FLOOD = {f"f{i}": [10 * i + k for k in range(10)] for i in (1, 2, 3)}
LIGHT = {f"l{i}": [200 + 10 * i + k for k in range(6)] for i in (1, 2)}


def add(core: EngineCore, rid: str, tenant: str, ids: list[int], max_tokens: int) -> None:
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    tracker = OutputTracker(rid, sampling, len(ids), max_tokens, frozenset(), decoder=None)
    core.add(SchedRequest(rid, list(ids), max_tokens, tenant=tenant), tracker)


def engine(model: Path, preempt: bool) -> EngineCore:
    config = EngineConfig(str(model), num_kv_blocks=64, block_size=4, max_num_seqs=2, fairness_preemption=preempt)
    core = EngineCore(build_engine_parts(config))
    if preempt:  # bounds small enough to act within this short run
        queue = core.scheduler.queue
        assert isinstance(queue, FairQueue) and isinstance(core.scheduler.fair_preemption, FairPreemption)
        core.scheduler.fair_preemption = FairPreemption(queue, FairPreemptionConfig(min_gap=4.0, min_run_tokens=2))
    return core


def flood_and_light(core: EngineCore, abort: str | None = None) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Three flood requests on two slots, then two light ones; every request's tokens and the
    step at which each got its first token."""
    tokens: dict[str, list[int]] = {}
    first: dict[str, int] = {}
    for rid, ids in FLOOD.items():
        add(core, rid, "flood", ids, 24)
    for n in range(400):
        if n == 3:
            for rid, ids in LIGHT.items():
                add(core, rid, "light", ids, 6)
        if n == 8 and abort is not None:
            core.abort(abort)
        for out in core.step().outputs:
            tokens.setdefault(out.request_id, []).extend(out.token_ids)
            first.setdefault(out.request_id, n)
        if not core.has_unfinished:
            break
    return tokens, first


def test_preempted_and_resumed_requests_decode_the_same_greedy_tokens(tiny_model_dir: Path) -> None:
    plain = engine(tiny_model_dir, preempt=False)
    assert plain.scheduler.fair_preemption is None
    want, first_plain = flood_and_light(plain)
    fair = engine(tiny_model_dir, preempt=True)
    got, first_fair = flood_and_light(fair)
    sched = fair.scheduler
    assert sched.num_fairness_preemptions >= 1 and plain.scheduler.num_preemptions == 0
    assert got == want and all(len(got[r]) == 24 for r in FLOOD) and all(len(got[r]) == 6 for r in LIGHT)
    # the light tenant's first token came sooner than behind a finishing flood request
    assert first_fair["l1"] < first_plain["l1"]
    # resumes found their full blocks in the prefix cache: less than a block redone each
    assert sched.num_fairness_recomputed_tokens < 4 * sched.num_fairness_preemptions
    bm = sched.kv
    assert isinstance(bm, BlockManager) and bm.check_pool_whole() and bm.num_tracked_requests == 0


def test_aborting_a_preempted_request_leaks_no_block(tiny_model_dir: Path) -> None:
    core = engine(tiny_model_dir, preempt=True)
    tokens, _ = flood_and_light(core, abort="f2")
    assert core.scheduler.num_fairness_preemptions >= 1 and len(tokens.get("f2", [])) < 24
    bm = core.scheduler.kv
    assert isinstance(bm, BlockManager) and bm.check_pool_whole() and bm.num_tracked_requests == 0


def test_fairness_preemption_is_an_engine_option_on_by_default_with_the_fair_queue(tiny_model_dir: Path) -> None:
    model = str(tiny_model_dir)
    on = build_engine_parts(EngineConfig(model, num_kv_blocks=8)).scheduler
    assert isinstance(on.fair_preemption, FairPreemption) and on.fair_preemption.queue is on.queue
    assert build_engine_parts(EngineConfig(model, num_kv_blocks=8), wait_queue=FCFSQueue()).scheduler.fair_preemption is None
    args = build_parser().parse_args(["engine", "--model", model])
    assert EngineConfig.from_args(args).fairness_preemption is True
    args = build_parser().parse_args(["engine", "--model", model, "--no-fairness-preemption"])
    assert EngineConfig.from_args(args).fairness_preemption is False
    assert on.fair_preemption.config.slot_share is True
    args = build_parser().parse_args(["engine", "--model", model, "--no-fairness-slot-share"])
    gap_only = build_engine_parts(EngineConfig.from_args(args)).scheduler.fair_preemption
    assert isinstance(gap_only, FairPreemption) and gap_only.config.slot_share is False
    # a returning tenant's lead: the fair queue's active lead, 1024 cost units unless told
    assert isinstance(on.queue, FairQueue) and on.queue.config.active_lead == 1024.0
    args = build_parser().parse_args(["engine", "--model", model, "--fairness-active-lead", "0"])
    level = build_engine_parts(EngineConfig.from_args(args)).scheduler.queue
    assert isinstance(level, FairQueue) and level.config.active_lead == 0.0
    with pytest.raises(ValueError, match="active_lead"):
        EngineConfig(model, fairness_active_lead=-1.0).validate()


def test_preemptions_are_counted_by_cause() -> None:
    stats = EngineStats(preemptions=5, fairness_preemptions=2, recomputed_tokens=30, fairness_recomputed_tokens=3)
    got = {(m.name, s.labels["cause"]): s.value for m in _preemption_counters(stats, "tiny") for s in m.samples
           if s.name.endswith("_total")}
    assert got == {
        ("fairgate_preemptions", "kv"): 3, ("fairgate_preemptions", "fairness"): 2,
        ("fairgate_preemption_recomputed_tokens", "kv"): 27, ("fairgate_preemption_recomputed_tokens", "fairness"): 3,
    }
