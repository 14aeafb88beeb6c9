"""In-process quota store: the Redis script's semantics for a single gateway process.

Every method runs without awaiting in its critical section, so on one event loop each
reserve/settle is atomic just as the Lua script is in Redis.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from fairgate.gateway.config.bus import MemoryConfigBus
from fairgate.gateway.quota import (
    BudgetSource,
    BudgetUse,
    QuotaDenied,
    RateLimitState,
    ScopeLimits,
    StaleConfig,
    clamp_amount,
    cost_units,
    has_budget,
    period_tags,
    rate_limit_state,
    retry_after_for,
    scope_kind,
)
from fairgate.gateway.quota.heartbeat import ReservationHeartbeat

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


def _denial(st: _Scope, limits: ScopeLimits, tokens: int, units: int, day: str, month: str,
            now: int) -> tuple[str, int] | None:
    """(the limit this scope is over, ms until its window frees) or None."""
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
    if cbud >= 0 and st.cost.get(month, 0) + units > cbud:
        return "monthly_cost", 1000
    return None


@dataclass(slots=True)
class _Reservation:
    scopes: list[str]
    tokens: int
    cost: int
    day: str
    month: str
    expires: int


class MemoryQuotaStore:
    """Reservations expire after `reservation_ttl_s` unless renewed by the heartbeat, as in
    the Redis store (here the process holding them is the only one that could die with them).
    `budgets`: where each tenant's budgets are rebuilt from before its first reserve of a month in
    this process (gateway.quota.rebuild), so a restart grants no second budget; None: not rebuilt."""

    def __init__(self, reservation_ttl_s: int = 30, bus: MemoryConfigBus | None = None,
                 budgets: BudgetSource | None = None) -> None:
        self._ttl_ms = reservation_ttl_s * 1000
        self._budgets = budgets
        self._seeded: set[tuple[str, str]] = set()  # (tenant scope, month) rebuilt
        self._scopes: dict[str, _Scope] = {}
        self._reservations: OrderedDict[str, _Reservation] = OrderedDict()
        self._bus = bus or MemoryConfigBus()
        self.heartbeat = ReservationHeartbeat(self._renew, reservation_ttl_s)

    @staticmethod
    def _now() -> int:
        return int(time.time() * 1000)

    async def reserve(self, reservation_id: str, scopes: list[ScopeLimits], tokens: int,
                      cost: float, version: int) -> RateLimitState:
        if self._budgets is not None and has_budget(scopes):
            await self._rebuild(scopes)
        if version != self._bus.current:
            raise StaleConfig()
        now = self._now()
        while self._reservations:  # forget reservations nobody settled (their TTL passed)
            rid, first = next(iter(self._reservations.items()))
            if first.expires > now:
                break
            del self._reservations[rid]
        day, month = period_tags(now / 1000)
        tokens, units = clamp_amount(tokens), cost_units(cost)
        states = [self._scope(limits.scope) for limits in scopes]
        for limits, st in zip(scopes, states, strict=True):  # every check before any write, as in the Lua script
            st.expire(now)
            denied = _denial(st, limits, tokens, units, day, month, now)
            if denied:
                raise QuotaDenied(denied[0], scope_kind(limits.scope), retry_after_for(*denied),
                                  self._state(scopes, now))
        for limits, st in zip(scopes, states, strict=True):
            self._take(st, limits, reservation_id, tokens, units, day, month, now)
        self._reservations[reservation_id] = _Reservation(
            [s.scope for s in scopes], tokens, units, day, month, now + self._ttl_ms)
        self.heartbeat.add(reservation_id)
        return self._state(scopes, now, states)

    async def _rebuild(self, scopes: list[ScopeLimits]) -> None:
        """The tenant's budgets from the usage rows (`reserve` calls it only for scopes with a
        budget), once a month per process (before the atomic
        part: a reserve racing it applies the same figures, and counters are only ever raised)."""
        tenant = next((limits.scope for limits in scopes if limits.scope.startswith("t:")), None)
        day, month = period_tags()
        if self._budgets is None or tenant is None or (tenant, month) in self._seeded:
            return
        use: dict[str, BudgetUse] = await self._budgets(tenant[2:])
        for scope, u in use.items():
            st = self._scope(scope)
            st.daily[day] = max(st.daily.get(day, 0), u.daily_tokens)
            st.monthly[month] = max(st.monthly.get(month, 0), u.monthly_tokens)
            st.cost[month] = max(st.cost.get(month, 0), u.monthly_cost)
        self._seeded.add((tenant, month))

    def _scope(self, scope: str) -> _Scope:
        st = self._scopes.get(scope)
        if st is None:  # (not setdefault: that would build a _Scope on every call)
            st = self._scopes[scope] = _Scope()
        return st

    def _state(self, scopes: list[ScopeLimits], now: int, expired: list[_Scope] | None = None) -> RateLimitState:
        """The windows as a client sees them; `expired`: the scopes' states, already expired at `now`."""
        values: list[int] = []
        for i, limits in enumerate(scopes):  # (a refusal may come before a later scope was ever seen)
            if expired is None:
                st = self._scope(limits.scope)
                st.expire(now)
            else:
                st = expired[i]
            newest_r = st.requests[-1][0] + WINDOW_MS - now if st.requests else 0
            newest_t = st.token_log[-1][0] + WINDOW_MS - now if st.token_log else 0
            values += [len(st.requests), newest_r, st.token_sum, newest_t]
        return rate_limit_state(scopes, values)

    def _take(self, st: _Scope, limits: ScopeLimits, rid: str, tokens: int, units: int, day: str,
              month: str, now: int) -> None:
        rpm, tpm, conc, *_ = limits.as_ints()
        if rpm >= 0:
            st.requests.append((now, rid))
        if tpm >= 0:
            st.token_log.append((now, rid))
            st.token_amounts[rid] = tokens
            st.token_sum += tokens
        if conc >= 0:
            st.concurrent[rid] = now + self._ttl_ms
        st.daily[day] = st.daily.get(day, 0) + tokens
        st.monthly[month] = st.monthly.get(month, 0) + tokens
        st.cost[month] = st.cost.get(month, 0) + units

    async def _renew(self, reservation_ids: list[str]) -> None:
        expires = self._now() + self._ttl_ms
        for rid in reservation_ids:
            res = self._reservations.get(rid)
            if res is None:
                continue
            res.expires = expires
            self._reservations.move_to_end(rid)  # keep the dict in expiry order
            for scope in res.scopes:
                st = self._scopes.get(scope)
                if st is not None and rid in st.concurrent:
                    st.concurrent[rid] = expires

    async def settle(self, reservation_id: str, tokens: int, cost: float) -> bool:
        self.heartbeat.discard(reservation_id)
        res = self._reservations.pop(reservation_id, None)
        if res is None:
            return False
        dt = clamp_amount(tokens) - res.tokens
        dc = cost_units(cost) - res.cost
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
        await self.heartbeat.aclose()
