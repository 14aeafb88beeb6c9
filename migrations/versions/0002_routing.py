"""Routing rules, tenant sensitivity patterns and the routing audit.

Revision ID: 0002_routing
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_routing"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "routing_rules",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False, unique=True),
        sa.Column("match", sa.JSON, nullable=False),
        sa.Column("backend", sa.String(200), nullable=False),
        sa.Column("fallbacks", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "tenant_sensitivity",
        sa.Column("tenant_id", sa.String(32), sa.ForeignKey("tenants.id"), primary_key=True),
        sa.Column("patterns", sa.JSON, nullable=False),
        sa.Column("keywords", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "routing_audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("priority", sa.String(32), nullable=False),
        sa.Column("sensitive", sa.Boolean, nullable=False),
        sa.Column("reasons", sa.JSON, nullable=False),
        sa.Column("finding_kinds", sa.JSON, nullable=False),
        sa.Column("rule_id", sa.String(100), nullable=True),
        sa.Column("backends", sa.JSON, nullable=False),
        sa.Column("decision", sa.String(200), nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
    )
    op.create_index("ix_routing_audit_request_id", "routing_audit", ["request_id"])
    op.create_index("ix_routing_audit_tenant_at", "routing_audit", ["tenant_id", "at"])


def downgrade() -> None:
    op.drop_table("routing_audit")
    op.drop_table("tenant_sensitivity")
    op.drop_table("routing_rules")
