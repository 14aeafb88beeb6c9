"""The fair queue seen on /metrics (issue 36): Jain's index of the weighted service backlogged
tenants got between scrapes, backlogged tenants per class, and, where tenant labels are allowed,
each tenant's service, VTC counter, waiting requests and weight."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
from fairgate.backends.local.engine.fairness_metrics import jain_index
from fairgate.backends.local.engine.metrics import EngineStatsCollector
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.scheduler.fair_queue import FairQueue


def test_jain_index() -> None:
    assert jain_index([]) == jain_index([5.0]) == jain_index([0.0, 0.0]) == 1.0
    assert jain_index([2.0, 2.0, 2.0]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)  # one of two got everything
    assert jain_index([3.0, 1.0]) == pytest.approx(0.8)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def _value(samples: dict, name: str, **labels: str) -> list[float]:
    want = set(labels.items())
    return [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]


async def test_the_fair_queue_on_metrics(tiny_model_dir: Path) -> None:
    engine = AsyncEngine(EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_seqs=1),
                         wait_queue=FairQueue())
    engine.set_fairness({"a": 1.0, "b": 3.0})
    named, anonymous = CollectorRegistry(), CollectorRegistry()
    named.register(EngineStatsCollector(engine, "tiny", tenant_labels=True))
    anonymous.register(EngineStatsCollector(engine, "tiny"))
    params = SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True)
    try:
        tasks = [asyncio.create_task(engine.generate([5 + i, 6, 7, 8], params, request_id=f"{t}{i}", tenant=t))
                 for i in range(6) for t in ("a", "b")]
        # both tenants queue behind the one slot: read while they do (however far a busy machine
        # let the engine get between two reads; it takes hundreds of steps to drain either line)
        busy: dict | None = None
        while busy is None and not all(task.done() for task in tasks):
            sample = _samples(named)
            if engine.stats().steps and sum(_value(sample, "fairgate_fair_queue_backlogged_tenants", model="tiny")) == 2.0:
                busy = sample
            await asyncio.sleep(0.002)
        assert busy is not None, "the metrics never showed both tenants backlogged"
        assert 0.0 < _value(busy, "fairgate_fairness_jain_index", model="tiny")[0] <= 1.0
        assert _value(busy, "fairgate_fairness_weight", tenant="b") == [3.0]
        assert sum(_value(busy, "fairgate_fair_queue_waiting", tenant="a")) >= 1
        await asyncio.gather(*tasks)
        done = _samples(named)
        served = engine.scheduler.queue.stats().served
        assert served["a"] > 0 and served["b"] > 0
        assert _value(done, "fairgate_tenant_service_total", tenant="a") == [pytest.approx(served["a"])]
        assert _value(done, "fairgate_fair_queue_virtual_counter", tenant="b")
        assert _value(done, "fairgate_fairness_jain_index", model="tiny") == [1.0]  # nobody waits now
        quiet = _samples(anonymous)  # no tenant labels: no tenant named anywhere
        assert not [k for k in quiet if dict(k[1]).get("tenant")]
        assert _value(quiet, "fairgate_fairness_jain_index", model="tiny")
    finally:
        await engine.aclose()


def test_the_index_window_is_time_so_every_reader_sees_the_same() -> None:
    """The dashboard reading the registry between two Prometheus scrapes must not move the
    scrape's window: the index covers the last WINDOW_S seconds, however often it is read."""
    from fairgate.backends.local.engine.fairness_metrics import WINDOW_S, FairnessGauges
    from fairgate.scheduler.fair_queue import FairQueue
    from fairgate.scheduler.request import SchedRequest

    def index(gauges: FairnessGauges) -> float:
        for metric in gauges.collect(queue, "m", tenant_labels=False):
            if metric.name == "fairgate_fairness_jain_index":
                return metric.samples[0].value
        raise AssertionError("no index")

    now = [0.0]
    queue = FairQueue()
    a, b = SchedRequest("a", [1, 2], 4, tenant="a"), SchedRequest("b", [3, 4], 4, tenant="b")
    queue.push(a)
    queue.push(b)  # both backlogged
    quiet, busy = FairnessGauges(lambda: now[0]), FairnessGauges(lambda: now[0])
    assert index(quiet) == index(busy) == 1.0  # no service yet
    for step in range(int(WINDOW_S) + 5):
        now[0] = float(step + 1)
        queue.on_decode(a, 3)  # a gets three times b's service
        queue.on_decode(b, 1)
        index(busy)  # read every second; `quiet` is not read meanwhile
    assert index(busy) == pytest.approx(index(quiet)) == pytest.approx(0.8)


