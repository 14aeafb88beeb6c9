"""FairQueue on its own: admission order, charging, lift, weights, classes, victims."""

from __future__ import annotations

import pytest

from fairgate.scheduler.fair_queue import FairQueue
from fairgate.scheduler.fairness import FairnessConfig, FairnessWeights, is_stale
from fairgate.scheduler.request import SchedRequest


def req(rid: str, tenant: str, priority: int = 1, t: float = 0.0, n: int = 10) -> SchedRequest:
    return SchedRequest(rid, list(range(n)), 8, tenant=tenant, priority=priority, arrival_time=t)


def drain(q: FairQueue, charge: int = 10) -> list[str]:
    """Pop everything, charging each admission `charge` prompt tokens (like the planner)."""
    order = []
    while len(q):
        r = q.pop()
        q.on_prefill(r, charge)
        order.append(r.request_id)
    return order


def test_empty_queue() -> None:
    q = FairQueue()
    assert q.peek() is None and len(q) == 0
    with pytest.raises(IndexError):
        q.pop()


def test_one_tenant_is_fifo() -> None:
    q = FairQueue()
    for i in range(4):
        q.push(req(f"a{i}", "a", t=i))
    assert drain(q) == ["a0", "a1", "a2", "a3"]


def test_equal_weights_alternate_least_counter_first() -> None:
    q = FairQueue()
    for i in range(3):
        q.push(req(f"a{i}", "a", t=i))  # a floods first
    for i in range(3):
        q.push(req(f"b{i}", "b", t=10 + i))
    # tie at 0: a's head arrived first; then whoever has the least counter
    assert drain(q) == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert q.counter("a") == q.counter("b") == 30.0


def test_weights_1_to_2_admit_twice_as_often() -> None:
    q = FairQueue(weights=FairnessWeights({"a": 1.0, "b": 2.0}))
    for i in range(4):
        q.push(req(f"a{i}", "a", t=i))
        q.push(req(f"b{i}", "b", t=i + 0.5))
    # b pays 10/2 = 5 per admission, a pays 10; the 10/10 tie goes to b's shorter line
    assert drain(q)[:6] == ["a0", "b0", "b1", "b2", "a1", "b3"]
    assert q.counter("a") == 40.0 and q.counter("b") == 20.0


def test_decode_charges_output_weight_over_tenant_weight() -> None:
    q = FairQueue(FairnessConfig(input_weight=1.0, output_weight=2.0),
                  FairnessWeights({"b": 4.0}))
    a, b = req("a0", "a"), req("b0", "b")
    q.on_prefill(a, 6)
    q.on_decode(a, 3)
    q.on_prefill(b, 6)
    q.on_decode(b, 3)
    assert q.counter("a") == 6 + 3 * 2
    assert q.counter("b") == (6 + 3 * 2) / 4


# the VTC paper's lift: a returning tenant starts level with the least backlogged counter
LEVEL = FairnessConfig(active_lead=0.0)

def test_returning_tenant_is_lifted_to_least_backlogged_counter_without_credit() -> None:
    q = FairQueue(LEVEL)
    q.push(req("a0", "a"))
    q.push(req("b0", "b"))
    q.on_decode(req("x", "a"), 50)  # a's running requests earn it 100
    q.on_decode(req("y", "b"), 20)  # b: 40
    q.push(req("c0", "c"))  # idle until now: starts at min(100, 40), not 0
    assert q.counter("c") == 40.0
    assert q.backlogged() == ["b", "c", "a"]
    # a tenant above the floor keeps its own counter
    assert q.pop().request_id == "b0"  # tie b/c at 40: b's head arrived first (same t, name)
    q.on_decode(req("z", "b"), 50)
    q.push(req("b1", "b"))
    assert q.counter("b") == 140.0


def test_lifted_tenant_wins_the_tie_against_a_backlog() -> None:
    q = FairQueue(LEVEL)
    for i in range(5):
        q.push(req(f"f{i}", "flood", t=i))
    q.on_decode(req("x", "flood"), 20)
    q.push(req("l0", "light", t=9))  # lifted to 40, level with the flooder
    assert q.counter("light") == q.counter("flood") == 40.0
    assert q.peek().request_id == "l0"  # its line is shorter, though it arrived last


def test_lift_with_nobody_backlogged_uses_last_tenant_to_leave() -> None:
    q = FairQueue(LEVEL)
    q.push(req("a0", "a"))
    q.on_decode(req("x", "a"), 30)  # 60
    assert q.pop().request_id == "a0"  # a leaves the backlog at 60
    q.push(req("b0", "b"))
    assert q.counter("b") == 60.0


def test_counters_are_per_class() -> None:
    q = FairQueue()
    q.on_decode(req("x", "a", priority=2), 10)
    assert q.counter("a", 2) == 20.0 and q.counter("a", 1) == 0.0


