"""A tenant's fleet-wide share cap on a backend pool (`tenant_pool_share`).

A pool of N replicas takes about N x `pool_replica_slots` requests at once. With the cap set,
one tenant may hold at most max(1, floor(share x that capacity)) of them in flight (share scaled
by the tenant's fairness weight against the mean weight: `weighted_share`), counted
across every gateway replica: each admitted request to a pool takes a slot in Redis (one
sorted set per pool and tenant, scored by expiry, in the pool's own Cluster slot) before its
quota is reserved, and gives it back when the request settles. Over the cap the answer is a
429 (`tenant_pool_share`) with Retry-After, before anything is reserved. Slots carry a TTL
renewed by this replica's heartbeat while the request runs, so a replica that dies gives its
slots back within a TTL. Without Redis (one process) the count is kept in memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol

from fairgate.backends.openai_wire import WireError
from fairgate.backends.pool import PoolBackend
from fairgate.gateway.quota.heartbeat import ReservationHeartbeat
from fairgate.gateway.quota.resp import RespClient, Script

if TYPE_CHECKING:
    from fairgate.gateway.request.routing import RouteDecision
    from fairgate.gateway.request.state import RequestState
    from fairgate.gateway.settings import Settings

# KEYS: the pool's base `<prefix>:{pool:<name>}`. ARGV: tenant, rid, cap, ttl_ms.
# Returns the tenant's in-flight count after admitting, or -1 when at the cap.
ACQUIRE = """
local key = KEYS[1] .. ':share:' .. ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
if n >= tonumber(ARGV[3]) then return -1 end
redis.call('ZADD', key, now + tonumber(ARGV[4]), ARGV[2])
redis.call('PEXPIRE', key, tonumber(ARGV[4]) + 60000)
return n + 1
"""
# KEYS: base. ARGV: tenant, ttl_ms, rids. Pushes live slots' expiry to now + ttl.
RENEW = """
local key = KEYS[1] .. ':share:' .. ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 3, #ARGV do redis.call('ZADD', key, 'XX', now + tonumber(ARGV[2]), ARGV[i]) end
redis.call('PEXPIRE', key, tonumber(ARGV[2]) + 60000)
return 1
"""


class ShareGate(Protocol):
    async def acquire(self, pool: str, tenant: str, rid: str, cap: int) -> bool: ...
    async def release(self, rid: str) -> None: ...
    async def in_flight(self, pool: str, tenant: str) -> int: ...
    async def aclose(self) -> None: ...


class MemoryShareGate:
    """One process: counts in a dict."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[str, str]] = {}  # rid → (pool, tenant)
        self._counts: dict[tuple[str, str], int] = {}

    async def acquire(self, pool: str, tenant: str, rid: str, cap: int) -> bool:
        n = self._counts.get((pool, tenant), 0)
        if n >= cap:
            return False
        self._counts[(pool, tenant)] = n + 1
        self._held[rid] = (pool, tenant)
        return True

    async def release(self, rid: str) -> None:
        held = self._held.pop(rid, None)
        if held is not None:
            self._counts[held] -= 1

    async def in_flight(self, pool: str, tenant: str) -> int:
        return self._counts.get((pool, tenant), 0)

    async def aclose(self) -> None:
        return None


