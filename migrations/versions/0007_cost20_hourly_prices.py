"""Hardware prices per hour on backends and pools (the real cost, gateway/billing/cost.py), each usage
row's cached prompt tokens (no engine time charged for them), and an index for the per-request
usage log (GET /admin/usage/requests, newest first).

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
    with op.batch_alter_table("usage_records") as batch:
        batch.add_column(sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_usage_created", "usage_records", ["created_at", "request_id"])


def downgrade() -> None:
    op.drop_index("ix_usage_created", table_name="usage_records")
    with op.batch_alter_table("usage_records") as batch:
        batch.drop_column("cached_tokens")
    for table in ("backends", "backend_pools"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("hourly_cost_usd")
