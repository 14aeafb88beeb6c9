"""Fairness in front of engines that have none: a pool's requests wait at the gateway in
weighted-VTC order and are bound to a replica only when the pool has room (issue 36).

vLLM schedules first come, first served (its `priority` is a class, not a share), so a tenant
that floods a vLLM pool fills its queues and everyone behind waits. With the gate, at most
`slots` requests per routable replica are out at once; the rest wait here, and when one ends
the waiting tenant with the least weighted service goes next (the engine's own fair queue,
scheduler/fair_queue.py, does the same inside our engines). Service is charged as it is known:
the prompt bound when a request is let through, the completion tokens it used when it ends,
each divided by the tenant's weight (the weights the gateway pushes to its engines). A tenant
that starts waiting is lifted to the least counter of those waiting, so idle time is no credit;
one served within the last `active_window_s` (a request let through or ended: it is not idle, it
asks for less than its share) keeps up to `active_lead` tokens (over its weight) of its lead below
that, as in the engine's fair queue (scheduler/fairness.py `FairnessConfig.active_lead`): a light
tenant's burst goes ahead of a flood's backlog instead of level with it.
Late binding: the replica is chosen after the wait, from the load then (pool routing).
A waiter whose client leaves is simply dropped; a slot is never held by a request that is not
running.

Headroom (`reserve`): the fair order decides who goes next, but a request that arrives while a
flood holds every slot still waits for one of them to end. So the last `reserve` free slots go
only to a tenant holding less than its weighted share of the slots, among the tenants that hold
or wait for one or ended a request in the last `recent_s` seconds: a light tenant's request goes
out at once, and the flood keeps the rest. With no other tenant about, the flood takes them too.

Each request's time at the gate (0 when it went straight through) is recorded per tenant in
`waits` (a histogram: the queue's part of a tenant's time to first token, on /metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD

WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, float("inf"))


@dataclass(slots=True)
class Waits:
    """One tenant's times at the gate: a cumulative histogram over `WAIT_BUCKETS`."""

    count: int = 0
    total_s: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * len(WAIT_BUCKETS))

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total_s += seconds
        for i, bound in enumerate(WAIT_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1


def record_wait(waits: dict[str, Waits], tenant: str, seconds: float) -> None:
    (waits.get(tenant) or waits.setdefault(tenant, Waits())).observe(seconds)


class FairGate:
    def __init__(self, capacity: Callable[[], int], weight_of: Callable[[str], float],
                 reserve: Callable[[], int] = lambda: 0, recent_s: float = 2.0,
                 active_lead: Callable[[], float] = lambda: DEFAULT_ACTIVE_LEAD,
                 active_window_s: float = 1.0) -> None:
        self.capacity = capacity
        self.weight_of = weight_of
        self.reserve, self.recent_s = reserve, recent_s  # reserve(): the headroom, read as it is used
        self.active_lead, self.active_window_s = active_lead, active_window_s  # active_lead(): as used
        self._served: dict[str, float] = {}  # when each tenant was last let through or ended (loop time)
        self.in_flight = 0
        self._held: dict[str, int] = {}  # slots each tenant holds
        self._ended: dict[str, float] = {}  # when each tenant's last request ended (loop time)
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: dict[str, deque[tuple[asyncio.Future[None], float]]] = {}
        self._counters: dict[str, float] = {}
        self._last_left = 0.0
        self.waited = 0  # requests that had to wait (metrics, tests)
        self.waits: dict[str, Waits] = {}  # each tenant's times at the gate (metrics)

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
            self._release(tenant)

    def _take(self, tenant: str, cost: float) -> None:
        self._served[tenant] = asyncio.get_running_loop().time()
        self.in_flight += 1
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._charge(tenant, cost)

    def _release(self, tenant: str) -> None:
        self.in_flight -= 1
        held = self._held.get(tenant, 0) - 1
        if held > 0:
            self._held[tenant] = held
        else:
            self._held.pop(tenant, None)
        now = self._ended[tenant] = self._served[tenant] = asyncio.get_running_loop().time()
        if len(self._ended) > 1024:  # only the last recent_s seconds matter
            self._ended = {t: at for t, at in self._ended.items() if now - at < self.recent_s}
        if len(self._served) > 1024:  # only the last active_window_s seconds matter
            self._served = {t: at for t, at in self._served.items() if now - at <= self.active_window_s}
        self.wake()

    def _may_take(self, tenant: str, capacity: int, now: float) -> bool:
        """Whether `tenant` may take a slot now: any free one outside the headroom; one of the
        last `reserve` only below its weighted share among the tenants about."""
        free = capacity - self.in_flight
        if free <= 0:
            return False
        if free > self.reserve():
            return True
        about = set(self._held) | set(self._waiting) | {tenant}
        about |= {t for t, at in self._ended.items() if now - at < self.recent_s}
        weight = max(self.weight_of(tenant), 1e-9)
        share = capacity * weight / sum(max(self.weight_of(t), 1e-9) for t in about)
        return self._held.get(tenant, 0) < share

    async def _enter(self, tenant: str, cost: float) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._waiting and self._may_take(tenant, self.capacity(), now):
            # let straight through, it still left the (empty) queue: lifted to the clock's present
            # and setting it, so the service it had alone is no debt to the next tenant to come
            self._lift(tenant)
            self._last_left = max(self._last_left, self.counter(tenant))  # a lead never turns it back
            self._take(tenant, cost)
            record_wait(self.waits, tenant, 0.0)
            return
        self.waited += 1
        line = self._waiting.get(tenant)
        if line is None:
            self._lift(tenant)
            line = self._waiting[tenant] = deque()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (fut, cost)
        line.append(entry)
        self.wake()  # room may have opened since the last end (a replica came back)
        try:
            await fut
            record_wait(self.waits, tenant, loop.time() - now)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # let through as the client left: give it back
                self._release(tenant)
            else:
                self._drop(tenant, entry)
            raise

    def wake(self) -> None:
        """Let the least-served waiting tenants through while the pool has room (the headroom
        only to those below their share; when that holds everyone back, look again once the
        tenants seen lately stop counting)."""
        loop = asyncio.get_running_loop()
        while self._waiting:
            capacity, now = self.capacity(), loop.time()
            allowed = [t for t in self._waiting if self._may_take(t, capacity, now)]
            if not allowed:
                if self.in_flight < capacity and self._timer is None:
                    self._timer = loop.call_later(self.recent_s, self._timed_wake)
                return
            tenant = min(allowed, key=lambda t: (self.counter(t), len(self._waiting[t]), t))
            line = self._waiting[tenant]
            fut, cost = line.popleft()
            if not line:
                del self._waiting[tenant]
                self._last_left = self.counter(tenant)
            if fut.done():  # cancelled meanwhile
                continue
            self._take(tenant, cost)
            fut.set_result(None)

    def _timed_wake(self) -> None:
        self._timer = None
        self.wake()

    def _drop(self, tenant: str, entry: tuple[asyncio.Future[None], float]) -> None:
        line = self._waiting.get(tenant)
        if line is not None and entry in line:
            line.remove(entry)
            if not line:
                del self._waiting[tenant]

    def _lift(self, tenant: str) -> None:
        """A tenant starting to wait starts no lower than the least waiting counter (or, with
        nobody waiting, the counter of the last to leave the queue); one served within the last
        `active_window_s`, no lower than `active_lead()` (over its weight) below that."""
        others = [self.counter(t) for t in self._waiting]
        floor = min(others) if others else self._last_left
        served = self._served.get(tenant)
        if served is not None and asyncio.get_running_loop().time() - served <= self.active_window_s:
            floor -= self.active_lead() / max(self.weight_of(tenant), 1e-9)
        self._counters[tenant] = max(self.counter(tenant), floor)

    def _charge(self, tenant: str, cost: float) -> None:
        if cost > 0:
            self._counters[tenant] = self.counter(tenant) + cost / max(self.weight_of(tenant), 1e-9)
