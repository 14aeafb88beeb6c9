"""What each caller-named request used, kept a while after it ended.

A gateway that hangs up on a request (its own client left), or one started after a replica was
killed with requests out, cannot read the answer, yet it must bill what was generated. It names
its requests, streamed or not (`X-Request-Id`, trusted callers only), and after the cut asks
`GET /v1/requests/{id}/usage`: the answer
waits for the request to end here (the disconnect may reach this server after the question) and
for the engine's abort to land, then gives the exact prompt tokens and the completion tokens the
engine generated, those still queued for the stream when its client left included. Bounded: the
oldest entries go first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

from fairgate.backends.base import UsageSoFar

MAX_ENTRIES = 4096


@dataclass(slots=True)
class LedgerEntry:
    used: UsageSoFar
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    status: str = "running"  # then "finished" or "cancelled"


class RequestLedger:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[str, LedgerEntry] = OrderedDict()
        self._max = max_entries

    @contextlib.contextmanager
    def track(self, caller_id: str | None, used: UsageSoFar) -> Iterator[LedgerEntry | None]:
        """Track one request under the caller's id while the block runs (None: not named)."""
        if not caller_id:
            yield None
            return
        entry = self._entries[caller_id] = LedgerEntry(used)
        self._entries.move_to_end(caller_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
        try:
            yield entry
        finally:
            if entry.status == "running":
                entry.status = "finished"
            entry.ended.set()

    async def usage(self, caller_id: str, wait_s: float = 5.0) -> tuple[str, UsageSoFar] | None:
        """(status, usage) once the request ended (or after `wait_s`, as it stands); None: unknown."""
        entry = self._entries.get(caller_id)
        if entry is None:
            return None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                await entry.ended.wait()
                if entry.used.settled is not None:  # a cut request: until the engine's own count is in
                    await entry.used.settled.wait()
        return entry.status, entry.used
