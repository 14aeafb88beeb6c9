"""Usage rows keep the OpenAI error code the client got (issue 37), so refusals are counted by
reason (auth, quota, validation, context length, no backend, sensitive without a local backend)
in usage reports and on the tenant's page, not only by HTTP status.

Revision ID: 0014_usage_error_code
Revises: 0013_dash35_dashboard_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_usage_error_code"
down_revision = "0013_dash35_dashboard_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("usage_records", sa.Column("error_code", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("usage_records", "error_code")
