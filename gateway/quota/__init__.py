"""Quota admission: check-and-reserve as one atomic step, reconciled when the request ends.

Two stores keep one contract (tests/gateway/test_quota_contract.py runs against both):
`RedisQuotaStore` (one Lua script per admission and per settle, exact across replicas) and
`MemoryQuotaStore` (a single process). Scopes are "t:<tenant id>" and "k:<key id>"; a request
reserves in every scope at once or in none.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from fairgate.gateway.config.bus import ConfigBus

# Lua and the memory store both use -1 for "no limit"
UNLIMITED = -1
COST_UNIT = 1_000_000  # costs are counted in micro-dollars so counters stay integers
# The largest count or limit a store takes: Lua numbers are doubles, exact below 2**53, and
# Redis counters are int64. The admin API refuses larger limits (a quadrillion tokens, a
# billion dollars); anything that still arrives larger is clamped, never sent as a double.
MAX_AMOUNT = 10**15
MAX_COST = MAX_AMOUNT / COST_UNIT  # dollars


def clamp_amount(n: int) -> int:
    """A token count or micro-dollar amount within [0, MAX_AMOUNT]: a request that would
    reserve more than any limit can allow is still refused by every finite limit."""
    return min(max(int(n), 0), MAX_AMOUNT)


def cost_units(cost: float) -> int:
    """Dollars → micro-dollars, clamped (an absurd price must not make the store fail)."""
    if not math.isfinite(cost) or cost >= MAX_COST:
        return MAX_AMOUNT if cost > 0 else 0
    return clamp_amount(round(cost * COST_UNIT))


def limit_int(v: float | None, unit: int = 1) -> int:
    """A limit for the stores: -1 for none, and for one no count can reach (beyond MAX_AMOUNT)."""
    if v is None or not math.isfinite(v * unit) or v * unit > MAX_AMOUNT:
        return UNLIMITED
    return max(int(v * unit), 0)


@dataclass(slots=True)
class ScopeLimits:
    scope: str
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_concurrent: int | None = None
    daily_tokens: int | None = None
    monthly_tokens: int | None = None
    monthly_cost: float | None = None
    _ints: tuple[int, int, int, int, int, int] | None = field(default=None, init=False, repr=False, compare=False)

    def as_ints(self) -> tuple[int, int, int, int, int, int]:
        """rpm, tpm, concurrent, daily, monthly, monthly cost (micro-dollars); -1 = unlimited.
        Computed once: a principal's limits are read on every request and never change (an
        admin change builds a new principal)."""
        if self._ints is None:
            self._ints = (limit_int(self.requests_per_minute), limit_int(self.tokens_per_minute),
                          limit_int(self.max_concurrent), limit_int(self.daily_tokens),
                          limit_int(self.monthly_tokens), limit_int(self.monthly_cost, COST_UNIT))
        return self._ints


@dataclass(slots=True, frozen=True)
class BudgetUse:
    """What one scope used of its budgets, by the usage rows: tokens this UTC day and this month,
    cost this month in micro-dollars."""

    daily_tokens: int = 0
    monthly_tokens: int = 0
    monthly_cost: int = 0


# tenant id -> what its tenant scope ("t:<id>") and its keys' scopes ("k:<id>") used this UTC day
# and month: a store whose counters are gone (Redis restarted or flushed, a process restarted)
# rebuilds a tenant's budgets from it before admitting that tenant again
BudgetSource = Callable[[str], Awaitable[dict[str, BudgetUse]]]


def has_budget(scopes: list[ScopeLimits]) -> bool:
    """Whether any scope has a daily or monthly token budget or a monthly cost budget."""
    return any(limit >= 0 for limits in scopes for limit in limits.as_ints()[3:])


@dataclass(slots=True, frozen=True)
class WindowState:
    """One per-minute window as a client sees it: its limit, what is left, and the time until
    it has fully refilled (every request or token counted in it has left the window)."""

    limit: int
    remaining: int
    reset_ms: int


@dataclass(slots=True, frozen=True)
class RateLimitState:
    """The tightest request and token windows over a request's scopes (None: no such limit),
    sent as OpenAI's `x-ratelimit-*` headers."""

    requests: WindowState | None = None
    tokens: WindowState | None = None

    def headers(self) -> list[tuple[bytes, bytes]]:
        out = []
        for (limit, remaining, reset), w in zip(_HEADER_NAMES, (self.requests, self.tokens), strict=True):
            if w is not None:
                out += [(limit, b"%d" % w.limit), (remaining, b"%d" % w.remaining),
                        (reset, duration(w.reset_ms).encode())]
        return out


