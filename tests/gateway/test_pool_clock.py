"""A pool's fleet-wide virtual clock (gateway/request/pool_clock.py) under two gates in one
process, each with its own PoolClock (its own gateway id and Redis connection) on real Redis:
skewed ingress keeps the weights, the least-served tenant waiting anywhere gets a freed slot,
a tenant that starts waiting is lifted, and nothing is left in Redis afterwards. The same over
two real gateways is tests/e2e/test_pool_fleet_fairness.py."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
import redis

from fairgate.backends.pool_fleet_gate import Ask, FleetGate, Round
from fairgate.gateway.request.pool_clock import PoolClock, PoolLedger
from tests.gateway.harness import REDIS_URL, redis_prefix
from tests.helpers.redis_cluster import missing_reason, redis_cluster
from tests.helpers.redis_server import redis_server


async def _backlog(gate: FleetGate, tenant: str, served: list[str], n: int, hold_s: float) -> None:
    async def one() -> None:
        async with gate.slot(tenant, 10.0, lambda: 30.0):
            served.append(tenant)
            await asyncio.sleep(hold_s)

    await asyncio.gather(*(one() for _ in range(n)), return_exceptions=True)


@contextlib.asynccontextmanager
async def _two_ledgers(url: str, prefix: str, cluster: bool = False
                       ) -> AsyncIterator[tuple[PoolClock, PoolLedger, PoolLedger]]:
    """Two gateways' clocks on one Redis (each its own id and connection), their ledgers of pool
    "p", closed afterwards; yields the first clock and both ledgers."""
    c1, c2 = PoolClock(url, prefix, 30, cluster), PoolClock(url, prefix, 30, cluster)
    l1, l2 = c1.ledger("p"), c2.ledger("p")
    try:
        yield c1, l1, l2
    finally:
        await l1.aclose()
        await l2.aclose()
        await c1.aclose()
        await c2.aclose()


async def test_two_gates_with_skewed_ingress_serve_the_weights() -> None:
    """Tenant a (weight 3) only at gate 1, b (weight 1) only at gate 2, both backlogged, 2 slots
    in the pool: a gets about three grants for each of b's (1:1 would be two per-gate queues)."""
    with redis_prefix() as prefix:
        c1, c2 = PoolClock(REDIS_URL, prefix, 30), PoolClock(REDIS_URL, prefix, 30)
        weights = {"a": 3.0, "b": 1.0}
        rooms = {"r0": 1, "r1": 1}
        g1 = FleetGate(lambda: rooms, weights.__getitem__, c1.ledger("p"), poll_s=0.25)
        g2 = FleetGate(lambda: rooms, weights.__getitem__, c2.ledger("p"), poll_s=0.25)
        served: list[str] = []
        runs = [asyncio.create_task(_backlog(g1, "a", served, 60, 0.03)),
                asyncio.create_task(_backlog(g2, "b", served, 60, 0.03))]
        while len(served) < 40:
            await asyncio.sleep(0.01)
        first = served[8:40]  # past the start (both begin at 0); both still backlogged
        ratio = first.count("a") / max(first.count("b"), 1)
        assert 2.0 <= ratio <= 4.5, (ratio, first)
        assert g1.waited > 0 and g2.waited > 0
        counters = await c1.counters("p")
        for task in runs:
            task.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await g1.aclose()
        await g2.aclose()
        await asyncio.sleep(0.05)
        # counters stay near each other (weighted), and no slot or demand is left behind
        assert abs(counters["a"] - counters["b"]) < 3 * 40.0, counters
        assert await c1.slots_in_use("p") == 0
        assert g1.in_flight == g2.in_flight == 0 and g1.waiting == g2.waiting == 0
        r = redis.Redis.from_url(REDIS_URL)
        assert not list(r.scan_iter(f"{prefix}:{{pool:p}}:demand:*"))
        assert r.zcard(f"{prefix}:{{pool:p}}:gws") == 0
        r.close()
        await c1.aclose()
        await c2.aclose()


