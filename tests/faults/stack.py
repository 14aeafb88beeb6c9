"""A gateway over real PostgreSQL and Redis for fault scenarios, each reachable through a
`TcpProxy` so a scenario can cut the database or Redis and bring it back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis

from fairgate.gateway.store.db import upgrade
from fairgate.gateway.store.routing_tables import RoutingAudit
from fairgate.gateway.store.tables import UsageRecord
from tests.gateway.harness import (
    REDIS_URL,
    Admin,
    GatewayThread,
    gateway_and_admin,
    pg_database,
    redis_prefix,
)
from tests.helpers.rows import count, wait_for
from tests.helpers.tcp_proxy import TcpProxy


@dataclass(slots=True)
class Stack:
    gw: GatewayThread
    admin: Admin
    db_url: str  # direct, for counting
    prefix: str
    db_proxy: TcpProxy
    redis_proxy: TcpProxy

    def tenant_key(self, **quota: Any) -> tuple[str, str]:
        t = self.admin.tenant()
        if quota:
            self.admin.quota(t["id"], **quota)
        return t["id"], self.admin.key(t["id"])["key"]

    def settle_writers(self, timeout: float = 60) -> None:
        """Wait until every request this gateway admitted has handed over its usage row (a client
        can hold its answer before the gateway settles and records it) and every usage and audit
        row is in the database."""
        st = self.gw.state
        wait_for(lambda: st.usage.open.out == 0, timeout, "requests still open (usage not recorded)")
        wait_for(lambda: st.usage.pending_rows() == 0 and st.usage.db_up, timeout)
        wait_for(lambda: st.routing_audit.pending == 0, timeout)
        assert self.gw.call(st.usage.flush(timeout), timeout + 5)

    def usage_rows(self, *tenants: str) -> int:
        return count(self.db_url, UsageRecord, UsageRecord.tenant_id.in_(tenants))

    def audit_lost(self) -> int:
        writer = self.gw.state.routing_audit
        return writer.recorded - writer.quarantined - count(self.db_url, RoutingAudit)

    def leaked(self, *tenants: str) -> int:
        """Concurrency slots still counted, plus reservations never settled."""
        held = sum(self.gw.call(self.gw.state.quota.counters(f"t:{t}"))["concurrent"] for t in tenants)
        r = redis.Redis.from_url(REDIS_URL)
        try:
            return held + len(list(r.scan_iter(f"{self.prefix}:r:*")))
        finally:
            r.close()


@contextlib.contextmanager
def stack(upstream: Any, tmp_path: Any, **overrides: Any) -> Iterator[Stack]:
    with contextlib.ExitStack() as es:
        db = es.enter_context(pg_database())
        upgrade(db)
        prefix = es.enter_context(redis_prefix())
        db_proxy = es.enter_context(TcpProxy("127.0.0.1", 5432))
        redis_proxy = es.enter_context(TcpProxy("127.0.0.1", 6379))
        gw, admin = es.enter_context(gateway_and_admin(
            db.replace(":5432/", f":{db_proxy.port}/"), redis_url=f"redis://127.0.0.1:{redis_proxy.port}/0",
            redis_prefix=prefix, embedded_engine=False, usage_flush_interval_s=0.02,
            usage_journal_path=str(tmp_path / "usage.journal"), **overrides))
        admin.backend("up", upstream.base_url, model="up-model", kind="local")
        yield Stack(gw, admin, db, prefix, db_proxy, redis_proxy)
