"""Usage rows keep what `fairgate advise` reads: route, prompt version (cached prompt tokens: 0007),
hashes of the prompt's head (never text) and the complexity score.

Revision ID: 0010_advise_usage_signals
Revises: 0009_dash20_admin_credentials
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_advise_usage_signals"
down_revision = "0009_dash20_admin_credentials"
branch_labels = None
depends_on = None

COLUMNS = (
    ("route", sa.String(64)),
    ("prompt_version", sa.String(64)),
    ("prefix_hash", sa.String(16)),
    ("prefix_shape", sa.String(16)),
    ("complexity", sa.Float()),
)


def upgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:  # batch: SQLite cannot alter in place
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("usage_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
