"""Quota faults under load: Redis cut mid-load, `max_tokens` beyond the counters, and a
gateway replica SIGKILLed while it holds a tenant's concurrency slots. Rows lost and
reservations leaked (still held a TTL after the load) must be 0."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.tables import UsageRecord
from tests.faults.figures import Figures, chat_body, load, recovery_s, refused
from tests.faults.stack import stack
from tests.faults.test_database_faults import cut_for
from tests.gateway.harness import (
    ADMIN_TOKEN,
    REDIS_URL,
    Admin,
    GatewayProcess,
    GatewayThread,
    pg_database,
    redis_prefix,
)
from tests.helpers.rows import count, wait_for

TTL_S = 2


def test_redis_cut_mid_load(upstream, tmp_path, fault_report):
    with stack(upstream, tmp_path, reservation_ttl_s=TTL_S) as s:
        tenant, key = s.tenant_key(max_concurrent=8, requests_per_minute=100_000)
        cutter, restored = cut_for(s.redis_proxy, after_s=2, for_s=3)
        refusals: list[float] = []
        statuses = asyncio.run(load(s.gw.url, key, 9, 6, refusals=refusals))
        cutter.join()
        s.settle_writers()
        time.sleep(TTL_S + 1)  # a settle cut by the outage is released by the TTL, not leaked
        fig = fault_report(Figures(
            "redis cut 3 s", served=statuses["200"], refused=refused(statuses), rows_written=s.usage_rows(tenant),
            audit_lost=s.audit_lost(), leaked=s.leaked(tenant), recover_s=recovery_s(refusals, restored[0]),
            statuses=dict(statuses)))
        fig.rows_lost = fig.served - fig.rows_written
        assert set(statuses) <= {"200", "503:quota_unavailable"} and fig.refused > 0 and fig.served > 50
        assert (fig.rows_lost, fig.audit_lost, fig.leaked) == (0, 0, 0)
        assert fig.recover_s < 5


def test_max_tokens_beyond_the_counters(upstream, tmp_path, fault_report):
    with stack(upstream, tmp_path) as s:
        tenant, key = s.tenant_key(max_concurrent=3, requests_per_minute=100_000)

        async def run():
            return await asyncio.gather(load(s.gw.url, key, 3, 3, chat_body(max_tokens=10**17)),
                                        load(s.gw.url, key, 3, 2))

        huge, normal = asyncio.run(run())
        s.settle_writers()
        fig = fault_report(Figures(
            "max_tokens 1e17", served=normal["200"], refused=refused(huge) + refused(normal),
            rows_written=s.usage_rows(tenant), audit_lost=s.audit_lost(), leaked=s.leaked(tenant),
            statuses=dict(huge + normal)))
        fig.rows_lost = fig.served - fig.rows_written
        assert set(huge) == {"400:invalid_value"} and set(normal) == {"200"}
        assert (fig.rows_lost, fig.audit_lost, fig.leaked) == (0, 0, 0)


def _hold_a_stream(url: str, key: str, first_chunk: threading.Event) -> threading.Thread:
    def run() -> None:
        with contextlib.suppress(httpx.HTTPError), httpx.Client(timeout=60) as c, c.stream(
                "POST", url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"},
                json=chat_body(max_tokens=200, stream=True)) as r:
            for _ in r.iter_lines():
                first_chunk.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_replica_sigkilled_while_holding_slots(upstream, fault_report):
    upstream.behaviour.token_delay_s = 0.1  # a 20 s stream
    try:
        with contextlib.ExitStack() as es:
            db, prefix = es.enter_context(pg_database()), es.enter_context(redis_prefix())
            env = {"FAIRGATE_DATABASE_URL": db, "FAIRGATE_REDIS_URL": REDIS_URL, "FAIRGATE_REDIS_PREFIX": prefix,
                   "FAIRGATE_ADMIN_TOKEN": ADMIN_TOKEN, "FAIRGATE_EMBEDDED_ENGINE": "false",
                   "FAIRGATE_RESERVATION_TTL_S": str(TTL_S), "FAIRGATE_USAGE_FLUSH_INTERVAL_S": "0.02"}
            doomed = es.enter_context(GatewayProcess(env))
            live = es.enter_context(GatewayThread(Settings(
                admin_token=ADMIN_TOKEN, database_url=db, redis_url=REDIS_URL, redis_prefix=prefix,
                embedded_engine=False, reservation_ttl_s=TTL_S, usage_flush_interval_s=0.02)))
            fig = _kill_and_recover(doomed, live, upstream, es)
            fault_report(fig)
        assert fig.leaked == 0 and fig.rows_lost == 0
        assert fig.recover_s is not None and fig.recover_s < 35
    finally:
        upstream.behaviour.token_delay_s = 0.0


def _kill_and_recover(doomed: GatewayProcess, live: GatewayThread, upstream, es: contextlib.ExitStack) -> Figures:
    admin = Admin(live.url)
    es.callback(admin.close)
    admin.backend("up", upstream.base_url, model="up-model", kind="local")
    tenant = admin.tenant()["id"]
    admin.quota(tenant, max_concurrent=2)
    key = admin.key(tenant)["key"]
    first = [threading.Event(), threading.Event()]
    streams = [_hold_a_stream(doomed.url, key, ev) for ev in first]
    assert all(ev.wait(30) for ev in first)
    h = {"authorization": f"Bearer {key}"}
    time.sleep(3 * TTL_S)  # past the TTL: only the doomed replica's heartbeat holds the slots
    denied = httpx.post(live.url + "/v1/chat/completions", headers=h, json=chat_body(), timeout=30)
    assert denied.status_code == 429 and denied.json()["error"]["code"] == "max_concurrent"
    doomed.proc.kill()
    killed_at = time.monotonic()
    statuses: dict[str, int] = {"429:max_concurrent": 1}
    recover_s = None
    while time.monotonic() - killed_at < 40:
        r = httpx.post(live.url + "/v1/chat/completions", headers=h, json=chat_body(), timeout=30)
        if r.status_code == 200:
            recover_s = round(time.monotonic() - killed_at, 2)
            break
        code = f"{r.status_code}:{r.json()['error']['code']}"
        statuses[code] = statuses.get(code, 0) + 1
        time.sleep(0.2)
    for t in streams:
        t.join(10)
    # the served request settles after its response went out: wait for its row, then count
    url = live.state.settings.database_url
    with contextlib.suppress(AssertionError):
        wait_for(lambda: live.call(live.state.usage.flush(1), 5)
                 and count(url, UsageRecord, UsageRecord.tenant_id == tenant) >= (1 if recover_s else 0), 15)
    rows = count(url, UsageRecord, UsageRecord.tenant_id == tenant)
    held = live.call(live.state.quota.counters(f"t:{tenant}"))["concurrent"]
    # the two streams died with their replica, before any usage row existed: reported, not "lost"
    return Figures("replica SIGKILLed holding 2 slots", served=1 if recover_s else 0,
                   refused=sum(statuses.values()), rows_written=rows, rows_lost=(1 if recover_s else 0) - rows,
                   leaked=held, recover_s=recover_s, statuses={**statuses, "streams_cut_by_the_kill": 2})
