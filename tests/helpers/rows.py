"""Small helpers for tests that count rows in a real database and wait for writers."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import func, select

from fairgate.gateway.billing.usage import UsageEvent
from fairgate.gateway.store.db import make_engine
from fairgate.gateway.store.tables import UsageRecord


def wait_for(pred: Any, timeout: float = 20.0, what: str = "condition not reached") -> None:
    """Poll `pred` every 50 ms until it is true; fail with `what` after `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(what)


def count(url: str, table: Any, *where: Any) -> int:
    """Rows of `table` (a mapped class) matching `where`, read on a fresh connection."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one()
    finally:
        engine.dispose()


def usage_rows(url: str) -> dict[str, UsageRecord]:
    """Every usage row, by request id, read on a fresh connection."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {r.request_id: r for r in conn.execute(select(UsageRecord))}
    finally:
        engine.dispose()


def event(rid: str, **kw: Any) -> UsageEvent:
    """A plausible usage event; keyword arguments override its fields."""
    values: dict[str, Any] = dict(
        request_id=rid, tenant_id="t1", key_prefix="fg-x", model="m", backend="b", priority="standard",
        status="finished", stream=False, prompt_tokens=1, completion_tokens=2, usage_estimated=False, cost=0.0,
        http_status=200, ttft_ms=None, latency_ms=1.0)
    return UsageEvent(**(values | kw))
