"""Usage records: one row per admitted request, written off the request path in batches.

`record()` cleans the row's client strings (see `gateway.store.row_writer`) and appends it to a
buffer. A background task writes batches in a worker thread with INSERT .. ON CONFLICT DO
NOTHING on the request id, so a retried batch never counts a request twice; a batch the
database refuses for its data is written row by row, the rows that still fail quarantined.

When the database is unreachable (`usage_on_db_unavailable`): `journal` (the default) moves
the queued rows to a local fsync'd file (`gateway.billing.journal`) and replays it when the
database is back; `refuse` keeps them queued and `accepting()` turns False so admission
answers 503 before reserving. A full journal also turns `accepting()` False: rows are
never dropped. Each change of the database's state is logged once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select

from fairgate.gateway.billing.journal import UsageJournal
from fairgate.gateway.billing.open_requests import OpenRequests
from fairgate.gateway.store.row_writer import (
    BatchLoop,
    CountsRows,
    WriteCounts,
    clean_fields,
    write_rows,
)
from fairgate.gateway.store.tables import UsageRecord, utcnow

if TYPE_CHECKING:
    from fairgate.gateway.settings import Settings

log = logging.getLogger("fairgate.usage")


@dataclass(slots=True)
class UsageEvent:
    request_id: str
    tenant_id: str
    key_prefix: str
    model: str
    backend: str | None
    priority: str
    status: str  # finished | cancelled | disconnected | failed
    stream: bool
    prompt_tokens: int
    completion_tokens: int
    usage_estimated: bool
    cost: float
    http_status: int
    ttft_ms: float | None
    latency_ms: float
    created_at: datetime = field(default_factory=utcnow)
    cached_tokens: int = 0  # prompt tokens the backend served from its prefix cache (charged no prefill engine time)
    route: str = ""  # the API route, e.g. /v1/chat/completions
    prompt_version: str = ""  # X-Prompt-Version or a hash of the system prompt, never its text
    prefix_hash: str = ""  # hashes of the prompt's head (policies.prompt_layout), never its text
    prefix_shape: str = ""
    complexity: float | None = None  # policies.complexity score: could a smaller model take it?
    error_code: str | None = None  # the OpenAI error code the client got, if any (refusal reasons)
    # For metrics only (request observers), not stored: see _NOT_STORED.
    overhead_ms: float | None = None  # gateway time to the response's first byte, backend excluded

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def row(self) -> dict[str, Any]:
        # plain getattr, not dataclasses.asdict: asdict deep-copies and costs ~10x more
        d = {name: getattr(self, name) for name in _stored_fields()}
        d["total_tokens"] = self.total_tokens
        return d


_NOT_STORED = ("overhead_ms",)
_TEXT_FIELDS = ("request_id", "tenant_id", "key_prefix", "model", "backend", "priority", "status", "route",
                "prompt_version", "error_code")


def clean_event(e: UsageEvent) -> UsageEvent:
    """Make the client-shaped strings storable: NUL removed, cut to their column widths."""
    clean_fields(e, UsageRecord, _TEXT_FIELDS)
    return e


def event_from_row(row: dict[str, Any]) -> UsageEvent:
    """A UsageEvent back from `row()` as read from the journal (dates as ISO text)."""
    values = {k: v for k, v in row.items() if k != "total_tokens"}
    values["created_at"] = datetime.fromisoformat(values["created_at"])
    return UsageEvent(**values)


@functools.cache
def _stored_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(UsageEvent) if f.name not in _NOT_STORED)


@functools.cache
def _stored_layout() -> tuple[Callable[[UsageEvent], tuple[Any, ...]], tuple[int, ...]]:
    """A getter of an event's stored values in column order, and where the datetimes sit."""
    names = _stored_fields()
    kinds = {f.name: f.type for f in fields(UsageEvent)}
    return attrgetter(*names), tuple(i for i, n in enumerate(names) if kinds[n] in ("datetime", datetime))


def _insert_sql(engine: Engine) -> tuple[str, bool]:
    """INSERT .. ON CONFLICT DO NOTHING in the driver's own parameter style, and whether
    datetimes must go as text (SQLite, in SQLAlchemy's storage format). The driver's
    executemany is several times cheaper than Core's per-row processing; it runs in the
    writer thread but holds the GIL, so its cost shows up in request latency."""
    cols = (*_stored_fields(), "total_tokens")
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    sql = (f"INSERT INTO usage_records ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))}) "
           "ON CONFLICT (request_id) DO NOTHING")
    return sql, engine.dialect.name == "sqlite"


