"""The gateway's tables, on one declarative `Base` that other modules add their tables to.

Ids are short hex strings made by the application, so rows can be created the same way on
SQLite and PostgreSQL. API keys are stored only as a SHA-256 hash plus a short visible prefix.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from fairgate.gateway.store.secret_box import SecretJSON, SecretText


def new_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """Now in UTC, naive (stored naive, always UTC). `combine` of the aware value's date and
    time is `replace(tzinfo=None)` at half its cost (a keyword replace is slow; every usage row
    asks)."""
    now = datetime.now(UTC)
    return datetime.combine(now.date(), now.time())


class Base(DeclarativeBase):
    pass


class Tenant(Base):
    __tablename__ = "tenants"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    priority_ceiling: Mapped[str] = mapped_column(String(32), default="standard")
    default_priority: Mapped[str] = mapped_column(String(32), default="standard")
    data_residency: Mapped[str] = mapped_column(String(32), default="any")  # any | local_only
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)
    # Admin opt-in: tenants in the same group share cached prefixes (NULL: the tenant's own cache).
    prefix_cache_group: Mapped[str | None] = mapped_column(String(100), nullable=True)


class ApiKey(Base):
    __tablename__ = "api_keys"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str | None] = mapped_column(String(200), nullable=True)
    default_priority: Mapped[str | None] = mapped_column(String(32), nullable=True)
    priority_ceiling: Mapped[str | None] = mapped_column(String(32), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class QuotaPolicy(Base):
    """Limits for a tenant (key_id NULL) or for one key; NULL limit = unlimited. BIGINT: a
    realistic monthly budget (3e9 tokens) does not fit a 32-bit column."""

    __tablename__ = "quota_policies"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    key_id: Mapped[str | None] = mapped_column(ForeignKey("api_keys.id"), nullable=True)
    requests_per_minute: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    tokens_per_minute: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    max_concurrent: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    daily_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    monthly_tokens: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    monthly_cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_tokens_per_request: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    allowed_models: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class PriorityClass(Base):
    __tablename__ = "priority_classes"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer, unique=True)  # 0 = highest
    description: Mapped[str | None] = mapped_column(Text, nullable=True)


class BackendRow(Base):
    """A registered backend. `api_key` is a credential: never logged, never returned."""

    __tablename__ = "backends"
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)  # the model name clients use
    kind: Mapped[str] = mapped_column(String(32), default="openai")  # openai | local
    base_url: Mapped[str] = mapped_column(String(500))
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)  # upstream's name
    api_key: Mapped[str | None] = mapped_column(SecretText, nullable=True)  # encrypted at rest
    input_cost_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    output_cost_per_mtok: Mapped[float] = mapped_column(Float, default=0.0)
    # The hardware's price per hour (NULL: none; the list prices above then make the cost).
    hourly_cost_usd: Mapped[float | None] = mapped_column(Float, nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # How the upstream is reached (0011; backends/http_transport.py). The proxy URL may carry a
    # password and header values may be credentials: both encrypted like the API key.
    proxy_url: Mapped[str | None] = mapped_column(SecretText, nullable=True)  # NULL: the environment's
    tls_verify: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    ca_bundle: Mapped[str | None] = mapped_column(String(1000), nullable=True)  # PEM file paths
    client_cert: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    client_key: Mapped[str | None] = mapped_column(String(1000), nullable=True)
    extra_headers: Mapped[dict[str, str] | None] = mapped_column(SecretJSON, nullable=True)
    extra_query: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    auth_header: Mapped[str | None] = mapped_column(String(100), nullable=True)  # NULL: Authorization: Bearer
    max_response_bytes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)  # NULL: 64 MiB


class UsageRecord(Base):
    """One row per admitted request; the request id as primary key makes the write idempotent."""

    __tablename__ = "usage_records"
    request_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(String(32))
    key_prefix: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    backend: Mapped[str | None] = mapped_column(String(200), nullable=True)
    priority: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))  # finished|cancelled|disconnected|failed
    stream: Mapped[bool] = mapped_column(Boolean, default=False)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    total_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # prompt tokens served from a prefix cache: no prefill computed, so no engine time charged
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    usage_estimated: Mapped[bool] = mapped_column(Boolean, default=False)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    http_status: Mapped[int] = mapped_column(Integer, default=200)
    ttft_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    # What `fairgate advise` reads (0010; cached_tokens above too): the API route, the prompt
    # version label, hashes of the prompt's head (policies.prompt_layout, never text) and the
    # complexity score a smaller model is judged by.
    route: Mapped[str | None] = mapped_column(String(64), nullable=True)
    prompt_version: Mapped[str | None] = mapped_column(String(64), nullable=True)
    prefix_hash: Mapped[str | None] = mapped_column(String(16), nullable=True)
    prefix_shape: Mapped[str | None] = mapped_column(String(16), nullable=True)
    complexity: Mapped[float | None] = mapped_column(Float, nullable=True)
    # the OpenAI error code the client got (refusals by reason: observability/refusals.py)
    error_code: Mapped[str | None] = mapped_column(String(64), nullable=True)

    __table_args__ = (Index("ix_usage_tenant_created", "tenant_id", "created_at"),
                      Index("ix_usage_created", "created_at", "request_id"))


class AuditEntry(Base):
    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    actor: Mapped[str] = mapped_column(String(64), default="admin")
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[str] = mapped_column(String(200))
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class AdminCredential(Base):
    """The admin token made on first start (no FAIRGATE_ADMIN_TOKEN): only its SHA-256 is kept.
    The fixed name is the primary key, so replicas starting together create it once."""

    __tablename__ = "admin_credentials"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)  # "admin"
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class DashboardSession(Base):
    """A signed-in dashboard session. The signed cookie carries a random session id; the row keeps
    only its SHA-256, and logout deletes the row, so a cookie replayed afterwards is refused on
    every replica. Rows past `expires_at` (the cookie's own lifetime) are swept at each sign-in."""

    __tablename__ = "dashboard_sessions"
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    role: Mapped[str] = mapped_column(String(16))  # admin | tenant
    key_id: Mapped[str | None] = mapped_column(String(32), nullable=True)  # a tenant session's key
    expires_at: Mapped[datetime] = mapped_column(DateTime, index=True)
