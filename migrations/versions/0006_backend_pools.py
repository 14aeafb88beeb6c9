"""Backend pools and their replicas (membership, drain state).

Revision ID: 0006_backend_pools
Revises: 0005_audit_finding_spans
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_backend_pools"
down_revision = "0005_audit_finding_spans"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backend_pools",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("api_key", sa.Text, nullable=True),
        sa.Column("tokenizer", sa.String(500), nullable=True),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("load_factor", sa.Float, nullable=False),
        sa.Column("max_kv_usage", sa.Float, nullable=False),
        sa.Column("load_slack", sa.Integer, nullable=False),
        sa.Column("block_size", sa.Integer, nullable=False),
        sa.Column("affinity_blocks", sa.Integer, nullable=False),
        sa.Column("input_cost_per_mtok", sa.Float, nullable=False),
        sa.Column("output_cost_per_mtok", sa.Float, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "pool_replicas",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("pool_id", sa.String(32), sa.ForeignKey("backend_pools.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("base_url", sa.String(500), nullable=False),
        sa.Column("api_key", sa.Text, nullable=True),
        sa.Column("draining", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("pool_id", "name", name="uq_pool_replica_name"),
    )
    op.create_index("ix_pool_replicas_pool_id", "pool_replicas", ["pool_id"])


def downgrade() -> None:
    op.drop_index("ix_pool_replicas_pool_id", "pool_replicas")
    op.drop_table("pool_replicas")
    op.drop_table("backend_pools")