_HEADER_NAMES = tuple(tuple(f"x-ratelimit-{what}-{kind}".encode() for what in ("limit", "remaining", "reset"))
                      for kind in ("requests", "tokens"))


def duration(ms: int) -> str:
    """A duration as OpenAI writes it (Go's format): "20ms", "1s", "1.5s", "6m0s", "1h2m3s"."""
    ms = max(int(ms), 0)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s = f"{rest / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if h:
        return f"{h}h{m}m{s}"
    return f"{m}m{s}" if m else s


def rate_limit_state(scopes: list[ScopeLimits], values: list[int]) -> RateLimitState:
    """From the stores' four numbers per scope (requests used, ms until the request window is
    empty, tokens used, ms until the token window is empty): the tightest window of each kind."""
    best: list[tuple[int, int, int] | None] = [None, None]  # requests, tokens: (remaining, limit, reset)
    for i, limits in enumerate(scopes):
        ints = limits.as_ints()
        for k in (0, 1):  # rpm, tpm; their values sit at 4i + 2k (used) and 4i + 2k + 1 (reset)
            limit = ints[k]
            if limit < 0:
                continue
            remaining = max(limit - int(values[4 * i + 2 * k]), 0)
            tightest = best[k]
            if tightest is None or remaining < tightest[0]:
                best[k] = (remaining, limit, max(int(values[4 * i + 2 * k + 1]), 0))
    requests, tokens = (None if b is None else WindowState(b[1], b[0], b[2]) for b in best)
    return RateLimitState(requests, tokens)


class QuotaDenied(Exception):
    """Over a limit. `limit` names it (e.g. "requests_per_minute"); `scope` is "tenant"/"key";
    `state` the windows as they stand (nothing was reserved)."""

    def __init__(self, limit: str, scope: str, retry_after_s: int, state: RateLimitState | None = None) -> None:
        super().__init__(f"{scope} quota exceeded: {limit}")
        self.limit = limit
        self.scope = scope
        self.retry_after_s = max(1, retry_after_s)
        self.state = state or RateLimitState()


class StaleConfig(Exception):
    """The caller's cached keys/limits predate an admin change: reload and try again."""


def scope_kind(scope_id: str) -> str:
    return "tenant" if scope_id.startswith("t:") else "key"


def period_tags(now: float | None = None) -> tuple[str, str]:
    """UTC day and month tags for the budget counters, e.g. ("20261129", "202611"); the tags of
    the day last asked for are kept (every reserve and settle asks)."""
    global _day_tags
    t = now if now is not None else time.time()
    start, tags = _day_tags
    if start <= t < start + 86400:
        return tags
    tm = time.gmtime(t)
    tags = (time.strftime("%Y%m%d", tm), time.strftime("%Y%m", tm))
    _day_tags = (math.floor(t) - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec), tags)
    return tags


_day_tags: tuple[float, tuple[str, str]] = (math.inf, ("", ""))  # the UTC day's first second, its tags


def retry_after_for(limit: str, wait_ms: int, now: float | None = None) -> int:
    """Seconds until the limit can admit again: window limits from the store, budgets by calendar."""
    now = time.time() if now is None else now
    tm = time.gmtime(now)
    if limit == "daily_tokens":
        return 86400 - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec)
    if limit in ("monthly_tokens", "monthly_cost"):
        days = calendar.monthrange(tm.tm_year, tm.tm_mon)[1]
        return (days - tm.tm_mday) * 86400 + 86400 - (tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec)
    return -(-max(wait_ms, 1) // 1000)


class QuotaStore(Protocol):
    async def reserve(self, reservation_id: str, scopes: list[ScopeLimits], tokens: int,
                      cost: float, version: int) -> RateLimitState:
        """Reserve `tokens` (and `cost`) in every scope, or raise QuotaDenied / StaleConfig.
        Returns the per-minute windows after the reservation (the `x-ratelimit-*` headers)."""
        ...

    async def settle(self, reservation_id: str, tokens: int, cost: float) -> bool:
        """Replace the reservation by what was used. Idempotent: False if already settled."""
        ...

    def config_bus(self) -> ConfigBus:
        """The config version `reserve` checks (gateway.config.bus), on this store's connection."""
        ...

    async def counters(self, scope: str) -> dict[str, int]:
        """Current usage in a scope (for tests and reports): requests/tokens in the window,
        concurrent, daily and monthly tokens, monthly cost in micro-dollars."""
        ...

    async def aclose(self) -> None: ...
