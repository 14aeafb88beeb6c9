"""Admin REST API (Bearer admin token only): tenants, keys, quotas, backends, usage, audit.

Every change runs in one transaction with its audit row, then bumps the config version so
every replica reloads its cached keys and limits before its next admission.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.http_transport import DEFAULT_MAX_RESPONSE_BYTES
from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin import schemas as sch
from fairgate.gateway.admin.http import admin_route
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.config.registry import refresh_if_stale
from fairgate.gateway.request.keys import generate_key
from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.tables import (
    ApiKey,
    AuditEntry,
    BackendRow,
    QuotaPolicy,
    Tenant,
    utcnow,
)

log = logging.getLogger("fairgate.admin")
Row = TypeVar("Row")


def _iso(dt: datetime | None) -> str | None:
    return None if dt is None else dt.isoformat() + "Z"


def tenant_out(t: Tenant) -> dict[str, Any]:
    return {"id": t.id, "object": "tenant", "name": t.name, "weight": t.weight,
            "priority_ceiling": t.priority_ceiling, "default_priority": t.default_priority,
            "data_residency": t.data_residency, "disabled": t.disabled, "created_at": _iso(t.created_at),
            "prefix_cache_group": t.prefix_cache_group}


def key_out(k: ApiKey) -> dict[str, Any]:
    return {"id": k.id, "object": "api_key", "prefix": k.prefix, "tenant_id": k.tenant_id, "name": k.name,
            "default_priority": k.default_priority, "priority_ceiling": k.priority_ceiling,
            "revoked": k.revoked_at is not None, "created_at": _iso(k.created_at)}


def quota_out(p: QuotaPolicy | None) -> dict[str, Any]:
    fields = sch.QuotaSet.model_fields
    return {"object": "quota", **{f: (getattr(p, f) if p else None) for f in fields}}


def backend_out(b: BackendRow) -> dict[str, Any]:
    # credentials are never shown: whether a key is set, header names only, the proxy's password masked
    return {"id": b.id, "object": "backend", "name": b.name, "kind": b.kind, "base_url": b.base_url,
            "model": b.model, "has_api_key": bool(b.api_key), "input_cost_per_mtok": b.input_cost_per_mtok,
            "output_cost_per_mtok": b.output_cost_per_mtok, "hourly_cost_usd": b.hourly_cost_usd,
            "enabled": b.enabled, "proxy_url": sch.redact_url(b.proxy_url), "tls_verify": b.tls_verify is not False,
            "ca_bundle": b.ca_bundle, "client_cert": b.client_cert, "client_key": b.client_key,
            "extra_header_names": sorted(b.extra_headers or {}), "extra_query": b.extra_query or {},
            "auth_header": b.auth_header, "max_response_bytes": b.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES}


def audit(s: Session, action: str, target_type: str, target_id: str, detail: dict[str, Any] | None = None) -> None:
    s.add(AuditEntry(action=action, target_type=target_type, target_id=target_id, detail=detail))


async def body_of(request: Request, model: type[BaseModel]) -> Any:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise WireError(400, f"{where or 'body'}: {first['msg']}", "invalid_value", where) from None


async def in_tx(request: Request, fn: Callable[[Session], Any]) -> Any:
    def run() -> Any:
        with admin_state(request.app).sessions.begin() as s:
            return fn(s)

    return await asyncio.to_thread(run)


async def change(request: Request, fn: Callable[[Session], Any]) -> Any:
    """Run `fn` in one transaction, then `changed`: what every admin write does. Returns what
    `fn` returned."""
    out = await in_tx(request, fn)
    await changed(request)
    return out


async def changed(request: Request, **_: bool) -> None:
    """Tell every replica: bump the version (their key caches and registries reload), and
    rebuild here at once (backends, router, weights pushed to every engine, new ones too) so
    this replica's next request already sees the change."""
    state = admin_state(request.app)
    state.keys.clear()
    try:
        version = await state.config.bump()
        await refresh_if_stale(state, version)
    except Exception as exc:  # the change is committed: answer it, say replicas may lag
        log.error("admin change committed but the config version bump failed (%s); other replicas "
                  "see it after the next successful change", type(exc).__name__)


def found(row: Row | None, what: str) -> Row:
    """`row`, or a 404 "No <what>." where the lookup found nothing."""
    if row is None:
        raise WireError(404, f"No {what}.", "not_found")
    return row


def _tenant(s: Session, tenant_id: str) -> Tenant:
    return found(s.get(Tenant, tenant_id), f"tenant {tenant_id!r}")


def _key(s: Session, prefix: str) -> ApiKey:
    return found(s.scalars(select(ApiKey).where(ApiKey.prefix == prefix)).first(), f"key with prefix {prefix!r}")


