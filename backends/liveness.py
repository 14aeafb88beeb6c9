"""Notice a local upstream that stopped answering while requests wait on it.

An engine server that hangs (stopped, wedged, its host frozen) keeps its TCP connections open:
nothing fails, and the requests on it would wait for the upstream timeout (60 s by default)
before the client hears anything. While a request has been out on a local backend for
`slow_after_s`, the watch asks the server's `/health` every `interval_s`; `fail_after` answers
missing in a row (each given `probe_timeout_s`) and every request out on that server ends at
once with `upstream_hung` (backends/http1.py `fail_in_flight`): one waiting for its answer fails
over to the next backend, or gets the local path's 503 with Retry-After; a stream ends with an
in-band error. With the defaults a hang is noticed in about 5 s.

A busy server answers `/health` from its event loop while it computes (issue 35 bounds that to
well under a second), so a slow answer is not a hang. The watch runs only while requests are
out: an idle gateway sends nothing.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from fairgate.backends.http1 import HTTP1Pool, HTTPError, Origin

log = logging.getLogger("fairgate.liveness")


@dataclass(slots=True, frozen=True)
class LivenessOptions:
    slow_after_s: float = 1.0  # a request out this long starts the checks
    interval_s: float = 0.25  # pause between checks
    probe_timeout_s: float = 1.0
    fail_after: int = 3  # checks missed in a row: hung


class LivenessWatch:
    """One per local backend. `started()` / `ended()` around each request; the watch task runs
    while any is out."""

    def __init__(self, name: str, pool: HTTP1Pool, origin: Origin, headers: bytes,
                 options: LivenessOptions | None = None) -> None:
        self.name = name
        self.options = options or LivenessOptions()
        self._pool, self._origin, self._headers = pool, origin, headers
        self._out = 0
        self._task: asyncio.Task[None] | None = None
        self.hangs = 0  # times a hang ended requests (for status and tests)

    def started(self) -> None:
        self._out += 1
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._watch(), name=f"liveness-{self.name}")
            self._task.add_done_callback(self._finished)

    def ended(self) -> None:
        self._out -= 1

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("liveness watch of %s failed: %r", self.name, task.exception())

    async def _watch(self) -> None:
        opts = self.options
        await asyncio.sleep(opts.slow_after_s)
        missed = 0
        while self._out > 0:
            missed = 0 if await self._answers() else missed + 1
            if missed >= opts.fail_after:
                ended = self._pool.fail_in_flight(self._origin, f"backend {self.name} stopped answering: {missed} "
                                                  f"health checks in a row got no answer within "
                                                  f"{opts.probe_timeout_s:g} s")
                self.hangs += 1
                log.warning("backend %s hung: ended %d requests out on it", self.name, ended)
                missed = 0
            await asyncio.sleep(opts.interval_s)

    async def _answers(self) -> bool:
        """Whether `/health` answers at all in time: any status will do (a 503 while the engine
        starts or drains is an answer; only silence is a hang)."""
        try:
            async with asyncio.timeout(self.options.probe_timeout_s):
                resp = await self._pool.post(self._origin, "/health", self._headers, b"",
                                             self.options.probe_timeout_s, method="GET")
                await resp.read(2**16)
        except (HTTPError, TimeoutError):
            return False
        return True

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
