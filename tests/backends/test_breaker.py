"""The circuit breaker's decisions on an injected clock: tenant isolation, the backend-wide
outage rule, half-open probes, Retry-After, and what is never counted."""

from __future__ import annotations

from fairgate.backends.breaker import Breaker, BreakerPolicy, Outcome, State, Ticket, Transition


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def make(**policy: float) -> tuple[Breaker, Clock, list[Transition]]:
    clock, seen = Clock(), []
    return Breaker(BreakerPolicy(**policy), clock, seen.append), clock, seen


def fail(b: Breaker, tenant: str, n: int = 1, **kw: float) -> None:
    for _ in range(n):
        ticket = b.admit(tenant)
        assert ticket.allowed, ticket
        b.record(ticket, Outcome.FAULT, **kw)
        b.release(ticket)


def ok(b: Breaker, tenant: str, n: int = 1) -> None:
    for _ in range(n):
        ticket = b.admit(tenant)
        assert ticket.allowed, ticket
        b.record(ticket, Outcome.SUCCESS)
        b.release(ticket)


def test_one_tenants_failures_back_off_that_tenant_only() -> None:
    b, _, seen = make()
    fail(b, "a", 4)
    assert b.tenant_state("a") is State.CLOSED  # under the tenant's minimum volume
    fail(b, "a")
    assert (b.tenant_state("a"), b.state, b.tenant_opened, b.opened) == (State.OPEN, State.CLOSED, 1, 0)
    assert b.admit("a") == Ticket(False, "a", "tenant", 2.0)
    assert b.admit("b").allowed
    ok(b, "b", 20)
    assert b.state is State.CLOSED
    assert [(t.tenant, t.old, t.new, t.open_for_s) for t in seen] == [("a", State.CLOSED, State.OPEN, 2.0)]


def test_a_tenant_under_the_failure_ratio_stays_closed() -> None:
    b, _, _ = make()
    ok(b, "a", 4)
    fail(b, "a", 3)  # 3 of 7 failed
    assert b.tenant_state("a") is State.CLOSED
    fail(b, "a")  # 4 of 8
    assert b.tenant_state("a") is State.OPEN


def test_failures_from_two_tenants_open_it_for_everybody() -> None:
    b, _, seen = make()
    for _ in range(5):
        fail(b, "a")
        fail(b, "b")
    assert (b.state, b.opened, b.tenant_opened) == (State.OPEN, 1, 2)
    assert b.admit("c") == Ticket(False, "c", "backend", 2.0)
    assert [t.reason for t in seen if t.tenant is None] == ["10 of 10 requests failed, from 2 tenant(s)"]


def test_under_the_minimum_volume_or_ratio_the_backend_stays_closed() -> None:
    b, _, _ = make()
    fail(b, "a", 4)
    fail(b, "b", 4)
    assert b.state is State.CLOSED  # 8 counted, under 10
    b, _, _ = make()
    ok(b, "c", 9)
    fail(b, "a", 4)
    fail(b, "b", 4)  # 8 of 17
    assert b.state is State.CLOSED


def test_a_very_high_count_from_one_tenant_opens_it() -> None:
    b, _, _ = make(single_tenant_failures=20)
    tickets = [b.admit("a") for _ in range(20)]  # in flight together, before any answer
    for t in tickets[:19]:
        b.record(t, Outcome.FAULT)
    assert b.state is State.CLOSED and b.tenant_state("a") is State.OPEN
    b.record(tickets[19], Outcome.FAULT)
    assert b.state is State.OPEN


def test_half_open_lets_one_probe_through_and_its_success_closes() -> None:
    b, clock, seen = make()
    for _ in range(5):
        fail(b, "a")
        fail(b, "b")
    clock.t = b.backend.open_until - 0.1
    assert not b.admit("c").allowed
    clock.t = b.backend.open_until
    assert b.state is State.HALF_OPEN
    probe = b.admit("c")
    assert probe.allowed and probe.backend_probe
    assert b.admit("d") == Ticket(False, "d", "backend", 2.0)  # the probe is out
    b.record(probe, Outcome.SUCCESS)
    b.release(probe)
    assert b.state is State.CLOSED and b.admit("d").allowed
    assert (b.window.ok, b.window.failed) == (0, 0)  # a fresh start
    assert [(t.tenant, t.old.name, t.new.name) for t in seen if t.tenant is None] == [
        (None, "CLOSED", "OPEN"), (None, "OPEN", "HALF_OPEN"), (None, "HALF_OPEN", "CLOSED")]


def test_a_failed_probe_doubles_the_interval_up_to_the_cap() -> None:
    b, clock, _ = make(max_open_s=7.0)
    for _ in range(5):
        fail(b, "a")
        fail(b, "b")
    intervals = []
    for _ in range(3):
        clock.t = b.backend.open_until
        probe = b.admit("c")
        b.record(probe, Outcome.FAULT)
        intervals.append(b.backend.open_until - clock.t)
    assert intervals == [4.0, 7.0, 7.0] and b.opened == 4