def test_ttft_objective_admissions_in_the_engine_and_on_metrics(tiny_model_dir: Path) -> None:
    """With an interactive objective every waiting request here is due: the earliest arrival goes
    first among tenants the counters hold level (counters alone alternate a and b), the tokens
    are the same, and /metrics counts each admission that went against the counters' order."""
    from fairgate.backends.local.engine.core import EngineCore
    from fairgate.backends.local.engine.factory import build_engine_parts
    from fairgate.backends.local.engine.fairness_metrics import FairnessGauges
    from fairgate.backends.local.engine.output import OutputTracker
    from fairgate.scheduler.request import SchedRequest

    def run(objectives: tuple[str, ...]) -> tuple[list[str], dict[str, list[int]], EngineCore]:
        cfg = EngineConfig(str(tiny_model_dir), num_kv_blocks=64, max_num_seqs=1, ttft_objectives=objectives)
        core = EngineCore(build_engine_parts(cfg))
        params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
        for rid in ("a0", "a1", "a2", "b0", "b1", "b2"):
            ids = [5 + int(rid[1]), 6, 7] if rid[0] == "a" else [9 + int(rid[1]), 6, 7]
            arrival = int(rid[1]) * 1e-3 + (0.01 if rid[0] == "b" else 0.0)  # a's three first, then b's
            core.add(SchedRequest(rid, ids, 4, tenant=rid[0], priority=0, arrival_time=arrival),
                     OutputTracker(rid, params, 3, 4, frozenset(), decoder=None))
        order: list[str] = []
        tokens: dict[str, list[int]] = {}
        while core.has_unfinished:
            for out in core.step().outputs:
                if out.request_id not in tokens:
                    order.append(out.request_id)
                tokens.setdefault(out.request_id, []).extend(out.token_ids)
        return order, tokens, core

    plain_order, plain_tokens, plain = run(())
    order, tokens, core = run(("interactive=0.001",))
    assert plain_order == ["a0", "b0", "a1", "b1", "a2", "b2"]  # the counters alternate
    assert order == ["a0", "a1", "a2", "b0", "b1", "b2"]  # all due: earliest arrival first
    queue = core.scheduler.queue
    assert isinstance(queue, FairQueue) and queue.deadline_picks == 2  # a1 and a2 went before b0
    assert tokens == plain_tokens
    metric = next(m for m in FairnessGauges().collect(queue, "tiny", tenant_labels=False)
                  if m.name == "fairgate_fair_queue_deadline_admissions")
    assert [s.value for s in metric.samples if s.name.endswith("_total")] == [queue.deadline_picks]


def test_ttft_objectives_from_the_engine_flags(tiny_model_dir: Path) -> None:
    from fairgate.gateway.cli import build_parser

    def objectives(*flags: str) -> dict[int, float]:
        args = build_parser().parse_args(["engine", "--model", str(tiny_model_dir), *flags])
        return dict(EngineConfig.from_args(args).fairness_config().ttft_objectives)

    assert objectives() == {0: 1.0}  # interactive answers within a second by default
    assert objectives("--ttft-objective", "interactive=0.5", "--ttft-objective", "standard=4") == {0: 0.5, 1: 4.0}
    assert objectives("--ttft-objective", "none") == {}
    for bad in ("urgent=1", "interactive", "interactive=-2"):
        with pytest.raises(ValueError, match="(?i)ttft objective"):
            EngineConfig(str(tiny_model_dir), ttft_objectives=(bad,)).validate()
