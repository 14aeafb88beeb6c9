"""One bad row never blocks the others (issue 18), on real PostgreSQL: client strings cleaned at
the edge, a refused batch written row by row, what still fails kept in `quarantined_rows`,
and routing audit rows retried through a database outage instead of dropped."""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest
from sqlalchemy import select

from fairgate.gateway.billing.usage import UsageRecorder
from fairgate.gateway.observability.routing_audit import AuditRecord, RoutingAuditWriter
from fairgate.gateway.settings import Settings
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.routing_tables import RoutingAudit
from fairgate.gateway.store.row_writer import QuarantinedRow
from fairgate.gateway.store.tables import UsageRecord
from tests.gateway.harness import ADMIN_TOKEN, Admin, GatewayThread, pg_database
from tests.helpers.rows import count, event, wait_for
from tests.helpers.tcp_proxy import TcpProxy


@pytest.fixture
def pg():
    with pg_database() as url:
        upgrade(url)
        yield url


def chat(gw, key: str, model: str) -> httpx.Response:
    return httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": f"Bearer {key}"}, timeout=30,
                      json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})


def test_bad_model_strings_do_not_block_usage_of_other_requests(pg, upstream, tmp_path):
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=pg, embedded_engine=False,
                        usage_flush_interval_s=0.01, usage_journal_path=str(tmp_path / "j"))
    with GatewayThread(settings) as gw, contextlib.closing(Admin(gw.url)) as admin:
        admin.backend("up", upstream.base_url, model="up-model", kind="local")
        admin.routes([{"match": {"model": "gpt-*"}, "backend": "up"}])
        bad_key = admin.key(admin.tenant()["id"])["key"]
        other = admin.tenant()["id"]
        good_key = admin.key(other)["key"]
        long_model, nul_model = "gpt-" + "a" * 300, "gpt-\u0000x"
        assert chat(gw, bad_key, long_model).status_code == 200
        assert chat(gw, bad_key, nul_model).status_code == 200
        for _ in range(20):
            assert chat(gw, good_key, "up").status_code == 200
        wait_for(lambda: gw.state.usage.written == 22)
        with gw.state.sessions() as s:
            models = sorted(s.scalars(select(UsageRecord.model).where(UsageRecord.model.like("gpt-%"))))
        assert models == ["gpt-" + "a" * 196, "gpt-x"]  # cut to VARCHAR(200), NUL removed
        assert count(pg, UsageRecord, UsageRecord.tenant_id == other) == 20
        assert count(pg, QuarantinedRow) == 0 and gw.state.usage.quarantined == 0


def test_a_row_the_database_refuses_is_quarantined_and_the_batch_still_lands(pg, tmp_path):
    async def run() -> UsageRecorder:
        rec = UsageRecorder(make_engine(pg), interval_s=0.01, journal_path=str(tmp_path / "j"))
        rec.start()
        for i in range(5):  # 2**40 prompt tokens: out of range for the INTEGER column
            rec.record(event(f"r{i}", prompt_tokens=2**40 if i == 2 else 1))
        assert await rec.flush(10)
        await rec.stop()
        return rec

    rec = asyncio.run(run())
    assert (rec.written, rec.quarantined) == (4, 1)
    assert count(pg, UsageRecord) == 4
    engine = make_engine(pg)
    with engine.connect() as conn:
        q = conn.execute(select(QuarantinedRow)).one()
    engine.dispose()
    assert (q.source, q.row_key) == ("usage_records", "r2")
    assert '"prompt_tokens": 1099511627776' in q.payload and q.error.startswith("DataError")


def test_a_nul_model_does_not_erase_other_tenants_audit_rows(pg, upstream, tmp_path):
    settings = Settings(admin_token=ADMIN_TOKEN, database_url=pg, embedded_engine=False,
                        usage_journal_path=str(tmp_path / "j"))
    with GatewayThread(settings) as gw, contextlib.closing(Admin(gw.url)) as admin:
        admin.backend("up", upstream.base_url, model="up-model")
        attacker = admin.key(admin.tenant()["id"])["key"]
        victim = admin.tenant()["id"]
        key = admin.key(victim)["key"]
        for i in range(40):
            if i % 3 == 0:
                assert chat(gw, attacker, "x\u0000").status_code == 404
            assert chat(gw, key, "up").status_code == 200
        assert gw.call(gw.state.routing_audit.flush(10))
        assert count(pg, RoutingAudit, RoutingAudit.tenant_id == victim) == 40
        assert count(pg, RoutingAudit, RoutingAudit.model == "x") == 14


def test_audit_rows_survive_a_six_second_database_outage(pg, upstream):
    with TcpProxy("127.0.0.1", 5432) as proxy:
        via_proxy = pg.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
        engine = make_engine(via_proxy)
        writer = RoutingAuditWriter(engine, interval_s=0.05, max_backoff_s=0.5)

        def rec(i: int) -> AuditRecord:
            return AuditRecord(tenant_id="t-out", model="m", priority="standard", sensitive=False, reasons=[],
                               finding_kinds=[], rule_id=None, backends=["b"], decision="model:m", status=200,
                               request_id=f"r{i}")

        async def run() -> None:
            for i in range(100):
                writer.record(rec(i))
                await asyncio.sleep(0.01)
            proxy.cut()
            t_end = time.time() + 6
            i = 100
            while time.time() < t_end:
                writer.record(rec(i))
                i += 1
                await asyncio.sleep(0.01)
            proxy.restore()
            for _ in range(100):
                writer.record(rec(i))
                i += 1
            assert await writer.flush(30)
            assert writer.failures >= 1

        asyncio.run(run())
        engine.dispose()
    # every recorded row exactly once (a batch retried after a lost commit answer is not doubled)
    assert writer.recorded > 300 and writer.pending == 0
    assert count(pg, RoutingAudit, RoutingAudit.tenant_id == "t-out") == writer.recorded
