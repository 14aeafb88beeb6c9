"""Apply a parsed declarative file to the database, and export the database in the same format.

`apply_config` runs in one transaction and returns what changed ("created backend up", ...);
an empty list means the database already matched. Every change gets an audit row; the caller
bumps the config version so every gateway replica reloads.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.pools import PoolIn, ReplicaIn, write_pool
from fairgate.gateway.admin.routes import _set_quota, audit
from fairgate.gateway.admin.schemas import backend_audit
from fairgate.gateway.config.declarative import (
    TENANT_KEYS,
    BackendDecl,
    ConfigError,
    Declared,
    TenantDecl,
)
from fairgate.gateway.config.pools_store import read_pools
from fairgate.gateway.config.routing_store import read_rules, write_rules
from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.routing_tables import TenantSensitivity
from fairgate.gateway.store.tables import BackendRow, QuotaPolicy, Tenant
from fairgate.policies.routing_schema import RuleSchemaError, parse_rules, rule_to_dict


def _sync_fields(row: Any, values: dict[str, Any]) -> bool:
    changed = False
    for f, v in values.items():
        if getattr(row, f) != v:
            setattr(row, f, v)
            changed = True
    return changed


def _apply_backends(s: Session, items: list[BackendDecl], prune: bool, out: list[str]) -> None:
    rows = {b.name: b for b in s.scalars(select(BackendRow))}
    pools = set(s.scalars(select(PoolRow.name)))
    for item in items:
        row = rows.pop(item.name, None)
        values = item.model_dump()
        if row is None:
            if item.name in pools:
                raise ConfigError(f"backends: a pool named {item.name!r} exists; pools and backends share names")
            s.add(BackendRow(**values))
            out.append(f"created backend {item.name}")
        elif _sync_fields(row, values):
            out.append(f"updated backend {item.name}")
        else:
            continue
        audit(s, "apply.backend", "backend", item.name, backend_audit(item.model_dump()))
    for gone in rows.values() if prune else ():
        s.delete(gone)
        out.append(f"deleted backend {gone.name}")


def pool_state(s: Session, name: str) -> dict[str, Any] | None:
    """A pool as its declaration would read (secrets included: only to compare)."""
    for cfg in read_pools(s, enabled_only=False):
        if cfg.row.name == name:
            body = {f: getattr(cfg.row, f) for f in PoolIn.model_fields if f != "replicas"}
            members = [ReplicaIn(name=r.name, base_url=r.base_url, api_key=_own_key(r.api_key, cfg.row.api_key))
                       for r in cfg.replicas]
            return PoolIn(**body, replicas=members).model_dump()
    return None


def _own_key(replica_key: str | None, pool_key: str | None) -> str | None:
    return None if replica_key == pool_key else replica_key  # read_pools folds the pool's key in


def _apply_pools(s: Session, items: list[PoolIn], prune: bool, out: list[str]) -> None:
    names = set(s.scalars(select(PoolRow.name)))
    for item in items:
        before = pool_state(s, item.name)
        if before == item.model_dump():
            continue
        try:
            write_pool(s, item)
        except WireError as exc:
            raise ConfigError(f"pools: {exc.message}") from None
        out.append(f"{'created' if before is None else 'updated'} pool {item.name}")
        audit(s, "apply.pool", "pool", item.name, {"replicas": [r.name for r in item.replicas]})
    for gone in (names - {p.name for p in items}) if prune else ():
        row = s.scalars(select(PoolRow).where(PoolRow.name == gone)).one()
        s.delete(row)
        out.append(f"deleted pool {gone}")


def _apply_tenants(s: Session, items: list[TenantDecl], prune: bool, out: list[str]) -> None:
    rows = {t.name: t for t in s.scalars(select(Tenant))}
    for item in items:
        values = item.model_dump(include=set(TENANT_KEYS))
        row = rows.pop(item.name, None)
        did = ""
        if row is None:
            row = Tenant(**values)
            s.add(row)
            s.flush()
            did = "created"
        elif _sync_fields(row, values):
            did = "updated"
        if item.quota is not None and _quota_differs(s, row.id, item.quota.model_dump()):
            _set_quota(s, row.id, None, item.quota)
            did = did or "updated"
        if item.sensitivity is not None and _sync_sensitivity(s, row.id, item.sensitivity.model_dump()):
            did = did or "updated"
        if did:
            out.append(f"{did} tenant {item.name}")
            detail = item.model_dump(mode="json", exclude={"sensitivity"})
            if item.sensitivity is not None:  # counts only: patterns may describe confidential projects
                sens = item.sensitivity
                detail["sensitivity"] = {"patterns": len(sens.patterns), "keywords": len(sens.keywords),
                                         **sens.model_dump(exclude={"patterns", "keywords"})}
            audit(s, "apply.tenant", "tenant", row.id, detail)
    for gone in rows.values() if prune else ():
        if not gone.disabled:
            gone.disabled = True
            out.append(f"disabled tenant {gone.name}")


def _sync_sensitivity(s: Session, tenant_id: str, wanted: dict[str, Any]) -> bool:
    """The tenant's patterns, keywords and detection options as declared; whether they changed."""
    row = s.get(TenantSensitivity, tenant_id)
    if row is None:
        row = TenantSensitivity(tenant_id=tenant_id, patterns=[], keywords=[])
        s.add(row)
    elif all(getattr(row, f) == v for f, v in wanted.items()):
        return False
    for f, v in wanted.items():
        setattr(row, f, v)
    return True