@pytest.mark.parametrize("redis_kind", ["redis", "cluster"])
async def test_a_freed_slot_waits_for_the_least_served_tenant_at_another_gateway(tmp_path, redis_kind) -> None:
    """Script by script, on one Redis and on a three-node Cluster (every key in the pool's slot)."""
    if redis_kind == "cluster" and missing_reason():
        pytest.skip(missing_reason())
    with contextlib.ExitStack() as es:
        prefix = es.enter_context(redis_prefix())
        url = es.enter_context(redis_cluster(tmp_path))[0] if redis_kind == "cluster" else REDIS_URL
        async with _two_ledgers(url, prefix, redis_kind == "cluster") as (c1, l1, l2):
            one = {"r": 1}
            first = await l1.admit([Ask("a", 1.0, 3, [("a1", 100.0, ""), ("a2", 100.0, ""), ("a3", 100.0, "")])], one)
            assert first.granted == [("a1", "r")] and first.in_use == 1 and first.counters["a"] == 100.0
            # b starts waiting at gateway 2 while the pool is full: lifted to a's waiting counter
            full = await l2.admit([Ask("b", 1.0, 1, [("b1", 5.0, "r")])], one)
            assert full.granted == [] and full.counters["b"] == 100.0 and full.gateways == 2
            await l1.release("a1", "r", "a", 50.0)
            # gateway 1 frees the slot but b (100 < a's 150) waits elsewhere: gateway 1 leaves it
            mine = await l1.admit([Ask("a", 1.0, 2, [("a2", 100.0, ""), ("a3", 100.0, "")])], one)
            assert mine.granted == [] and mine.counters["a"] == 150.0
            # ... and gateway 2 was woken (by the release and by the round; one wake is kept)
            assert await l2.wait_freed(0.1) and not await l2.wait_freed(0.05)
            assert not await l1.wait_freed(0.05)  # the releaser tries on its own
            theirs = await l2.admit([Ask("b", 1.0, 1, [("b1", 5.0, "r")])], one)
            assert theirs.granted == [("b1", "r")] and theirs.counters["b"] == 105.0
            await l2.release("b1", "r", "b", 0.0)
            assert (await l2.admit([], one)).granted == []  # gateway 2 withdraws (nothing waits there)
            again = await l1.admit([Ask("a", 1.0, 2, [("a2", 100.0, ""), ("a3", 100.0, "")])], one)
            assert again.granted == [("a2", "r")]  # nobody else waits: a goes on
            await l1.release("a2", "r", "a", 0.0)
            assert (await l1.admit([], one)).granted == []
            assert await c1.slots_in_use("p") == 0


async def test_service_let_straight_through_sets_the_floor_a_newcomer_is_lifted_to() -> None:
    """Script by script: tenant a served alone at gateway 1 (every request straight through,
    nobody waiting), then b starts at gateway 2: b is lifted to the clock's present, so once b
    has had as much service, a freed slot goes to a's waiting request, not to b's backlog."""
    with redis_prefix() as prefix:
        async with _two_ledgers(REDIS_URL, prefix) as (c1, l1, l2):
            one = {"r": 1}
            for i in range(3):  # alone: 3 x (100 + 50)
                got = await l1.admit([Ask("a", 1.0, 1, [(f"a{i}", 100.0, "")])], one)
                assert got.granted == [(f"a{i}", "r")]
                await l1.release(f"a{i}", "r", "a", 50.0)
                assert (await l1.admit([], one)).granted == []
            assert (await c1.counters("p"))["a"] == 450.0
            first = await l2.admit([Ask("b", 1.0, 3, [("b0", 100.0, ""), ("b1", 100.0, ""), ("b2", 100.0, "")])], one)
            assert first.granted == [("b0", "r")]
            assert first.counters["b"] >= 400.0  # lifted to a's last grant (300), then charged
            waits = await l1.admit([Ask("a", 1.0, 1, [("a3", 100.0, "")])], one)
            assert waits.granted == [] and waits.counters["a"] == 450.0
            await l2.release("b0", "r", "b", 60.0)  # b has now had more than a since it came
            theirs = await l2.admit([Ask("b", 1.0, 2, [("b1", 100.0, ""), ("b2", 100.0, "")])], one)
            assert theirs.granted == []  # a waits elsewhere and is behind: its gateway is woken
            mine = await l1.admit([Ask("a", 1.0, 1, [("a3", 100.0, "")])], one)
            assert mine.granted == [("a3", "r")]
            await l1.release("a3", "r", "a", 0.0)
            await l1.admit([], one)
            theirs = await l2.admit([Ask("b", 1.0, 2, [("b1", 100.0, ""), ("b2", 100.0, "")])], one)
            assert theirs.granted == [("b1", "r")]
            await l2.release("b1", "r", "b", 0.0)
            await l2.admit([], one)
            assert await c1.slots_in_use("p") == 0


