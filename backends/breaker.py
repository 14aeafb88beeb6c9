"""The circuit breaker of one upstream backend, which one tenant or one bad request cannot trip
for everybody, and which closes again as soon as the upstream answers.

Pure decisions, no I/O: the backend (backends/openai_compat.py) asks `admit` before it calls the
upstream, reports what each attempt got with `record`, and `release`s its ticket when the
request ends; time comes from an injected clock. Shaped after Envoy's outlier detection (a
failure percentage over a window, counted only past a minimum request volume; an ejection that
lasts longer each time it repeats) and LiteLLM's cooldowns (a 429's Retry-After is a pause, not
a failure).

- What counts: upstream faults only (`FAULT`: connect failures, resets, timeouts, 5xx, a 429
  without Retry-After; `BROKEN`: a 2xx whose body broke, once counted as a success). A 4xx the
  request caused is `ANSWERED` (the upstream is up; nothing is counted) and a client that left
  reports nothing.
- Two levels. A tenant's sub-circuit opens on that tenant's own failure ratio over the window
  (`tenant_min_requests`, `failure_ratio`): the tenant whose requests fail backs off, nobody
  else. The backend-wide circuit opens on everybody's ratio (`min_requests`), and only when the
  failures came from `min_tenants` tenants or more, or a very high count from one
  (`single_tenant_failures`): an outage, not one tenant's requests.
- Retry-After (a 429's or a 5xx's): the tenant that got it waits that long (`BACKOFF`, a 429
  with one, is never a failure); the longest one seen sets how long the backend-wide circuit
  stays open when it opens. Both are capped at `max_open_s`.
- Open, half-open, closed: after the open interval (`open_s`, doubled by each failed probe up to
  `max_open_s`) one request goes through as the probe while the others are still refused. Any
  answer to it closes the circuit and forgets the window's failures; a fault opens it again; a
  probe whose client left frees the slot for the next request.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any


class State(IntEnum):
    """The metric's values: 0 closed, 1 half-open, 2 open."""

    CLOSED = 0
    HALF_OPEN = 1
    OPEN = 2


class Outcome(Enum):
    SUCCESS = "success"  # a 2xx
    ANSWERED = "answered"  # a 4xx the request caused: the upstream is up; not counted
    FAULT = "fault"  # the upstream's failure: counted
    BACKOFF = "backoff"  # a 429 with Retry-After: the tenant pauses; not counted
    BROKEN = "broken"  # a 2xx whose body then broke (a reset, a stall): its success becomes a fault


@dataclass(slots=True, frozen=True)
class BreakerPolicy:
    window_s: float = 10.0  # outcomes older than this are forgotten
    bucket_s: float = 1.0  # the window's granularity
    failure_ratio: float = 0.5  # failed / counted at which a circuit opens
    min_requests: int = 10  # counted outcomes (all tenants) before the backend-wide ratio applies
    min_tenants: int = 2  # distinct failing tenants for a backend-wide open ...
    single_tenant_failures: int = 50  # ... or this many failures from one
    tenant_min_requests: int = 5  # one tenant's counted outcomes before its ratio applies
    open_s: float = 2.0  # the first open interval; doubled by each failed probe
    max_open_s: float = 30.0  # cap of the interval and of any Retry-After
    probe_timeout_s: float = 120.0  # a probe not heard of for this long frees its slot
    forget_s: float = 300.0  # a tenant circuit untouched this long after its interval is dropped


@dataclass(slots=True)
class Circuit:
    """The state of one circuit: the backend's, or one tenant's."""

    state: State = State.CLOSED
    open_until: float = 0.0
    trips: int = 0  # opens since it last closed: the next lasts open_s × 2**trips
    probe: int = 0  # the number of the probe in flight (0: none)
    probe_since: float = 0.0


@dataclass(slots=True, frozen=True)
class Ticket:
    """What `admit` said. Refused (`allowed` False) by `scope` ("backend" or "tenant") for about
    `retry_in_s`; allowed, it may be the probe of either circuit (the probe's number, else 0)."""

    allowed: bool
    tenant: str
    scope: str | None = None
    retry_in_s: float = 0.0
    backend_probe: int = 0
    tenant_probe: int = 0


