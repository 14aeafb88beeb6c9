"""A tenant's personal-data detection options beside its own patterns (issue 33): whether a name
alone is personal (strict, the default), and whether a company's identifiers and an institution's
contact points count as personal (not, by default). NULL: the default.

Revision ID: 0012_tenant_detection_options
Revises: 0011_http18b_backend_transport
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_tenant_detection_options"
down_revision = "0011_http18b_backend_transport"
branch_labels = None
depends_on = None

COLUMNS = ("strict_names", "legal_person_data", "institutional_contacts")


def upgrade() -> None:
    with op.batch_alter_table("tenant_sensitivity") as batch:  # batch: SQLite cannot alter in place
        for name in COLUMNS:
            batch.add_column(sa.Column(name, sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tenant_sensitivity") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
