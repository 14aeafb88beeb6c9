"""The real cost of a backend over a window, and each tenant's share of it (pure: no I/O).

A backend with an hourly hardware price (`hourly_cost_usd`: a local engine, a vLLM box, a
pool) costs `paid hours x price`, whether it worked or not:

- paid hours: the window `[start, end)`, from no earlier than the backend was registered and
  to no later than now;
- busy time: the window's whole UTC minutes in which at least one request was in flight on the
  backend (a usage row is in flight from `created_at - latency_ms` to `created_at`, its end;
  the minutes are 1-minute buckets aligned to UTC);
  idle hours = paid hours - busy hours, the idle share = idle hours / paid hours;
- cost per 1M generated tokens = cost / completion tokens x 1e6, per 1M tokens = cost / all
  tokens (prompt + completion) x 1e6, both over the window, idle hours included;
- each tenant's share, and each report row's cost: the backend's cost in proportion to the
  engine time its tokens used, `(prompt - cached prompt tokens) x s_prefill + completion
  tokens x s_decode` (a prompt token served from the prefix cache is not computed),
  with the weights the engine measured (backends/local/engine/step_cost.py). Without a measurement
  both weights are 1 (cost in proportion to tokens) and the report says `"source": "default"`;
  with only one kind measured, that figure stands for both (`"partial"`). Idle time is paid
  by the tenants that used the backend, in the same proportion.

A backend without an hourly price (an external API) keeps its list prices: its cost is the sum
of the usage rows' `cost` (per-token prices at request time).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from fairgate.backends.local.engine.step_cost import StepCosts

MINUTE = timedelta(minutes=1)


@dataclass(slots=True, frozen=True)
class HourlyPrice:
    usd_per_hour: float
    since: datetime | None = None  # registered at: hours before it are not paid


@dataclass(slots=True, frozen=True)
class Weights:
    """Seconds of engine time per prefill token and per decode step, as allocation uses them."""

    prefill: float
    decode: float
    source: str  # measured | partial | default
    steps: int = 0

    @classmethod
    def of(cls, costs: StepCosts | None) -> Weights:
        if costs is None:
            return cls(1.0, 1.0, "default")
        p, d = costs.prefill_s_per_token, costs.decode_s_per_step
        if p is not None and d is not None:
            return cls(p, d, "measured", costs.steps)
        one = p if p is not None else d
        assert one is not None
        return cls(one, one, "partial", costs.steps)

    def engine_seconds(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """Prompt tokens served from a prefix cache were not computed: they cost no prefill."""
        return max(prompt_tokens - cached_tokens, 0) * self.prefill + completion_tokens * self.decode

    def as_dict(self) -> dict[str, Any]:
        return {"source": self.source, "steps": self.steps, "unit": "relative" if self.source == "default" else
                "seconds", "prefill_per_token": self.prefill, "decode_per_step": self.decode}


@dataclass(slots=True)
class Cell:
    """Usage summed over one (tenant, report group, backend)."""

    tenant_id: str
    group: str
    backend: str | None
    requests: int
    prompt_tokens: int
    completion_tokens: int
    list_cost: float
    cached_tokens: int = 0


@dataclass(slots=True)
class TenantShare:
    tenant_id: str
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    engine_seconds: float = 0.0
    share: float = 0.0
    cost: float = 0.0


@dataclass(slots=True)
class BackendCost:
    backend: str
    pricing: str  # hourly | list
    hourly_cost_usd: float | None = None
    hours: float = 0.0
    busy_hours: float = 0.0
    cost: float = 0.0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    engine_seconds: float = 0.0
    weights: Weights | None = None
    tenants: dict[str, TenantShare] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def idle_hours(self) -> float | None:
        return max(self.hours - self.busy_hours, 0.0) if self.pricing == "hourly" else None

    @property
    def idle_share(self) -> float | None:
        idle = self.idle_hours
        return None if idle is None or self.hours <= 0 else idle / self.hours

    def as_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "pricing": self.pricing, "hourly_cost_usd": self.hourly_cost_usd,
                "hours": self.hours if self.pricing == "hourly" else None,
                "busy_hours": self.busy_hours if self.pricing == "hourly" else None,
                "idle_hours": self.idle_hours, "idle_share": self.idle_share, "cost": self.cost,
                "requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "total_tokens": self.total_tokens,
                "cost_per_million_generated_tokens": per_million(self.cost, self.completion_tokens),
                "cost_per_million_tokens": per_million(self.cost, self.total_tokens),
                "weights": self.weights.as_dict() if self.weights else None,
                "tenants": [{"tenant_id": t.tenant_id, "requests": t.requests, "prompt_tokens": t.prompt_tokens,
                             "completion_tokens": t.completion_tokens, "engine_seconds": t.engine_seconds,
                             "share": t.share, "cost": t.cost} for t in sorted(self.tenants.values(),
                                                                                key=lambda t: t.tenant_id)]}


def per_million(cost: float, tokens: int) -> float | None:
    return cost / tokens * 1e6 if tokens > 0 else None


def busy_minutes(spans: Iterable[tuple[datetime, datetime]], start: datetime, end: datetime) -> float:
    """Minutes of `[start, end)` that lie in a whole UTC minute with a request in flight.

    `spans` are (first, last) moments of requests, in flight over `[first, last)`; a minute
    `[m, m+1)` is busy when a span overlaps it (a span of no length: the minute it lies in).
    Minutes cut by the window's edges count for the part inside the window."""
    if end <= start:
        return 0.0
    busy: set[datetime] = set()
    for first, last in spans:
        lo, hi = max(first, start), min(last, end)
        if hi < lo or lo >= end or (hi == lo and last > first):
            continue  # outside the window, or it only touches the window's start
        m = lo.replace(second=0, microsecond=0)
        busy.add(m)
        m += MINUTE
        while m < hi:
            busy.add(m)
            m += MINUTE
    total = 0.0
    for m in busy:
        inside = min(m + MINUTE, end) - max(m, start)
        total += inside.total_seconds() / 60
    return total


