"""Database faults under load: bad rows from one tenant, and the database cut for 6 s with
`usage_on_db_unavailable` journal and refuse. Rows lost and reservations leaked must be 0."""

from __future__ import annotations

import asyncio
import threading
import time

from fairgate.gateway.store.row_writer import QuarantinedRow
from tests.faults.figures import Figures, chat_body, load, recovery_s, refused
from tests.faults.stack import stack
from tests.helpers.rows import count


def cut_for(proxy, after_s: float, for_s: float) -> tuple[threading.Thread, list[float]]:
    """Cut `proxy` after `after_s` for `for_s` in a thread; the list gets the restore time."""
    restored: list[float] = []

    def run() -> None:
        time.sleep(after_s)
        proxy.cut()
        time.sleep(for_s)
        proxy.restore()
        restored.append(time.monotonic())

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, restored


def test_bad_rows_from_one_tenant(upstream, tmp_path, fault_report):
    with stack(upstream, tmp_path) as s:
        assert s.admin.client.put("/admin/routes", json=[{"match": {"model": "gpt-*"}, "backend": "up"}]
                                  ).status_code == 200
        bad, bad_key = s.tenant_key()
        good, good_key = s.tenant_key(max_concurrent=8)

        async def run():
            return await asyncio.gather(
                load(s.gw.url, bad_key, 4, 2, chat_body("gpt-" + "a" * 300)),
                load(s.gw.url, bad_key, 4, 2, chat_body("gpt-\u0000x")),
                load(s.gw.url, bad_key, 4, 1, chat_body("x\u0000")),  # a 404 with an audit row
                load(s.gw.url, good_key, 4, 4))

        results = asyncio.run(run())
        s.settle_writers()
        statuses = sum(results, start=type(results[0])())
        fig = fault_report(Figures(
            "bad rows (PostgreSQL)", served=statuses["200"], refused=refused(statuses),
            rows_written=s.usage_rows(bad, good), audit_lost=s.audit_lost(), leaked=s.leaked(bad, good),
            statuses=dict(statuses)))
        fig.rows_lost = fig.served - fig.rows_written
        assert statuses["404:model_not_found"] == refused(statuses) > 0
        assert results[3]["200"] > 0 and s.usage_rows(good) == results[3]["200"]
        assert (fig.rows_lost, fig.audit_lost, fig.leaked) == (0, 0, 0)
        assert count(s.db_url, QuarantinedRow) == 0


def _outage(upstream, tmp_path, fault_report, mode: str) -> Figures:
    with stack(upstream, tmp_path, usage_on_db_unavailable=mode) as s:
        tenant, key = s.tenant_key(max_concurrent=8, requests_per_minute=100_000)
        s.tenant_key()  # a second tenant: the key cache holds both before the cut
        cutter, restored = cut_for(s.db_proxy, after_s=2, for_s=6)
        refusals: list[float] = []
        statuses = asyncio.run(load(s.gw.url, key, 12, 6, refusals=refusals))
        cutter.join()
        s.settle_writers()
        fig = fault_report(Figures(
            f"database cut 6 s ({mode})", served=statuses["200"], refused=refused(statuses),
            rows_written=s.usage_rows(tenant), audit_lost=s.audit_lost(), leaked=s.leaked(tenant),
            statuses=dict(statuses)))
        fig.rows_lost = fig.served - fig.rows_written
        fig.recover_s = recovery_s(refusals, restored[0])
        assert (fig.rows_lost, fig.audit_lost, fig.leaked) == (0, 0, 0)
        return fig


def test_database_cut_with_the_journal(upstream, tmp_path, fault_report):
    fig = _outage(upstream, tmp_path, fault_report, "journal")
    assert fig.refused == 0 and fig.served > 100


def test_database_cut_with_refuse(upstream, tmp_path, fault_report):
    fig = _outage(upstream, tmp_path, fault_report, "refuse")
    assert fig.statuses.get("503:usage_unavailable", 0) == fig.refused > 0 and fig.served > 50
