"""Usage reports: totals per tenant grouped by hour, day, model, backend or priority."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from backends.openai_wire import WireError
from gateway.tables import UsageRecord

GROUPS = ("hour", "day", "model", "backend", "priority")
COLUMNS = ("tenant_id", "group", "requests", "prompt_tokens", "completion_tokens", "total_tokens", "cost")


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


def usage_report(session: Session, tenant_id: str | None, start: datetime | None, end: datetime | None,
                 group_by: str) -> list[dict[str, Any]]:
    """Rows of COLUMNS, ordered by tenant then group; `end` is exclusive."""
    if group_by not in GROUPS:
        raise WireError(400, f"`group_by` must be one of {', '.join(GROUPS)}", "invalid_value", "group_by")
    g = _group_expr(session, group_by).label("grp")
    q = select(UsageRecord.tenant_id, g, func.count(), func.sum(UsageRecord.prompt_tokens),
               func.sum(UsageRecord.completion_tokens), func.sum(UsageRecord.total_tokens),
               func.sum(UsageRecord.cost)).group_by(UsageRecord.tenant_id, g)
    if tenant_id is not None:
        q = q.where(UsageRecord.tenant_id == tenant_id)
    if start is not None:
        q = q.where(UsageRecord.created_at >= start)
    if end is not None:
        q = q.where(UsageRecord.created_at < end)
    rows = session.execute(q.order_by(UsageRecord.tenant_id, g)).all()
    return [dict(zip(COLUMNS, (t, grp, int(n), int(p or 0), int(c or 0), int(tt or 0), float(cost or 0.0)),
                     strict=True)) for t, grp, n, p, c, tt, cost in rows]


def to_csv(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()