def _quota_differs(s: Session, tenant_id: str, wanted: dict[str, Any]) -> bool:
    p = s.scalars(select(QuotaPolicy).where(QuotaPolicy.tenant_id == tenant_id, QuotaPolicy.key_id.is_(None))).first()
    return p is None or any(getattr(p, f) != v for f, v in wanted.items())


def _apply_routes(s: Session, items: list[dict[str, Any]], out: list[str]) -> None:
    try:
        rules = parse_rules(items)
    except RuleSchemaError as exc:
        raise ConfigError(f"routes: {exc}") from None
    if [rule_to_dict(r) for r in read_rules(s)] != [rule_to_dict(r) for r in rules]:
        write_rules(s, rules)
        out.append(f"replaced routes ({len(rules)} rules)")


def _apply_prices(s: Session, prices: dict[str, Any], out: list[str]) -> None:
    for name, price in prices.items():
        row: Any = (s.scalars(select(BackendRow).where(BackendRow.name == name)).first()
                    or s.scalars(select(PoolRow).where(PoolRow.name == name)).first())
        if row is None:
            raise ConfigError(f"prices.{name}: no backend or pool of that name")
        if _sync_fields(row, price):
            out.append(f"updated price of {name}")


def apply_config(s: Session, config: Declared, prune: bool = False) -> list[str]:
    """Make the database match `config` (inside the caller's transaction); what changed."""
    out: list[str] = []
    # a price entry sets the fields it names (an hourly price alone keeps the list prices)
    prices = {n: p.model_dump(exclude_unset=True) for n, p in (config.prices or {}).items()}
    # a price for an item declared here is part of that item (so a second apply sees no change)
    backends = [b.model_copy(update=prices.pop(b.name, {})) for b in config.backends or []]
    pools = [p.model_copy(update=prices.pop(p.name, {})) for p in config.pools or []]
    if config.backends is not None:
        _apply_backends(s, backends, prune, out)
    if config.pools is not None:
        _apply_pools(s, pools, prune, out)
    s.flush()
    if config.tenants is not None:
        _apply_tenants(s, config.tenants, prune, out)
    if config.routes is not None:
        _apply_routes(s, config.routes, out)
    if prices:  # prices of backends and pools this file does not declare
        s.flush()
        _apply_prices(s, prices, out)
    return out
