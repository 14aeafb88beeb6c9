"""Usage records: one row per admitted request, written off the request path in batches.

`record()` only appends to a buffer. A background task writes batches in a worker thread
with INSERT .. ON CONFLICT DO NOTHING on the request id, so a retried batch never counts a
request twice; when the database is down the batch stays queued and is retried with backoff.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from gateway.tables import utcnow

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
    # For metrics only (request observers), not stored: see _NOT_STORED.
    route: str = ""  # the API route, e.g. /v1/chat/completions
    cached_tokens: int = 0  # prompt tokens the backend served from its prefix cache
    prompt_version: str = ""  # X-Prompt-Version or a hash of the system prompt, never its text
    overhead_ms: float | None = None  # gateway time to the response's first byte, backend excluded

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def row(self) -> dict[str, Any]:
        # plain getattr, not dataclasses.asdict: asdict deep-copies and costs ~10x more
        d = {name: getattr(self, name) for name in _stored_fields()}
        d["total_tokens"] = self.total_tokens
        return d


_NOT_STORED = ("route", "cached_tokens", "prompt_version", "overhead_ms")


@functools.cache
def _stored_fields() -> tuple[str, ...]:
    return tuple(f.name for f in fields(UsageEvent) if f.name not in _NOT_STORED)


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


class UsageRecorder:
    def __init__(self, engine: Engine, batch_size: int = 500, interval_s: float = 0.05,
                 max_backoff_s: float = 5.0) -> None:
        self._engine = engine
        self._sql, self._dates_as_text = _insert_sql(engine)
        self._batch_size = batch_size
        self._interval_s = interval_s
        self._max_backoff_s = max_backoff_s
        self._pending: list[UsageEvent] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.failures = 0  # failed write attempts so far (for tests and metrics)
        self.written = 0

    def record(self, event: UsageEvent) -> None:
        self._pending.append(event)
        self._idle.clear()
        self._wake.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="usage-writer")

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self._interval_s)  # let a batch gather
            while self._pending:
                batch = self._pending[: self._batch_size]
                try:
                    await asyncio.to_thread(self._write, batch)
                except Exception as exc:  # the database is down or busy: keep the rows, retry
                    self.failures += 1
                    log.warning("usage write failed (%s); %d rows queued, retrying",
                                type(exc).__name__, len(self._pending))
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff_s)
                    continue
                backoff = 0.1
                del self._pending[: len(batch)]
                self.written += len(batch)
            self._idle.set()

    def _write(self, batch: list[UsageEvent]) -> None:
        names = _stored_fields()
        rows = []
        for e in batch:
            values = [getattr(e, n) for n in names]
            if self._dates_as_text:
                values = [v.strftime("%Y-%m-%d %H:%M:%S.%f") if isinstance(v, datetime) else v for v in values]
            values.append(e.total_tokens)
            rows.append(tuple(values))
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql, rows)

    async def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything recorded so far is written; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
            return True
        except TimeoutError:
            return False

    async def stop(self, timeout_s: float = 10.0) -> None:
        if not await self.flush(timeout_s):
            log.error("usage writer stopped with %d rows unwritten", len(self._pending))
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
