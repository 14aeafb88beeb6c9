"""Tenants: `prefix_cache_group`, the admin opt-in to share cached prefixes between tenants.

Revision ID: 0003_prefix_cache_group
Revises: 0002_routing
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_prefix_cache_group"
down_revision = "0002_routing"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:  # batch: SQLite cannot alter in place
        batch.add_column(sa.Column("prefix_cache_group", sa.String(100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("prefix_cache_group")
