"""Routing audit: `finding_spans`, where in the request each detector finding sat (kind and
offsets, never the text).

Revision ID: 0005_audit_finding_spans
Revises: 0004_row_safety
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_audit_finding_spans"
down_revision = "0004_row_safety"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("routing_audit") as batch:  # batch: SQLite cannot alter in place
        batch.add_column(sa.Column("finding_spans", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("routing_audit") as batch:
        batch.drop_column("finding_spans")