@pytest.mark.parametrize(("lead", "idle_s", "light_first"), [(1024.0, 0.0, True), (0.0, 0.0, False),
                                                          (1024.0, 0.15, False)])
async def test_a_tenant_served_lately_keeps_its_lead_at_any_gateway(lead, idle_s, light_first) -> None:
    """Script by script: a (light) is served once at gateway 1, b (a flood) at gateway 2 is served
    twice and keeps a backlog; then a starts waiting at gateway 1 with the pool full. Served
    within the window, a keeps its lead (its counter stays below b's), so the next freed slot is
    left for a even at b's own gateway; lifted level (a lead of 0, or a idle past the 0.1 s
    window) it ties with b, and b's gateway takes the slot for b."""
    with redis_prefix() as prefix:
        c1, c2 = PoolClock(REDIS_URL, prefix, 30, active_window_s=0.1), PoolClock(REDIS_URL, prefix, 30)
        l1, l2 = c1.ledger("p"), c2.ledger("p")
        try:
            one = {"r": 1}
            assert (await l1.admit([Ask("a", 1.0, 1, [("a0", 10.0, "")])], one, lead)).granted == [("a0", "r")]
            await l1.release("a0", "r", "a", 10.0)
            await l1.admit([], one, lead)
            flood = [("b0", 100.0, ""), ("b1", 100.0, ""), ("b2", 100.0, "")]
            assert (await l2.admit([Ask("b", 1.0, 3, flood)], one, lead)).granted == [("b0", "r")]
            await l2.release("b0", "r", "b", 100.0)
            assert (await l2.admit([Ask("b", 1.0, 2, flood[1:])], one, lead)).granted == [("b1", "r")]
            await asyncio.sleep(idle_s)
            light = [("a1", 10.0, ""), ("a2", 10.0, "")]
            waits = await l1.admit([Ask("a", 1.0, 2, light)], one, lead)
            assert waits.granted == []
            assert waits.counters["a"] == (20.0 if light_first else 300.0)  # kept, or lifted level
            await l2.release("b1", "r", "b", 0.0)
            theirs = await l2.admit([Ask("b", 1.0, 1, flood[2:])], one, lead)
            assert theirs.granted == ([] if light_first else [("b2", "r")])
            if light_first:  # gateway 1 was woken for it, and a's burst goes ahead of b's backlog
                assert await l1.wait_freed(0.1)
                assert (await l1.admit([Ask("a", 1.0, 2, light)], one, lead)).granted == [("a1", "r")]
                await l1.release("a1", "r", "a", 10.0)
                assert (await l1.admit([Ask("a", 1.0, 1, light[1:])], one, lead)).granted == [("a2", "r")]
                await l1.release("a2", "r", "a", 10.0)
                await l1.admit([], one, lead)
                assert (await l2.admit([Ask("b", 1.0, 1, flood[2:])], one, lead)).granted == [("b2", "r")]
            await l2.release("b2", "r", "b", 0.0)
            await l2.admit([], one, lead)
            assert await c1.slots_in_use("p") == 0
        finally:
            for closing in (l1, l2, c1, c2):
                await closing.aclose()


