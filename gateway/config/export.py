"""`fairgate export`: the database's configuration as a declarative file (gateway/config/declarative.py).

Secrets are never written: a backend's or pool's API key becomes `${ENV:FAIRGATE_SECRET_<NAME>}`
(a backend's extra header values and a proxy URL with a password likewise) and the export says
which variables to set before applying it elsewhere. Applying the export
to the database it came from (with those variables set to the keys) changes nothing.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from fairgate.gateway.admin.schemas import QuotaSet
from fairgate.gateway.config.apply import pool_state
from fairgate.gateway.config.declarative import BACKEND_KEYS, TENANT_KEYS, SensitivityDecl
from fairgate.gateway.config.routing_store import read_rules
from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.routing_tables import TenantSensitivity
from fairgate.gateway.store.tables import BackendRow, QuotaPolicy, Tenant
from fairgate.policies.routing_schema import rule_to_dict


def secret_ref(*names: str) -> str:
    var = "FAIRGATE_SECRET_" + re.sub(r"[^A-Za-z0-9]+", "_", "_".join(names)).strip("_").upper()
    return "${ENV:" + var + "}"


def export_config(s: Session) -> tuple[dict[str, Any], list[str]]:
    """The declarative mapping and the environment variables its secrets refer to."""
    env: list[str] = []

    def secret(value: str | None, *names: str) -> str | None:
        if not value:
            return None
        ref = secret_ref(*names)
        env.append(ref[6:-1])
        return ref

    backends = []
    for b in s.scalars(select(BackendRow).order_by(BackendRow.name)):
        item = {k: getattr(b, k) for k in BACKEND_KEYS}
        item["api_key"] = secret(b.api_key, b.name)
        if b.proxy_url and urlsplit(b.proxy_url).password is not None:  # a password: like a key
            item["proxy_url"] = secret(b.proxy_url, b.name, "proxy_url")
        if b.extra_headers:
            item["extra_headers"] = {h: secret(v, b.name, "header", h) or "" for h, v in b.extra_headers.items()}
        backends.append(item)
    pools = []
    for name in s.scalars(select(PoolRow.name).order_by(PoolRow.name)):
        item = pool_state(s, name) or {}
        item["api_key"] = secret(item.get("api_key"), name)
        for r in item.get("replicas", []):
            r["api_key"] = secret(r.get("api_key"), name, r["name"])
        pools.append(item)
    tenants = []
    for t in s.scalars(select(Tenant).order_by(Tenant.name)):
        item = {k: getattr(t, k) for k in TENANT_KEYS}
        q = s.scalars(select(QuotaPolicy).where(QuotaPolicy.tenant_id == t.id, QuotaPolicy.key_id.is_(None))).first()
        if q is not None:
            item["quota"] = {f: getattr(q, f) for f in QuotaSet.model_fields}
        sens = s.get(TenantSensitivity, t.id)
        if sens is not None:
            item["sensitivity"] = {f: getattr(sens, f) for f in SensitivityDecl.model_fields}
        tenants.append(item)
    routes = [rule_to_dict(r) for r in read_rules(s)]
    return {"backends": backends, "pools": pools, "tenants": tenants, "routes": routes}, env


def export_yaml(s: Session) -> str:
    data, env = export_config(s)
    head = "# fairgate export: apply with `fairgate apply -f FILE`\n"
    if env:
        head += "# set before applying: " + ", ".join(env) + "\n"
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
