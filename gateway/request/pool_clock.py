"""A pool's fleet-wide virtual clock in Redis: the `GateLedger` of backends/pool_fleet_gate.py.

Every gateway replica's fair queue for a pool (`pool_fair_slots`) reads and charges the same
weighted service counter per tenant (VTC: prompt tokens when a request is let through,
completion tokens when it ends, each over the tenant's fairness weight, the weights every
replica loads from the same database and pushes to the engines) and takes slots from the same
set (the pool's capacity, fleet-wide). Keys live in the pool's own Cluster slot, as
pool_share's do, under `<prefix>:{pool:<name>}`:

    :slots           sorted set, `<replica>/<slot id>` -> expiry (ms); a dead gateway's expire;
                     `*/<slot id>`: a slot a gateway took on its own while Redis was unreachable
                     (on no replica in particular: it counts against the pool's total)
    :vtc             hash, tenant -> virtual counter
    :recent          hash, tenant -> when it was last let through or a request of its ended (ms)
    :owner           hash, `<replica>/<slot id>` -> the tenant holding it (its held slots, for the headroom)
    :weight          hash, tenant -> its fairness weight as a gateway last asked with it (the headroom)
    :floor           the clock's present: the highest counter let through or left waiting
                     (VTC's counter of the last to leave the queue)
    :demand:<gw>     hash, tenant -> requests waiting at gateway <gw> (expires unless refreshed)
    :gws             sorted set of gateways with demand, -> expiry
    :live            sorted set of gateways seen, -> expiry (the local fallback's share)
    :wake:<gw>       a list gateway <gw> blocks on (BLPOP, a connection per pool) while it waits

One ADMIT call (a round) registers this gateway's demand and hands out free slots, one at a
time, to the least-served tenant waiting anywhere (on the waiter's preferred replica if it has
a free slot, else on the replica with the most free slots); it stops when that tenant waits
only at another gateway (its slot) and wakes that gateway. RELEASE frees a slot, charges the
completion and wakes the gateways where the least-served waiting tenant waits. A tenant that
starts waiting is lifted to the least counter of those already waiting, or with nobody
waiting to the floor (idle time is no credit), as in the engine's fair queue; one served within
the last `active_window_s` (let through, or a request of its ended, at any gateway) keeps up to
`active_lead` tokens over its weight of its lead below that (backends/pool_gate.py). With a
headroom (`pool_fair_reserve`), the last free slots of the pool go only to a tenant holding fewer
than its weighted share of them among the tenants about (holding, waiting at any gateway, or
seen within two seconds), as in the local queue: each slot records its tenant (`:owner`) and each
asking gateway its tenants' weights (`:weight`), so the shares are the fleet's. Every grant
counts, also one let straight through: a tenant served alone while the others were idle must
not owe that service to the next one to arrive (before, a light tenant served alone had its
counter far above a flood's that arrived later, and waited seconds while the flood caught up;
bench/fairness_live.py --pool 2, 2026-12-07). Counters are
read inside the script, so ordering never uses a stale value; the copy each gateway keeps (for
metrics and the local fallback) is as old as its last round. Cost per request: one ADMIT
(several requests share one when they arrive together) and one RELEASE; while a gateway has
waiters, one ADMIT per wake and one BLPOP plus one ADMIT per `poll_s` (0.25 s) per pool; a
RENEW per ttl/3 for all its slots.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from fairgate.backends.pool_fleet_gate import Ask, Round
from fairgate.gateway.quota.heartbeat import ReservationHeartbeat
from fairgate.gateway.quota.resp import RespClient, Script
from fairgate.gateway.request.pool_clock_lua import ADMIT, ADOPT, RELEASE, RENEW

if TYPE_CHECKING:
    from fairgate.gateway.settings import Settings


def parse_round(reply: list[Any]) -> Round:
    n = int(reply[0])
    granted = [(str(reply[1 + 2 * j]), str(reply[2 + 2 * j])) for j in range(n)]
    gateways, in_use = int(reply[1 + 2 * n]), int(reply[2 + 2 * n])
    rest = reply[3 + 2 * n:]
    counters = {str(rest[i]): float(rest[i + 1]) for i in range(0, len(rest), 2)}
    return Round(granted, counters, gateways, in_use)


class PoolClock:
    """The Redis side of every pool's fleet gate in this gateway process (one connection)."""

    def __init__(self, url: str, prefix: str, ttl_s: int, cluster: bool = False,
                 demand_ttl_ms: int = 2000, active_window_s: float = 1.0, recent_s: float = 2.0) -> None:
        self._url, self._cluster = url, cluster
        self._redis: Any = self.connect()
        self._prefix = prefix
        self._ttl_ms = ttl_s * 1000
        self._demand_ttl_ms = demand_ttl_ms
        self._window_ms = int(active_window_s * 1000)  # a tenant served this lately keeps a lead
        self._about_ms = int(recent_s * 1000)  # ... and one seen this lately counts for the headroom
        self.gateway_id = uuid.uuid4().hex[:12]
        self._admit = Script(self._redis, ADMIT)
        self._release = Script(self._redis, RELEASE)
        self._renew_script = Script(self._redis, RENEW)
        self._adopt = Script(self._redis, ADOPT)
        self._held: dict[str, tuple[str, str]] = {}  # slot id -> (pool, member in its :slots)
        self.heartbeat = ReservationHeartbeat(self._renew, ttl_s)
        self.calls = 0  # Redis round trips (metrics: the cost per request)
        self.seconds = 0.0  # time spent waiting on them

    def connect(self) -> Any:
        """A client of its own (a RespClient, or a ClusterClient for a Redis Cluster)."""
        if self._cluster:
            from fairgate.gateway.quota.cluster import ClusterClient

            return ClusterClient(self._url)
        return RespClient(self._url)

    def base(self, pool: str) -> str:
        return f"{self._prefix}:{{pool:{pool}}}"

    def ledger(self, pool: str) -> PoolLedger:
        return PoolLedger(self, pool)

    async def admit(self, pool: str, asks: list[Ask], rooms: dict[str, int], active_lead: float = 0.0,
                    reserve: int = 0) -> Round:
        args: list[Any] = [self.gateway_id, self._ttl_ms, self._demand_ttl_ms, repr(float(active_lead)),
                           self._window_ms, reserve, self._about_ms, len(rooms)]
        for replica, slots in rooms.items():
            args += [replica, slots]
        args.append(len(asks))
        for a in asks:
            args += [a.tenant, repr(max(a.weight, 1e-9)), a.waiting, len(a.heads)]
            for sid, cost, prefer in a.heads:
                args += [sid, repr(float(cost)), prefer]
        got = parse_round(await self._timed(self._admit([self.base(pool)], args)))
        for sid, replica in got.granted:
            self._held[sid] = (pool, f"{replica}/{sid}")
            self.heartbeat.add(sid)
        return got

    async def adopt(self, pool: str, sids: list[str]) -> None:
        """Record slots let through while Redis was unreachable (released as replica "*")."""
        await self._timed(self._adopt([self.base(pool)], [self._ttl_ms, *sids]))
        for sid in sids:
            self._held[sid] = (pool, f"*/{sid}")
            self.heartbeat.add(sid)

    async def release(self, pool: str, sid: str, replica: str, tenant: str, charge: float) -> None:
        self._held.pop(sid, None)
        self.heartbeat.discard(sid)
        await self._timed(self._release([self.base(pool)], [f"{replica}/{sid}", tenant, repr(float(charge)),
                                                            self.gateway_id,
                                                            max(self._window_ms, self._about_ms)]))

    async def counters(self, pool: str) -> dict[str, float]:
        """The fleet counters as they are now (tests, the admin)."""
        raw = await self._redis.execute("HGETALL", f"{self.base(pool)}:vtc")
        return {str(raw[i]): float(raw[i + 1]) for i in range(0, len(raw), 2)}

    async def slots_in_use(self, pool: str) -> int:
        """Live slots of `pool` fleet-wide (tests: nothing leaked)."""
        sec, usec = await self._redis.execute("TIME")
        now = int(sec) * 1000 + int(usec) // 1000
        return int(await self._redis.execute("ZCOUNT", f"{self.base(pool)}:slots", f"({now}", "+inf"))

    async def _timed(self, call: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await call
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t0

    async def _renew(self, sids: list[str]) -> None:
        groups: dict[str, list[str]] = {}
        for sid in sids:
            if (held := self._held.get(sid)) is not None:
                groups.setdefault(held[0], []).append(held[1])
        for pool, ids in groups.items():
            await self._timed(self._renew_script([self.base(pool)], [self._ttl_ms, *ids]))

    async def aclose(self) -> None:
        await self.heartbeat.aclose()
        await self._redis.aclose()


class PoolLedger:
    """One pool's view of the clock (backends.pool_fleet_gate.GateLedger). `wait_freed` blocks
    on a connection of its own (BLPOP would hold up every other call on a shared one)."""

    def __init__(self, clock: PoolClock, pool: str) -> None:
        self.clock = clock
        self.pool = pool
        self._waker: Any = None

    async def wait_freed(self, timeout_s: float) -> bool:
        if self._waker is None:
            self._waker = self.clock.connect()
        key = f"{self.clock.base(self.pool)}:wake:{self.clock.gateway_id}"
        got = await self._waker.execute("BLPOP", key, f"{timeout_s:.3f}")
        self.clock.calls += 1
        return got is not None

    async def aclose(self) -> None:
        if self._waker is not None:
            await self._waker.aclose()
            self._waker = None

    async def admit(self, asks: list[Ask], rooms: dict[str, int], active_lead: float = 0.0,
                    reserve: int = 0) -> Round:
        return await self.clock.admit(self.pool, asks, rooms, active_lead, reserve)

    async def release(self, slot_id: str, replica: str, tenant: str, charge: float) -> None:
        await self.clock.release(self.pool, slot_id, replica, tenant, charge)

    async def adopt(self, slot_ids: list[str]) -> None:
        await self.clock.adopt(self.pool, slot_ids)


def make_pool_clock(settings: Settings) -> PoolClock | None:
    """The shared clock when pools have a fair queue and replicas share Redis; else None (each
    pool's gate keeps its counters in memory: one process)."""
    if settings.pool_fair_slots is None or not settings.redis_url:
        return None
    return PoolClock(settings.redis_url, settings.redis_prefix, settings.reservation_ttl_s, settings.redis_cluster)