def test_push_front_keeps_the_preempted_request_at_its_tenants_head() -> None:
    q = FairQueue()
    q.push(req("a1", "a", t=1))
    q.push(req("a2", "a", t=2))
    q.push_front(req("a0", "a", t=0))
    assert [q.pop().request_id for _ in range(3)] == ["a0", "a1", "a2"]


def test_remove() -> None:
    q = FairQueue()
    q.push(req("a0", "a"))
    q.push(req("b0", "b"))
    assert q.remove("nope") is None
    assert q.remove("a0").request_id == "a0"
    assert len(q) == 1 and q.backlogged() == ["b"]
    with pytest.raises(ValueError):
        q.push(req("b0", "b"))  # already waiting


def test_set_weights_versions() -> None:
    q = FairQueue()
    assert q.version == 0 and q.weight_of("anyone") == 1.0
    assert q.set_weights({"a": 3.0}, version=5, default_weight=0.5)
    assert q.version == 5 and q.weight_of("a") == 3.0 and q.weight_of("unknown") == 0.5
    assert not q.set_weights({"a": 9.0}, version=4)  # stale push: ignored
    assert q.weight_of("a") == 3.0
    assert q.set_weights({"a": 2.0}, version=5)  # same version again: accepted
    assert q.set_weights({}) and q.version == 6 and q.weight_of("a") == 1.0
    with pytest.raises(ValueError):
        q.set_weights({"a": 0.0})
    assert q.stats().weights == {} and q.stats().version == 6


def test_weight_change_reorders_next_admission() -> None:
    q = FairQueue()
    q.push(req("a0", "a", t=0))
    q.push(req("b0", "b", t=1))
    q.on_prefill(req("x", "a"), 10)
    q.on_prefill(req("y", "b"), 12)
    assert q.peek().request_id == "a0"  # 10 < 12
    q.set_weights({"a": 1.0, "b": 1.0})  # counters are past service: order unchanged ...
    assert q.peek().request_id == "a0"
    q.set_weights({"a": 0.25})
    q.on_prefill(req("x", "a"), 1)  # ... but a's next token now costs 4
    assert q.peek().request_id == "b0"


def test_higher_class_first_without_reserved_share() -> None:
    q = FairQueue(FairnessConfig(reserved_shares={}))
    q.push(req("b0", "a", priority=2, t=0))
    q.push(req("s0", "a", priority=1, t=1))
    q.push(req("i0", "z", priority=0, t=2))
    q.push(req("i1", "z", priority=0, t=3))
    assert drain(q) == ["i0", "i1", "s0", "b0"]


def test_reserved_share_gives_a_lower_class_its_fraction() -> None:
    q = FairQueue(FairnessConfig(reserved_shares={2: 0.25}))
    for i in range(12):
        q.push(req(f"i{i}", "a", priority=0, t=i))
        q.push(req(f"b{i}", "a", priority=2, t=i))
    order = drain(q)[:10]
    # each admission costs 10; batch earns 2.5 per 10 served while it waits
    assert order == ["i0", "b0", "i1", "i2", "i3", "b1", "i4", "i5", "i6", "b2"]


def test_reserved_credit_is_not_banked_without_contention() -> None:
    q = FairQueue(FairnessConfig(reserved_shares={2: 0.25}))
    q.push(req("i0", "a", priority=0))
    for _ in range(10):
        q.on_decode(req("x", "a", priority=0), 10)  # service while batch is not waiting
    q.push(req("b0", "a", priority=2))
    assert q.stats().class_credit.get(2, 0.0) == 0.0
    assert q.peek().request_id == "i0"


def test_choose_victim_lowest_class_then_most_served_then_newest() -> None:
    q = FairQueue()
    a1, a2 = req("a1", "a", t=1), req("a2", "a", t=2)
    b1, i1 = req("b1", "b", t=3), req("i1", "i", priority=0, t=9)
    q.on_decode(a1, 10)
    q.on_decode(b1, 5)
    assert q.choose_victim([i1, b1, a1, a2]) is a2
    lo = req("lo", "b", priority=2, t=0)
    assert q.choose_victim([i1, a1, a2, lo, b1]) is lo


def test_weights_wire_form_round_trip_and_errors() -> None:
    w = FairnessWeights({"a": 2}, version=3, default_weight=0.5)
    assert FairnessWeights.from_json(w.to_json()) == w
    for bad in ({"weights": {"a": -1}}, {"weights": []}, {"version": "x"},
                {"weights": {"a": True}}, {"version": -1}, {"default_weight": 0}):
        with pytest.raises(ValueError):
            FairnessWeights.from_json(bad)
    with pytest.raises(ValueError):
        FairnessConfig(reserved_shares={1: 0.6, 2: 0.5})


