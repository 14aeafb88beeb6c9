"""policies.advice, policies.replica_plan and policies.prompt_layout on hand-made numbers."""

from __future__ import annotations

from fairgate.policies.advice import (
    KV_QUANTIZATION,
    MORE_REPLICAS,
    SPEC_OFF,
    SPEC_ON,
    EngineWindow,
    RouteWindow,
    advise,
)
from fairgate.policies.prompt_layout import HEAD_CHARS, head_fingerprint
from fairgate.policies.replica_plan import plan_replicas, startup_rise


def _route(**kw) -> RouteWindow:
    values = dict(route="/v1/chat/completions", model="m", backend="m", requests=100, prompt_tokens=2000,
                  completion_tokens=20000)
    return RouteWindow(**(values | kw))


def _levers(routes, engines) -> dict[str, str | None]:
    return {a.finding: a.lever for a in advise(routes, engines)}


def test_speculation_with_low_acceptance_or_at_large_batches_goes_off():
    low = EngineWindow("m", steps=100, sampled_seqs=100, spec_draft_tokens=400, spec_accepted_tokens=40)
    assert _levers([_route()], {"m": low})["speculation not paying"] == SPEC_OFF
    big = EngineWindow("m", steps=100, sampled_seqs=3200, spec_draft_tokens=400, spec_accepted_tokens=300)
    assert _levers([_route()], {"m": big})["speculation not paying"] == SPEC_OFF
    good = EngineWindow("m", steps=100, sampled_seqs=100, spec_draft_tokens=400, spec_accepted_tokens=300)
    assert _levers([_route()], {"m": good})["decode-bound at batch 1"] is None  # keep it on
    off = EngineWindow("m", steps=100, sampled_seqs=100)
    assert _levers([_route()], {"m": off})["decode-bound at batch 1"] == SPEC_ON


def test_kv_pressure_levers():
    float_kv = EngineWindow("m", steps=10, sampled_seqs=80, preemptions=5, requests=100, kv_cache_dtype="bfloat16")
    assert _levers([_route()], {"m": float_kv})["memory-bound"] == KV_QUANTIZATION
    int8 = EngineWindow("m", steps=10, sampled_seqs=80, preemptions=5, requests=100, kv_cache_dtype="int8")
    assert _levers([_route()], {"m": int8})["memory-bound"] == MORE_REPLICAS
    queued = EngineWindow("m", steps=10, sampled_seqs=80, queue_s_sum=200.0, queue_n=100, kv_cache_dtype="int8")
    assert _levers([_route()], {"m": queued})["queueing"] == MORE_REPLICAS
    # under one preemption per hundred requests and no queueing: no pressure
    calm = EngineWindow("m", steps=10, sampled_seqs=80, preemptions=0, requests=100, queue_s_sum=1.0, queue_n=100)
    assert _levers([_route()], {"m": calm})["KV pressure"] is None


def test_no_engine_metrics_no_engine_findings_and_empty_routes_skipped():
    levers = _levers([_route(), _route(route="/v1/completions", requests=0)], {})
    assert set(levers) == {"decode-heavy", "prefix hit rate", "smaller model"}


def test_smaller_model_share():
    adv = {a.finding: a for a in advise([_route(scored=10, simple=4)], {})}
    assert adv["smaller model could serve"].numbers["simple_share"] == 0.4
    assert {a.finding for a in advise([_route(scored=10, simple=2)], {})} >= {"smaller model"}
    assert "smaller model could serve" not in {a.finding for a in advise([_route(model="auto", scored=10, simple=9)], {})}


def test_replica_plan_per_hour_with_a_startup_buffer():
    base = 20_000 * 1440  # a day boundary, epoch minutes
    # 09:00 busiest minute 12,000 tokens (200/s); 10:00 6,000 (100/s); a rise 50 → 150 tokens/s within 2 min
    load = {base + 9 * 60 + 5: 12_000, base + 10 * 60: 6_000, base + 10 * 60 + 30: 3_000, base + 10 * 60 + 32: 9_000}
    assert startup_rise(load, 120) == 2.0  # 3,000 → 9,000 within two minutes
    assert startup_rise(load, 60) == 0.0  # nothing one minute later
    plan = plan_replicas(load, capacity_tokens_per_s=50, startup_s=120)
    assert plan.buffer == 1.0  # the rise, capped
    assert plan.peak_tokens_per_s_by_hour[9] == 200.0 and plan.peak_tokens_per_s_by_hour[10] == 150.0
    assert plan.replicas_by_hour[9] == 8 and plan.replicas_by_hour[10] == 6 and plan.replicas_by_hour[0] == 1
    calm = plan_replicas(load, capacity_tokens_per_s=50, startup_s=30)
    assert calm.buffer == 0.2 and calm.replicas_by_hour[9] == 5  # ceil(200 x 1.2 / 50)


def test_head_fingerprint_sees_numbers_but_keeps_no_text():
    a = head_fingerprint(["Now: 2026-12-01T10:00:01Z. You are helpful.", "q1"])
    b = head_fingerprint(["Now: 2026-12-01T10:07:42Z. You are helpful.", "q2"])
    c = head_fingerprint(["Now: 2026-12-01T10:07:42Z. You are terse.", "q2"])
    assert a[0] != b[0] and a[1] == b[1] != c[1]  # same shape apart from numbers; the last message left out
    assert head_fingerprint([]) == ("", "") and len(a[0]) == len(a[1]) == 12
    long = "x" * (HEAD_CHARS + 10)
    assert head_fingerprint([long + "1"]) == head_fingerprint([long + "2"])  # only the head counts


def test_an_engine_with_a_fair_queue_is_judged_on_its_fairness():
    """Issue 36: Jain's index of the waiting tenants' weighted service at the window's end."""
    unfair = EngineWindow("m", steps=100, sampled_seqs=800, requests=100, jain=0.55, backlogged_tenants=3,
                          fairness_preemptions=0)
    found = {a.finding: a for a in advise([_route()], {"m": unfair})}
    assert found["unfair service"].numbers["jain"] == 0.55 and found["unfair service"].route == "*"
    fair = EngineWindow("m", steps=100, sampled_seqs=800, requests=100, jain=0.97, backlogged_tenants=2,
                        fairness_preemptions=12)
    found = {a.finding: a for a in advise([_route()], {"m": fair})}
    assert found["fair service"].numbers["fairness_preemptions_per_request"] == 0.12
    one = EngineWindow("m", steps=100, sampled_seqs=800, requests=100, jain=0.4, backlogged_tenants=1)
    assert "unfair service" not in {a.finding for a in advise([_route()], {"m": one})}  # no contention
    fcfs = EngineWindow("m", steps=100, sampled_seqs=800, requests=100)  # no fair queue: nothing said
    assert not {"fair service", "unfair service"} & {a.finding for a in advise([_route()], {"m": fcfs})}
