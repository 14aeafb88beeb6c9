"""Gateway tables: tenants, API keys, quota policies, priority classes, backends, usage, audit.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("priority_ceiling", sa.String(32), nullable=False),
        sa.Column("default_priority", sa.String(32), nullable=False),
        sa.Column("data_residency", sa.String(32), nullable=False),
        sa.Column("disabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(32), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("prefix", sa.String(32), nullable=False, unique=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("default_priority", sa.String(32), nullable=True),
        sa.Column("priority_ceiling", sa.String(32), nullable=True),
        sa.Column("revoked_at", sa.DateTime, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_api_keys_tenant_id", "api_keys", ["tenant_id"])
    op.create_table(
        "quota_policies",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant_id", sa.String(32), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("key_id", sa.String(32), sa.ForeignKey("api_keys.id"), nullable=True),
        sa.Column("requests_per_minute", sa.Integer, nullable=True),
        sa.Column("tokens_per_minute", sa.Integer, nullable=True),
        sa.Column("max_concurrent", sa.Integer, nullable=True),
        sa.Column("daily_tokens", sa.Integer, nullable=True),
        sa.Column("monthly_tokens", sa.Integer, nullable=True),
        sa.Column("monthly_cost", sa.Float, nullable=True),
        sa.Column("max_tokens_per_request", sa.Integer, nullable=True),
        sa.Column("allowed_models", sa.JSON, nullable=True),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_quota_policies_tenant_id", "quota_policies", ["tenant_id"])
    prio = op.create_table(
        "priority_classes",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("rank", sa.Integer, nullable=False, unique=True),
        sa.Column("description", sa.Text, nullable=True),
    )
    op.bulk_insert(prio, [
        {"name": "interactive", "rank": 0, "description": "latency-sensitive, served first"},
        {"name": "standard", "rank": 1, "description": "default"},
        {"name": "batch", "rank": 2, "description": "throughput work; never starved"},
    ])
    op.create_table(
        "backends",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("base_url", sa.String(500), nullable=False),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("api_key", sa.Text, nullable=True),
        sa.Column("input_cost_per_mtok", sa.Float, nullable=False),
        sa.Column("output_cost_per_mtok", sa.Float, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "usage_records",
        sa.Column("request_id", sa.String(64), primary_key=True),
        sa.Column("tenant_id", sa.String(32), nullable=False),
        sa.Column("key_prefix", sa.String(32), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("backend", sa.String(200), nullable=True),
        sa.Column("priority", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("stream", sa.Boolean, nullable=False),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("total_tokens", sa.Integer, nullable=False),
        sa.Column("usage_estimated", sa.Boolean, nullable=False),
        sa.Column("cost", sa.Float, nullable=False),
        sa.Column("http_status", sa.Integer, nullable=False),
        sa.Column("ttft_ms", sa.Float, nullable=True),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_usage_tenant_created", "usage_records", ["tenant_id", "created_at"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", sa.DateTime, nullable=False),
        sa.Column("actor", sa.String(64), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(200), nullable=False),
        sa.Column("detail", sa.JSON, nullable=True),
    )


def downgrade() -> None:
    for table in ("audit_log", "usage_records", "backends", "priority_classes",
                  "quota_policies", "api_keys", "tenants"):
        op.drop_table(table)