class UsageRecorder(CountsRows):
    """Queues usage rows and writes them off the request path (see the module docstring)."""

    def __init__(self, engine: Engine, batch_size: int = 500, interval_s: float = 0.05,
                 max_backoff_s: float = 5.0, *, on_db_unavailable: str = "journal",
                 journal_path: str | None = None, journal_max_bytes: int = 256 << 20) -> None:
        if on_db_unavailable not in ("journal", "refuse"):
            raise ValueError("on_db_unavailable must be journal or refuse")
        self._engine = engine
        self._sql, self._dates_as_text = _insert_sql(engine)
        self._max_backoff_s = max_backoff_s
        self._mode = on_db_unavailable
        path = journal_path or default_journal_path(engine.url.render_as_string(hide_password=True))
        self.journal = UsageJournal(path, journal_max_bytes)
        self.open = OpenRequests(path + ".open")  # requests out now: a crash still bills them
        self._loop = BatchLoop[UsageEvent]("usage-writer", self._write, batch_size, interval_s, max_backoff_s)
        self._loop.on_failure = self._on_failure
        self._loop.on_success = self._on_success
        self._replayer: asyncio.Task[None] | None = None
        self.db_up = True
        self.replay_failures = 0
        self.recorded = 0  # rows handed over (written + quarantined + pending, once all settle)
        self._counts = WriteCounts()

    @classmethod
    def from_settings(cls, engine: Engine, settings: Settings) -> UsageRecorder:
        return cls(engine, settings.usage_batch_size, settings.usage_flush_interval_s,
                   on_db_unavailable=settings.usage_on_db_unavailable,
                   journal_path=settings.usage_journal_path, journal_max_bytes=settings.usage_journal_max_bytes)

    @property
    def failures(self) -> int:
        """Failed write attempts so far, journal replays included (tests, metrics)."""
        return self._loop.failures + self.replay_failures

    def pending_rows(self) -> int:
        """Rows not yet in the database: queued in memory plus journaled."""
        return len(self._loop.pending) + self.journal.rows

    def accepting(self) -> bool:
        """False when a new request's usage could not be kept: admission answers 503 then,
        before reserving. (`refuse` mode with the database down, or a full journal.)"""
        if self._mode == "refuse":
            return self.db_up
        return not self.journal.full

    def record(self, event: UsageEvent) -> None:
        self.recorded += 1
        self.open.closed(event.request_id)
        self._loop.add(clean_event(event))

    def start(self) -> None:
        self._loop.start()
        self._replayer = asyncio.get_running_loop().create_task(self._replay_loop(), name="usage-replay")

    def _set_db_up(self, up: bool, why: str = "") -> None:
        if up == self.db_up:
            return
        self.db_up = up
        if up:
            log.warning("usage database reachable again; %d rows still to write", self.pending_rows())
        elif self._mode == "journal":
            log.warning("usage database unavailable (%s); journaling usage rows to %s", why, self.journal.path)
        else:
            log.warning("usage database unavailable (%s); refusing new requests until it is back", why)

    def _on_failure(self, exc: Exception) -> None:
        self._set_db_up(False, type(exc).__name__)
        if self._mode == "journal":
            self._journal_pending()

    def _journal_pending(self) -> None:
        if not self._loop.pending:
            return
        rows = [e.row() for e in self._loop.pending]
        if self.journal.append(rows):  # durable on disk now: the memory copy can go
            self._loop.pending.clear()

    def _on_success(self) -> None:
        self._set_db_up(True)

    def _insert(self, conn: Connection, batch: list[UsageEvent]) -> None:
        values_of, dates = _stored_layout()
        rows = []
        for e in batch:
            values = [*values_of(e), e.prompt_tokens + e.completion_tokens]  # the last: total_tokens
            if self._dates_as_text:
                for i in dates:
                    if isinstance(v := values[i], datetime):
                        values[i] = v.strftime("%Y-%m-%d %H:%M:%S.%f")
            rows.append(tuple(values))
        conn.exec_driver_sql(self._sql, rows)

    def _write(self, batch: list[UsageEvent]) -> None:
        write_rows(self._engine, "usage_records", batch, self._insert, UsageEvent.row, lambda e: e.request_id,
                   self._counts)

    def _replay(self) -> int:
        """Write the journal's rows (idempotent by request id); the number of rows stored."""
        events = [clean_event(event_from_row(r)) for r in self.journal.take()]
        n = len(events)
        if not n:  # nothing journaled (refuse mode): is the database back?
            with self._engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        for i in range(0, n, 500):
            self._write(events[i:i + 500])
        self.journal.done()
        return n

    async def _replay_loop(self) -> None:
        delay = 0.1
        while True:
            await asyncio.sleep(delay)
            if self.db_up and not self.journal.rows:
                delay = 0.2
                continue
            try:
                n = await asyncio.to_thread(self._replay)
            except Exception as exc:  # still down: try again later
                self.replay_failures += 1
                self._set_db_up(False, type(exc).__name__)
                delay = min(max(delay, 0.1) * 2, self._max_backoff_s)
                continue
            delay = 0.1
            self._set_db_up(True)
            if n:
                log.warning("usage journal replayed: %d rows", n)

    def without_rows(self, request_ids: list[str]) -> set[str]:
        """Which of `request_ids` have no usage row in the database (blocking: a thread's)."""
        missing = set(request_ids)
        with self._engine.connect() as conn:
            for i in range(0, len(request_ids), 500):
                part = request_ids[i:i + 500]
                found = conn.execute(select(UsageRecord.request_id).where(UsageRecord.request_id.in_(part)))
                missing.difference_update(found.scalars())
        return missing

    async def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything recorded so far is written; False on timeout."""
        return await self._loop.flush(timeout_s)

    async def stop(self, timeout_s: float = 10.0) -> None:
        if self._replayer is not None:
            self._replayer.cancel()
        if not await self._loop.stop(timeout_s):
            self._journal_pending()  # whatever the mode: what the database did not take is kept
        self.open.close()
        left = len(self._loop.pending)
        if left:
            log.error("usage writer stopped with %d rows unwritten", left)
        elif self.journal.rows:
            log.warning("usage writer stopped; %d rows journaled in %s for the next start",
                        self.journal.rows, self.journal.path)


def default_journal_path(database_url: str) -> str:
    """One journal per database, in the working directory, stable across restarts."""
    return f"fairgate-usage-{hashlib.sha256(database_url.encode()).hexdigest()[:12]}.journal"
