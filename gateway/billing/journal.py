"""A local append-only file for usage rows while the database is unreachable.

Each row is one JSON line, fsync'd before `append` returns, so a row handed to the journal
survives a crash of the process. The file is bounded (`max_bytes`): a full journal refuses
the append and the recorder stops admitting requests instead of losing rows. Replay is
exactly once in effect: rows carry their request id and are inserted with ON CONFLICT DO
NOTHING, and the file is removed only after its rows are committed. A replay first moves
the file aside (`<path>.replaying`), so rows journaled meanwhile go to a fresh file.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("fairgate.usage")


class UsageJournal:
    def __init__(self, path: str | Path, max_bytes: int) -> None:
        self.path = Path(path)
        self.replaying = self.path.with_name(self.path.name + ".replaying")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # appends (event loop) against the replay's move (thread)
        _end_torn_line(self.path)
        self.rows = sum(_count_lines(p) for p in (self.path, self.replaying))
        self.size = sum(p.stat().st_size for p in (self.path, self.replaying) if p.exists())
        self._refused = False  # an append did not fit: full until a replay frees space

    @property
    def full(self) -> bool:
        return self._refused or self.size >= self.max_bytes

    def append(self, rows: list[dict[str, Any]]) -> bool:
        """Write `rows` durably; False (nothing written) when they would not fit."""
        data = b"".join(json.dumps(r, ensure_ascii=True, default=str).encode() + b"\n" for r in rows)
        with self._lock:
            if self.size + len(data) > self.max_bytes:
                return self._refuse(f"full ({self.size} of {self.max_bytes} bytes)")
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                try:
                    written = os.write(fd, data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as exc:  # not writable, disk full: a partial line is skipped at replay
                return self._refuse(f"not writable ({exc.strerror})")
            self.size += written
            if written < len(data):
                return self._refuse("short write")
            self.rows += len(rows)
        return True

    def _refuse(self, why: str) -> bool:
        if not self._refused:
            log.error("usage journal %s is %s; new requests are refused until it is replayed", self.path, why)
        self._refused = True
        return False

    def take(self) -> list[dict[str, Any]]:
        """The rows to replay: an unfinished earlier replay's, or the journal moved aside."""
        with self._lock:
            if not self.replaying.exists() and self.path.exists():
                os.replace(self.path, self.replaying)
        if not self.replaying.exists():
            return []
        rows = []
        for n, line in enumerate(self.replaying.read_bytes().splitlines()):
            try:
                rows.append(json.loads(line))
            except ValueError:  # a line torn by a crash mid-append was never acknowledged
                log.warning("usage journal: line %d is incomplete, skipped", n + 1)
        return rows

    def done(self) -> None:
        """The rows from `take` are committed: forget them."""
        with self._lock:
            size = self.replaying.stat().st_size if self.replaying.exists() else 0
            lines = _count_lines(self.replaying)
            self.replaying.unlink(missing_ok=True)
            self.size -= size
            self.rows = max(0, self.rows - lines)
            self._refused = False


def _end_torn_line(path: Path) -> None:
    """A crash mid-append leaves a line without its newline: end it, so the next row appended
    starts a line of its own (the torn one is skipped at replay; it was never acknowledged)."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b"\n":
            f.write(b"\n")
            f.flush()
            os.fsync(f.fileno())


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)
