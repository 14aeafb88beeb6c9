"""Dashboard sessions kept server-side (issue 35), so logout ends a session on every replica:
the hash of each signed-in session's id, its role and key, and when it expires.

Revision ID: 0013_dash35_dashboard_sessions
Revises: 0012_tenant_detection_options
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_dash35_dashboard_sessions"
down_revision = "0012_tenant_detection_options"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=True),
        sa.Column("expires_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_dashboard_sessions_expires_at", "dashboard_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_expires_at", "dashboard_sessions")
    op.drop_table("dashboard_sessions")
