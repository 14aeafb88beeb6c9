"""Migrations build the tables the models describe, on SQLite and PostgreSQL, via
`fairgate db upgrade`; running them twice changes nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from fairgate.gateway.store.db import make_engine, upgrade
from fairgate.gateway.store.tables import Base
from tests.gateway.harness import ROOT, pg_database

MINE = {"tenants", "api_keys", "quota_policies", "priority_classes", "backends", "usage_records", "audit_log"}


def _check(url: str) -> None:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert MINE <= set(inspect(conn).get_table_names())
            diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
            mine = [d for d in diffs if any(t in repr(d) for t in (f"'{n}'" for n in MINE))
                    and not (isinstance(d, tuple) and d[0] == "remove_table")]
            assert mine == []
            prios = conn.execute(text("SELECT name FROM priority_classes ORDER BY rank")).scalars().all()
            assert prios == ["interactive", "standard", "batch"]
    finally:
        engine.dispose()


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_cli_upgrade_builds_the_models_tables(tmp_path, db):
    import contextlib

    with contextlib.ExitStack() as es:
        url = es.enter_context(pg_database()) if db == "postgres" else f"sqlite:///{tmp_path}/m.db"
        out = subprocess.run([sys.executable, "-m", "fairgate.gateway.cli", "db", "upgrade"], cwd=ROOT, capture_output=True,
                             text=True, env={"FAIRGATE_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        _check(url)
        upgrade(url)  # idempotent
        _check(url)
