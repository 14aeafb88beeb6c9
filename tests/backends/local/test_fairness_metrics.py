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
    params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    try:
        tasks = [asyncio.create_task(engine.generate([5 + i, 6, 7, 8], params, request_id=f"{t}{i}", tenant=t))
                 for i in range(6) for t in ("a", "b")]
        while engine.stats().steps < 3:  # both tenants queue behind the one slot
            await asyncio.sleep(0.005)
        busy = _samples(named)
        assert sum(_value(busy, "fairgate_fair_queue_backlogged_tenants", model="tiny")) == 2.0
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
