"""Alembic environment: runs on the connection the gateway hands over, or on sqlalchemy.url."""

from __future__ import annotations

from alembic import context

from fairgate.gateway.store.db import make_engine
from fairgate.gateway.store.tables import Base

config = context.config
target_metadata = Base.metadata


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()
