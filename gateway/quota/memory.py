"""In-process quota store: the Redis script's semantics for a single gateway process.

Every method runs without awaiting in its critical section, so on one event loop each
reserve/settle is atomic just as the Lua script is in Redis.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from gateway.config_bus import MemoryConfigBus
from gateway.quota import (
    COST_UNIT,
    QuotaDenied,
    ScopeLimits,
    StaleConfig,
    period_tags,
    retry_after_for,
    scope_kind,
)

WINDOW_MS = 60_000


@dataclass(slots=True)
class _Scope:
    requests: deque[tuple[int, str]] = field(default_factory=deque)
    token_log: deque[tuple[int, str]] = field(default_factory=deque)
    token_amounts: dict[str, int] = field(default_factory=dict)
    token_sum: int = 0
    concurrent: dict[str, int] = field(default_factory=dict)  # reservation id -> expiry ms
    daily: dict[str, int] = field(default_factory=dict)
    monthly: dict[str, int] = field(default_factory=dict)
    cost: dict[str, int] = field(default_factory=dict)

    def expire(self, now: int) -> None:
        start = now - WINDOW_MS
        while self.requests and self.requests[0][0] <= start:
            self.requests.popleft()
        while self.token_log and self.token_log[0][0] <= start:
            _, rid = self.token_log.popleft()
            self.token_sum -= self.token_amounts.pop(rid, 0)
        for rid in [r for r, exp in self.concurrent.items() if exp <= now]:
            del self.concurrent[rid]


@dataclass(slots=True)
class _Reservation:
    scopes: list[str]
    tokens: int
    cost: int
    day: str
    month: str
    expires: int


def _denial(st: _Scope, limits: ScopeLimits, tokens: int, cost_units: int, day: str, month: str,
            now: int) -> tuple[str, int] | None:
    """The first limit this reservation would break in one scope, and the wait in ms; None: fits."""
    rpm, tpm, conc, daily, monthly, cbud = limits.as_ints()
    if rpm >= 0 and len(st.requests) >= rpm:
        return "requests_per_minute", st.requests[0][0] + WINDOW_MS - now if st.requests else WINDOW_MS
    if tpm >= 0 and st.token_sum + tokens > tpm:
        return "tokens_per_minute", st.token_log[0][0] + WINDOW_MS - now if st.token_log else WINDOW_MS
    if conc >= 0 and len(st.concurrent) >= conc:
        return "max_concurrent", 1000
    if daily >= 0 and st.daily.get(day, 0) + tokens > daily:
        return "daily_tokens", 1000
    if monthly >= 0 and st.monthly.get(month, 0) + tokens > monthly:
        return "monthly_tokens", 1000
    if cbud >= 0 and st.cost.get(month, 0) + cost_units > cbud:
        return "monthly_cost", 1000
    return None


class MemoryQuotaStore:
    def __init__(self, reservation_ttl_s: int = 900, bus: MemoryConfigBus | None = None) -> None:
        self._ttl_ms = reservation_ttl_s * 1000
        self._scopes: dict[str, _Scope] = {}
        self._reservations: OrderedDict[str, _Reservation] = OrderedDict()
        self._bus = bus or MemoryConfigBus()

    @staticmethod
    def _now() -> int:
        return int(time.time() * 1000)

    async def reserve(self, reservation_id: str, scopes: list[ScopeLimits], tokens: int,
                      cost: float, version: int) -> None:
        if version != self._bus.current:
            raise StaleConfig()
        now = self._now()
        while self._reservations:  # forget reservations nobody settled (their TTL passed)
            rid, first = next(iter(self._reservations.items()))
            if first.expires > now:
                break
            del self._reservations[rid]
        day, month = period_tags(now / 1000)
        cost_units = int(cost * COST_UNIT)
        for limits in scopes:
            st = self._scopes.setdefault(limits.scope, _Scope())
            st.expire(now)
            denied = _denial(st, limits, tokens, cost_units, day, month, now)
            if denied:
                limit, wait = denied
                raise QuotaDenied(limit, scope_kind(limits.scope), retry_after_for(limit, wait))
        for limits in scopes:
            st = self._scopes[limits.scope]
            rpm, tpm, conc, *_ = limits.as_ints()
            if rpm >= 0:
                st.requests.append((now, reservation_id))
            if tpm >= 0:
                st.token_log.append((now, reservation_id))
                st.token_amounts[reservation_id] = tokens
                st.token_sum += tokens
            if conc >= 0:
                st.concurrent[reservation_id] = now + self._ttl_ms
            st.daily[day] = st.daily.get(day, 0) + tokens
            st.monthly[month] = st.monthly.get(month, 0) + tokens
            st.cost[month] = st.cost.get(month, 0) + cost_units
        self._reservations[reservation_id] = _Reservation(
            [s.scope for s in scopes], tokens, cost_units, day, month, now + self._ttl_ms)

    async def settle(self, reservation_id: str, tokens: int, cost: float) -> bool:
        res = self._reservations.pop(reservation_id, None)
        if res is None:
            return False
        dt = tokens - res.tokens
        dc = int(cost * COST_UNIT) - res.cost
        for scope in res.scopes:
            st = self._scopes.get(scope)
            if st is None:
                continue
            st.concurrent.pop(reservation_id, None)
            st.daily[res.day] = st.daily.get(res.day, 0) + dt
            st.monthly[res.month] = st.monthly.get(res.month, 0) + dt
            st.cost[res.month] = st.cost.get(res.month, 0) + dc
            if reservation_id in st.token_amounts:
                st.token_amounts[reservation_id] += dt
                st.token_sum += dt
        return True

    def config_bus(self) -> MemoryConfigBus:
        """The config version this store checks at every reserve."""
        return self._bus

    async def counters(self, scope: str) -> dict[str, int]:
        st = self._scopes.get(scope) or _Scope()
        st.expire(self._now())
        day, month = period_tags()
        return {"requests": len(st.requests), "tokens": st.token_sum,
                "concurrent": len(st.concurrent), "daily_tokens": st.daily.get(day, 0),
                "monthly_tokens": st.monthly.get(month, 0), "monthly_cost": st.cost.get(month, 0)}

    async def aclose(self) -> None:
        return None