async def test_the_fleet_headroom_keeps_a_slot_for_a_tenant_below_its_share() -> None:
    """Script by script, four slots, one of them headroom. Alone, the flood (b, gateway 2) takes
    all four. Once a light tenant (a, gateway 1) has been seen lately, the flood holding three
    (over its half) is not let into the fourth, and a's request arriving then goes out at once;
    when a has not been seen for the headroom window, b's waiting request takes the slot."""
    with redis_prefix() as prefix:
        c1 = PoolClock(REDIS_URL, prefix, 30, recent_s=0.3)
        c2 = PoolClock(REDIS_URL, prefix, 30, recent_s=0.3)
        l1, l2 = c1.ledger("p"), c2.ledger("p")
        try:
            four = {"r0": 2, "r1": 2}
            alone = [(f"x{i}", 10.0, "") for i in range(4)]
            got = await l2.admit([Ask("b", 1.0, 4, alone)], four, 0.0, 1)
            assert len(got.granted) == 4  # nobody else about: the headroom is the flood's
            for sid, replica in got.granted:
                await l2.release(sid, replica, "b", 0.0)
            await l2.admit([], four, 0.0, 1)
            assert (await l1.admit([Ask("a", 1.0, 1, [("a0", 10.0, "")])], four, 0.0, 1)).granted != []
            await l1.release("a0", "r0", "a", 0.0)
            await l1.admit([], four, 0.0, 1)
            flood = [(f"b{i}", 10.0, "") for i in range(5)]
            got = await l2.admit([Ask("b", 1.0, 5, flood)], four, 0.0, 1)
            assert [sid for sid, _ in got.granted] == ["b0", "b1", "b2"] and got.in_use == 3
            light = await l1.admit([Ask("a", 1.0, 1, [("a1", 10.0, "")])], four, 0.0, 1)
            assert light.granted != [] and light.granted[0][0] == "a1" and light.in_use == 4
            await l1.release("a1", light.granted[0][1], "a", 0.0)
            await l1.admit([], four, 0.0, 1)
            again = await l2.admit([Ask("b", 1.0, 2, flood[3:])], four, 0.0, 1)
            assert again.granted == [] and again.in_use == 3  # a is still about: its slot stays free
            await asyncio.sleep(0.4)
            late = await l2.admit([Ask("b", 1.0, 2, flood[3:])], four, 0.0, 1)
            assert [sid for sid, _ in late.granted] == ["b3"]  # a not seen for the window: b's
            for sid, replica in got.granted + late.granted:
                await l2.release(sid, replica, "b", 0.0)
            await l2.admit([], four, 0.0, 1)
            assert await c1.slots_in_use("p") == 0
            assert redis.Redis.from_url(REDIS_URL).hlen(f"{c1.base('p')}:owner") == 0  # nothing held is left
        finally:
            for closing in (l1, l2, c1, c2):
                await closing.aclose()


async def test_a_closed_gate_lets_its_waiters_go_on_in_local_order() -> None:
    """A pool dropped by a rebuild (or a stopping gateway) strands nobody: its waiters run under
    the local queue; the fleet slot held meanwhile is given back to Redis."""
    with redis_prefix() as prefix:
        clock = PoolClock(REDIS_URL, prefix, 30)
        gate = FleetGate(lambda: {"r": 1}, lambda tenant: 1.0, clock.ledger("p"), poll_s=0.25)
        hold, order = asyncio.Event(), []

        async def run(name: str, wait: asyncio.Event | None = None) -> None:
            async with gate.slot("t", 1.0, lambda: 1.0):
                order.append(name)
                if wait is not None:
                    await wait.wait()

        holder = asyncio.create_task(run("holder", hold))
        while not order:
            await asyncio.sleep(0.005)
        waiters = [asyncio.create_task(run(f"w{i}")) for i in range(2)]
        while gate.waiting < 2:
            await asyncio.sleep(0.005)
        await gate.aclose()
        await asyncio.wait_for(asyncio.gather(*waiters), 5)
        assert order == ["holder", "w0", "w1"] and gate.local.in_flight == 0
        hold.set()
        await holder
        await gate.aclose()
        assert gate.in_flight == 0 and gate.waiting == 0 and await clock.slots_in_use("p") == 0
        await clock.aclose()


