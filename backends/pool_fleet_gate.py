"""A pool's fair queue shared by every gateway replica (issue 36: fleet-wide fairness).

`FairGate` (pool_gate.py) orders one process's waiters by that process's counters and lets
`slots` x replicas through per process. Two gateways with skewed ingress then split the pool by
ingress, not by weight: tenant A (weight 3) arriving only at gateway 1 and B (weight 1) only at
gateway 2, both backlogged, each gateway fills its own slots with its one tenant and the engines
see as many of B's requests as of A's, so the fleet serves 1:1 whatever the weights.

`FleetGate` keeps the waiters here but moves the two things that decide who goes next into a
shared `GateLedger` (Redis, gateway/request/pool_clock.py):
- one set of slots for the pool, fleet-wide: `slots` on each routable replica are the pool's,
  not this process's, and any gateway may take a free one. A slot is on one replica (routing's
  choice when it has room, else the one with the most room): each gateway sees only its own
  requests, so per-process routing would pile two gateways' requests onto one replica;
- one virtual counter per tenant (weighted tokens served: the prompt when let through, the
  completion when done, each over the tenant's weight), and every gateway's waiting tenants.
A slot goes to the least-served tenant waiting anywhere in the fleet; when that tenant waits
at another gateway this one leaves the slot free for it and wakes that gateway (the ledger's
`wait_freed`, which each gateway with waiters blocks on), whose round takes it at once. So A and
B alternate by counter, A gets three slots' worth of tokens for each of B's, and the engines
(whose own queues see both tenants too) serve 3:1. Rounds are batched: one ledger call lets
through every waiter of this process it can, so a burst costs one round trip; while it has
waiters a process also tries every `poll_s` in case a wake was lost. A request that arrives while
the last round saw the pool full, for a tenant already waiting here (so the ledger knows its
demand), starts no round of its own: nothing could be let through, and the next free slot wakes
a round anyway (a release here, a wake from the ledger, the poll). Under a flood this was most
rounds (2026-12-07, `--pool 2`: 1,099 of the flood gateway's 1,778 rounds granted nothing).

Ledger unreachable: the waiters go on in local order (a `FairGate` over this process's share
of the capacity, the pool's slots over the gateways last seen) for `down_s`, then the ledger is
tried again; no request that was let into the gate is dropped. The slots taken locally meanwhile
are recorded in the ledger by the first round that reaches it (`adopt`), so every gateway counts
them until they end; their prompt and completion are charged then. Slots held in the ledger carry a
TTL the ledger renews, so a dead gateway's slots come back; its waiting demand expires within
two seconds (until then a slot it would have taken stays free).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from fairgate.backends.pool_gate import FairGate, Waits, record_wait
from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD

log = logging.getLogger("fairgate.pool")


@dataclass(slots=True, frozen=True)
class Ask:
    """One tenant's waiters in this process, for one round."""

    tenant: str
    weight: float
    waiting: int  # all of them (what other gateways see)
    heads: list[tuple[str, float, str]]  # (slot id, prompt cost, preferred replica or "") of the first few


@dataclass(slots=True)
class Round:
    """What a round let through and what it saw of the fleet."""

    granted: list[tuple[str, str]]  # (slot id, the replica its slot is on), in the order let through
    counters: dict[str, float] = field(default_factory=dict)  # fleet counters of the tenants seen
    gateways: int = 1  # gateway replicas seen live
    in_use: int = 0  # the pool's slots held fleet-wide after the round


class GateLedger(Protocol):
    """The shared slots and counters of one pool."""

    async def admit(self, asks: list[Ask], rooms: dict[str, int], active_lead: float = 0.0,
                    reserve: int = 0) -> Round:
        """Let waiters through onto the routable replicas' slots (`rooms`: replica -> slots); a
        tenant served lately keeps up to `active_lead` of its lead when it starts waiting; the
        last `reserve` free slots go only to a tenant below its weighted share (the headroom)."""
        ...

    async def release(self, slot_id: str, replica: str, tenant: str, charge: float) -> None:
        """Give the slot back and add `charge` (completion tokens over weight) to the counter."""
        ...

    async def wait_freed(self, timeout_s: float) -> bool:
        """Block until another gateway freed a slot this one's waiters may take (True), or for
        `timeout_s` (False)."""
        ...

    async def adopt(self, slot_ids: list[str]) -> None:
        """Record slots this gateway let through on its own while the ledger was unreachable:
        held (on no replica in particular) until released as replica "*"."""
        ...

    async def aclose(self) -> None: ...


@dataclass(slots=True, eq=False)
class _Waiter:
    tenant: str
    cost: float
    sid: str
    prefer: str  # the replica pool routing would pick here ("" none): taken when it has room
    fut: asyncio.Future[bool]  # True: a fleet slot; False: go local (ledger down)
    rounds: int = 0
    replica: str = ""  # where the slot was granted


