"""Every upstream backend's circuit breaker (backends/breaker.py) as Prometheus metrics, read at
scrape time. A pool's replicas are listed by their backend names (`pool/replica`).

    fairgate_backend_breaker_state{backend}                  0 closed, 1 half-open, 2 open
    fairgate_backend_breaker_opened_total{backend}           backend-wide opens
    fairgate_backend_breaker_tenants_open{backend}           tenants backing off now
    fairgate_backend_breaker_tenant_opened_total{backend}    tenant sub-circuit opens

No tenant label: which tenants back off is in the admin view (`GET /admin/backends`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fairgate.backends.breaker import Breaker
from fairgate.backends.pool import PoolBackend


def breakers(backends: Mapping[str, Any]) -> Iterator[tuple[str, Breaker]]:
    """(backend name, breaker) of every backend that has one, pool replicas included."""
    for backend in backends.values():
        members = [r.backend for r in backend.replicas.values()] if isinstance(backend, PoolBackend) else [backend]
        for member in members:
            if member.breaker is not None:
                yield member.name, member.breaker


class BreakerCollector(Collector):
    def __init__(self, backends: Callable[[], Mapping[str, Any]]) -> None:
        self._backends = backends  # the state's current map (replaced whole on rebuilds)

    def collect(self) -> Iterator[Metric]:
        labels = ["backend"]
        state = GaugeMetricFamily("fairgate_backend_breaker_state", "The backend-wide circuit: 0 closed, "
                                  "1 half-open, 2 open.", labels=labels)
        opened = CounterMetricFamily("fairgate_backend_breaker_opened", "Times the backend-wide circuit "
                                     "opened.", labels=labels)
        tenants = GaugeMetricFamily("fairgate_backend_breaker_tenants_open", "Tenants whose requests to the "
                                    "backend are backing off now.", labels=labels)
        tenant_opened = CounterMetricFamily("fairgate_backend_breaker_tenant_opened", "Times a tenant's "
                                            "sub-circuit opened (its failures, or a Retry-After).", labels=labels)
        for name, breaker in breakers(self._backends()):
            state.add_metric([name], float(breaker.state))
            opened.add_metric([name], breaker.opened)
            tenants.add_metric([name], breaker.tenants_open())
            tenant_opened.add_metric([name], breaker.tenant_opened)
        yield from (state, opened, tenants, tenant_opened)