@admin_route
async def create_tenant(request: Request) -> Any:
    body = await body_of(request, sch.TenantCreate)

    def run(s: Session) -> dict[str, Any]:
        t = Tenant(**body.model_dump())
        s.add(t)
        s.flush()
        audit(s, "tenant.create", "tenant", t.id, body.model_dump())
        return tenant_out(t)

    return 201, await change(request, run)


@admin_route
async def list_tenants(request: Request) -> Any:
    rows = await in_tx(request, lambda s: [tenant_out(t) for t in s.scalars(select(Tenant).order_by(Tenant.name))])
    return {"object": "list", "data": rows}


@admin_route
async def get_tenant(request: Request) -> Any:
    return await in_tx(request, lambda s: tenant_out(_tenant(s, request.path_params["id"])))


@admin_route
async def update_tenant(request: Request) -> Any:
    body = await body_of(request, sch.TenantUpdate)
    fields = body.model_dump(exclude_unset=True)

    def run(s: Session) -> dict[str, Any]:
        t = _tenant(s, request.path_params["id"])
        for k, v in fields.items():
            if v is not None or k in sch.TENANT_NULLABLE:
                setattr(t, k, v)
        audit(s, "tenant.update", "tenant", t.id, fields)
        return tenant_out(t)

    return await change(request, run)


@admin_route
async def disable_tenant(request: Request) -> Any:
    def run(s: Session) -> dict[str, Any]:
        t = _tenant(s, request.path_params["id"])
        t.disabled = True
        audit(s, "tenant.disable", "tenant", t.id)
        return tenant_out(t)

    return await change(request, run)


@admin_route
async def create_key(request: Request) -> Any:
    body = await body_of(request, sch.KeyCreate)
    key, prefix, digest = generate_key()

    def run(s: Session) -> dict[str, Any]:
        t = _tenant(s, request.path_params["id"])
        k = ApiKey(tenant_id=t.id, prefix=prefix, key_hash=digest, **body.model_dump())
        s.add(k)
        s.flush()
        audit(s, "key.create", "api_key", prefix, {"tenant_id": t.id, **body.model_dump()})
        return key_out(k)

    return 201, {**await change(request, run), "key": key}  # the only time the full key is ever shown


@admin_route
async def list_keys(request: Request) -> Any:
    def run(s: Session) -> list[dict[str, Any]]:
        t = _tenant(s, request.path_params["id"])
        return [key_out(k) for k in s.scalars(select(ApiKey).where(ApiKey.tenant_id == t.id))]

    return {"object": "list", "data": await in_tx(request, run)}


@admin_route
async def revoke_key(request: Request) -> Any:
    def run(s: Session) -> dict[str, Any]:
        k = _key(s, request.path_params["prefix"])
        if k.revoked_at is None:
            k.revoked_at = utcnow()
            audit(s, "key.revoke", "api_key", k.prefix, {"tenant_id": k.tenant_id})
        return key_out(k)

    return await change(request, run)


def _set_quota(s: Session, tenant_id: str, key_id: str | None, body: sch.QuotaSet) -> QuotaPolicy:
    p = s.scalars(select(QuotaPolicy).where(QuotaPolicy.tenant_id == tenant_id, (
        QuotaPolicy.key_id.is_(None) if key_id is None else QuotaPolicy.key_id == key_id))).first()
    if p is None:
        p = QuotaPolicy(tenant_id=tenant_id, key_id=key_id)
        s.add(p)
    for f, v in body.model_dump().items():
        setattr(p, f, v)
    p.updated_at = utcnow()
    s.flush()
    return p


@admin_route
async def put_tenant_quota(request: Request) -> Any:
    body = await body_of(request, sch.QuotaSet)

    def run(s: Session) -> dict[str, Any]:
        t = _tenant(s, request.path_params["id"])
        p = _set_quota(s, t.id, None, body)
        audit(s, "quota.set", "tenant", t.id, body.model_dump())
        return {**quota_out(p), "tenant_id": t.id}

    return await change(request, run)


@admin_route
async def get_tenant_quota(request: Request) -> Any:
    def run(s: Session) -> dict[str, Any]:
        t = _tenant(s, request.path_params["id"])
        p = s.scalars(select(QuotaPolicy).where(QuotaPolicy.tenant_id == t.id, QuotaPolicy.key_id.is_(None))).first()
        return {**quota_out(p), "tenant_id": t.id}

    return await in_tx(request, run)


@admin_route
async def put_key_quota(request: Request) -> Any:
    body = await body_of(request, sch.QuotaSet)

    def run(s: Session) -> dict[str, Any]:
        k = _key(s, request.path_params["prefix"])
        p = _set_quota(s, k.tenant_id, k.id, body)
        audit(s, "quota.set", "api_key", k.prefix, body.model_dump())
        return {**quota_out(p), "tenant_id": k.tenant_id, "key_prefix": k.prefix}

    return await change(request, run)


