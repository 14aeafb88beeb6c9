"""What the usage rows say each scope of a tenant used of its budgets this UTC day and month:
the figures a quota store rebuilds its counters from when it lost them (gateway.quota.rebuild).
One grouped query over the tenant's rows of the month (`ix_usage_created` leads with the time)."""

from __future__ import annotations

import asyncio
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session, sessionmaker

from fairgate.gateway.quota import BudgetSource, BudgetUse, cost_units
from fairgate.gateway.store.tables import ApiKey, UsageRecord, utcnow


def budgets_used(s: Session, tenant_id: str, now: datetime | None = None) -> dict[str, BudgetUse]:
    """{"t:<tenant>": its use, "k:<key id>": each key's} this UTC day and month, by the rows."""
    now = now or utcnow()
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    month = day.replace(day=1)
    today = func.sum(case((UsageRecord.created_at >= day, UsageRecord.total_tokens), else_=0))
    q = (select(UsageRecord.key_prefix, today, func.sum(UsageRecord.total_tokens), func.sum(UsageRecord.cost))
         .where(UsageRecord.tenant_id == tenant_id, UsageRecord.created_at >= month)
         .group_by(UsageRecord.key_prefix))
    rows = [(prefix, int(d or 0), int(m or 0), float(c or 0.0)) for prefix, d, m, c in s.execute(q).all()]
    key_ids = dict(s.execute(select(ApiKey.prefix, ApiKey.id).where(
        ApiKey.prefix.in_([r[0] for r in rows]))).tuples().all()) if rows else {}
    out = {f"t:{tenant_id}": BudgetUse(sum(r[1] for r in rows), sum(r[2] for r in rows),
                                       cost_units(sum(r[3] for r in rows)))}
    for prefix, d, m, c in rows:
        if prefix in key_ids:
            out[f"k:{key_ids[prefix]}"] = BudgetUse(d, m, cost_units(c))
    return out


def budget_source(sessions: sessionmaker[Session]) -> BudgetSource:
    """`budgets_used` for a quota store, run in a worker thread."""

    async def used(tenant_id: str) -> dict[str, BudgetUse]:
        def load() -> dict[str, BudgetUse]:
            with sessions() as s:
                return budgets_used(s, tenant_id)

        return await asyncio.to_thread(load)

    return used
