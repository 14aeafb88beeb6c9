"""Per-replica Prometheus metrics of every backend pool, read at scrape time.

Gauges: outstanding requests (sent by this gateway), healthy (1/0), draining (1/0), KV usage
(0..1, as last probed). Counters: requests sent, failures, ejections, and requests routed to a
replica first by reason (affinity, spill, least_loaded, round_robin, fair_queue: the fleet fair queue placed it).

The pool's fair queue (`pool_fair_slots`, backends/pool_gate.py and pool_fleet_gate.py):
`fairgate_pool_fair_waiting{pool}` requests waiting at this gateway, `fairgate_pool_fair_in_flight`
slots this gateway holds, `fairgate_pool_fair_waited_total` requests that had to wait; with tenant
labels allowed, `fairgate_pool_fair_counter{pool, tenant}`: the tenant's virtual counter (weighted
tokens served), fleet-wide where replicas share Redis (as of this gateway's last round), else this
process's. `fairgate_pool_fair_wait_seconds{pool[, tenant]}`: a histogram of each request's time
at the fair queue (0 when it went straight through; per tenant with tenant labels allowed; with
the shared ledger, fleet slots here and slots taken in local order while it was down). The shared clock's Redis cost: `fairgate_pool_clock_redis_calls_total` and
`fairgate_pool_clock_redis_seconds_total` (divide by requests for the cost per request).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from fairgate.backends.pool import PoolBackend
from fairgate.backends.pool_gate import WAIT_BUCKETS, FairGate, Waits


class PoolCollector(Collector):
    def __init__(self, backends: Callable[[], Mapping[str, Any]], tenant_labels: bool = False,
                 clock: Any = None) -> None:
        self._backends = backends  # the state's current map (replaced whole on rebuilds)
        self._tenant_labels = tenant_labels  # counters per tenant only where tenant ids may be labels
        self._clock = clock  # gateway.request.pool_clock.PoolClock, when pools share Redis

    def collect(self) -> Iterator[Metric]:
        pools = [b for b in self._backends().values() if isinstance(b, PoolBackend)]
        labels = ["pool", "replica"]
        gauges = {n: GaugeMetricFamily(f"fairgate_pool_replica_{n}", h, labels=labels) for n, h in (
            ("outstanding", "Requests in flight on the replica from this gateway."),
            ("healthy", "1 while the replica takes requests (not ejected)."),
            ("draining", "1 while the replica is draining."),
            ("kv_usage", "The replica's KV-cache usage (0..1) at the last probe."),
            ("waiting", "Requests waiting in the replica's own queue at the last probe."))}
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
                if r.engine_waiting is not None:
                    gauges["waiting"].add_metric(key, r.engine_waiting)
                counters["requests"].add_metric(key, r.requests)
                counters["failures"].add_metric(key, r.failures)
                counters["ejections"].add_metric(key, r.ejections)
                for reason, n in r.routed.items():
                    routed.add_metric([*key, reason], n)
        yield from gauges.values()
        yield from counters.values()
        yield routed
        yield from self._fair_queue(pools)

    def _fair_queue(self, pools: list[PoolBackend]) -> Iterator[Metric]:
        gated = [p for p in pools if p.options.fair_slots is not None]
        waiting = GaugeMetricFamily("fairgate_pool_fair_waiting", "Requests waiting at this gateway's fair queue.",
                                    labels=["pool"])
        held = GaugeMetricFamily("fairgate_pool_fair_in_flight", "Pool slots this gateway's requests hold.",
                                 labels=["pool"])
        waited = CounterMetricFamily("fairgate_pool_fair_waited", "Requests that waited at the fair queue.",
                                     labels=["pool"])
        counter = GaugeMetricFamily("fairgate_pool_fair_counter", "A tenant's virtual counter at the pool's fair "
                                    "queue (weighted tokens served; fleet-wide with Redis).", labels=["pool", "tenant"])
        waits = HistogramMetricFamily("fairgate_pool_fair_wait_seconds", "Time a request spent at the pool's "
                                      "fair queue before it was let through (0: straight through).",
                                      labels=["pool", "tenant"] if self._tenant_labels else ["pool"])
        for pool in gated:
            waiting.add_metric([pool.name], pool.gate.waiting)
            held.add_metric([pool.name], pool.gate.in_flight)
            waited.add_metric([pool.name], pool.gate.waited)
            for tenant, value in sorted(pool.gate.counters.items()) if self._tenant_labels else ():
                counter.add_metric([pool.name, tenant], value)
            for key, w in _waits(pool.gate, self._tenant_labels):
                cumulative = [(_bound(b), float(n)) for b, n in zip(WAIT_BUCKETS, w.buckets, strict=True)]
                waits.add_metric([pool.name, *key], cumulative, w.total_s)
        yield from (waiting, held, waited, counter, waits)
        if self._clock is not None:
            yield CounterMetricFamily("fairgate_pool_clock_redis_calls", "Redis calls of the pools' shared fair "
                                      "queue (admission rounds, releases, renewals).", value=self._clock.calls)
            yield CounterMetricFamily("fairgate_pool_clock_redis_seconds", "Time waited on those calls.",
                                      value=self._clock.seconds)


def _bound(b: float) -> str:
    return "+Inf" if b == float("inf") else repr(b)


def _waits(gate: Any, per_tenant: bool) -> list[tuple[list[str], Waits]]:
    """The gate's wait histograms (a fleet gate's and its local fallback's added), one per
    tenant or, without tenant labels, one for the pool."""
    merged: dict[str, Waits] = {}
    for part in (gate.waits, gate.local.waits) if not isinstance(gate, FairGate) else (gate.waits,):
        for tenant, w in part.items():
            into = merged.setdefault(tenant if per_tenant else "", Waits())
            into.count += w.count
            into.total_s += w.total_s
            into.buckets = [a + b for a, b in zip(into.buckets, w.buckets, strict=True)]
    return [([t] if per_tenant else [], w) for t, w in sorted(merged.items())]
