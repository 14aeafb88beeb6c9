"""The gateway-side fair queue of a pool (backends/pool_gate.py, issue 36): requests wait at the
gateway in weighted-VTC order and are let through as the pool has room; a light tenant arriving
behind a flood goes next; weights share the slots; a waiter that leaves holds nothing."""

from __future__ import annotations

import asyncio
import time

import httpx

from fairgate.backends.base import GenerationRequest
from fairgate.backends.http1 import HTTP1Pool
from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.backends.pool import PoolBackend, PoolOptions, ReplicaSpec
from fairgate.backends.pool_gate import FairGate
from tests.helpers.upstream import UpstreamServer


def _pool(r0: UpstreamServer, r1: UpstreamServer, http1: HTTP1Pool, http: httpx.AsyncClient,
          options: PoolOptions) -> PoolBackend:
    """A pool of kind vllm over two loopback replicas."""
    return PoolBackend("p", "vllm", [ReplicaSpec("r0", r0.base_url), ReplicaSpec("r1", r1.base_url)],
                       lambda s: OpenAICompatBackend(f"p/{s.name}", s.base_url, http1, is_local=True, max_retries=0),
                       http, options=options)


async def _run(gate: FairGate, order: list[str], tenant: str, name: str, hold: asyncio.Event | None = None,
               cost: float = 10.0) -> None:
    async with gate.slot(tenant, cost, lambda: cost):
        order.append(name)
        if hold is not None:
            await hold.wait()
        await asyncio.sleep(0)


async def test_a_light_tenant_behind_a_flood_goes_next() -> None:
    gate = FairGate(lambda: 1, lambda tenant: 1.0)
    order: list[str] = []
    release = asyncio.Event()
    first = asyncio.create_task(_run(gate, order, "flood", "f0", release))
    await asyncio.sleep(0)
    flood = [asyncio.create_task(_run(gate, order, "flood", f"f{i}")) for i in range(1, 6)]
    await asyncio.sleep(0)
    light = asyncio.create_task(_run(gate, order, "light", "l0"))
    await asyncio.sleep(0)
    assert gate.waiting == 6 and gate.in_flight == 1
    release.set()
    await asyncio.gather(first, *flood, light)
    assert order[:2] == ["f0", "l0"]  # not behind the flood's five
    assert gate.in_flight == 0 and gate.waiting == 0
    # every request's time at the gate is on record: the first went straight through, the rest waited
    assert gate.waits["flood"].count == 6 and gate.waits["flood"].buckets[-1] == 6
    assert gate.waits["light"].count == 1 and gate.waits["light"].total_s > 0


async def test_service_a_tenant_had_alone_is_no_debt_to_a_flood_that_comes_later() -> None:
    """A light tenant served alone (straight through, nobody waiting) for a while, then a flood:
    the flood's first request is lifted to the clock's present, so when the light tenant's next
    request waits behind the flood's backlog it goes next, not after the flood has caught up
    with all the light tenant's service (seen live: seconds at the gate)."""
    gate = FairGate(lambda: 1, lambda tenant: 1.0)
    order: list[str] = []
    for i in range(10):  # alone: 10 x (10 + 10) of service
        await _run(gate, order, "light", f"l{i}")
    assert gate.waited == 0 and gate.counter("light") == 200.0
    release = asyncio.Event()
    first = asyncio.create_task(_run(gate, order, "flood", "f0", release))
    await asyncio.sleep(0)
    assert gate.counter("flood") >= 180.0  # lifted: no credit for the time it was idle
    flood = [asyncio.create_task(_run(gate, order, "flood", f"f{i}")) for i in range(1, 6)]
    await asyncio.sleep(0)
    light = asyncio.create_task(_run(gate, order, "light", "l10"))
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *flood, light)
    assert order[10:12] == ["f0", "l10"], order[10:]  # not behind the flood's five


