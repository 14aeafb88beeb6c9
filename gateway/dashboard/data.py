"""What the dashboard reads from the database (every replica's requests): usage over a window
from the usage reports, quota consumption against the tenants' policies, and where requests went.
Plain functions over a session; the pages run them in a worker thread."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fairgate.gateway.billing.reports import usage_report
from fairgate.gateway.observability.refusals import refusal_reason
from fairgate.gateway.store.routing_tables import RoutingAudit
from fairgate.gateway.store.tables import QuotaPolicy, Tenant, UsageRecord, utcnow

SUMMED = ("requests", "prompt_tokens", "completion_tokens", "total_tokens", "cost")


@dataclass(slots=True)
class Usage:
    """Report rows of the window, per time bucket, with per-tenant totals."""

    group_by: str  # hour | day
    rows: list[dict[str, Any]]
    totals: dict[str, dict[str, Any]] = field(default_factory=dict)  # tenant id -> summed columns
    buckets: list[str] = field(default_factory=list)  # every bucket label of the window, in order

    @property
    def has_cost(self) -> bool:
        return any("cost" in r for r in self.rows)


def window(hours: int, now: datetime | None = None) -> tuple[datetime, datetime, str]:
    """(start, end, group_by) of the last `hours` hours: hourly buckets up to three days."""
    end = (now or utcnow()) + timedelta(seconds=1)
    return end - timedelta(hours=hours), end, "hour" if hours <= 72 else "day"


def bucket_labels(start: datetime, end: datetime, group_by: str) -> list[str]:
    """The labels the usage report gives each hour or day of [start, end), in order."""
    if group_by == "hour":
        t, step, fmt = start.replace(minute=0, second=0, microsecond=0), timedelta(hours=1), "%Y-%m-%dT%H:00:00"
    else:
        t, step, fmt = start.replace(hour=0, minute=0, second=0, microsecond=0), timedelta(days=1), "%Y-%m-%d"
    out = []
    while t < end:
        out.append(t.strftime(fmt))
        t += step
    return out


def usage(s: Session, tenant_id: str | None, start: datetime, end: datetime, group_by: str) -> Usage:
    rows = usage_report(s, tenant_id, start, end, group_by)
    totals: dict[str, dict[str, Any]] = {}
    for r in rows:
        t = totals.setdefault(r["tenant_id"], {})
        for k, v in r.items():  # every numeric column, cost and what later helpers add included
            if k not in ("tenant_id", "group") and isinstance(v, int | float) and not k.endswith("per_million_tokens"):
                t[k] = t.get(k, 0) + v
    for t in totals.values():  # per-million figures are ratios: recomputed, never summed
        if "cost" in t and t.get("total_tokens"):
            t["cost_per_million_tokens"] = t["cost"] / t["total_tokens"] * 1e6
    return Usage(group_by, rows, totals, bucket_labels(start, end, group_by))


def tenant_names(s: Session) -> dict[str, str]:
    return dict(s.execute(select(Tenant.id, Tenant.name)).tuples().all())


@dataclass(slots=True)
class QuotaUse:
    tenant_id: str
    limit_name: str  # daily_tokens | monthly_tokens | monthly_cost
    used: float
    limit: float

    @property
    def share(self) -> float:
        return self.used / self.limit if self.limit else 0.0


def _used_since(s: Session, since: datetime, tenant_id: str | None) -> dict[str, tuple[int, float]]:
    q = select(UsageRecord.tenant_id, func.sum(UsageRecord.total_tokens), func.sum(UsageRecord.cost)).where(
        UsageRecord.created_at >= since).group_by(UsageRecord.tenant_id)
    if tenant_id is not None:
        q = q.where(UsageRecord.tenant_id == tenant_id)
    return {t: (int(n or 0), float(c or 0.0)) for t, n, c in s.execute(q).all()}


def quota_use(s: Session, tenant_id: str | None, now: datetime | None = None) -> list[QuotaUse]:
    """Each tenant-level daily/monthly limit against what the tenant used today / this month (UTC)."""
    now = now or utcnow()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    q = select(QuotaPolicy).where(QuotaPolicy.key_id.is_(None))
    if tenant_id is not None:
        q = q.where(QuotaPolicy.tenant_id == tenant_id)
    policies = s.scalars(q).all()
    if not policies:
        return []
    today, this_month = _used_since(s, day, tenant_id), _used_since(s, month, tenant_id)
    out = []
    for p in sorted(policies, key=lambda p: p.tenant_id):
        d_tok = today.get(p.tenant_id, (0, 0.0))[0]
        m_tok, m_cost = this_month.get(p.tenant_id, (0, 0.0))
        for name, used, limit in (("daily_tokens", d_tok, p.daily_tokens), ("monthly_tokens", m_tok, p.monthly_tokens),
                                  ("monthly_cost", m_cost, p.monthly_cost)):
            if limit:
                out.append(QuotaUse(p.tenant_id, name, float(used), float(limit)))
    return out


def requests_by_backend(s: Session, tenant_id: str | None, start: datetime, end: datetime
                        ) -> dict[str, tuple[int, int]]:
    """backend name ("" for requests refused before one) -> (requests, tokens) in the window."""
    q = select(UsageRecord.backend, func.count(), func.sum(UsageRecord.total_tokens)).where(
        UsageRecord.created_at >= start, UsageRecord.created_at < end).group_by(UsageRecord.backend)
    if tenant_id is not None:
        q = q.where(UsageRecord.tenant_id == tenant_id)
    return {b or "": (int(n), int(t or 0)) for b, n, t in s.execute(q).all()}


def routing_decisions(s: Session, start: datetime, end: datetime) -> dict[str, int]:
    """Audited routing decisions of the window: sensitive kept local, others, refused. Grouped by
    the stored columns: PostgreSQL does not match `status = $1` in the select list to `status = $2`
    in GROUP BY (each comparison binds its own 200), so the comparison is made here."""
    q = select(RoutingAudit.sensitive, RoutingAudit.status, func.count()).where(
        RoutingAudit.at >= start, RoutingAudit.at < end).group_by(RoutingAudit.sensitive, RoutingAudit.status)
    out: dict[str, int] = defaultdict(int)
    for sensitive, status, n in s.execute(q).all():
        if status != 200:
            out["refused"] += int(n)
        else:
            out["sensitive (local only)" if sensitive else "not sensitive"] += int(n)
    return dict(out)


TENANT_ROWS = 100_000  # the newest rows a tenant page reads: its percentiles hold well before that


@dataclass(slots=True)
class TenantRequests:
    """One tenant's requests in the window, from its usage rows: every replica's, with no need
    for tenant labels on the metrics. Served rows (reached a backend, status under 400) carry
    the figures; refused rows only count, by reason, so an instant 400 is no fast answer."""

    ttft_ms: dict[str, list[float]] = field(default_factory=dict)  # route -> TTFT of served rows with one
    latency_ms: dict[str, list[float]] = field(default_factory=dict)  # route -> end-to-end of served rows
    prompt_tokens: dict[str, int] = field(default_factory=dict)  # route -> prompt tokens of served rows
    cached_tokens: dict[str, int] = field(default_factory=dict)  # route -> of those, found in a prefix cache
    refused: dict[tuple[int, str], int] = field(default_factory=dict)  # (HTTP status, reason) -> refused rows
    truncated: bool = False  # more than TENANT_ROWS rows: the newest were read

    @property
    def served(self) -> int:
        return sum(len(v) for v in self.latency_ms.values())

    @property
    def total(self) -> int:
        return self.served + sum(self.refused.values())


def tenant_requests(s: Session, tenant_id: str, start: datetime, end: datetime,
                    limit: int = TENANT_ROWS) -> TenantRequests:
    q = select(UsageRecord.route, UsageRecord.backend, UsageRecord.http_status, UsageRecord.ttft_ms,
               UsageRecord.latency_ms, UsageRecord.prompt_tokens, UsageRecord.cached_tokens,
               UsageRecord.error_code).where(
        UsageRecord.tenant_id == tenant_id, UsageRecord.created_at >= start, UsageRecord.created_at < end,
    ).order_by(UsageRecord.created_at.desc()).limit(limit + 1)
    rows = s.execute(q).tuples().all()
    out = TenantRequests(truncated=len(rows) > limit)
    for route, backend, status, ttft, latency, prompt, cached, code in rows[:limit]:
        if not backend or (status or 200) >= 400:
            key = (status or 0, refusal_reason(status or 0, code) if code or status != 400 else "")
            out.refused[key] = out.refused.get(key, 0) + 1
            continue
        route = route or "(no route)"
        out.latency_ms.setdefault(route, []).append(float(latency or 0.0))
        if ttft is not None:
            out.ttft_ms.setdefault(route, []).append(float(ttft))
        out.prompt_tokens[route] = out.prompt_tokens.get(route, 0) + int(prompt or 0)
        out.cached_tokens[route] = out.cached_tokens.get(route, 0) + int(cached or 0)
    return out