@dataclass(slots=True, frozen=True)
class Transition:
    """One state change, for the log: `tenant` is None for the backend-wide circuit."""

    tenant: str | None
    old: State
    new: State
    reason: str
    open_for_s: float = 0.0


class Window:
    """Counted outcomes per tenant over the last `window_s`, in buckets, with running totals."""

    def __init__(self, window_s: float, bucket_s: float) -> None:
        self.window_s, self.bucket_s = window_s, bucket_s
        self._buckets: deque[tuple[float, dict[str, list[int]]]] = deque()  # (start, tenant → [ok, failed])
        self.totals: dict[str, list[int]] = {}
        self.ok = self.failed = self.failing_tenants = 0

    def add(self, now: float, tenant: str, failed: bool) -> None:
        self.expire(now)
        if not self._buckets or now - self._buckets[-1][0] >= self.bucket_s:
            self._buckets.append((now, {}))
        i = int(failed)
        self._buckets[-1][1].setdefault(tenant, [0, 0])[i] += 1
        total = self.totals.setdefault(tenant, [0, 0])
        total[i] += 1
        if failed:
            self.failed += 1
            self.failing_tenants += total[1] == 1
        else:
            self.ok += 1

    def amend(self, now: float, tenant: str) -> None:
        """One of the tenant's successes (the latest) was a failure after all."""
        self.expire(now)
        for _, counts in reversed(self._buckets):
            c = counts.get(tenant)
            if c is not None and c[0]:
                c[0], c[1] = c[0] - 1, c[1] + 1
                total = self.totals[tenant]
                total[0], total[1] = total[0] - 1, total[1] + 1
                self.ok, self.failed = self.ok - 1, self.failed + 1
                self.failing_tenants += total[1] == 1
                return
        self.add(now, tenant, failed=True)  # its success has left the window already

    def expire(self, now: float) -> None:
        while self._buckets and now - self._buckets[0][0] >= self.window_s:
            for tenant, (ok, failed) in self._buckets.popleft()[1].items():
                self._subtract(tenant, ok, failed)

    def forget(self, tenant: str | None = None) -> None:
        """Drop one tenant's outcomes, or everybody's."""
        if tenant is None:
            self._buckets.clear()
            self.totals.clear()
            self.ok = self.failed = self.failing_tenants = 0
            return
        for _, counts in self._buckets:
            if (c := counts.pop(tenant, None)) is not None:
                self._subtract(tenant, *c)

    def tenant(self, tenant: str) -> tuple[int, int]:
        ok, failed = self.totals.get(tenant, (0, 0))
        return ok, failed

    def _subtract(self, tenant: str, ok: int, failed: int) -> None:
        total = self.totals[tenant]
        total[0] -= ok
        total[1] -= failed
        self.ok -= ok
        self.failed -= failed
        if failed and total[1] == 0:
            self.failing_tenants -= 1
        if total == [0, 0]:
            del self.totals[tenant]


