"""Usage reports: totals per tenant grouped by hour, day, model, backend or priority, with the
real cost of every row and group (gateway/billing/cost.py) and per backend.

`cost_report` reads the usage of a window in one grouped query, plus the in-flight spans of the
backends that have an hourly price (one row each: backend, end, latency); prices and engine
weights come from the caller (gateway/billing/cost_sources.py), so this module does no network I/O.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fairgate.backends.local.engine.step_cost import StepCosts
from fairgate.backends.openai_wire import WireError
from fairgate.gateway.billing.cost import (
    BackendCost,
    Cell,
    HourlyPrice,
    backend_costs,
    cell_cost,
    per_million,
)
from fairgate.gateway.observability.refusals import refusal_reason
from fairgate.gateway.store.tables import UsageRecord, utcnow

GROUPS = ("hour", "day", "model", "backend", "priority")
COLUMNS = ("tenant_id", "group", "requests", "prompt_tokens", "completion_tokens", "total_tokens", "cost",
           "cost_per_million_tokens")
BACKEND_COLUMNS = ("backend", "pricing", "hourly_cost_usd", "hours", "busy_hours", "idle_hours", "idle_share",
                   "cost", "requests", "prompt_tokens", "completion_tokens", "total_tokens",
                   "cost_per_million_generated_tokens", "cost_per_million_tokens")
LONGEST_REQUEST = timedelta(hours=1)  # spans: rows that ended this long after the window may overlap it


def parse_time(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise WireError(400, f"`{name}` must be an ISO 8601 date or time", "invalid_value", name) from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(UTC).replace(tzinfo=None)  # rows are stored as naive UTC
    return dt


def _group_expr(session: Session, group_by: str):  # type: ignore[no-untyped-def]
    col = UsageRecord.created_at
    if group_by in ("hour", "day"):
        if session.get_bind().dialect.name == "postgresql":
            fmt = 'YYYY-MM-DD"T"HH24:00:00' if group_by == "hour" else "YYYY-MM-DD"
            return func.to_char(func.date_trunc(group_by, col), fmt)
        return func.strftime("%Y-%m-%dT%H:00:00" if group_by == "hour" else "%Y-%m-%d", col)
    return {"model": UsageRecord.model, "backend": UsageRecord.backend,
            "priority": UsageRecord.priority}[group_by]


def _in_window(q: Any, start: datetime | None, end: datetime | None) -> Any:
    if start is not None:
        q = q.where(UsageRecord.created_at >= start)
    if end is not None:
        q = q.where(UsageRecord.created_at < end)
    return q


def read_cells(session: Session, start: datetime | None, end: datetime | None, group_by: str) -> list[Cell]:
    """Usage of every tenant summed per (tenant, group, backend); `end` is exclusive."""
    if group_by not in GROUPS:
        raise WireError(400, f"`group_by` must be one of {', '.join(GROUPS)}", "invalid_value", "group_by")
    g = _group_expr(session, group_by).label("grp")
    q = select(UsageRecord.tenant_id, g, UsageRecord.backend, func.count(), func.sum(UsageRecord.prompt_tokens),
               func.sum(UsageRecord.completion_tokens), func.sum(UsageRecord.cost),
               func.sum(UsageRecord.cached_tokens)).group_by(UsageRecord.tenant_id, g, UsageRecord.backend)
    return [Cell(t, grp, b, int(n), int(p or 0), int(c or 0), float(cost or 0.0), int(cached or 0))
            for t, grp, b, n, p, c, cost, cached in session.execute(_in_window(q, start, end)).all()]


def read_refusals(session: Session, tenant_id: str | None, start: datetime | None, end: datetime | None
                  ) -> list[dict[str, Any]]:
    """Requests that got no answer, counted per tenant and reason (observability/refusals.py):
    rows with an HTTP status of 400 or more. Rows written before error codes were kept count by
    their status alone."""
    q = select(UsageRecord.tenant_id, UsageRecord.http_status, UsageRecord.error_code, func.count()).where(
        UsageRecord.http_status >= 400).group_by(UsageRecord.tenant_id, UsageRecord.http_status,
                                                  UsageRecord.error_code)
    if tenant_id is not None:
        q = q.where(UsageRecord.tenant_id == tenant_id)
    counts: dict[tuple[str, str], int] = {}
    for tenant, status, code, n in session.execute(_in_window(q, start, end)).all():
        key = (tenant, refusal_reason(int(status), code))
        counts[key] = counts.get(key, 0) + int(n)
    return [{"tenant_id": t, "reason": r, "requests": counts[(t, r)]} for t, r in sorted(counts)]


def read_spans(session: Session, backends: Iterable[str], start: datetime | None, end: datetime
               ) -> dict[str, list[tuple[datetime, datetime]]]:
    """(first, last) moment of every request on these backends that may overlap the window."""
    names = list(backends)
    if not names:
        return {}
    q = select(UsageRecord.backend, UsageRecord.created_at, UsageRecord.latency_ms).where(
        UsageRecord.backend.in_(names))
    out: dict[str, list[tuple[datetime, datetime]]] = {n: [] for n in names}
    for b, at, latency in session.execute(_in_window(q, start, end + LONGEST_REQUEST)).all():
        out[b].append((at - timedelta(milliseconds=latency or 0.0), at))
    return out


@dataclass(slots=True)
class UsageReport:
    rows: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    backends: dict[str, BackendCost] = field(default_factory=dict)
    start: datetime | None = None
    end: datetime | None = None
    refusals: list[dict[str, Any]] = field(default_factory=list)  # tenant, reason, requests

    def window(self) -> dict[str, str | None]:
        return {"from": _iso(self.start), "to": _iso(self.end)}

    def backend_rows(self) -> list[dict[str, Any]]:
        return [self.backends[n].as_dict() for n in sorted(self.backends)]


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat() + "Z"


def _totals(key: dict[str, Any]) -> dict[str, Any]:
    return {**key, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost": 0.0}


def _add(acc: dict[str, Any], c: Cell, cost: float) -> None:
    acc["requests"] += c.requests
    acc["prompt_tokens"] += c.prompt_tokens
    acc["completion_tokens"] += c.completion_tokens
    acc["total_tokens"] += c.prompt_tokens + c.completion_tokens
    acc["cost"] += cost


def _finish(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = list(rows)
    for r in out:
        r["cost_per_million_tokens"] = per_million(r["cost"], r["total_tokens"])
    return out


def cost_report(session: Session, tenant_id: str | None, start: datetime | None, end: datetime | None,
                group_by: str, prices: dict[str, HourlyPrice] | None = None,
                weights: dict[str, StepCosts | None] | None = None, now: datetime | None = None) -> UsageReport:
    """Rows of COLUMNS (ordered by tenant then group), per-group totals and per-backend costs.

    Every tenant's usage is read even for one tenant's report: a backend's cost is shared by
    engine time among all who used it. Hours are paid up to `end`, never past `now`."""
    prices = prices or {}
    paid_end = min(end, now or utcnow()) if end is not None else (now or utcnow())
    cells = read_cells(session, start, end, group_by)
    spans = read_spans(session, prices, start, paid_end)
    costs = backend_costs(cells, spans, prices, weights or {}, start, paid_end)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for c in cells:
        if tenant_id is not None and c.tenant_id != tenant_id:
            continue
        cost = cell_cost(c, costs)
        key = (c.tenant_id, c.group)
        _add(rows.get(key) or rows.setdefault(key, _totals({"tenant_id": c.tenant_id, "group": c.group})), c, cost)
        _add(groups.get(c.group) or groups.setdefault(c.group, _totals({"group": c.group})), c, cost)
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1] or ""))]
    return UsageReport(_finish(ordered), _finish(groups[g] for g in sorted(groups, key=lambda g: g or "")),
                       costs, start, paid_end if end is None else end, read_refusals(session, tenant_id, start, end))


def usage_report(session: Session, tenant_id: str | None, start: datetime | None, end: datetime | None,
                 group_by: str) -> list[dict[str, Any]]:
    """Rows at list prices only (no hourly prices known): see `cost_report`."""
    return cost_report(session, tenant_id, start, end, group_by).rows


def to_csv(rows: list[dict[str, Any]], columns: tuple[str, ...] = COLUMNS) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
