"""Routing configuration in the database, and the Router built from it.

Every replica rebuilds its Router whenever the gateway's config version moves (an admin change
on any replica; see gateway.config.registry), so a saved rule list takes effect everywhere without a
restart. If the configuration cannot be read, the Router fails closed: every request counts as
sensitive, so nothing reaches an external API on a half-loaded configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from fairgate.gateway.observability.routing_audit import RoutingAuditWriter
from fairgate.gateway.request.classification import classifier_for
from fairgate.gateway.request.routing import Router, TenantDetectors
from fairgate.gateway.store.routing_tables import RoutingRuleRow, TenantSensitivity
from fairgate.policies.routing import Rule
from fairgate.policies.routing_schema import parse_rules, rule_to_dict

if TYPE_CHECKING:
    from fairgate.gateway.config.state import ConfigState

log = logging.getLogger("fairgate.routing")


@dataclass(slots=True)
class RoutingConfig:
    rules: list[Rule] = field(default_factory=list)
    tenants: dict[str, TenantDetectors] = field(default_factory=dict)


def read_rules(s: Session) -> list[Rule]:
    rows = s.scalars(select(RoutingRuleRow).order_by(RoutingRuleRow.position))
    return parse_rules([{"id": r.id, "match": r.match, "backend": r.backend, "fallbacks": r.fallbacks}
                        for r in rows])


def write_rules(s: Session, rules: list[Rule]) -> None:
    """Replace the whole ordered list (inside the caller's transaction)."""
    s.execute(delete(RoutingRuleRow))
    s.flush()
    for i, rule in enumerate(rules):
        d = rule_to_dict(rule)
        s.add(RoutingRuleRow(id=d["id"], position=i, match=d["match"], backend=d["backend"],
                             fallbacks=d["fallbacks"]))


def load_config(sessions: sessionmaker[Session]) -> RoutingConfig:
    with sessions() as s:
        rules = read_rules(s)
        tenants = {
            t.tenant_id: TenantDetectors(tuple(t.patterns or ()), tuple(t.keywords or ()), t.options())
            for t in s.scalars(select(TenantSensitivity))
        }
    return RoutingConfig(rules, tenants)


def build_router(state: ConfigState, aliases: Mapping[str, str] | None = None) -> Router:
    """The Router for `state.backends` with the stored rules (a short synchronous read, done
    only when the configuration changed). Keeps one audit writer per app across rebuilds."""
    audit = state.routing_audit
    if audit is None:
        audit = state.routing_audit = RoutingAuditWriter(state.db)
    try:
        config = load_config(state.sessions)
    except Exception as exc:  # noqa: BLE001 - fail closed, keep serving local traffic
        log.error("routing configuration could not be loaded (%s); treating all requests as "
                  "sensitive until it can", type(exc).__name__)
        return Router(dict(state.backends), dict(aliases or {}), audit=audit, fail_closed=True,
                      classifier=classifier_for(state))
    return Router(dict(state.backends), dict(aliases or {}), rules=config.rules,
                  tenants=config.tenants, audit=audit, classifier=classifier_for(state))
