"""Tables of the routing issue, on the gateway's one declarative `Base`.

`routing_rules`: the ordered rule list (`position`), replaced as a whole by PUT /admin/routes.
`tenant_sensitivity`: a tenant's own patterns and keywords for the PII detectors.
`routing_audit`: one row per routing decision: what was decided and why (rule id, sensitivity
reasons, detector kinds) — never prompt text or matched values.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from fairgate.gateway.store.tables import Base, utcnow
from fairgate.policies.detection_options import DetectionOptions

OPTION_FIELDS = ("strict_names", "legal_person_data", "institutional_contacts")


class RoutingRuleRow(Base):
    __tablename__ = "routing_rules"
    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, unique=True)
    match: Mapped[dict[str, Any]] = mapped_column(JSON)
    backend: Mapped[str] = mapped_column(String(200))
    fallbacks: Mapped[list[str]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TenantSensitivity(Base):
    __tablename__ = "tenant_sensitivity"
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id"), primary_key=True)
    patterns: Mapped[list[str]] = mapped_column(JSON)
    keywords: Mapped[list[str]] = mapped_column(JSON)
    # detection options (policies.detection_options), NULL: the default
    strict_names: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    legal_person_data: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    institutional_contacts: Mapped[bool | None] = mapped_column(Boolean, nullable=True)

    def options(self) -> DetectionOptions:
        """The tenant's detection options, defaults where unset."""
        given = {f: getattr(self, f) for f in OPTION_FIELDS if getattr(self, f) is not None}
        return DetectionOptions(**given)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow)


class RoutingAudit(Base):
    __tablename__ = "routing_audit"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    tenant_id: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(200))
    priority: Mapped[str] = mapped_column(String(32))
    sensitive: Mapped[bool] = mapped_column(Boolean)
    reasons: Mapped[list[str]] = mapped_column(JSON)  # e.g. ["detector"], ["tenant:local_only"]
    finding_kinds: Mapped[list[str]] = mapped_column(JSON)  # e.g. ["iban", "tckn"]
    # [[kind, start, end], ...] in the request's joined texts: where, never what
    finding_spans: Mapped[list[list[Any]] | None] = mapped_column(JSON, nullable=True)
    rule_id: Mapped[str | None] = mapped_column(String(100), nullable=True)
    backends: Mapped[list[str]] = mapped_column(JSON)  # candidates in order; [] when rejected
    decision: Mapped[str] = mapped_column(String(200))  # "rule:<id>", "model:<name>" or the error code
    status: Mapped[int] = mapped_column(Integer)  # 200 routed, else the error's HTTP status
    # Made by the writer: a batch retried after a commit whose answer was lost inserts nothing twice.
    entry_id: Mapped[str | None] = mapped_column(String(32), nullable=True, unique=True, index=True)

    __table_args__ = (Index("ix_routing_audit_tenant_at", "tenant_id", "at"),)
