"""The engine's measured cost weights: the fit on synthetic steps (exact), what a real engine
records per step, and where it shows them (/stats, /health, /metrics)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.engine.step_cost import StepCostMeter, StepCosts
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.server import build_app
from tests.backends.local.test_engine_metrics import scrape, serve, value


def test_regression_recovers_the_weights_of_mixed_steps() -> None:
    m = StepCostMeter()
    # seconds = 0.001 per prefill token + 0.02 per decode step, steps of every mix
    for p, d in [(100, 0), (0, 4), (50, 2), (10, 8), (0, 1), (200, 1)]:
        m.record(p, d, 0.001 * p + 0.02 * d)
    c = m.costs()
    assert c is not None and c.method == "regression" and c.steps == 6
    assert c.prefill_s_per_token == pytest.approx(0.001, rel=1e-9)
    assert c.decode_s_per_step == pytest.approx(0.02, rel=1e-9)


def test_one_kind_only_falls_back_to_direct_attribution() -> None:
    m = StepCostMeter()
    m.record(0, 2, 0.05)
    m.record(0, 3, 0.07)
    c = m.costs()
    assert c == StepCosts(None, pytest.approx(0.12 / 5), 2, "direct")
    m.record(40, 0, 0.02)  # a pure prefill step gives the other weight (no step mixes the kinds:
    m.record(0, 0, 9.9)  # still direct, a ratio of sums); a step with no work is not recorded
    c = m.costs()
    assert c is not None and c.steps == 3 and c.method == "direct"
    assert c.prefill_s_per_token == pytest.approx(0.02 / 40)
    assert c.decode_s_per_step == pytest.approx(0.12 / 5)


def test_a_negative_fit_is_not_trusted() -> None:
    m = StepCostMeter()
    for p, d, t in [(10, 1, 0.01), (20, 1, 0.005), (0, 2, 0.04), (30, 0, 0.003)]:
        m.record(p, d, t)  # noise: more prefill made steps faster
    c = m.costs()
    assert c is not None and c.method == "direct"
    assert c.prefill_s_per_token == pytest.approx(0.003 / 30)
    assert c.decode_s_per_step == pytest.approx(0.04 / 2)


def test_window_and_empty() -> None:
    m = StepCostMeter(window=2)
    assert m.costs() is None
    for t in (1.0, 0.2, 0.4):
        m.record(0, 1, t)
    assert m.costs() == StepCosts(None, pytest.approx(0.3), 2, "direct")


def test_round_trip_and_refusals() -> None:
    c = StepCosts(0.001, 0.02, 7, "regression")
    assert StepCosts.from_dict(c.as_dict()) == c
    for bad in (None, [], {"steps": 0, "prefill_s_per_token": 1.0}, {"steps": 3},
                {"steps": 3, "prefill_s_per_token": -1.0}, {"steps": 3, "decode_s_per_step": "x"}):
        assert StepCosts.from_dict(bad) is None


async def test_engine_records_prefill_tokens_and_decode_steps(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_batched_tokens=8))
    try:
        prompt = list(range(5, 25))  # 20 tokens, in chunks of 8 + 8 + 4
        await engine.generate(prompt, SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))
        steps = list(engine.core.step_costs._steps)
        assert [(p, d) for p, d, _ in steps] == [(8, 0), (8, 0), (4, 0)] + [(0, 1)] * 5
        c = engine.step_costs()
        assert c is not None and c.steps == 8 and c.method == "direct"
        assert c.prefill_s_per_token == pytest.approx(sum(t for _, _, t in steps[:3]) / 20)
        assert c.decode_s_per_step == pytest.approx(sum(t for _, _, t in steps[3:]) / 5)
    finally:
        await engine.aclose()


def test_engine_server_shows_the_weights(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, served_model_name="tiny"))
    with serve(build_app(LocalBackend(engine))) as url, httpx.Client(base_url=url, timeout=60) as http:
        assert http.get("/health").json() == {"status": "ok", "step_costs": None}  # nothing ran yet
        _, before = scrape(http)
        assert not value(before, "fairgate_engine_decode_seconds_per_step")
        r = http.post("/v1/completions", json={"model": "tiny", "prompt": [5, 6, 7, 8], "max_tokens": 4,
                                                "ignore_eos": True})
        assert r.status_code == 200
        health, stats = http.get("/health").json(), http.get("/stats").json()
        _, m = scrape(http)
    costs = StepCosts.from_dict(stats["step_costs"])
    assert costs is not None and costs == StepCosts.from_dict(health["step_costs"]) and costs.steps == 4
    assert costs.prefill_s_per_token and costs.decode_s_per_step
    assert value(m, "fairgate_engine_prefill_seconds_per_token", model="tiny") == pytest.approx(
        costs.prefill_s_per_token)
    assert value(m, "fairgate_engine_decode_seconds_per_step", model="tiny") == pytest.approx(
        costs.decode_s_per_step)
