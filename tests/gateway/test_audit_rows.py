"""Routing audit rows as the writer stores them (the driver's executemany, JSON by orjson), read
back through the ORM on SQLite and PostgreSQL: every column as recorded, a retried batch not
doubled, and row ids unique in a forked child too."""

from __future__ import annotations

import multiprocessing
from datetime import datetime

import pytest
from sqlalchemy import select

from fairgate.gateway.observability.routing_audit import AuditRecord, RoutingAuditWriter, _entry_ids
from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.routing_tables import RoutingAudit
from tests.gateway.harness import pg_database


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/audit.db"
        upgrade(url)
        yield url
        return
    with pg_database() as url:
        upgrade(url)
        yield url


def record(i: int, **kw: object) -> AuditRecord:
    base: dict[str, object] = {
        "tenant_id": "t1", "model": "chat", "priority": "standard", "sensitive": False, "reasons": [],
        "finding_kinds": [], "rule_id": None, "backends": ["up"], "decision": "model:chat", "status": 200,
        "request_id": f"chatcmpl-{i}"}
    base.update(kw)
    return AuditRecord(**base)  # type: ignore[arg-type]


def test_every_column_reads_back_as_recorded(db_url) -> None:
    engine = make_engine(db_url)
    writer = RoutingAuditWriter(engine)
    at = datetime(2026, 12, 1, 15, 4, 5, 123456)
    sensitive = record(1, sensitive=True, reasons=["detector", "ünlü"], finding_kinds=["iban", "tckn"],
                       finding_spans=[["iban", 3, 29], ["tckn", 40, 51]], rule_id="pii", backends=["loc", "loc2"],
                       decision="rule:pii", at=at)
    refused = record(2, backends=[], decision="no_local_backend", status=503)
    writer.record(sensitive)
    writer.record(refused)  # no loop running: written at once
    with engine.connect() as conn:
        rows = {r.request_id: r for r in conn.execute(select(RoutingAudit))}
    engine.dispose()
    got = rows["chatcmpl-1"]
    assert (got.sensitive, got.reasons, got.finding_kinds, got.rule_id, got.backends, got.decision, got.status) == (
        True, ["detector", "ünlü"], ["iban", "tckn"], "pii", ["loc", "loc2"], "rule:pii", 200)
    assert got.finding_spans == [["iban", 3, 29], ["tckn", 40, 51]] and got.at == at
    assert got.entry_id == sensitive.entry_id and len(got.entry_id) == 32
    other = rows["chatcmpl-2"]
    assert (other.sensitive, other.reasons, other.finding_spans, other.backends, other.status) == (
        False, [], [], [], 503)
    assert other.entry_id != got.entry_id


def test_a_batch_written_twice_is_stored_once(db_url) -> None:
    engine = make_engine(db_url)
    writer = RoutingAuditWriter(engine)
    batch = [record(i) for i in range(5)]
    writer._write(list(batch))
    writer._write(list(batch))  # e.g. retried after a commit whose answer was lost
    with engine.connect() as conn:
        n = len(conn.execute(select(RoutingAudit.id)).all())
    engine.dispose()
    assert n == 5


def _child_id(queue: multiprocessing.Queue) -> None:
    queue.put(_entry_ids())


def test_a_forked_child_draws_its_own_ids() -> None:
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    mine = _entry_ids()
    child = ctx.Process(target=_child_id, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(30)
    assert mine[:16] != theirs[:16]  # a different prefix: the two counters cannot collide