class RedisShareGate:
    """Every gateway replica: the slots in Redis (or a Redis Cluster, one slot per pool)."""

    def __init__(self, url: str, prefix: str, ttl_s: int, cluster: bool = False) -> None:
        if cluster:
            from fairgate.gateway.quota.cluster import ClusterClient

            self._redis: Any = ClusterClient(url)
        else:
            self._redis = RespClient(url)
        self._prefix = prefix
        self._ttl_ms = ttl_s * 1000
        self._acquire = Script(self._redis, ACQUIRE)
        self._renew_script = Script(self._redis, RENEW)
        self._held: dict[str, tuple[str, str]] = {}
        self.heartbeat = ReservationHeartbeat(self._renew, ttl_s)

    def base(self, pool: str) -> str:
        return f"{self._prefix}:{{pool:{pool}}}"

    async def acquire(self, pool: str, tenant: str, rid: str, cap: int) -> bool:
        n = await self._acquire([self.base(pool)], [tenant, rid, cap, self._ttl_ms])
        if int(n) < 0:
            return False
        self._held[rid] = (pool, tenant)
        self.heartbeat.add(rid)
        return True

    async def release(self, rid: str) -> None:
        held = self._held.pop(rid, None)
        self.heartbeat.discard(rid)
        if held is not None:
            await self._redis.execute("ZREM", f"{self.base(held[0])}:share:{held[1]}", rid)

    async def in_flight(self, pool: str, tenant: str) -> int:
        key = f"{self.base(pool)}:share:{tenant}"
        return int(await self._redis.execute("ZCOUNT", key, "(" + str(await self._now_ms()), "+inf"))

    async def _now_ms(self) -> int:
        sec, usec = await self._redis.execute("TIME")
        return int(sec) * 1000 + int(usec) // 1000

    async def _renew(self, rids: list[str]) -> None:
        groups: dict[tuple[str, str], list[str]] = {}
        for rid in rids:
            if (held := self._held.get(rid)) is not None:
                groups.setdefault(held, []).append(rid)
        for (pool, tenant), ids in groups.items():
            await self._renew_script([self.base(pool)], [tenant, self._ttl_ms, *ids])

    async def aclose(self) -> None:
        await self.heartbeat.aclose()
        await self._redis.aclose()


def make_share_gate(settings: Settings) -> ShareGate | None:
    if settings.tenant_pool_share is None:
        return None
    if settings.redis_url:
        return RedisShareGate(settings.redis_url, settings.redis_prefix, settings.reservation_ttl_s,
                              settings.redis_cluster)
    return MemoryShareGate()


def weighted_share(share: float, tenant: str, weights: dict[str, float]) -> float:
    """`share` is what a tenant of average fairness weight may hold; a heavier tenant holds
    proportionally more (never over the whole pool), a lighter one less. No weights: `share`."""
    w = weights.get(tenant)
    if not weights or w is None:
        return share
    mean = sum(weights.values()) / len(weights)
    return min(1.0, share * w / mean) if mean > 0 else share


def share_cap(pool: PoolBackend, share: float, slots_per_replica: int) -> int:
    """The most requests one tenant may hold in flight on `pool`, fleet-wide."""
    live = sum(1 for r in pool.replicas.values() if r.healthy and not r.spec.draining) or len(pool.replicas)
    return max(1, math.floor(share * live * slots_per_replica))


async def take_share(state: RequestState, rid: str, tenant: str, decision: RouteDecision) -> None:
    """Take a slot on the routed pool (its first backend) or raise a 429; a no-op when the cap
    is off or the request goes to a plain backend. A store that is down fails closed (503)."""
    gate, first = state.pool_share, decision.backends[0] if decision.backends else None
    if gate is None or not isinstance(first, PoolBackend):
        return
    assert state.settings.tenant_pool_share is not None
    share = weighted_share(state.settings.tenant_pool_share, tenant, state.fairness_weights)
    cap = share_cap(first, share, state.settings.pool_replica_slots)
    try:
        ok = await gate.acquire(first.name, tenant, rid, cap)
    except Exception:  # noqa: BLE001 - never admit unchecked
        raise WireError(503, "The pool share service is unavailable; retry shortly.", "quota_unavailable",
                        headers={"retry-after": "1"}) from None
    if not ok:
        raise WireError(429, f"This tenant holds its share of pool {first.name!r} ({cap} requests in flight "
                        f"across the fleet, {share:.0%} of its capacity). Retry shortly.", "tenant_pool_share",
                        headers={"retry-after": "1"})


async def give_back_share(state: RequestState, rid: str) -> None:
    if state.pool_share is not None:
        try:
            await state.pool_share.release(rid)
        except Exception:  # noqa: BLE001 - the slot's TTL gives it back
            return
