"""Routing audit rows, written off the hot path.

`Router.decide` hands each decision to `RoutingAuditWriter.record()` (cleaning and a list
append, no I/O); batches are written in a worker thread and retried with backoff while the
database is unavailable, like usage rows; a batch the database refuses for its data is
written row by row and what still fails is quarantined (`gateway.row_writer`). Rows hold
the decision and its reasons, never prompt text.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import weakref
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert
from sqlalchemy.dialects import postgresql, sqlite

from gateway.row_writer import BatchLoop, WriteCounts, clean_text, column_widths, write_rows
from gateway.tables import new_id, utcnow
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
    entry_id: str = field(default_factory=new_id)  # makes a retried insert idempotent


@functools.cache
def _widths() -> dict[str, int]:
    return column_widths(RoutingAudit)


def clean_record(rec: AuditRecord) -> AuditRecord:
    """Strings cut to their columns and NUL removed, inside the JSON lists too (a model name
    is the client's: it must not be able to make the row, or its batch, unstorable)."""
    widths = _widths()
    for name in ("tenant_id", "model", "priority", "rule_id", "decision", "request_id"):
        v = getattr(rec, name)
        if isinstance(v, str):
            setattr(rec, name, clean_text(v, widths.get(name)))
    for name in ("reasons", "finding_kinds", "backends"):
        setattr(rec, name, [clean_text(str(v), 500) for v in getattr(rec, name)])
    return rec


def _insert(conn: Connection, rows: list[AuditRecord]) -> None:
    # ON CONFLICT on entry_id: a batch whose commit went through but whose answer was lost
    # (the connection cut at that moment) is retried without writing its rows twice
    dialect = conn.dialect.name
    if dialect in ("postgresql", "sqlite"):
        module = postgresql if dialect == "postgresql" else sqlite
        stmt = module.insert(RoutingAudit).on_conflict_do_nothing(index_elements=["entry_id"])
    else:
        stmt = insert(RoutingAudit)
    conn.execute(stmt, [asdict(r) for r in rows])


def _as_dict(rec: AuditRecord) -> dict[str, Any]:
    return asdict(rec)


class RoutingAuditWriter:
    """Batches audit rows in a `BatchLoop` started by the first row recorded on an event loop
    (the app's lifespan need not know about it); rows recorded without a loop are written at
    once, and rows still queued when the process exits are written by an atexit hook."""

    def __init__(self, engine: Engine, interval_s: float = 0.2, max_backoff_s: float = 5.0) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self._batches = BatchLoop[AuditRecord]("routing-audit-writer", self._write, 500, interval_s, max_backoff_s)
        self._batches.on_failure = self._on_failure
        self._batches.on_success = self._on_success
        self._down = False
        self.recorded = 0  # rows handed over: written + quarantined + pending
        self._counts = WriteCounts()
        atexit.register(_flush_at_exit, weakref.ref(self))

    @property
    def written(self) -> int:
        return self._counts.written

    @property
    def quarantined(self) -> int:
        return self._counts.quarantined

    @property
    def failures(self) -> int:
        return self._batches.failures

    @property
    def pending(self) -> int:
        return len(self._batches.pending)

    def record(self, rec: AuditRecord) -> None:
        """Queue one row (called on the hot path)."""
        self.recorded += 1
        self._batches.add(clean_record(rec))
        if self._batches.running:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop (a sync caller): write now
            self._write_sync()
            return
        self._batches.start()

    async def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until everything queued so far is written (the audit endpoint, tests); False
        when the database did not take it within `timeout_s` (the rows stay queued)."""
        if not self._batches.running:
            await asyncio.to_thread(self._write_sync)
            return not self._batches.pending
        return await self._batches.flush(timeout_s)

    async def stop(self, timeout_s: float = 10.0) -> None:
        """At shutdown: write what is queued (rows the database does not take within
        `timeout_s` are tried once more by the atexit hook)."""
        if not await self._batches.stop(timeout_s):
            log.error("routing audit writer stopped with %d rows unwritten", self.pending)

    def _on_failure(self, exc: Exception) -> None:
        if not self._down:
            self._down = True
            log.warning("routing audit write failed (%s); %d rows queued, retrying",
                        type(exc).__name__, self.pending)

    def _on_success(self) -> None:
        if self._down:
            self._down = False
            log.warning("routing audit database reachable again")

    def _write(self, batch: list[AuditRecord]) -> None:
        write_rows(self.engine, "routing_audit", batch, _insert, _as_dict, lambda r: r.request_id, self._counts)

    def _write_sync(self) -> None:
        """Write what is queued now, from a thread or at exit (no retry: the loop retries)."""
        pending = self._batches.pending
        batch = pending[:]
        n = len(batch)
        try:
            self._write(batch)
        except Exception as exc:  # the audit must never take the request path down
            log.warning("routing audit write failed for %d rows (%s)", len(batch), type(exc).__name__)
        del pending[: n - len(batch)]


def _flush_at_exit(ref: weakref.ReferenceType[RoutingAuditWriter]) -> None:
    writer = ref()
    if writer is not None:
        writer._write_sync()
