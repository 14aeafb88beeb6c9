"""Database engine, sessions and migrations (`fairgate db upgrade`; `serve` runs it too).

The gateway uses synchronous SQLAlchemy from worker threads: admin calls and usage batches are
few and off the hot path, and one code path then serves SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.orm import Session, sessionmaker

from fairgate import migrations
from fairgate.gateway.store.secret_box import SecretBox, attach, box_from_settings


def make_engine(url: str, secrets: SecretBox | None = None) -> Engine:
    """An engine for `url`; `secrets` encrypts and decrypts its upstream-key columns."""
    engine = _engine(url)
    attach(engine, secrets)
    return engine


def _engine(url: str) -> Engine:
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
            # WAL lets the usage writer and admin calls proceed while readers read
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: no fsync per commit (usage batches), still never a corrupt file
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str):  # type: ignore[no-untyped-def]
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "heads", secrets: SecretBox | None = None) -> None:
    """Apply every migration up to `revision` on the database at `url` (`secrets`: the key that
    migration 0008 encrypts stored upstream keys with)."""
    from alembic import command

    engine = make_engine(url, secrets)
    try:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                # replicas starting together must not run the same migration twice
                conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7261001)")
            refuse_plaintext_without_key(conn, secrets)
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        engine.dispose()


SECRET_COLUMNS = (("backends", "api_key"), ("backend_pools", "api_key"), ("pool_replicas", "api_key"))


def refuse_plaintext_without_key(conn: Connection, secrets: SecretBox | None) -> None:
    """Stop before any migration runs when stored upstream keys are plaintext and no secrets key is
    set: SQLite commits DDL as it goes, so failing inside migration 0008 would leave the earlier
    ones applied but unrecorded."""
    from fairgate.gateway.settings import Settings

    if secrets is not None or box_from_settings(Settings()) is not None:
        return
    present = set(inspect(conn).get_table_names())
    for table, column in SECRET_COLUMNS:
        if table in present and conn.execute(text(
                f"SELECT 1 FROM {table} WHERE {column} IS NOT NULL AND {column} NOT LIKE 'fernet:%' LIMIT 1")).first():
            raise RuntimeError(f"{table}.{column} holds upstream API keys: set FAIRGATE_SECRETS_KEY (a Fernet "
                               "key) so the migration can encrypt them")


def run_db_command(args: argparse.Namespace) -> int:
    from fairgate.gateway.settings import load_settings

    settings = load_settings(args.config)
    if args.action == "upgrade":
        upgrade(settings.database_url, secrets=box_from_settings(settings))
        print("database upgraded")
    return 0
