"""The real cost in `/metrics`: per backend over the trailing hour (gateway/billing/cost.py), read from
the shared database, so every gateway replica reports the same fleet-wide figures.

The scrape refreshes the figures when they are older than `MAX_AGE_S` (one grouped query and
one `GET /stats` per engine server); a refresh that fails keeps the last figures.

    fairgate_backend_hourly_cost_usd{backend}                 the hardware price
    fairgate_backend_cost_usd{backend}                        cost over the last hour
    fairgate_backend_cost_per_million_tokens{backend,tokens}  tokens="total" | "generated"
    fairgate_backend_idle_share{backend}                      idle part of the paid hour
    fairgate_tenant_cost_usd{tenant,backend}                  each tenant's share (only with tenant labels on)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fairgate.gateway.billing.cost import BackendCost, per_million
from fairgate.gateway.store.tables import utcnow

if TYPE_CHECKING:
    from fairgate.gateway.observability.state import ObservabilityState

log = logging.getLogger("fairgate.cost")
MAX_AGE_S = 15.0
WINDOW = timedelta(hours=1)


class CostCollector(Collector):
    def __init__(self, tenant_labels: bool = False) -> None:
        self.tenant_labels = tenant_labels  # per-tenant shares only where tenant ids may be labels
        self.backends: dict[str, BackendCost] = {}
        self.refreshed = float("-inf")
        self._lock = asyncio.Lock()

    async def refresh(self, state: ObservabilityState, max_age_s: float = MAX_AGE_S) -> None:
        if time.monotonic() - self.refreshed < max_age_s:
            return
        async with self._lock:  # one refresh for scrapes that arrive together
            if time.monotonic() - self.refreshed < max_age_s:
                return
            from fairgate.gateway.billing.cost_sources import costed_report

            now = utcnow()
            try:
                report = await costed_report(state, None, now - WINDOW, now, "backend", now=now)
            except Exception as exc:  # the database blinked: keep the last figures
                log.warning("cost metrics not refreshed (%s)", type(exc).__name__)
                return
            self.backends, self.refreshed = report.backends, time.monotonic()

    def collect(self) -> Iterator[Metric]:
        price = GaugeMetricFamily("fairgate_backend_hourly_cost_usd", "Hardware price per hour.", labels=["backend"])
        cost = GaugeMetricFamily("fairgate_backend_cost_usd", "Cost over the last hour: hours paid x price, or "
                                 "list prices.", labels=["backend"])
        cpm = GaugeMetricFamily("fairgate_backend_cost_per_million_tokens", "Cost over the last hour per 1M "
                                "tokens (total or generated), idle time included.", labels=["backend", "tokens"])
        idle = GaugeMetricFamily("fairgate_backend_idle_share", "Part of the last hour paid with no request in "
                                 "flight (whole UTC minutes).", labels=["backend"])
        tenant = GaugeMetricFamily("fairgate_tenant_cost_usd", "Each tenant's share of a backend's cost over "
                                   "the last hour, by engine time.", labels=["tenant", "backend"])
        for name, b in sorted(self.backends.items()):
            if b.hourly_cost_usd is not None:
                price.add_metric([name], b.hourly_cost_usd)
            cost.add_metric([name], b.cost)
            for kind, tokens in (("total", b.total_tokens), ("generated", b.completion_tokens)):
                value = per_million(b.cost, tokens)
                if value is not None:
                    cpm.add_metric([name, kind], value)
            if b.idle_share is not None:
                idle.add_metric([name], b.idle_share)
            for t in b.tenants.values() if self.tenant_labels else ():
                tenant.add_metric([t.tenant_id, name], t.cost)
        yield from (price, cost, cpm, idle, tenant)
