"""A gateway replica SIGKILLed with open streams while the database is out: the other replica
keeps serving throughout, the killed one's slots come back through the heartbeat TTL, and
the rows it had journaled are replayed when it starts again. Nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.tables import UsageRecord
from tests.faults.figures import Figures, chat_body, load
from tests.faults.test_quota_faults import _hold_a_stream
from tests.gateway.harness import (
    ADMIN_TOKEN,
    REDIS_URL,
    Admin,
    GatewayProcess,
    GatewayThread,
    pg_database,
    redis_prefix,
)
from tests.helpers.rows import wait_for
from tests.helpers.tcp_proxy import TcpProxy

TTL_S = 2
DOOMED_SERVED = 5  # answered by the doomed replica while the database is out: journaled


def _journaled(path: Path) -> int:
    files = (path, path.with_name(path.name + ".replaying"))
    return sum(p.read_bytes().count(b"\n") for p in files if p.exists())


def _rows(db: str, tenant: str) -> tuple[int, int]:
    """(rows, distinct request ids) of the tenant, read directly."""
    engine = make_engine(db)
    try:
        with engine.connect() as conn:
            q = select(func.count(), func.count(UsageRecord.request_id.distinct())).where(
                UsageRecord.tenant_id == tenant)
            rows, distinct = conn.execute(q).one()
            return rows, distinct
    finally:
        engine.dispose()


@pytest.mark.timeout(900)  # two gateway process starts: minutes on a loaded machine
def test_replica_sigkilled_with_open_streams_during_a_db_outage(upstream, tmp_path, fault_report):
    upstream.behaviour.token_delay_s = 0.05  # the held streams take 10 s
    try:
        with contextlib.ExitStack() as es:
            db, prefix = es.enter_context(pg_database()), es.enter_context(redis_prefix())
            upgrade(db)
            proxy = es.enter_context(TcpProxy("127.0.0.1", 5432))
            via = db.replace(":5432/", f":{proxy.port}/")
            live = es.enter_context(GatewayThread(Settings(
                admin_token=ADMIN_TOKEN, database_url=via, redis_url=REDIS_URL, redis_prefix=prefix,
                embedded_engine=False, reservation_ttl_s=TTL_S, usage_flush_interval_s=0.02,
                usage_journal_path=str(tmp_path / "live.journal"))))
            admin = Admin(live.url)
            es.callback(admin.close)
            admin.backend("up", upstream.base_url, model="up-model", kind="local")
            tenant = admin.tenant()["id"]
            admin.quota(tenant, max_concurrent=8)
            key = admin.key(tenant)["key"]
            journal = tmp_path / "doomed.journal"
            env = {"FAIRGATE_DATABASE_URL": via, "FAIRGATE_REDIS_URL": REDIS_URL, "FAIRGATE_REDIS_PREFIX": prefix,
                   "FAIRGATE_ADMIN_TOKEN": ADMIN_TOKEN, "FAIRGATE_EMBEDDED_ENGINE": "false",
                   "FAIRGATE_RESERVATION_TTL_S": str(TTL_S), "FAIRGATE_USAGE_FLUSH_INTERVAL_S": "0.02",
                   "FAIRGATE_USAGE_JOURNAL_PATH": str(journal)}
            fig, cut = _scenario(live, env, journal, key, tenant, proxy, db)
            fault_report(fig)
        assert fig.statuses["live_not_200"] == 0 and fig.served > 0
        # the two streams the kill cut: billed by the restarted replica from the file of requests out
        assert [(c.status, c.http_status, c.stream, c.usage_estimated) for c in cut] == [("failed", 502, True, True)] * 2
        assert all(c.prompt_tokens > 0 and c.completion_tokens == 0 for c in cut)
        assert (fig.rows_lost, fig.leaked, fig.statuses["duplicates"]) == (0, 0, 0)
    finally:
        upstream.behaviour.token_delay_s = 0.0


def _cut_rows(db: str, tenant: str) -> list[UsageRecord]:
    engine = make_engine(db)
    try:
        with Session(engine) as s:
            return list(s.scalars(select(UsageRecord).where(UsageRecord.tenant_id == tenant,
                                                            UsageRecord.status == "failed")))
    finally:
        engine.dispose()


def _scenario(live: GatewayThread, env: dict[str, str], journal: Path, key: str, tenant: str, proxy: TcpProxy,
              db: str) -> tuple[Figures, list[UsageRecord]]:
    h = {"authorization": f"Bearer {key}"}
    doomed = GatewayProcess(env, start_timeout_s=300).__enter__()
    try:
        assert httpx.post(doomed.url + "/v1/chat/completions", headers=h, json=chat_body(), timeout=30
                          ).status_code == 200  # the key is cached on the doomed replica now
        # its row stored before the cut: else it is journaled too, and the journal would reach
        # DOOMED_SERVED lines while the last served row still waits in memory for the kill
        wait_for(lambda: _rows(db, tenant)[0] >= 1, 30)
        assert httpx.post(live.url + "/v1/chat/completions", headers=h, json=chat_body(), timeout=30
                          ).status_code == 200  # ... and on the live one
        live_load: list[Counter[str]] = []
        loader = threading.Thread(target=lambda: live_load.append(asyncio.run(load(live.url, key, 12, 2))))
        loader.start()
        proxy.cut()
        for _ in range(DOOMED_SERVED):
            r = httpx.post(doomed.url + "/v1/chat/completions", headers=h, json=chat_body(), timeout=30)
            assert r.status_code == 200, r.text
        wait_for(lambda: _journaled(journal) == DOOMED_SERVED, 30)  # fsync'd before the kill
        first = [threading.Event(), threading.Event()]
        streams = [_hold_a_stream(doomed.url, key, ev) for ev in first]
        assert all(ev.wait(30) for ev in first)
        doomed.proc.kill()
        doomed.proc.wait()
        killed_at = time.monotonic()
        proxy.restore()
    finally:
        doomed.__exit__(None, None, None)
    for t in streams:
        t.join(15)
    restarted = GatewayProcess(env, start_timeout_s=300).__enter__()  # replays the journal at start
    try:
        loader.join(60)
        statuses = live_load[0]
        # warm-ups + journaled + the live replica's + the 2 streams the kill cut (billed by the restart)
        expected = 2 + DOOMED_SERVED + statuses["200"] + 2
        with contextlib.suppress(AssertionError):
            wait_for(lambda: _rows(db, tenant)[0] >= expected and _journaled(journal) == 0, 60)
        recover_s = round(time.monotonic() - killed_at, 2)
        wait_for(lambda: live.call(live.state.quota.counters(f"t:{tenant}"))["concurrent"] == 0, 3 * TTL_S + 30)
        rows, distinct = _rows(db, tenant)
        cut = _cut_rows(db, tenant)
        held = live.call(live.state.quota.counters(f"t:{tenant}"))["concurrent"]
    finally:
        restarted.__exit__(None, None, None)
    return Figures("replica SIGKILLed, streams open, DB out", served=expected, refused=0, rows_written=rows,
                   rows_lost=expected - rows, leaked=held, recover_s=recover_s,
                   statuses={"live_200": statuses["200"], "live_not_200": sum(statuses.values()) - statuses["200"],
                             "journaled_then_replayed": DOOMED_SERVED, "duplicates": rows - distinct,
                             "streams_cut_by_the_kill": 2, "cut_rows_billed_at_restart": len(cut)}), cut