@admin_route
async def create_backend(request: Request) -> Any:
    body = await body_of(request, sch.BackendCreate)

    def run(s: Session) -> dict[str, Any]:
        if s.scalars(select(PoolRow.id).where(PoolRow.name == body.name)).first() is not None:
            raise WireError(409, f"A pool named {body.name!r} exists; pools and backends share names.", "conflict")
        b = BackendRow(**body.model_dump())
        s.add(b)
        s.flush()
        audit(s, "backend.create", "backend", b.name, sch.backend_audit(body.model_dump()))
        return backend_out(b)

    return 201, await change(request, run)


@admin_route
async def list_backends(request: Request) -> Any:
    """The rows, each with what this gateway sees live of it (its circuit breaker)."""
    rows = await in_tx(request, lambda s: [backend_out(b) for b in s.scalars(select(BackendRow))])
    return {"object": "list", "data": [with_live(request, row) for row in rows]}


def with_live(request: Request, row: dict[str, Any]) -> dict[str, Any]:
    backend = admin_state(request.app).backends.get(row["name"])
    breaker = backend.breaker if backend is not None else None
    return {**row, "live": {"breaker": breaker.snapshot()} if breaker is not None else None}


def _backend(s: Session, name: str) -> BackendRow:
    return found(s.scalars(select(BackendRow).where(BackendRow.name == name)).first(), f"backend {name!r}")


@admin_route
async def get_backend(request: Request) -> Any:
    return await in_tx(request, lambda s: backend_out(_backend(s, request.path_params["name"])))


@admin_route
async def update_backend(request: Request) -> Any:
    body = await body_of(request, sch.BackendUpdate)
    fields = body.model_dump(exclude_unset=True)
    if "name" in fields:
        raise WireError(400, "name: a backend's name cannot change (routes refer to it).", "invalid_value", "name")

    def run(s: Session) -> dict[str, Any]:
        b = _backend(s, request.path_params["name"])
        for k, v in fields.items():
            if v is not None or k in sch.BACKEND_NULLABLE:
                setattr(b, k, v)
        if b.client_key and not b.client_cert:
            raise WireError(400, "client_key: needs client_cert.", "invalid_value", "client_key")
        audit(s, "backend.update", "backend", b.name, sch.backend_audit(fields))
        return backend_out(b)

    return await change(request, run)


@admin_route
async def delete_backend(request: Request) -> Any:
    def run(s: Session) -> dict[str, Any]:
        b = found(s.scalars(select(BackendRow).where(BackendRow.name == request.path_params["name"])).first(),
                  "such backend")
        out = backend_out(b)
        s.delete(b)
        audit(s, "backend.delete", "backend", b.name)
        return out

    return await change(request, run)


@admin_route
async def list_audit(request: Request) -> Any:
    try:
        limit = min(max(int(request.query_params.get("limit", "100") or 100), 1), 1000)
    except ValueError:
        raise WireError(400, "`limit` must be an integer.", "invalid_value", "limit") from None

    def run(s: Session) -> list[dict[str, Any]]:
        rows = s.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit))
        return [{"id": a.id, "at": _iso(a.at), "actor": a.actor, "action": a.action,
                 "target_type": a.target_type, "target_id": a.target_id, "detail": a.detail} for a in rows]

    return {"object": "list", "data": await in_tx(request, run)}


def routes() -> list[Route]:
    return [
        Route("/admin/tenants", create_tenant, methods=["POST"]),
        Route("/admin/tenants", list_tenants, methods=["GET"]),
        Route("/admin/tenants/{id}", get_tenant, methods=["GET"]),
        Route("/admin/tenants/{id}", update_tenant, methods=["PATCH", "PUT"]),
        Route("/admin/tenants/{id}", disable_tenant, methods=["DELETE"]),
        Route("/admin/tenants/{id}/keys", create_key, methods=["POST"]),
        Route("/admin/tenants/{id}/keys", list_keys, methods=["GET"]),
        Route("/admin/keys/{prefix}", revoke_key, methods=["DELETE"]),
        Route("/admin/tenants/{id}/quota", put_tenant_quota, methods=["PUT"]),
        Route("/admin/tenants/{id}/quota", get_tenant_quota, methods=["GET"]),
        Route("/admin/keys/{prefix}/quota", put_key_quota, methods=["PUT"]),
        Route("/admin/backends", create_backend, methods=["POST"]),
        Route("/admin/backends", list_backends, methods=["GET"]),
        Route("/admin/backends/{name}", get_backend, methods=["GET"]),
        Route("/admin/backends/{name}", update_backend, methods=["PATCH"]),
        Route("/admin/backends/{name}", delete_backend, methods=["DELETE"]),
        Route("/admin/audit", list_audit, methods=["GET"]),
    ]
