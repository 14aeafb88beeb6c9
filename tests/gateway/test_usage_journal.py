"""`usage_on_db_unavailable` (issue 18): with the database unreachable (a loopback proxy cut in
front of real PostgreSQL), `journal` keeps serving and loses no row, `refuse` answers 503
before reserving; the journal is bounded, fsync'd and replayed exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx
import pytest
from sqlalchemy import func, select

from fairgate.gateway.billing.usage import UsageRecorder
from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.tables import UsageRecord
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, pg_database
from tests.helpers.rows import count, event, wait_for
from tests.helpers.tcp_proxy import TcpProxy


@pytest.fixture
def pg_proxy():
    with pg_database() as url, TcpProxy("127.0.0.1", 5432) as proxy:
        upgrade(url)
        yield url, url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}"), proxy


@contextlib.contextmanager
def gateway(url: str, upstream, tmp_path, **overrides):
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=url, embedded_engine=False,
                        usage_flush_interval_s=0.01, usage_journal_path=str(tmp_path / "usage.journal"),
                        **overrides)
    with GatewayThread(settings) as gw, contextlib.closing(Admin(gw.url)) as admin:
        admin.backend("up", upstream.base_url, model="up-model")
        t = admin.tenant()
        admin.quota(t["id"], max_concurrent=4, requests_per_minute=100)
        yield gw, admin.key(t["id"])["key"], t["id"]


def chat(gw, key: str) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": "up", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})


def pending_gauge(gw) -> float:
    text = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).text
    line = next(x for x in text.splitlines() if x.startswith("fairgate_usage_pending_rows "))
    return float(line.split()[1])


def test_journal_mode_serves_through_an_outage_and_loses_no_row(pg_proxy, upstream, tmp_path, caplog):
    direct, via_proxy, proxy = pg_proxy
    caplog.set_level(logging.WARNING, logger="fairgate.usage")
    with gateway(via_proxy, upstream, tmp_path) as (gw, key, tenant):
        assert chat(gw, key).status_code == 200
        wait_for(lambda: gw.state.usage.written == 1)
        proxy.cut()
        for _ in range(30):
            assert chat(gw, key).status_code == 200
        wait_for(lambda: gw.state.usage.journal.rows == 30)
        on_disk = [tmp_path / "usage.journal", tmp_path / "usage.journal.replaying"]  # see UsageJournal.take
        assert sum(p.read_bytes().count(b"\n") for p in on_disk if p.exists()) == 30  # on disk, not in memory
        assert pending_gauge(gw) == 30
        proxy.restore()
        wait_for(lambda: gw.state.usage.written == 31 and gw.state.usage.pending_rows() == 0, timeout=30)
        assert pending_gauge(gw) == 0
        assert not any(p.exists() for p in on_disk)
    assert count(direct, UsageRecord, UsageRecord.tenant_id == tenant) == 31
    changes = [r.getMessage() for r in caplog.records if "usage database" in r.getMessage()]
    assert len(changes) == 2 and "unavailable" in changes[0] and "reachable again" in changes[1]


def test_refuse_mode_answers_503_before_reserving(pg_proxy, upstream, tmp_path):
    direct, via_proxy, proxy = pg_proxy
    with gateway(via_proxy, upstream, tmp_path, usage_on_db_unavailable="refuse") as (gw, key, tenant):
        assert chat(gw, key).status_code == 200
        wait_for(lambda: gw.state.usage.written == 1)
        proxy.cut()
        assert chat(gw, key).status_code == 200  # served before the writer noticed; kept in memory
        wait_for(lambda: not gw.state.usage.db_up)
        for _ in range(5):
            r = chat(gw, key)
            assert r.status_code == 503 and r.json()["error"]["code"] == "usage_unavailable"
            assert r.headers["retry-after"] == "1"
        counters = gw.call(gw.state.quota.counters(f"t:{tenant}"))
        assert (counters["concurrent"], counters["requests"]) == (0, 2)  # the 503s reserved nothing
        proxy.restore()
        wait_for(lambda: gw.state.usage.db_up, timeout=30)
        assert chat(gw, key).status_code == 200
        wait_for(lambda: gw.state.usage.written == 3, timeout=30)
    assert count(direct, UsageRecord, UsageRecord.tenant_id == tenant) == 3


def test_journal_is_replayed_at_the_next_start_exactly_once(pg_proxy, tmp_path):
    direct, via_proxy, proxy = pg_proxy
    journal = tmp_path / "usage.journal"
    proxy.cut()

    async def down() -> UsageRecorder:
        rec = UsageRecorder(make_engine(via_proxy), interval_s=0.01, max_backoff_s=0.2, journal_path=str(journal))
        rec.start()
        for i in range(7):
            rec.record(event(f"j{i}"))
        await asyncio.sleep(0.5)
        await rec.stop(timeout_s=2)
        return rec

    assert asyncio.run(down()).journal.rows == 7
    files = [journal, journal.with_name("usage.journal.replaying")]  # see UsageJournal.take
    saved = b"".join(p.read_bytes() for p in files if p.exists())
    assert saved.count(b"\n") == 7

    async def up() -> int:
        rec = UsageRecorder(make_engine(direct), journal_path=str(journal))
        rec.start()
        for _ in range(100):
            if rec.written == 7 and not rec.journal.rows:
                break
            await asyncio.sleep(0.05)
        await rec.stop()
        return rec.written

    assert asyncio.run(up()) == 7
    assert not any(p.exists() for p in files)
    journal.write_bytes(saved)  # the same rows again (a crash between commit and removal)
    asyncio.run(up())
    engine = make_engine(direct)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(UsageRecord)).scalar_one() == 7
    engine.dispose()


def test_a_full_journal_stops_admission_instead_of_dropping(pg_proxy, tmp_path):
    _, via_proxy, proxy = pg_proxy
    proxy.cut()

    async def run() -> tuple[bool, int, int]:
        rec = UsageRecorder(make_engine(via_proxy), interval_s=0.01, max_backoff_s=0.2,
                            journal_path=str(tmp_path / "small.journal"), journal_max_bytes=4096)
        rec.start()
        for i in range(40):  # ~400 bytes a row: about ten fit
            rec.record(event(f"f{i}"))
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)
        accepting = rec.accepting()
        pending = rec.pending_rows()
        await rec._loop.stop(0.1)
        return accepting, pending, rec.journal.rows

    accepting, pending, journaled = asyncio.run(run())
    assert not accepting and pending == 40 and 0 < journaled < 40


def test_an_unwritable_journal_refuses_admission_and_keeps_rows_in_memory(pg_proxy, tmp_path):
    direct, via_proxy, proxy = pg_proxy
    proxy.cut()

    async def run() -> tuple[bool, int, bool, int]:
        rec = UsageRecorder(make_engine(via_proxy), interval_s=0.01, max_backoff_s=0.2,
                            journal_path=str(tmp_path / "no-such-dir" / "usage.journal"))
        rec.start()
        for i in range(5):
            rec.record(event(f"u{i}"))
        await asyncio.sleep(0.5)
        refused = (rec.accepting(), rec.pending_rows())
        proxy.restore()
        for _ in range(200):
            if rec.written == 5:
                break
            await asyncio.sleep(0.05)
        await rec.stop()
        return (*refused, rec.accepting(), rec.written)

    assert asyncio.run(run()) == (False, 5, True, 5)
    assert count(direct, UsageRecord) == 5


def test_a_line_torn_by_a_crash_is_skipped_and_the_rest_replayed(tmp_path):
    from fairgate.gateway.billing.journal import UsageJournal

    j = UsageJournal(tmp_path / "u.journal", 1 << 20)
    assert j.append([{"request_id": "a"}, {"request_id": "b"}])
    with (tmp_path / "u.journal").open("ab") as f:
        f.write(b'{"request_id": "c", "tena')  # the process died mid-append: never acknowledged
    reopened = UsageJournal(tmp_path / "u.journal", 1 << 20)
    assert reopened.rows == 3  # counted by lines, so the gauge never under-reports
    assert reopened.append([{"request_id": "d"}])  # on a line of its own, not glued to the torn one
    assert [r["request_id"] for r in reopened.take()] == ["a", "b", "d"]
    reopened.done()
    assert (reopened.rows, reopened.size, reopened.full) == (0, 0, False)  # counted by lines: 4 - 4
    assert not any(tmp_path.iterdir())