class FleetGate:
    """`slot()` as FairGate's, ordered and counted fleet-wide through `ledger`; `rooms()`: the
    routable replicas and the slots each takes. A slot is on one replica (the preferred one when
    it has room fleet-wide, else the one with the most room), so the pool's routing follows the
    fleet's load, not this process's share of it."""

    def __init__(self, rooms: Callable[[], dict[str, int]], weight_of: Callable[[str], float], ledger: GateLedger,
                 poll_s: float = 0.25, down_s: float = 1.0,
                 active_lead: Callable[[], float] = lambda: DEFAULT_ACTIVE_LEAD,
                 reserve: Callable[[], int] = lambda: 0) -> None:
        self.rooms = rooms
        self.weight_of = weight_of
        self.ledger = ledger
        self.poll_s = poll_s
        self.down_s = down_s
        self.active_lead, self.reserve = active_lead, reserve  # read each round (pool_gate.FairGate's)
        self.local = FairGate(self._local_capacity, weight_of, reserve,  # while the ledger is unreachable
                              active_lead=active_lead)
        self.in_flight = 0  # fleet slots this process holds
        self.waited = 0  # requests not let through in their first round
        self.waits: dict[str, Waits] = {}  # each tenant's times at the gate, fleet slots (metrics)
        self.fallbacks = 0  # times the ledger failed and the waiters went on locally
        self.counters: dict[str, float] = {}  # fleet counters as last read (bounded by a round's age)
        self.gateways = 1
        self._lines: dict[str, deque[_Waiter]] = {}
        self._pending: dict[str, _Waiter] = {}
        self._announced = False  # the ledger holds waiting demand of this process
        self._full = False  # the last round left no free slot in the pool
        self._held_back = False  # an arrival started no round since the last one (see `_enter`)
        self._kick = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._down_until = 0.0
        self._outage: dict[str, bool] = {}  # slot id of a request let through locally -> recorded in the ledger

    def capacity(self) -> int:
        return sum(self.rooms().values())

    def counter(self, tenant: str) -> float:
        return self.counters.get(tenant, 0.0)

    @property
    def waiting(self) -> int:
        return len(self._pending) + self.local.waiting

    def wake(self) -> None:
        """Room may have opened (a replica back): try again now."""
        self._kick.set()
        self.local.wake()

    @contextlib.asynccontextmanager
    async def slot(self, tenant: str, prompt_cost: float, completion_cost: Callable[[], float],
                   prefer: str = "") -> AsyncIterator[str | None]:
        """Hold a slot while the block runs; yields the replica it is on (None: the ledger is
        down, route as usual)."""
        waiter = None if self._down() else await self._enter(tenant, prompt_cost, prefer)
        if waiter is None:
            async with self.local.slot(tenant, prompt_cost, completion_cost):
                sid = uuid.uuid4().hex
                self._outage[sid] = False
                try:
                    yield None
                finally:
                    if self._outage.pop(sid):  # the ledger counts it: give it back there
                        self._give_back(sid, "*", tenant, prompt_cost + completion_cost())
            return
        try:
            yield waiter.replica
        finally:
            self.in_flight -= 1
            self._give_back(waiter.sid, waiter.replica, tenant, completion_cost())

    def _down(self) -> bool:
        return asyncio.get_running_loop().time() < self._down_until

    def _local_capacity(self) -> int:
        """This gateway's share of the pool's slots (of the gateways last seen) while the
        ledger is down; none while no replica is routable."""
        cap = self.capacity()
        return max(1, cap // max(self.gateways, 1)) if cap else 0

    async def _enter(self, tenant: str, cost: float, prefer: str) -> _Waiter | None:
        """Wait for a fleet slot; None when the ledger failed meanwhile (go local)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter = _Waiter(tenant, cost, uuid.uuid4().hex, prefer, loop.create_future())
        line = self._lines.setdefault(tenant, deque())
        if line and self._full and self._announced:  # the ledger knows this tenant waits here
            self._held_back = True
        else:
            self._kick.set()
        line.append(waiter)
        self._pending[waiter.sid] = waiter
        if self._dispatcher is None:
            self._dispatcher = loop.create_task(self._dispatch(), name="pool-fleet-gate")
        try:
            fleet = await waiter.fut
            if fleet:
                record_wait(self.waits, tenant, loop.time() - start)
        except asyncio.CancelledError:
            if waiter.fut.done() and not waiter.fut.cancelled() and waiter.fut.result():
                self.in_flight -= 1  # let through as the client left: give it back
                self._give_back(waiter.sid, waiter.replica, tenant, 0.0)
            else:
                self._forget(waiter)
            raise
        return waiter if fleet else None

    async def _dispatch(self) -> None:
        """Rounds while this process has waiters (and once more to withdraw its demand): after a
        local release or arrival, when another gateway frees a slot for one of ours, and every
        `poll_s` in case a wake was missed (a slot expired, a gateway died)."""
        listener = asyncio.get_running_loop().create_task(self._listen(), name="pool-fleet-wake")
        try:
            while self._lines or self._announced:
                self._kick.clear()
                await self._round()
                if self._lines and not self._kick.is_set():
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.poll_s):
                            await self._kick.wait()
        except Exception as exc:  # noqa: BLE001 - the ledger is down: never strand a waiter
            self._fall_back(exc)
        finally:
            listener.cancel()
            self._dispatcher = None

    async def _listen(self) -> None:
        while True:
            try:
                if await self.ledger.wait_freed(self.poll_s):
                    self._kick.set()
            except Exception:  # noqa: BLE001 - the round fails too and falls back
                await asyncio.sleep(self.poll_s)

    async def _round(self) -> None:
        if not all(self._outage.values()):  # the ledger is back: it counts what went through meanwhile
            sids = [sid for sid, recorded in self._outage.items() if not recorded]
            await self.ledger.adopt(sids)
            for sid in sids:
                if sid in self._outage:
                    self._outage[sid] = True
                else:  # it ended while the ledger was hearing of it
                    self._give_back(sid, "*", "", 0.0)
        rooms = self.rooms()
        cap = sum(rooms.values())
        asks = [Ask(t, self.weight_of(t), len(line),
                    [(w.sid, w.cost, w.prefer) for w in itertools.islice(line, max(cap, 0))])
                for t, line in self._lines.items()]
        self._held_back = False
        reserve = self.reserve()
        got = await self.ledger.admit(asks, rooms, self.active_lead(), reserve)
        # full for the tenants waiting here: what is left is headroom they were not let into
        self._full = got.in_use >= cap - reserve
        if self._held_back and not self._full:  # arrivals during the round: room after all
            self._kick.set()
        self.counters.update(got.counters)
        self.gateways = max(1, got.gateways)
        self._announced = len(got.granted) < sum(a.waiting for a in asks)
        for sid, replica in got.granted:
            waiter = self._pending.get(sid)
            if waiter is None or waiter.fut.done():  # its client left during the round
                if waiter is not None:
                    self._forget(waiter, kick=False)
                self._give_back(sid, replica, waiter.tenant if waiter else "", 0.0)
                continue
            self._forget(waiter, kick=False)
            self.in_flight += 1
            waiter.replica = replica
            waiter.fut.set_result(True)
        for line in self._lines.values():
            for waiter in line:
                waiter.rounds += 1
                if waiter.rounds == 1:
                    self.waited += 1

    def _fall_back(self, exc: Exception) -> None:
        self.fallbacks += 1
        self._down_until = asyncio.get_running_loop().time() + self.down_s
        log.warning("pool fair queue: the shared ledger failed (%s); %d waiters go on in local order",
                    type(exc).__name__, len(self._pending))
        waiters, self._lines, self._pending, self._announced = list(self._pending.values()), {}, {}, False
        for waiter in waiters:
            if not waiter.fut.done():
                waiter.fut.set_result(False)

    def _forget(self, waiter: _Waiter, kick: bool = True) -> None:
        self._pending.pop(waiter.sid, None)
        line = self._lines.get(waiter.tenant)
        if line is not None and waiter in line:
            line.remove(waiter)
            if not line:
                del self._lines[waiter.tenant]
        if kick:  # a waiter left: the ledger hears the new demand at once
            self._kick.set()

    def _give_back(self, sid: str, replica: str, tenant: str, cost: float) -> None:
        charge = cost / max(self.weight_of(tenant), 1e-9) if tenant else 0.0
        task = asyncio.get_running_loop().create_task(self._release(sid, replica, tenant, charge),
                                                      name="pool-slot-release")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _release(self, sid: str, replica: str, tenant: str, charge: float) -> None:
        try:
            await self.ledger.release(sid, replica, tenant, charge)
        except Exception as exc:  # noqa: BLE001 - the slot's TTL gives it back
            log.warning("pool fair queue: releasing a slot failed (%s)", type(exc).__name__)
        self._kick.set()  # a slot is free: this process's waiters try now

    async def aclose(self) -> None:
        """The pool is going (a rebuild dropped it, or the gateway stops): waiters still here go
        on in local order; the slot releases under way reach the ledger first."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
        for waiter in list(self._pending.values()):
            self._forget(waiter, kick=False)
            if not waiter.fut.done():
                waiter.fut.set_result(False)
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.ledger.aclose()
