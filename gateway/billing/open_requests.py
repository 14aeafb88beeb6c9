"""The requests out on this replica, on disk while they run: a replica killed with requests out
still bills them at its next start.

At admission a request's would-be usage row (tenant, key, model, the backend it goes to first,
the prompt bound, no completion) is copied into `<usage journal>.open`, mapped shared into
memory: the page cache holds it as soon as it is copied, so it outlives the process, though not
the machine, as an unbuffered write would, without a system call per request. The file's blocks
are allocated when it is mapped (a full disk fails then, never at a copy), and what follows the
last row is zero bytes, which a reader drops. Settlement forgets the row; once the file is full
it is rewritten with only the requests still out.

At the next start the file a killed process left is moved to `<...>.open.recovering` and its rows
are handed to gateway/request/orphans.py, which bills the requests that have no row in the
database (their rows may have been written before the kill: ON CONFLICT DO NOTHING keeps
those). The file goes once they are written.

Several processes may share a journal path (replicas started in one folder): each holds a slot
of its own, `<...>.open.<n>`, under an exclusive lock (`flock` on `<...>.open.<n>.lock`, freed
by the kernel when its process dies). A starting process takes the first free slot and also
recovers every other free slot a dead process left rows in; a live process's slot is never read.
"""

from __future__ import annotations

import fcntl
import logging
import mmap
import os
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger("fairgate.usage")


SLOTS = 16


def _lock(path: Path) -> int | None:
    """An fd holding an exclusive lock on `path`, or None if another holds it; OSError when
    the folder cannot be written."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder let the slot go and unlinked this file meanwhile: lock the new one


def _take(slot: Path) -> tuple[list[dict[str, Any]], Path | None]:
    """A free slot's rows (its file and an unfinished recovery's), moved into one
    `.recovering` file; ([], None) when it has none."""
    recovering = slot.with_name(slot.name + ".recovering")
    data = b"".join(p.read_bytes().rstrip(b"\0") for p in (recovering, slot) if p.exists())
    slot.unlink(missing_ok=True)
    if not data:
        recovering.unlink(missing_ok=True)
        return [], None
    tmp = recovering.with_name(recovering.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, recovering)
    rows = []
    for line in data.splitlines():  # a torn last line (killed mid-copy) is skipped
        try:
            row = orjson.loads(line.strip(b"\0"))
        except orjson.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("request_id"), str):
            rows.append(row)
    return rows, recovering


def _allocate(fd: int, size: int) -> None:
    """Give the file `size` bytes of allocated blocks (zeros), so a copy into its map never meets
    a full disk (a sparse file's first write to a page would raise SIGBUS there)."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
    else:  # macOS: write the zeros
        os.pwrite(fd, bytes(size), 0)


class OpenRequests:
    def __init__(self, path: str | Path, max_bytes: int = 1 << 20) -> None:
        base = Path(path)
        self.max_bytes = max_bytes
        self.left: list[dict[str, Any]] = []  # dead processes' requests out, to bill
        self._recovering: list[Path] = []
        self._held: list[int] = []  # locks on dead processes' slots, until their rows are billed
        self._slot_lock = -1
        self._lock_paths: dict[int, Path] = {}  # fd -> its lock file (unlinked while held, when let go)
        self.path = base.with_name(base.name + ".0")
        self._open: dict[str, bytes] = {}
        self._fd = -1
        self._map: mmap.mmap | None = None
        self._size = 0  # bytes of rows in the map; zeros follow
        self._failed = False
        for n in range(SLOTS):
            slot = base.with_name(f"{base.name}.{n}")
            if self._slot_lock >= 0 and not any(slot.with_name(slot.name + x).exists() for x in ("", ".recovering")):
                continue  # no rows there: nothing to recover
            try:
                fd = _lock(slot.with_name(slot.name + ".lock"))
                if fd is None:
                    continue  # a live process's
                self._lock_paths[fd] = slot.with_name(slot.name + ".lock")
                rows, recovering = _take(slot)
            except OSError as exc:
                log.error("cannot write %s (%s): requests cut by a crash of this process leave no usage row",
                          slot, exc.strerror)
                self._failed = True
                break
            self.left += rows
            if recovering is not None:
                self._recovering.append(recovering)
            if self._slot_lock < 0:
                self._slot_lock, self.path = fd, slot
            elif recovering is not None:
                self._held.append(fd)
            else:
                self._let_go(fd)
        if self._slot_lock < 0 and not self._failed:
            log.error("all %d slots of %s are held: requests cut by a crash of this process leave no usage row",
                      SLOTS, base)
        if self._slot_lock >= 0:
            self._reopen(b"")

    def recovered(self) -> None:
        """The leftovers are billed: their files go, and the dead processes' slots are free."""
        self.left = []
        for p in self._recovering:
            p.unlink(missing_ok=True)
        for fd in self._held:
            self._let_go(fd)
        self._recovering, self._held = [], []

    def _let_go(self, fd: int) -> None:
        """Free a slot: its lock file goes while still locked (a process that opened it before
        fails to lock it and moves on; one that comes after makes a new one), then the lock."""
        path = self._lock_paths.pop(fd, None)
        if path is not None:
            path.unlink(missing_ok=True)
        os.close(fd)

    def opened(self, request_id: str, row: dict[str, Any]) -> None:
        line = orjson.dumps(row) + b"\n"
        self._open[request_id] = line
        if self._map is None:
            return
        end = self._size + len(line)
        if end > len(self._map):  # full: start again with the requests still out, this one too
            self._reopen(b"".join(self._open.values()))
            return
        self._map[self._size : end] = line
        self._size = end

    def closed(self, request_id: str) -> None:
        self._open.pop(request_id, None)

    @property
    def out(self) -> int:
        return len(self._open)

    def _reopen(self, content: bytes) -> None:
        """Start the file again with `content` (the requests still out) and room for as much
        again, at least `max_bytes`; its blocks are allocated now, so a copy into the map never
        meets a full disk. If that fails the rows stay in memory only (a crash bills less)."""
        size = -(-max(self.max_bytes, 2 * len(content)) // mmap.PAGESIZE) * mmap.PAGESIZE
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = -1
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
            _allocate(fd, size)
            os.pwrite(fd, content, 0)
            os.replace(tmp, self.path)
            mapped = mmap.mmap(fd, size)
        except OSError as exc:
            if fd >= 0:
                os.close(fd)
            tmp.unlink(missing_ok=True)
            log.error("cannot rewrite %s (%s): requests cut by a crash now leave no usage row",
                      self.path, exc.strerror)
            self._unmap()
            self._failed = True
            return
        self._unmap()
        self._fd, self._map, self._size = fd, mapped, len(content)

    def _unmap(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """A clean stop: with nothing out any more (settlement ran for each) no file is left."""
        if self._map is not None:
            self._unmap()
            if not self._open:
                self.path.unlink(missing_ok=True)
        for fd in (self._slot_lock, *self._held):
            if fd >= 0:
                self._let_go(fd)
        self._slot_lock, self._held = -1, []
