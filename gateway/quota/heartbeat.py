"""The live replica's heartbeat for its reservations.

Reservations carry a short TTL (`reservation_ttl_s`, about 30 s) so a replica that dies
without settling (SIGKILL, OOM, a lost host) gives its tenants' concurrency slots back
within a TTL. A request may run far longer than that, so while it does, its replica renews
its reservation every third of the TTL; a missed beat or two is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("fairgate.quota")
CHUNK = 500  # reservation ids per renew call


class ReservationHeartbeat:
    """Tracks this process's in-flight reservation ids and renews them with `renew(ids)`;
    the task starts with the first reservation (on the caller's event loop)."""

    def __init__(self, renew: Callable[[list[str]], Awaitable[object]], ttl_s: float) -> None:
        self._renew = renew
        self.interval_s = max(ttl_s / 3, 0.05)
        self.inflight: set[str] = set()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def add(self, reservation_id: str) -> None:
        self.inflight.add(reservation_id)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="reservation-heartbeat")

    def discard(self, reservation_id: str) -> None:
        self.inflight.discard(reservation_id)

    async def beat(self) -> None:
        """Renew every in-flight reservation once."""
        ids = list(self.inflight)
        for i in range(0, len(ids), CHUNK):
            await self._renew(ids[i:i + CHUNK])

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.beat()
            except Exception as exc:  # the store is down: its admissions fail closed meanwhile
                if not self._failing:
                    log.warning("reservation heartbeat failed (%s); retrying", type(exc).__name__)
                self._failing = True
                continue
            if self._failing:
                log.warning("reservation heartbeat recovered")
            self._failing = False

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
