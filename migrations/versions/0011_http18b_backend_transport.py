"""How a backend is reached: a proxy URL (encrypted: it may carry a password), TLS settings
(verify flag, CA bundle, client certificate and key paths), extra headers (encrypted: they may
be credentials) and query parameters, the header the API key goes in, and a response size cap
(backends/http_transport.py).

Revision ID: 0011_http18b_backend_transport
Revises: 0010_advise_usage_signals
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_http18b_backend_transport"
down_revision = "0010_advise_usage_signals"
branch_labels = None
depends_on = None

COLUMNS = (
    ("proxy_url", sa.Text()),
    ("ca_bundle", sa.String(1000)),
    ("client_cert", sa.String(1000)),
    ("client_key", sa.String(1000)),
    ("extra_headers", sa.Text()),
    ("extra_query", sa.JSON()),
    ("auth_header", sa.String(100)),
    ("max_response_bytes", sa.BigInteger()),
)


def upgrade() -> None:
    with op.batch_alter_table("backends") as batch:  # batch: SQLite cannot alter in place
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
        batch.add_column(sa.Column("tls_verify", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("backends") as batch:
        batch.drop_column("tls_verify")
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
