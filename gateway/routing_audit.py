"""Routing audit rows, written off the hot path.

`Router.decide` hands each decision to `RoutingAuditWriter.record()` (a list append, no I/O);
batches are written in a worker thread. Rows hold the decision and its reasons, never prompt
text.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import weakref
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert

from gateway.tables import utcnow
from gateway.tables_routing import RoutingAudit

log = logging.getLogger("fairgate.routing")


@dataclass(slots=True)
class AuditRecord:
    tenant_id: str
    model: str
    priority: str
    sensitive: bool
    reasons: list[str]
    finding_kinds: list[str]
    rule_id: str | None
    backends: list[str]
    decision: str
    status: int
    request_id: str | None = None
    finding_spans: list[list[Any]] = field(default_factory=list)  # [kind, start, end]: offsets, never text
    at: datetime = field(default_factory=utcnow)


class RoutingAuditWriter:
    """Batches audit rows; no long-lived task (the app's lifespan need not know about it): the
    first row of a batch schedules one write `interval_s` later in a worker thread, and rows
    still queued when the process exits are written by an atexit hook."""

    def __init__(self, engine: Engine, interval_s: float = 0.2) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self._pending: list[AuditRecord] = []
        self._scheduled = False
        self.written = 0
        atexit.register(_flush_at_exit, weakref.ref(self))

    def record(self, rec: AuditRecord) -> None:
        """Queue one row (a list append; called on the hot path)."""
        self._pending.append(rec)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a sync caller): write now
            self._write_sync()
            return
        self._scheduled = True
        loop.call_later(self.interval_s, self._kick, loop)

    async def flush(self) -> None:
        """Write everything queued so far (the audit endpoint, tests)."""
        await asyncio.to_thread(self._write_sync)

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        loop.run_in_executor(None, self._write_sync)

    def _write_sync(self) -> None:
        # Swapping the list is atomic under the GIL: a row appended meanwhile lands in one batch.
        rows, self._pending = self._pending, []
        if not rows:
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(RoutingAudit), [asdict(r) for r in rows])
            self.written += len(rows)
        except Exception as exc:  # the audit must never take the request path down
            log.warning("routing audit write failed for %d rows (%s)", len(rows), type(exc).__name__)


def _flush_at_exit(ref: weakref.ReferenceType[RoutingAuditWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer._write_sync()
