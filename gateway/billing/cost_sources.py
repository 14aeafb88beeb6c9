"""Where the real cost's inputs come from: hourly prices (the database and settings) and the
engines' measured weights (the embedded engine directly, engine servers over `GET /stats`).
Then `costed_report` puts them into a usage report (gateway/billing/reports.py)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from fairgate.backends.local.engine.step_cost import StepCosts
from fairgate.backends.pool_load import server_root
from fairgate.gateway.billing.cost import HourlyPrice
from fairgate.gateway.billing.reports import UsageReport, cost_report
from fairgate.gateway.store.pool_tables import PoolReplicaRow, PoolRow
from fairgate.gateway.store.tables import BackendRow

if TYPE_CHECKING:
    import httpx

    from fairgate.gateway.billing.state import BillingState

log = logging.getLogger("fairgate.cost")
STATS_TIMEOUT_S = 2.0


@dataclass(slots=True)
class PriceBook:
    hourly: dict[str, HourlyPrice] = field(default_factory=dict)
    engines: dict[str, list[str]] = field(default_factory=dict)  # backend → engine server roots to ask


def read_price_book(s: Session, embedded: str | None, embedded_hourly: float | None) -> PriceBook:
    """Every backend and pool with an hourly price, and the fairgate engine servers behind each
    (`local` kind: they measure their weights; a vLLM box does not, so it gets the default)."""
    book = PriceBook()
    for b in s.scalars(select(BackendRow).where(BackendRow.hourly_cost_usd.is_not(None))):
        book.hourly[b.name] = HourlyPrice(float(b.hourly_cost_usd or 0.0), b.created_at)
        if b.kind == "local":
            book.engines[b.name] = [server_root(b.base_url)]
    for p in s.scalars(select(PoolRow).where(PoolRow.hourly_cost_usd.is_not(None))):
        book.hourly[p.name] = HourlyPrice(float(p.hourly_cost_usd or 0.0), p.created_at)
        if p.kind == "local":
            urls = s.scalars(select(PoolReplicaRow.base_url).where(PoolReplicaRow.pool_id == p.id))
            book.engines[p.name] = [server_root(u) for u in urls]
    if embedded is not None and embedded_hourly is not None:
        book.hourly.setdefault(embedded, HourlyPrice(embedded_hourly))
    return book


def combine(readings: list[StepCosts | None]) -> StepCosts | None:
    """Several replicas' weights as one: each figure averaged over the replicas that measured
    it, weighted by their step counts."""
    got = [r for r in readings if r is not None]
    if not got:
        return None

    def mean(values: list[tuple[float | None, int]]) -> float | None:
        known = [(v, n) for v, n in values if v is not None]
        total = sum(n for _, n in known)
        return sum(v * n for v, n in known) / total if total else None

    return StepCosts(mean([(r.prefill_s_per_token, r.steps) for r in got]),
                     mean([(r.decode_s_per_step, r.steps) for r in got]), sum(r.steps for r in got),
                     got[0].method if len(got) == 1 else "replicas")


async def _read_stats(http: httpx.AsyncClient, root: str) -> StepCosts | None:
    try:
        r = await http.get(root + "/stats", timeout=STATS_TIMEOUT_S)
        return StepCosts.from_dict(r.json().get("step_costs")) if r.status_code == 200 else None
    except Exception as exc:  # an engine that does not answer: its weights are unknown
        log.info("engine weights unavailable from %s (%s)", root, type(exc).__name__)
        return None


async def measured_weights(state: BillingState, book: PriceBook) -> dict[str, StepCosts | None]:
    out: dict[str, StepCosts | None] = {}
    for name in book.hourly:
        if state.embedded is not None and name == state.embedded.name:
            out[name] = state.embedded.engine.step_costs()
        elif book.engines.get(name):
            out[name] = combine(list(await asyncio.gather(*(_read_stats(state.http, u) for u in book.engines[name]))))
        else:
            out[name] = None
    return out


async def costed_report(state: BillingState, tenant_id: str | None, start: datetime | None,
                        end: datetime | None, group_by: str, now: datetime | None = None) -> UsageReport:
    """The usage report with real costs: prices read, weights asked for, then the report."""
    embedded = state.embedded.name if state.embedded is not None else None

    def prices() -> PriceBook:
        with state.sessions() as s:
            return read_price_book(s, embedded, state.settings.embedded_hourly_cost_usd)

    book = await asyncio.to_thread(prices)
    weights = await measured_weights(state, book)

    def report() -> UsageReport:
        with state.sessions() as s:
            return cost_report(s, tenant_id, start, end, group_by, book.hourly, weights, now)

    return await asyncio.to_thread(report)
