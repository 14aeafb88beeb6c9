"""Fairness in front of engines that have none: a pool's requests wait at the gateway in
weighted-VTC order and are bound to a replica only when the pool has room (issue 36).

vLLM schedules first come, first served (its `priority` is a class, not a share), so a tenant
that floods a vLLM pool fills its queues and everyone behind waits. With the gate, at most
`slots` requests per routable replica are out at once; the rest wait here, and when one ends
the waiting tenant with the least weighted service goes next (the engine's own fair queue,
scheduler/fair_queue.py, does the same inside our engines). Service is charged as it is known:
the prompt bound when a request is let through, the completion tokens it used when it ends,
each divided by the tenant's weight (the weights the gateway pushes to its engines). A tenant
that starts waiting is lifted to the least counter of those waiting, so idle time is no credit.
Late binding: the replica is chosen after the wait, from the load then (pool routing).
A waiter whose client leaves is simply dropped; a slot is never held by a request that is not
running.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable


class FairGate:
    def __init__(self, capacity: Callable[[], int], weight_of: Callable[[str], float]) -> None:
        self.capacity = capacity
        self.weight_of = weight_of
        self.in_flight = 0
        self._waiting: dict[str, deque[tuple[asyncio.Future[None], float]]] = {}
        self._counters: dict[str, float] = {}
        self._last_left = 0.0
        self.waited = 0  # requests that had to wait (metrics, tests)

    def counter(self, tenant: str) -> float:
        return self._counters.get(tenant, 0.0)

    @property
    def counters(self) -> dict[str, float]:
        """Every tenant's counter (metrics)."""
        return dict(self._counters)

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str, prompt_cost: float,
                   completion_cost: Callable[[], float]) -> AsyncIterator[None]:
        """Hold one of the pool's slots while the block runs; `completion_cost()` is read at
        the end (what the request generated)."""
        await self._enter(tenant, prompt_cost)
        try:
            yield
        finally:
            self._charge(tenant, completion_cost())
            self.in_flight -= 1
            self.wake()

    async def _enter(self, tenant: str, cost: float) -> None:
        if not self._waiting and self.in_flight < self.capacity():
            self.in_flight += 1
            self._charge(tenant, cost)
            return
        self.waited += 1
        line = self._waiting.get(tenant)
        if line is None:
            self._lift(tenant)
            line = self._waiting[tenant] = deque()
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (fut, cost)
        line.append(entry)
        self.wake()  # room may have opened since the last end (a replica came back)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # let through as the client left: give it back
                self.in_flight -= 1
                self.wake()
            else:
                self._drop(tenant, entry)
            raise

    def wake(self) -> None:
        """Let the least-served waiting tenants through while the pool has room."""
        while self._waiting and self.in_flight < self.capacity():
            tenant = min(self._waiting, key=lambda t: (self.counter(t), len(self._waiting[t]), t))
            line = self._waiting[tenant]
            fut, cost = line.popleft()
            if not line:
                del self._waiting[tenant]
                self._last_left = self.counter(tenant)
            if fut.done():  # cancelled meanwhile
                continue
            self.in_flight += 1
            self._charge(tenant, cost)
            fut.set_result(None)

    def _drop(self, tenant: str, entry: tuple[asyncio.Future[None], float]) -> None:
        line = self._waiting.get(tenant)
        if line is not None and entry in line:
            line.remove(entry)
            if not line:
                del self._waiting[tenant]

    def _lift(self, tenant: str) -> None:
        others = [self.counter(t) for t in self._waiting]
        floor = min(others) if others else self._last_left
        self._counters[tenant] = max(self.counter(tenant), floor)

    def _charge(self, tenant: str, cost: float) -> None:
        if cost > 0:
            self._counters[tenant] = self.counter(tenant) + cost / max(self.weight_of(tenant), 1e-9)
