"""Quarantine for rows the database refused; 64-bit quota limits; an idempotency key for
routing audit rows.

Revision ID: 0004_row_safety
Revises: 0003_prefix_cache_group
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_row_safety"
down_revision = "0003_prefix_cache_group"
branch_labels = None
depends_on = None

LIMITS = ("requests_per_minute", "tokens_per_minute", "max_concurrent", "daily_tokens", "monthly_tokens",
          "max_tokens_per_request")


def upgrade() -> None:
    op.create_table(
        "quarantined_rows",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("row_key", sa.String(64), nullable=True),
        sa.Column("error", sa.String(500), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
    )
    with op.batch_alter_table("quota_policies") as batch:  # batch: SQLite cannot alter in place
        for name in LIMITS:
            batch.alter_column(name, type_=sa.BigInteger, existing_type=sa.Integer, existing_nullable=True)
    with op.batch_alter_table("routing_audit") as batch:
        batch.add_column(sa.Column("entry_id", sa.String(32), nullable=True))
        batch.create_index("ix_routing_audit_entry_id", ["entry_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("routing_audit") as batch:
        batch.drop_index("ix_routing_audit_entry_id")
        batch.drop_column("entry_id")
    with op.batch_alter_table("quota_policies") as batch:
        for name in LIMITS:
            batch.alter_column(name, type_=sa.Integer, existing_type=sa.BigInteger, existing_nullable=True)
    op.drop_table("quarantined_rows")