def paid_window(price: HourlyPrice, start: datetime | None, end: datetime, first_seen: datetime | None
                ) -> tuple[datetime, datetime] | None:
    """The part of the window the hardware is paid for (None: nothing): no earlier than it was
    registered; without a start, from its registration, else from the hour of its first use."""
    begin = start
    if price.since is not None:
        begin = price.since if begin is None else max(begin, price.since)
    if begin is None:
        if first_seen is None:
            return None
        begin = first_seen.replace(minute=0, second=0, microsecond=0)
    return (begin, end) if end > begin else None


def backend_costs(cells: list[Cell], spans: dict[str, list[tuple[datetime, datetime]]],
                  prices: dict[str, HourlyPrice], weights: dict[str, StepCosts | None],
                  start: datetime | None, end: datetime) -> dict[str, BackendCost]:
    """Every backend with usage in `cells` or an hourly price, costed over the window."""
    out: dict[str, BackendCost] = {}
    for name, price in prices.items():
        out[name] = BackendCost(name, "hourly", price.usd_per_hour, weights=Weights.of(weights.get(name)))
    for c in cells:
        if c.backend is None:
            continue
        b = out.get(c.backend) or out.setdefault(c.backend, BackendCost(c.backend, "list"))
        b.requests += c.requests
        b.prompt_tokens += c.prompt_tokens
        b.completion_tokens += c.completion_tokens
        t = b.tenants.get(c.tenant_id) or b.tenants.setdefault(c.tenant_id, TenantShare(c.tenant_id))
        t.requests += c.requests
        t.prompt_tokens += c.prompt_tokens
        t.completion_tokens += c.completion_tokens
        if b.weights is not None:
            seconds = b.weights.engine_seconds(c.prompt_tokens, c.completion_tokens, c.cached_tokens)
            t.engine_seconds += seconds
            b.engine_seconds += seconds
        else:
            t.cost += c.list_cost
            b.cost += c.list_cost
    for name, b in out.items():
        if b.pricing == "hourly":
            _cost_hourly(b, prices[name], spans.get(name, []), start, end)
        else:
            total = sum(t.cost for t in b.tenants.values())
            for t in b.tenants.values():
                t.share = t.cost / total if total > 0 else 0.0
    return out


def _cost_hourly(b: BackendCost, price: HourlyPrice, spans: list[tuple[datetime, datetime]],
                 start: datetime | None, end: datetime) -> None:
    first_seen = min((s for s, _ in spans), default=None)
    window = paid_window(price, start, end, first_seen)
    if window is None:
        return
    b.hours = (window[1] - window[0]).total_seconds() / 3600
    b.busy_hours = busy_minutes(spans, *window) / 60
    b.cost = b.hours * price.usd_per_hour
    for t in b.tenants.values():
        t.share = t.engine_seconds / b.engine_seconds if b.engine_seconds > 0 else 0.0
        t.cost = b.cost * t.share


def cell_cost(c: Cell, costs: dict[str, BackendCost]) -> float:
    """A cell's part of its backend's cost: by engine time (hourly) or its list price."""
    b = costs.get(c.backend) if c.backend is not None else None
    if b is None or b.weights is None:
        return c.list_cost
    if b.engine_seconds <= 0:
        return 0.0
    return b.cost * b.weights.engine_seconds(c.prompt_tokens, c.completion_tokens, c.cached_tokens) / b.engine_seconds
