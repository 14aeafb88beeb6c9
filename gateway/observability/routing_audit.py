"""Routing audit rows, written off the hot path.

`Router.decide` hands each decision to `RoutingAuditWriter.record()` (cleaning and a list
append, no I/O); batches are written in a worker thread and retried with backoff while the
database is unavailable, like usage rows; a batch the database refuses for its data is
written row by row and what still fails is quarantined (`gateway.store.row_writer`). Rows hold
the decision and its reasons, never prompt text.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import itertools
import logging
import os
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from operator import attrgetter
from typing import Any

import orjson
from sqlalchemy import Connection, Engine, insert

from fairgate.gateway.store.routing_tables import RoutingAudit
from fairgate.gateway.store.row_writer import (
    BatchLoop,
    CountsRows,
    WriteCounts,
    clean_fields,
    clean_text,
    write_rows,
)
from fairgate.gateway.store.tables import utcnow

log = logging.getLogger("fairgate.routing")


class _EntryIds:
    """Unique row ids at a counter's cost (uuid4 reads the OS's random source every call): 16
    random hex digits per process, then a count. A forked child draws its own prefix."""

    def __init__(self) -> None:
        self.reset()
        os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self._prefix = os.urandom(8).hex()
        self._count = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._count):016x}"


_entry_ids = _EntryIds()


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
    entry_id: str = field(default_factory=_entry_ids)  # makes a retried insert idempotent


def clean_record(rec: AuditRecord) -> AuditRecord:
    """Strings cut to their columns and NUL removed, inside the JSON lists too (a model name
    is the client's: it must not be able to make the row, or its batch, unstorable)."""
    clean_fields(rec, RoutingAudit, ("tenant_id", "model", "priority", "rule_id", "decision", "request_id"))
    for name in ("reasons", "finding_kinds", "backends"):
        setattr(rec, name, [clean_text(str(v), 500) for v in getattr(rec, name)])
    return rec


_JSON_FIELDS = ("reasons", "finding_kinds", "finding_spans", "backends")


@functools.cache
def _layout() -> tuple[tuple[str, ...], Callable[[AuditRecord], tuple[Any, ...]], tuple[int, ...], int]:
    """Column names, a getter of a record's values in that order, where the JSON columns sit,
    and where `at` sits."""
    names = tuple(f.name for f in fields(AuditRecord))
    return names, attrgetter(*names), tuple(names.index(n) for n in _JSON_FIELDS), names.index("at")


@functools.cache
def _insert_sql(paramstyle: str) -> str:
    # ON CONFLICT on entry_id: a batch whose commit went through but whose answer was lost
    # (the connection cut at that moment) is retried without writing its rows twice
    names = _layout()[0]
    mark = "?" if paramstyle == "qmark" else "%s"
    return (f"INSERT INTO routing_audit ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))}) "
            "ON CONFLICT (entry_id) DO NOTHING")


def _insert(conn: Connection, rows: list[AuditRecord]) -> None:
    """The driver's executemany, the JSON columns encoded by orjson: Core's per-row bind
    processing (asdict's deep copy, json.dumps per column) cost ~30 µs a row, in the writer
    thread but holding the GIL (as in gateway.billing.usage._insert_sql)."""
    dialect = conn.dialect
    if dialect.name not in ("postgresql", "sqlite"):
        conn.execute(insert(RoutingAudit), [asdict(r) for r in rows])
        return
    _, values_of, json_at, at = _layout()
    dates_as_text = dialect.name == "sqlite"  # in SQLAlchemy's SQLite storage format
    dumps = orjson.dumps
    params = []
    for r in rows:
        values = list(values_of(r))
        for i in json_at:
            v = values[i]
            values[i] = "[]" if v == [] else dumps(v).decode()  # most of these lists are empty
        if dates_as_text:
            values[at] = values[at].strftime("%Y-%m-%d %H:%M:%S.%f")
        params.append(tuple(values))
    conn.exec_driver_sql(_insert_sql(dialect.paramstyle), params)


def _as_dict(rec: AuditRecord) -> dict[str, Any]:
    return asdict(rec)


class RoutingAuditWriter(CountsRows):
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
