"""How fair the engine's fair queue is being, read at scrape time (issue 36: fairness seen).

Always, without naming tenants:
- `fairgate_fair_queue_backlogged_tenants{model, priority}`: tenants with requests waiting;
- `fairgate_fairness_jain_index{model}`: Jain's index, (Σx)² / (n·Σx²), over the tenants waiting
  now, of the service each received over the last WINDOW_S seconds divided by its weight. 1 means
  every backlogged tenant got service in proportion to its weight; 1/n means one got it all.
  With fewer than two tenants waiting there is no contention and the index is 1. The window is
  time, not "since the previous read", so Prometheus, the dashboard and anyone else reading the
  registry all see the same index.

With tenant labels allowed (`metrics_tenant_labels`: the labels list the tenants):
- `fairgate_tenant_service_total{model, tenant}`: service received (the fair queue's cost units:
  prompt and output tokens weighted by its `input_weight` / `output_weight`), its rate is the
  tenant's service rate;
- `fairgate_fair_queue_virtual_counter{model, tenant, priority}`: the VTC counter (weighted);
- `fairgate_fair_queue_waiting{model, tenant, priority}`: requests waiting;
- `fairgate_fairness_weight{model, tenant}`: the weight the gateway pushed.
A tenant's queue wait is the engine's `fairgate_request_queue_time_seconds` histogram.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from fairgate.scheduler.fair_queue import FairQueue, FairQueueStats
from fairgate.scheduler.request import PRIORITY_CLASSES


def jain_index(values: list[float]) -> float:
    """(Σx)² / (n·Σx²); 1.0 for fewer than two values or when nobody got anything."""
    if len(values) < 2:
        return 1.0
    square_sum = sum(v * v for v in values)
    return 1.0 if square_sum == 0 else sum(values) ** 2 / (len(values) * square_sum)


WINDOW_S = 15.0  # the service the index covers: about one Prometheus scrape interval


class FairnessGauges:
    """Keeps snapshots of the service served (one a second at most, as reads come) for the index's window."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._snapshots: deque[tuple[float, dict[str, float]]] = deque()

    def _window_start(self, served: dict[str, float]) -> dict[str, float]:
        """The service at the start of the window: the newest snapshot at least WINDOW_S old
        (the oldest one while the engine is younger than that)."""
        now = self._clock()
        if not self._snapshots or now - self._snapshots[-1][0] >= 1.0:
            self._snapshots.append((now, dict(served)))
        while len(self._snapshots) > 1 and now - self._snapshots[1][0] >= WINDOW_S:
            self._snapshots.popleft()
        return self._snapshots[0][1]

    def collect(self, queue: Any, model: str, tenant_labels: bool) -> Iterator[Metric]:
        if not isinstance(queue, FairQueue):
            return
        stats = queue.stats()
        backlogged: dict[int, set[str]] = {}
        for rank, tenant in stats.waiting:
            backlogged.setdefault(rank, set()).add(tenant)
        g = GaugeMetricFamily("fairgate_fair_queue_backlogged_tenants", "Tenants with requests waiting, by "
                              "priority class.", labels=["model", "priority"])
        for rank in sorted(set(range(len(PRIORITY_CLASSES))) | set(backlogged)):  # 0 too: a flat line reads
            g.add_metric([model, _class(rank)], len(backlogged.get(rank, ())))
        yield g
        waiting = set().union(*backlogged.values()) if backlogged else set()
        start = self._window_start(stats.served)
        shares = [(stats.served.get(t, 0.0) - start.get(t, 0.0)) / queue.weight_of(t) for t in waiting]
        j = GaugeMetricFamily("fairgate_fairness_jain_index", "Jain's index of the weighted service the "
                              f"backlogged tenants got over the last {WINDOW_S:g} s (1: in proportion to their "
                              "weights).", labels=["model"])
        j.add_metric([model], jain_index(shares))
        yield j
        d = CounterMetricFamily("fairgate_fair_queue_deadline_admissions", "Admissions a class's TTFT objective "
                                "moved ahead of the fair counters' order (--ttft-objective).", labels=["model"])
        d.add_metric([model], queue.deadline_picks)
        yield d
        if tenant_labels:
            yield from _per_tenant(stats, queue, model)


def _per_tenant(stats: FairQueueStats, queue: FairQueue, model: str) -> Iterator[Metric]:
    served = CounterMetricFamily("fairgate_tenant_service", "Service the tenant received (prompt and output "
                                 "tokens in the fair queue's cost units).", labels=["model", "tenant"])
    for tenant, value in sorted(stats.served.items()):
        served.add_metric([model, tenant], value)
    yield served
    counter = GaugeMetricFamily("fairgate_fair_queue_virtual_counter", "The tenant's VTC counter (weighted "
                                "service) in its priority class.", labels=["model", "tenant", "priority"])
    for (rank, tenant), value in sorted(stats.counters.items()):
        counter.add_metric([model, tenant, _class(rank)], value)
    yield counter
    waiting = GaugeMetricFamily("fairgate_fair_queue_waiting", "The tenant's requests waiting.",
                                labels=["model", "tenant", "priority"])
    for (rank, tenant), n in sorted(stats.waiting.items()):
        waiting.add_metric([model, tenant, _class(rank)], n)
    yield waiting
    weight = GaugeMetricFamily("fairgate_fairness_weight", "The tenant's fairness weight.",
                               labels=["model", "tenant"])
    for tenant in sorted(set(stats.weights) | set(stats.served)):
        weight.add_metric([model, tenant], queue.weight_of(tenant))
    yield weight


def _class(rank: int) -> str:
    return PRIORITY_CLASSES[rank] if 0 <= rank < len(PRIORITY_CLASSES) else str(rank)
