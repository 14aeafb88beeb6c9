"""Hardware prices per hour on backends and pools (the real cost, gateway/cost.py), and an
index for the per-request usage log (GET /admin/usage/requests, newest first).

Revision ID: 0007_cost20_hourly_prices
Revises: 0006_backend_pools
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_cost20_hourly_prices"
down_revision = "0006_backend_pools"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("backends", "backend_pools"):
        with op.batch_alter_table(table) as batch:  # batch: SQLite cannot alter in place
            batch.add_column(sa.Column("hourly_cost_usd", sa.Float(), nullable=True))
    op.create_index("ix_usage_created", "usage_records", ["created_at", "request_id"])


def downgrade() -> None:
    op.drop_index("ix_usage_created", table_name="usage_records")
    for table in ("backends", "backend_pools"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("hourly_cost_usd")