async def test_slots_go_where_the_fleet_has_room() -> None:
    """Two gateways each routing by their own load would pile onto one replica; the ledger puts
    a slot on the preferred replica while it has room fleet-wide, else on the emptiest one."""
    with redis_prefix() as prefix:
        c1, c2 = PoolClock(REDIS_URL, prefix, 30), PoolClock(REDIS_URL, prefix, 30)
        try:
            l1, l2 = c1.ledger("p"), c2.ledger("p")
            rooms = {"r0": 2, "r1": 2}
            got1 = await l1.admit([Ask("a", 1.0, 2, [("a1", 1.0, "r0"), ("a2", 1.0, "r0")])], rooms)
            assert got1.granted == [("a1", "r0"), ("a2", "r0")]
            # gateway 2's routing also prefers r0 (it sees none of gateway 1's requests): r0 is full
            got2 = await l2.admit([Ask("b", 1.0, 3, [("b1", 1.0, "r0"), ("b2", 1.0, "r0"), ("b3", 1.0, "r0")])],
                                  rooms)
            assert [r for _, r in got2.granted] == ["r1", "r1"] and got2.in_use == 4
            await l1.release("a1", "r0", "a", 0.0)
            got3 = await l2.admit([Ask("b", 1.0, 1, [("b3", 1.0, "r1")])], rooms)
            assert got3.granted == [("b3", "r0")]  # r1 is full: where the room is
            for sid, r in [("a2", "r0"), ("b1", "r1"), ("b2", "r1"), ("b3", "r0")]:
                await (l1 if sid.startswith("a") else l2).release(sid, r, sid[0], 0.0)
            await l2.admit([], rooms)
            assert await c1.slots_in_use("p") == 0
        finally:
            await c1.aclose()
            await c2.aclose()


class _CountedLedger(PoolLedger):
    """A real ledger that counts its ADMIT rounds."""

    rounds = 0

    async def admit(self, asks: list[Ask], rooms: dict[str, int], active_lead: float = 0.0,
                    reserve: int = 0) -> Round:
        self.rounds += 1
        return await super().admit(asks, rooms, active_lead, reserve)


async def test_arrivals_at_a_full_pool_start_no_rounds_of_their_own() -> None:
    """One slot, held; a tenant's first waiter announces its demand; twenty more arriving one by
    one while the pool stays full start no ledger round (nothing could be let through); once the
    slot is freed every one of them is served, in order, and nothing is left held."""
    with redis_prefix() as prefix:
        clock = PoolClock(REDIS_URL, prefix, 30)
        ledger = _CountedLedger(clock, "p")
        gate = FleetGate(lambda: {"r": 1}, lambda tenant: 1.0, ledger, poll_s=5.0)
        hold = asyncio.Event()
        served: list[int] = []

        async def one(i: int) -> None:
            async with gate.slot("a", 10.0, lambda: 10.0):
                served.append(i)
                if i == 0:
                    await hold.wait()

        tasks = [asyncio.create_task(one(0))]
        while not served:
            await asyncio.sleep(0.01)
        tasks.append(asyncio.create_task(one(1)))
        while gate.waiting == 0 or ledger.rounds < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        before = ledger.rounds
        for i in range(2, 22):
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0.01)
        assert ledger.rounds == before, (before, ledger.rounds)
        hold.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert served == list(range(22)) and gate.in_flight == 0 and gate.waiting == 0
        await gate.aclose()
        assert await clock.slots_in_use("p") == 0
        await clock.aclose()


