"""Per-replica Prometheus metrics of every backend pool, read at scrape time.

Gauges: outstanding requests (sent by this gateway), healthy (1/0), draining (1/0), KV usage
(0..1, as last probed). Counters: requests sent, failures, ejections, and requests routed to a
replica first by reason (affinity, spill, least_loaded, round_robin).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fairgate.backends.pool import PoolBackend


class PoolCollector(Collector):
    def __init__(self, backends: Callable[[], Mapping[str, Any]]) -> None:
        self._backends = backends  # the state's current map (replaced whole on rebuilds)

    def collect(self) -> Iterator[Metric]:
        pools = [b for b in self._backends().values() if isinstance(b, PoolBackend)]
        labels = ["pool", "replica"]
        gauges = {n: GaugeMetricFamily(f"fairgate_pool_replica_{n}", h, labels=labels) for n, h in (
            ("outstanding", "Requests in flight on the replica from this gateway."),
            ("healthy", "1 while the replica takes requests (not ejected)."),
            ("draining", "1 while the replica is draining."),
            ("kv_usage", "The replica's KV-cache usage (0..1) at the last probe."))}
        counters = {n: CounterMetricFamily(f"fairgate_pool_replica_{n}", h, labels=labels) for n, h in (
            ("requests", "Requests sent to the replica (fail-overs included)."),
            ("failures", "Requests the replica failed."),
            ("ejections", "Times the replica was ejected."))}
        routed = CounterMetricFamily("fairgate_pool_routed", "Requests routed to the replica first, by reason.",
                                     labels=[*labels, "reason"])
        for pool in pools:
            for r in pool.replicas.values():
                key = [pool.name, r.name]
                gauges["outstanding"].add_metric(key, r.outstanding)
                gauges["healthy"].add_metric(key, 1.0 if r.healthy else 0.0)
                gauges["draining"].add_metric(key, 1.0 if r.spec.draining else 0.0)
                if r.kv_usage is not None:
                    gauges["kv_usage"].add_metric(key, r.kv_usage)
                counters["requests"].add_metric(key, r.requests)
                counters["failures"].add_metric(key, r.failures)
                counters["ejections"].add_metric(key, r.ejections)
                for reason, n in r.routed.items():
                    routed.add_metric([*key, reason], n)
        yield from gauges.values()
        yield from counters.values()
        yield routed
