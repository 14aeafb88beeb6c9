"""The admin token made on first start, stored as its hash only.

Revision ID: 0009_dash20_admin_credentials
Revises: 0008_secrets_encrypt_keys
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_dash20_admin_credentials"
down_revision = "0008_secrets_encrypt_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "admin_credentials",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("admin_credentials")