async def test_two_gates_never_hold_more_than_the_pools_slots() -> None:
    """A storm on two gates with clients leaving (some while waiting, some just let through):
    at no sample do the gates, or Redis, hold more than the pool's 4 slots; nothing is left."""
    with redis_prefix() as prefix:
        c1, c2 = PoolClock(REDIS_URL, prefix, 30), PoolClock(REDIS_URL, prefix, 30)
        rooms, weights = {"r0": 2, "r1": 2}, {"a": 3.0, "b": 1.0}
        gates = [FleetGate(lambda: rooms, weights.__getitem__, c.ledger("p")) for c in (c1, c2)]
        worst = {"gates": 0, "redis": 0}

        async def one(gate: FleetGate, tenant: str) -> None:
            async with gate.slot(tenant, 10.0, lambda: 5.0):
                await asyncio.sleep(0.01)

        async def sample() -> None:
            while True:
                worst["gates"] = max(worst["gates"], sum(g.in_flight for g in gates))
                worst["redis"] = max(worst["redis"], await c1.slots_in_use("p"))
                await asyncio.sleep(0.001)

        async def storm(gate: FleetGate, tenant: str) -> None:
            tasks: list[asyncio.Task[None]] = []
            for i in range(150):
                tasks.append(asyncio.create_task(one(gate, tenant)))
                if i % 7 == 6:
                    await asyncio.sleep(0.003)
                    tasks[-3].cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        sampler = asyncio.create_task(sample())
        await asyncio.gather(storm(gates[0], "a"), storm(gates[1], "b"))
        sampler.cancel()
        for gate in gates:
            await gate.aclose()
        assert 0 < worst["gates"] <= 4 and 0 < worst["redis"] <= 4, worst
        assert await c1.slots_in_use("p") == 0 and all(g.in_flight == 0 and g.waiting == 0 for g in gates)
        await c1.aclose()
        await c2.aclose()


async def test_slots_taken_while_redis_was_down_count_fleet_wide_once_it_is_back(tmp_path) -> None:
    """Redis unreachable: a request goes through on the gateway's own share. Redis back: the
    gateway's next round records that slot, so another gateway sees the pool full and waits
    until it ends; its tenant is charged for it then, and nothing is left."""
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(contextlib.ExitStack())
        srv = first.enter_context(redis_server(tmp_path))
        c1, c2 = PoolClock(srv.url, "fg-outage", 30), PoolClock(srv.url, "fg-outage", 30)
        rooms = {"r": 2}
        g1 = FleetGate(lambda: rooms, lambda t: 1.0, c1.ledger("p"), poll_s=0.1, down_s=0.2)
        g2 = FleetGate(lambda: rooms, lambda t: 1.0, c2.ledger("p"), poll_s=0.1, down_s=0.2)
        first.close()  # Redis goes away
        held, order = asyncio.Event(), []

        async def run(gate: FleetGate, tenant: str, wait: asyncio.Event | None = None) -> None:
            async with gate.slot(tenant, 10.0, lambda: 5.0):
                order.append(tenant)
                if wait is not None:
                    await wait.wait()

        outage = asyncio.create_task(run(g1, "a", held))
        while g1.local.in_flight < 1:
            await asyncio.sleep(0.01)
        assert g1.fallbacks == 1
        srv = stack.enter_context(redis_server(tmp_path, port=srv.port))  # back, empty
        await asyncio.sleep(0.3)  # past down_s: the next request tries the ledger
        other = asyncio.Event()
        b = asyncio.create_task(run(g1, "b", other))
        while "b" not in order:
            await asyncio.sleep(0.01)
        assert await c1.slots_in_use("p") == 2  # b's, and a's recorded from the outage
        c = asyncio.create_task(run(g2, "c"))
        await asyncio.sleep(0.4)
        assert "c" not in order and g2.waiting == 1  # the pool is full fleet-wide
        held.set()
        await outage
        await asyncio.wait_for(c, 5)  # a's slot came back to the fleet
        other.set()
        await b
        assert (await c1.counters("p"))["a"] == pytest.approx(15.0)  # prompt and completion, weight 1
        for gate in (g1, g2):
            await gate.aclose()
        assert await c1.slots_in_use("p") == 0 and g1.in_flight == g2.in_flight == 0
        await c1.aclose()
        await c2.aclose()