def test_the_stale_weights_rule() -> None:
    assert is_stale(4, 5)
    assert not is_stale(5, 5)  # a re-push of the same version is accepted
    assert not is_stale(6, 5) and not is_stale(None, 5) and not is_stale(3, None)


# ---- TTFT objectives ---------------------------------------------------------------------


def deadline_queue(now: list[float], slack: float = 100.0) -> FairQueue:
    config = FairnessConfig(ttft_objectives={0: 1.0}, due_fraction=0.5, deadline_slack=slack)
    return FairQueue(config, clock=lambda: now[0])


def test_a_due_request_goes_ahead_of_a_tenant_level_with_its_own() -> None:
    now = [0.0]
    q = deadline_queue(now)
    q.push(req("a1", "a", priority=0, t=0.1))
    q.push(req("b1", "b", priority=0, t=0.3))
    q.on_prefill(req("x", "a", priority=0), 40)  # a is 40 ahead, within the slack
    assert q.peek().request_id == "b1"  # nobody due: the least counter first
    now[0] = 0.65  # a1 waited 0.55 s of its 1 s objective, b1 only 0.35 s
    assert q.pop().request_id == "a1" and q.deadline_picks == 1
    assert q.pop().request_id == "b1" and q.deadline_picks == 1  # b was VTC's pick anyway


def test_a_due_request_of_a_tenant_past_the_slack_waits_its_turn() -> None:
    now = [0.0]
    q = deadline_queue(now, slack=100.0)
    q.push(req("a1", "a", priority=0, t=0.0))
    q.push(req("b1", "b", priority=0, t=0.0))
    q.on_prefill(req("x", "a", priority=0), 150)  # a is 150 ahead: more than the slack
    now[0] = 5.0  # both long due
    assert q.pop().request_id == "b1" and q.deadline_picks == 0


def test_objectives_apply_to_their_class_and_first_tokens_only() -> None:
    now = [0.0]
    q = deadline_queue(now)
    q.push(req("s-a", "a", priority=1, t=0.0))
    q.push(req("s-b", "b", priority=1, t=0.5))
    q.on_prefill(req("x", "a", priority=1), 40)
    now[0] = 5.0  # the standard class has no objective: counters decide
    assert drain(q) == ["s-b", "s-a"] and q.deadline_picks == 0
    resumed = req("i-a", "a", priority=0, t=0.0)
    resumed.output_token_ids = [7]  # a preempted request that already answered: TTFT is behind it
    q.push(resumed)
    q.push(req("i-b", "b", priority=0, t=4.0))
    q.on_prefill(req("y", "a", priority=0), 40)
    assert q.pop().request_id == "i-b" and q.deadline_picks == 0


def test_ttft_objectives_are_checked() -> None:
    for bad in ({0: 0.0}, {0: float("inf")}):
        with pytest.raises(ValueError, match="TTFT objectives"):
            FairnessConfig(ttft_objectives=bad)
    with pytest.raises(ValueError, match="due_fraction"):
        FairnessConfig(due_fraction=0.0)
    with pytest.raises(ValueError, match="deadline_slack"):
        FairnessConfig(deadline_slack=-1.0)


def test_a_tenant_served_a_moment_ago_keeps_a_bounded_lead_below_the_floor() -> None:
    now = [0.0]
    q = FairQueue(FairnessConfig(active_lead=100.0), weights=FairnessWeights({"heavy": 2.0}),
                  clock=lambda: now[0])
    for tenant in ("light", "heavy", "idle"):  # one request each, admitted and served a little
        q.push(req(f"{tenant}0", tenant))
        q.on_decode(q.pop(), 1)
    now[0] = 5.0
    for i in range(3):
        q.push(req(f"f{i}", "flood", t=i))
    q.on_decode(req("x", "flood"), 500)  # the flooder's counter: 1000
    for tenant in ("light", "heavy"):  # their requests still run: charged again just now
        q.on_decode(req("r", tenant), 1)
    now[0] = 5.5
    q.push(req("l1", "light", t=9))  # served 0.5 s ago: 100 below the floor, not level
    assert q.counter("light") == 900.0
    q.push(req("h1", "heavy", t=9))  # below the least backlogged (light's 900) by 100 / weight 2
    assert q.counter("heavy") == 900.0 - 100.0 / 2
    q.push(req("i1", "idle", t=9))  # idle for 5.5 s, past the 1 s window: it starts level
    assert q.counter("idle") == 850.0
    assert [q.pop().request_id for _ in range(3)] == ["h1", "i1", "l1"]  # ahead of the backlog
    # a tenant above floor - lead keeps its own counter: no lead is made out of nothing
    q.on_decode(req("y", "light"), 80)  # 1060
    q.push(req("l2", "light", t=10))
    assert q.counter("light") == 1060.0
    with pytest.raises(ValueError):
        FairnessConfig(active_lead=-1.0)
    with pytest.raises(ValueError):
        FairnessConfig(active_window_s=float("nan"))