def test_a_probe_whose_client_left_frees_the_slot() -> None:
    b, clock, _ = make()
    fail(b, "a", 5)
    clock.t += 2.0
    probe = b.admit("a")
    assert probe.tenant_probe and not b.admit("a").allowed
    b.release(probe)  # cancelled: no outcome
    nxt = b.admit("a")
    assert nxt.allowed and nxt.tenant_probe and nxt.tenant_probe != probe.tenant_probe
    b.record(probe, Outcome.SUCCESS)  # the old ticket decides nothing any more
    assert b.tenant_state("a") is State.HALF_OPEN
    b.record(nxt, Outcome.SUCCESS)
    assert b.tenant_state("a") is State.CLOSED and "a" not in b.tenants


def test_a_probe_never_heard_of_times_out() -> None:
    b, clock, _ = make(probe_timeout_s=30.0)
    fail(b, "a", 5)
    clock.t += 2.0
    assert b.admit("a").tenant_probe
    clock.t += 29.0
    assert not b.admit("a").allowed
    clock.t += 1.0
    assert b.admit("a").tenant_probe


def test_a_429_retry_after_backs_the_tenant_off_without_counting() -> None:
    b, clock, seen = make()
    ticket = b.admit("a")
    b.record(ticket, Outcome.BACKOFF, retry_after_s=7.0)
    assert (b.window.ok, b.window.failed) == (0, 0)
    assert b.admit("a") == Ticket(False, "a", "tenant", 7.0)
    assert b.admit("b").allowed and b.state is State.CLOSED
    clock.t += 7.0
    probe = b.admit("a")
    b.record(probe, Outcome.SUCCESS)
    assert b.tenant_state("a") is State.CLOSED
    assert [(t.tenant, t.new.name, t.reason) for t in seen] == [
        ("a", "OPEN", "the upstream sent Retry-After"), ("a", "HALF_OPEN", "open interval over: one probe goes through"),
        ("a", "CLOSED", "the probe got success")]


def test_the_longest_retry_after_sets_the_open_interval_capped() -> None:
    b, clock, _ = make()
    for ticket in [b.admit("a") for _ in range(4)]:  # in flight together
        b.record(ticket, Outcome.FAULT, retry_after_s=12.0)
    assert b.admit("a") == Ticket(False, "a", "tenant", 12.0)  # a's Retry-After holds a
    for t in "bcdef":
        fail(b, t)  # 9 failures from 6 tenants...
    fail(b, "g")  # ...and the tenth opens it, for as long as the upstream asked
    assert b.state is State.OPEN and b.backend.open_until - clock.t == 12.0
    b, clock, _ = make()
    fail(b, "a", retry_after_s=1000.0)
    assert b.admit("a").retry_in_s == 30.0  # max_open_s


def test_answers_the_request_caused_are_never_counted_and_close_a_probe() -> None:
    b, clock, _ = make()
    for t in "ab" * 10:
        ticket = b.admit(t)
        b.record(ticket, Outcome.ANSWERED)
    assert (b.window.ok, b.window.failed, b.state, b.tenants) == (0, 0, State.CLOSED, {})
    fail(b, "a", 5)
    clock.t += 2.0
    probe = b.admit("a")
    b.record(probe, Outcome.ANSWERED)
    assert b.tenant_state("a") is State.CLOSED


def test_failures_leave_the_window() -> None:
    b, clock, _ = make()
    fail(b, "a", 4)
    clock.t += 10.0
    fail(b, "a")
    assert b.tenant_state("a") is State.CLOSED and b.window.tenant("a") == (0, 1)


def test_a_closed_tenant_starts_afresh_and_quiet_ones_are_forgotten() -> None:
    b, clock, _ = make()
    fail(b, "a", 5)
    clock.t += 2.0
    probe = b.admit("a")
    b.record(probe, Outcome.SUCCESS)
    fail(b, "a")
    assert b.tenant_state("a") is State.CLOSED  # its old failures went with the close
    fail(b, "b", 5)
    clock.t += 400.0
    fail(b, "c", 5)  # opening c drops b, silent since its interval ended
    assert list(b.tenants) == ["c"]


def test_a_tenant_refused_first_takes_no_backend_probe() -> None:
    b, clock, _ = make()
    fail(b, "a", 5)
    clock.t += 2.0
    probe = b.admit("a")
    b.record(probe, Outcome.FAULT)  # a's circuit: open 4 s more
    fail(b, "b")
    for t in "cde":
        fail(b, t)  # 10 failures from 5 tenants: open 2 s
    assert b.state is State.OPEN
    clock.t += 2.0
    assert b.admit("a").scope == "tenant"  # a's own circuit refuses before the backend's is tried
    probe = b.admit("c")
    assert probe.backend_probe and not probe.tenant_probe


def test_holds_while_an_interval_runs_not_while_a_probe_is_out() -> None:
    b, clock, _ = make()
    fail(b, "a", 5)
    assert b.holds("a") and not b.holds("b")
    clock.t += 2.0
    assert b.admit("a").tenant_probe and not b.holds("a")  # the probe itself may retry


def test_a_body_that_broke_turns_its_success_into_a_failure() -> None:
    b, _, _ = make()
    for _ in range(4):
        ok(b, "a")
        b.record(Ticket(True, "a"), Outcome.BROKEN)  # head 2xx, then a reset
    assert (b.window.ok, b.window.failed, b.tenant_state("a")) == (0, 4, State.CLOSED)
    ok(b, "a")
    b.record(Ticket(True, "a"), Outcome.BROKEN)
    assert b.tenant_state("a") is State.OPEN  # 5 of 5