async def _burst_behind_a_flood(gate: FairGate, idle_s: float) -> list[str]:
    """The light tenant is served once and the flood five times (20 of service each), then the
    light tenant idles `idle_s` and sends three requests while the flood holds the one slot and
    has five waiting: the order in which the gate lets them through."""
    order: list[str] = []
    await _run(gate, order, "light", "l0")
    for i in range(5):
        await _run(gate, order, "flood", f"a{i}")
    release = asyncio.Event()
    first = asyncio.create_task(_run(gate, order, "flood", "f0", release))
    await asyncio.sleep(0)
    flood = [asyncio.create_task(_run(gate, order, "flood", f"f{i}")) for i in range(1, 6)]
    await asyncio.sleep(idle_s)
    light = [asyncio.create_task(_run(gate, order, "light", f"l{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    assert gate.waiting == 8
    release.set()
    await asyncio.gather(first, *flood, *light)
    assert gate.in_flight == 0 and gate.waiting == 0
    return order[7:]


async def test_a_tenant_served_lately_keeps_its_lead_over_a_flood_backlog() -> None:
    """Served within the window, the light tenant is not idle: its burst of three goes ahead of
    the flood's backlog, by the service it had less than the flood. Lifted level (a lead of 0,
    VTC's rule), it alternates with the flood."""
    led = await _burst_behind_a_flood(FairGate(lambda: 1, lambda tenant: 1.0), idle_s=0.0)
    assert led[:4] == ["l1", "l2", "l3", "f1"], led
    level = await _burst_behind_a_flood(FairGate(lambda: 1, lambda tenant: 1.0, active_lead=lambda: 0.0),
                                        idle_s=0.0)
    assert level[:5] == ["l1", "f1", "l2", "f2", "l3"], level


async def test_a_tenant_idle_past_the_window_starts_level_and_the_lead_is_bounded() -> None:
    """Idle longer than `active_window_s`, the light tenant gets no lead; and a lead smaller than
    the burst lets only part of it ahead of the flood (the bound grows by the lead, no more)."""
    idle = await _burst_behind_a_flood(FairGate(lambda: 1, lambda tenant: 1.0, active_window_s=0.05),
                                       idle_s=0.1)
    assert idle[:5] == ["l1", "f1", "l2", "f2", "l3"], idle
    # each light request costs 10 let through and 10 more when it ends: a lead of 25 covers two
    short = await _burst_behind_a_flood(FairGate(lambda: 1, lambda tenant: 1.0, active_lead=lambda: 25.0),
                                        idle_s=0.0)
    assert short[:4] == ["l1", "l2", "f1", "l3"], short


async def test_weights_share_the_slots() -> None:
    weights = {"a": 1.0, "b": 3.0, "z": 1.0}
    gate = FairGate(lambda: 1, weights.__getitem__)
    order: list[str] = []
    release = asyncio.Event()
    blocker = asyncio.create_task(_run(gate, order, "z", "z", release))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(_run(gate, order, t, f"{t}{i}")) for i in range(12) for t in ("a", "b")]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(blocker, *tasks)
    first16 = order[1:17]
    served = [name[0] for name in first16]
    assert served.count("b") == 12 and served.count("a") == 4  # 3:1 while both wait


async def test_the_headroom_lets_a_light_tenant_in_while_a_flood_holds_the_rest() -> None:
    """Four slots, one of them headroom. Alone, the flood takes all four. Once a light tenant has
    been seen lately, the flood holding three (over its half) waits for the fourth, and a light
    request arriving then goes out at once, ahead of the flood's waiting ones; when the light
    tenant has not been seen for `recent_s`, the flood's waiting request takes the slot."""
    gate = FairGate(lambda: 4, lambda tenant: 1.0, lambda: 1, recent_s=0.2)
    order: list[str] = []
    hold = asyncio.Event()
    alone = [asyncio.create_task(_run(gate, order, "flood", f"a{i}", hold)) for i in range(4)]
    await asyncio.sleep(0)
    assert gate.in_flight == 4 and gate.waiting == 0  # nobody else about: the headroom is the flood's
    hold.set()
    await asyncio.gather(*alone)
    await _run(gate, order, "light", "l0")  # the light tenant is about from here
    hold = asyncio.Event()
    flood = [asyncio.create_task(_run(gate, order, "flood", f"f{i}", hold)) for i in range(5)]
    await asyncio.sleep(0)
    assert gate.in_flight == 3 and gate.waiting == 2  # the fourth slot is headroom now
    light_hold = asyncio.Event()
    light = asyncio.create_task(_run(gate, order, "light", "l1", light_hold))
    await asyncio.sleep(0)
    assert gate.in_flight == 4 and order[-1] == "l1"  # out at once, not behind f3 and f4
    light_hold.set()
    await light
    await asyncio.sleep(0.05)
    assert gate.in_flight == 3  # l1 ended: the light tenant is still about, its slot stays headroom
    await asyncio.sleep(0.3)
    assert gate.in_flight == 4 and order[-1] == "f3"  # no light request for recent_s: the flood's
    hold.set()
    await asyncio.gather(*flood)
    assert gate.in_flight == 0 and gate.waiting == 0


async def test_a_waiter_that_leaves_holds_no_slot() -> None:
    gate = FairGate(lambda: 1, lambda tenant: 1.0)
    order: list[str] = []
    release = asyncio.Event()
    holder = asyncio.create_task(_run(gate, order, "a", "a0", release))
    await asyncio.sleep(0)
    gone = asyncio.create_task(_run(gate, order, "b", "b0"))
    after = asyncio.create_task(_run(gate, order, "c", "c0"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.gather(gone, return_exceptions=True)
    release.set()
    await asyncio.gather(holder, after)
    assert order == ["a0", "c0"] and gate.in_flight == 0 and gate.waiting == 0


async def test_a_pool_with_the_gate_serves_a_light_tenant_ahead_of_a_flood_backlog() -> None:
    """Real HTTP replicas (loopback OpenAI servers, 0.1 s per chunk): one slot per replica; the
    light tenant's request, sent after twelve of the flood's, finishes before most of them."""
    with UpstreamServer() as r0, UpstreamServer() as r1:
        for r in (r0, r1):
            r.behaviour.token_delay_s = 0.1
        http1 = HTTP1Pool()
        async with httpx.AsyncClient() as http:
            pool = _pool(r0, r1, http1, http, PoolOptions(policy="least_loaded", fair_slots=1))
            done: dict[str, float] = {}

            async def ask(tenant: str, name: str) -> None:
                req = GenerationRequest.from_body(name, "chat", {"model": "m", "max_tokens": 3, "stream": True,
                                                                "messages": [{"role": "user", "content": "x"}]},
                                                  tenant=tenant)
                async for _ in pool.stream_batches(req):
                    pass
                done[name] = time.monotonic()

            flood = [asyncio.create_task(ask("flood", f"f{i}")) for i in range(12)]
            await asyncio.sleep(0.05)
            await ask("light", "light")
            await asyncio.gather(*flood)
            finished_before = sum(1 for k, t in done.items() if k != "light" and t < done["light"])
            assert finished_before <= 4, sorted(done, key=done.get)  # two slots: it waited for one round
            assert pool.gate.in_flight == 0 and max(len(r.app.received) for r in (r0, r1)) <= 12
            await pool.aclose()


async def test_a_replica_s_own_queue_shrinks_its_room() -> None:
    """A replica whose /metrics reports requests waiting in its own queue (sent by clients beside
    the gateway) takes that many fewer of the gate's slots: with two slots per replica and one
    request waiting on each, at most two of six slow streams are out at once, where an empty
    queue lets four out. A queue counts when two probes in a row see it."""

    async def peak_with(waiting: int) -> tuple[int, int]:
        with UpstreamServer() as r0, UpstreamServer() as r1:
            for r in (r0, r1):
                r.behaviour.token_delay_s, r.behaviour.metrics_waiting = 0.05, waiting
            http1 = HTTP1Pool()
            async with httpx.AsyncClient() as http:
                pool = _pool(r0, r1, http1, http, PoolOptions(policy="least_loaded", fair_slots=2))
                await pool.probe_once()
                assert pool._room() == 4  # one reading may be a request between two steps
                await pool.probe_once()
                room, peak = pool._room(), 0

                async def ask(i: int) -> None:
                    req = GenerationRequest.from_body(f"q{i}", "chat", {
                        "model": "m", "max_tokens": 3, "stream": True,
                        "messages": [{"role": "user", "content": "x"}]}, tenant="t")
                    async for _ in pool.stream_batches(req):
                        pass

                tasks = [asyncio.create_task(ask(i)) for i in range(6 if room else 0)]
                while not all(t.done() for t in tasks):
                    peak = max(peak, pool.gate.in_flight)
                    await asyncio.sleep(0.01)
                await asyncio.gather(*tasks)
                statuses = {s["name"]: s["waiting"] for s in pool.status()}
                await pool.aclose()
                assert statuses == {"r0": waiting, "r1": waiting}
                return room, peak

    assert await peak_with(0) == (4, 4)
    assert await peak_with(1) == (2, 2)
    assert await peak_with(2) == (0, 0)  # a full queue: nothing goes out until a probe sees it drain


async def test_the_gate_places_each_slot_on_a_replica_with_room() -> None:
    """Affinity routing sends every request with one prompt to its home replica until the load
    bound (1.25x the mean, past the slots here); the gate's slots are the pool's, so the slot it
    grants is placed on a replica with a free one: two slots per replica, eight streams of one
    prompt, and neither replica ever holds more than two while the other has room."""
    with UpstreamServer() as r0, UpstreamServer() as r1:
        for r in (r0, r1):
            r.behaviour.token_delay_s = 0.05
        http1 = HTTP1Pool()
        async with httpx.AsyncClient() as http:
            pool = _pool(r0, r1, http1, http, PoolOptions(policy="affinity", fair_slots=2))
            peaks = {"r0": 0, "r1": 0}

            async def ask(i: int) -> None:
                req = GenerationRequest.from_body(f"q{i}", "chat", {
                    "model": "m", "max_tokens": 3, "stream": True,
                    "messages": [{"role": "user", "content": "the same long prompt " * 8}]}, tenant="t")
                async for _ in pool.stream_batches(req):
                    pass

            tasks = [asyncio.create_task(ask(i)) for i in range(8)]
            while not all(t.done() for t in tasks):
                for r in pool.replicas.values():
                    peaks[r.name] = max(peaks[r.name], r.outstanding)
                await asyncio.sleep(0.005)
            await asyncio.gather(*tasks)
            routed = {r.name: dict(r.routed) for r in pool.replicas.values()}
            await pool.aclose()
    assert peaks == {"r0": 2, "r1": 2}, (peaks, routed)
    assert sum(n for by in routed.values() for n in by.values()) == 8