class Breaker:
    """The backend-wide circuit and the tenants' sub-circuits of one backend. `on_change` hears
    every transition (the backend logs them); `opened` and `tenant_opened` count opens."""

    def __init__(self, policy: BreakerPolicy | None = None, clock: Callable[[], float] = time.monotonic,
                 on_change: Callable[[Transition], None] | None = None) -> None:
        self.policy = p = policy or BreakerPolicy()
        self._clock = clock
        self._on_change = on_change
        self.backend = Circuit()
        self.tenants: dict[str, Circuit] = {}  # only circuits that are not closed
        self.window = Window(p.window_s, p.bucket_s)
        self.retry_after_until = 0.0  # the longest Retry-After seen, as a time
        self.opened = 0
        self.tenant_opened = 0
        self._numbers = itertools.count(1)

    @property
    def state(self) -> State:
        """The backend-wide circuit's state (open past its interval reads half-open)."""
        return self._view(self.backend, self._clock())

    def tenant_state(self, tenant: str) -> State:
        c = self.tenants.get(tenant)
        return State.CLOSED if c is None else self._view(c, self._clock())

    def tenants_open(self) -> int:
        """Tenants whose open interval is running (backing off now)."""
        now = self._clock()
        return sum(c.state is State.OPEN and now < c.open_until for c in self.tenants.values())

    def holds(self, tenant: str) -> bool:
        """Is an open interval running for `tenant`'s requests (its own, or everybody's)? An
        admitted request checks before each retry; `admit` decides for new ones."""
        now = self._clock()
        tc = self.tenants.get(tenant)
        return any(c.state is State.OPEN and now < c.open_until for c in (self.backend, tc) if c is not None)

    def admit(self, tenant: str) -> Ticket:
        """May a request of `tenant` go upstream now? Release the ticket when the request ends."""
        now = self._clock()
        tc = self.tenants.get(tenant)
        tenant_probe = 0
        if tc is not None:
            tenant_probe, wait = self._gate(tc, tenant, now)
            if wait is not None:
                return Ticket(False, tenant, "tenant", wait)
        backend_probe, wait = self._gate(self.backend, None, now)
        if wait is not None:
            if tc is not None and tenant_probe:
                tc.probe = 0  # not sent after all: the tenant's next request probes
            return Ticket(False, tenant, "backend", wait)
        return Ticket(True, tenant, backend_probe=backend_probe, tenant_probe=tenant_probe)

    def record(self, ticket: Ticket, outcome: Outcome, retry_after_s: float | None = None) -> None:
        """What one attempt of an admitted request got; `retry_after_s`: the upstream's Retry-After."""
        now = self._clock()
        hold = 0.0
        if retry_after_s is not None and outcome in (Outcome.FAULT, Outcome.BACKOFF):
            hold = now + min(max(retry_after_s, 0.0), self.policy.max_open_s)
            self.retry_after_until = max(self.retry_after_until, hold)
        if outcome is Outcome.BROKEN:
            self.window.amend(now, ticket.tenant)
            outcome = Outcome.FAULT
        elif outcome in (Outcome.SUCCESS, Outcome.FAULT):
            self.window.add(now, ticket.tenant, failed=outcome is Outcome.FAULT)
        self._judge_backend(ticket, outcome, now)
        self._judge_tenant(ticket, outcome, now, hold)

    def release(self, ticket: Ticket) -> None:
        """The request ended: a probe that got no answer (its client left) frees its slot."""
        if ticket.backend_probe and self.backend.probe == ticket.backend_probe:
            self.backend.probe = 0
        tc = self.tenants.get(ticket.tenant)
        if ticket.tenant_probe and tc is not None and tc.probe == ticket.tenant_probe:
            tc.probe = 0

    def snapshot(self, max_tenants: int = 50) -> dict[str, Any]:
        """For the admin view: states, open intervals left, opens, the window's counts."""
        now = self._clock()
        self.window.expire(now)

        def left(c: Circuit) -> float:
            return round(max(0.0, c.open_until - now), 3) if c.state is not State.CLOSED else 0.0

        tenants = {t: {"state": self._view(c, now).name.lower(), "open_for_s": left(c)}
                   for t, c in itertools.islice(self.tenants.items(), max_tenants)}
        return {"state": self._view(self.backend, now).name.lower(), "open_for_s": left(self.backend),
                "opened": self.opened, "tenant_opened": self.tenant_opened, "tenants_open": self.tenants_open(),
                "tenants": tenants, "window": {"requests": self.window.ok + self.window.failed,
                                               "failures": self.window.failed}}

    # ------------------------------------------------------------------ decisions
    def _view(self, c: Circuit, now: float) -> State:
        return State.HALF_OPEN if c.state is State.OPEN and now >= c.open_until else c.state

    def _gate(self, c: Circuit, tenant: str | None, now: float) -> tuple[int, float | None]:
        """(this request's probe number or 0, None) when it may go; (0, seconds) when refused."""
        if c.state is State.CLOSED:
            return 0, None
        if c.state is State.OPEN and now < c.open_until:
            return 0, c.open_until - now
        if c.state is State.HALF_OPEN and c.probe and now - c.probe_since < self.policy.probe_timeout_s:
            return 0, self.policy.open_s  # the probe is out: its answer decides
        if c.state is State.OPEN:
            self._emit(tenant, State.OPEN, State.HALF_OPEN, "open interval over: one probe goes through")
        c.state, c.probe, c.probe_since = State.HALF_OPEN, next(self._numbers), now
        return c.probe, None

    def _judge_backend(self, ticket: Ticket, outcome: Outcome, now: float) -> None:
        c = self.backend
        probe = bool(ticket.backend_probe) and c.probe == ticket.backend_probe
        if outcome is Outcome.FAULT:
            if probe:
                self._open(c, None, now, self.retry_after_until, "the probe failed")
            elif c.state is State.CLOSED and self._outage():
                self._open(c, None, now, self.retry_after_until,
                           f"{self.window.failed} of {self.window.ok + self.window.failed} requests failed, "
                           f"from {self.window.failing_tenants} tenant(s)")
        elif probe:  # any answer: the upstream is back
            self._close(c, None, f"the probe got {outcome.value}")

    def _judge_tenant(self, ticket: Ticket, outcome: Outcome, now: float, hold: float) -> None:
        tenant = ticket.tenant
        c = self.tenants.get(tenant)
        probe = c is not None and bool(ticket.tenant_probe) and c.probe == ticket.tenant_probe
        if outcome is Outcome.FAULT and (probe or (c is None and self._tenant_failing(tenant))):
            c = c or self.tenants.setdefault(tenant, Circuit())
            ok, failed = self.window.tenant(tenant)
            self._open(c, tenant, now, hold, "the probe failed" if probe else f"{failed} of {ok + failed} failed")
        elif hold > now:
            self._hold(tenant, now, hold)
        elif probe and c is not None and outcome is not Outcome.FAULT:
            self._close(c, tenant, f"the probe got {outcome.value}")

    def _outage(self) -> bool:
        w, p = self.window, self.policy
        counted = w.ok + w.failed
        if counted < p.min_requests or w.failed < p.failure_ratio * counted:
            return False
        return w.failing_tenants >= p.min_tenants or w.failed >= p.single_tenant_failures

    def _tenant_failing(self, tenant: str) -> bool:
        ok, failed = self.window.tenant(tenant)
        return ok + failed >= self.policy.tenant_min_requests and failed >= self.policy.failure_ratio * (ok + failed)

    # ------------------------------------------------------------------ transitions
    def _open(self, c: Circuit, tenant: str | None, now: float, hold: float, reason: str) -> None:
        p = self.policy
        interval = min(p.open_s * 2 ** c.trips, p.max_open_s)
        old = self._view(c, now)
        c.state, c.probe, c.trips = State.OPEN, 0, c.trips + 1
        c.open_until = min(max(now + interval, hold), now + p.max_open_s)
        self._count_open(tenant, now)
        self._emit(tenant, old, State.OPEN, reason, c.open_until - now)

    def _hold(self, tenant: str, now: float, until: float) -> None:
        """The upstream asked this tenant to wait (Retry-After): open without a trip."""
        c = self.tenants.get(tenant)
        if c is None:
            c = self.tenants[tenant] = Circuit()
        old, was_until = self._view(c, now), c.open_until
        c.state, c.probe, c.open_until = State.OPEN, 0, max(c.open_until, until)
        if old is not State.OPEN:
            self._count_open(tenant, now)
        if old is not State.OPEN or c.open_until > was_until:
            self._emit(tenant, old, State.OPEN, "the upstream sent Retry-After", c.open_until - now)

    def _close(self, c: Circuit, tenant: str | None, reason: str) -> None:
        old = self._view(c, self._clock())
        c.state, c.probe, c.trips, c.open_until = State.CLOSED, 0, 0, 0.0
        if tenant is not None:
            self.tenants.pop(tenant, None)
        self.window.forget(tenant)  # a fresh start: old failures do not trip it again at once
        self._emit(tenant, old, State.CLOSED, reason)

    def _count_open(self, tenant: str | None, now: float) -> None:
        if tenant is None:
            self.opened += 1
            return
        self.tenant_opened += 1
        stale = [t for t, c in self.tenants.items()  # tenants gone quiet since their interval ended
                 if not c.probe and now - c.open_until > self.policy.forget_s]
        for t in stale:
            del self.tenants[t]

    def _emit(self, tenant: str | None, old: State, new: State, reason: str, open_for_s: float = 0.0) -> None:
        if self._on_change is not None:
            self._on_change(Transition(tenant, old, new, reason, round(open_for_s, 3)))
