"""Writing rows that clients shaped: cleaned at the edge, one bad row never blocks the others.

`clean_text` makes a client string storable (NUL removed, cut to the column's width) before
it is queued. `write_rows` inserts a batch in one transaction; when the database refuses the
batch for its data (DataError, IntegrityError), each row is retried on its own and a row that
still fails goes to the `quarantined_rows` table with its content as escaped JSON, so it can be
looked at and replayed by hand. Any other error (the database is down) propagates: the
caller keeps the rows and retries later. `BatchLoop` is that caller's retry loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, DateTime, Engine, Integer, String, Text, insert
from sqlalchemy.exc import DataError, IntegrityError
from sqlalchemy.orm import Mapped, mapped_column

from fairgate.gateway.store.tables import Base, utcnow

log = logging.getLogger("fairgate.rows")
T = TypeVar("T")
REFUSED = (DataError, IntegrityError)  # the database is up and refuses these rows' data


class QuarantinedRow(Base):
    """A row the database refused even on its own: kept, never silently dropped."""

    __tablename__ = "quarantined_rows"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    source: Mapped[str] = mapped_column(String(64))  # the table it was meant for
    row_key: Mapped[str | None] = mapped_column(String(64), nullable=True)  # e.g. the request id
    error: Mapped[str] = mapped_column(String(500))
    payload: Mapped[str] = mapped_column(Text)  # the row as ASCII JSON (NUL and the like escaped)


def clean_text(value: str, width: int | None) -> str:
    """`value` without NUL characters (PostgreSQL text cannot hold them), cut to `width`."""
    if "\x00" in value:
        value = value.replace("\x00", "")
    return value if width is None or len(value) <= width else value[:width]


@functools.cache
def column_widths(table: Any) -> dict[str, int]:
    """Column name → VARCHAR length, for the string columns of a mapped class."""
    return {c.name: c.type.length for c in table.__table__.columns
            if isinstance(c.type, String) and c.type.length}


def clean_fields(obj: Any, table: Any, names: Iterable[str]) -> None:
    """`clean_text` on each of `obj`'s fields `names` that holds a string, to the width of its
    column in `table` (a mapped class): what a writer does to a client-shaped row before queueing it."""
    widths = column_widths(table)
    for name in names:
        v = getattr(obj, name)
        if isinstance(v, str):
            setattr(obj, name, clean_text(v, widths.get(name)))


def _payload(row: dict[str, Any]) -> str:
    return json.dumps(row, default=str, ensure_ascii=True)[:1_000_000]


@dataclass(slots=True)
class WriteCounts:
    """Rows stored and rows quarantined so far (kept by the caller across attempts)."""

    written: int = 0
    quarantined: int = 0


class CountsRows:
    """What a row writer reports of its `WriteCounts` (kept in `_counts`): metrics and tests read it."""

    _counts: WriteCounts

    @property
    def written(self) -> int:
        return self._counts.written

    @property
    def quarantined(self) -> int:
        return self._counts.quarantined


def write_rows(engine: Engine, source: str, rows: list[T], insert_rows: Callable[[Connection, list[T]], None],
               as_dict: Callable[[T], dict[str, Any]], key_of: Callable[[T], str | None],
               counts: WriteCounts) -> None:
    """Insert `rows`, adding to `counts`. Raises when the database is unavailable.

    Rows are removed from `rows` as they are stored, so after a raise only the rest remains to
    be retried (the row-by-row pass may have stored some, and counted them)."""
    if not rows:
        return
    try:
        with engine.begin() as conn:
            insert_rows(conn, rows)
        counts.written += len(rows)
        rows.clear()
        return
    except REFUSED as exc:
        log.warning("%s: a batch of %d rows was refused (%s); writing row by row",
                    source, len(rows), type(exc).__name__)
    while rows:
        row = rows[0]
        try:
            with engine.begin() as conn:
                insert_rows(conn, [row])
            counts.written += 1
        except REFUSED as exc:
            _quarantine(engine, source, key_of(row), exc, as_dict(row))
            counts.quarantined += 1
        rows.pop(0)


def _quarantine(engine: Engine, source: str, key: str | None, exc: Exception, row: dict[str, Any]) -> None:
    reason = clean_text(f"{type(exc).__name__}: {getattr(exc, 'orig', exc)}", 500)
    log.error("%s: row %s refused by the database (%s); kept in quarantined_rows",
              source, key, type(exc).__name__)
    with engine.begin() as conn:
        conn.execute(insert(QuarantinedRow), [{"source": source, "row_key": clean_text(key or "", 64) or None,
                                               "error": reason, "payload": _payload(row)}])


class BatchLoop(Generic[T]):
    """Rows queued in memory, written in batches by one task, retried with backoff while the
    database is unavailable. `write(batch)` runs in a worker thread and must remove what it
    stored from `batch` (see `write_rows`); `on_failure(exc)` may take the rest elsewhere."""

    def __init__(self, name: str, write: Callable[[list[T]], None], batch_size: int = 500,
                 interval_s: float = 0.05, max_backoff_s: float = 5.0) -> None:
        self.name = name
        self._write = write
        self._batch_size = batch_size
        self._interval_s = interval_s
        self._max_backoff_s = max_backoff_s
        self.pending: list[T] = []
        self.failures = 0  # failed write attempts so far (tests, metrics)
        self.on_failure: Callable[[Exception], None] = lambda exc: None
        self.on_success: Callable[[], None] = lambda: None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    def add(self, row: T) -> None:
        self.pending.append(row)
        self._idle.clear()
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self._interval_s)  # let a batch gather
            while self.pending:
                batch = self.pending[: self._batch_size]
                n = len(batch)
                try:
                    await asyncio.to_thread(self._write, batch)
                except Exception as exc:  # the database is down or busy: keep the rows, retry
                    del self.pending[: n - len(batch)]  # what the row-by-row pass stored
                    self.failures += 1
                    self.on_failure(exc)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff_s)
                    continue
                backoff = 0.1
                del self.pending[:n]
                self.on_success()
            self._idle.set()

    async def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything queued so far is written; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def stop(self, timeout_s: float = 10.0) -> bool:
        """Flush, then end the task; False when rows were left unwritten."""
        done = await self.flush(timeout_s)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        return done
