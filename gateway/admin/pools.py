"""Admin REST for backend pools (Bearer admin token): create, list, add a replica, drain, remove.

    POST   /admin/pools                                  a pool with its replicas
    GET    /admin/pools[/{name}]                         config + what this gateway sees live
    DELETE /admin/pools/{name}
    POST   /admin/pools/{name}/replicas                  add one
    POST   /admin/pools/{name}/replicas/{replica}/drain  ?wait_s=30&remove=true
    DELETE /admin/pools/{name}/replicas/{replica}        remove at once

Drain: the replica is marked draining (every gateway stops sending within one config round),
then this call waits until this gateway has nothing in flight there, then removes it. Other
gateways' in-flight requests keep running after the removal: they hold their replica.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.backends.pool import PoolBackend
from fairgate.backends.pool_routing import POLICIES
from fairgate.gateway.admin.http import admin_route
from fairgate.gateway.admin.routes import audit, body_of, change, found, in_tx
from fairgate.gateway.admin.schemas import BaseUrl, Credential, Text, _Strict
from fairgate.gateway.admin.state import admin_state
from fairgate.gateway.store.pool_tables import PoolReplicaRow, PoolRow
from fairgate.gateway.store.tables import BackendRow

NAME = r"^[A-Za-z0-9_.:-]{1,200}$"


class ReplicaIn(_Strict):
    name: str = Field(pattern=NAME)
    base_url: BaseUrl
    api_key: Credential | None = None


class PoolIn(_Strict):
    name: str = Field(pattern=NAME)
    kind: Literal["local", "vllm"] = "local"
    model: Text | None = Field(default=None, max_length=200)
    api_key: Credential | None = None
    tokenizer: Text | None = Field(default=None, max_length=500)
    policy: Literal[POLICIES] = "affinity"  # type: ignore[valid-type]
    load_factor: float = Field(default=1.25, ge=1.0, le=100)
    max_kv_usage: float = Field(default=0.9, gt=0, le=1)
    load_slack: int = Field(default=4, ge=0, le=10_000)
    block_size: int = Field(default=16, ge=1, le=1024)
    affinity_blocks: int = Field(default=4, ge=1, le=1024)
    input_cost_per_mtok: float = Field(default=0.0, ge=0)
    output_cost_per_mtok: float = Field(default=0.0, ge=0)
    hourly_cost_usd: float | None = Field(default=None, ge=0, le=1e6)  # all its replicas together
    enabled: bool = True
    replicas: list[ReplicaIn] = Field(default_factory=list)


def pool_out(p: PoolRow, members: list[PoolReplicaRow], live: PoolBackend | None) -> dict[str, Any]:
    seen = {r["name"]: r for r in live.status()} if live is not None else {}
    fields = PoolIn.model_fields.keys() - {"api_key", "replicas"}
    return {"object": "pool", **{f: getattr(p, f) for f in sorted(fields)}, "has_api_key": bool(p.api_key),
            "replicas": [{"name": r.name, "base_url": r.base_url, "draining": r.draining,
                          "has_api_key": bool(r.api_key), "live": _live(seen.get(r.name))} for r in members]}


def _live(status: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if status is None else {k: v for k, v in status.items() if k not in ("name", "base_url")}


def _pool(s: Session, name: str) -> PoolRow:
    return found(s.scalars(select(PoolRow).where(PoolRow.name == name)).first(), f"pool {name!r}")


def _members(s: Session, p: PoolRow) -> list[PoolReplicaRow]:
    return list(s.scalars(select(PoolReplicaRow).where(PoolReplicaRow.pool_id == p.id).order_by(PoolReplicaRow.name)))


def _live_pool(request: Request, name: str) -> PoolBackend | None:
    b = admin_state(request.app).backends.get(name)
    return b if isinstance(b, PoolBackend) else None


def write_pool(s: Session, body: PoolIn) -> PoolRow:
    """Create or replace a pool and its replica list (also used by `fairgate apply`)."""
    if s.scalars(select(BackendRow).where(BackendRow.name == body.name)).first() is not None:
        raise WireError(409, f"A backend named {body.name!r} exists; pools and backends share names.", "conflict")
    p = s.scalars(select(PoolRow).where(PoolRow.name == body.name)).first()
    if p is None:
        p = PoolRow(name=body.name)
        s.add(p)
    for f, v in body.model_dump(exclude={"replicas"}).items():
        setattr(p, f, v)
    s.flush()
    old = {r.name: r for r in _members(s, p)}
    for r in body.replicas:
        row = old.pop(r.name, None) or PoolReplicaRow(pool_id=p.id, name=r.name, draining=False)
        row.base_url, row.api_key = r.base_url, r.api_key
        s.add(row)
    for gone in old.values():
        s.delete(gone)
    s.flush()
    return p


@admin_route
async def create_pool(request: Request) -> Any:
    body = await body_of(request, PoolIn)

    def run(s: Session) -> dict[str, Any]:
        if s.scalars(select(PoolRow).where(PoolRow.name == body.name)).first() is not None:
            raise WireError(409, f"Pool {body.name!r} exists.", "conflict")
        p = write_pool(s, body)
        audit(s, "pool.create", "pool", p.name, body.model_dump(exclude={"api_key"}, mode="json") | {
            "replicas": [r.model_dump(exclude={"api_key"}) for r in body.replicas]})
        return pool_out(p, _members(s, p), None)

    return 201, await change(request, run)


@admin_route
async def list_pools(request: Request) -> Any:
    def run(s: Session) -> list[dict[str, Any]]:
        return [pool_out(p, _members(s, p), _live_pool(request, p.name))
                for p in s.scalars(select(PoolRow).order_by(PoolRow.name))]

    return {"object": "list", "data": await in_tx(request, run)}


@admin_route
async def get_pool(request: Request) -> Any:
    name = request.path_params["name"]
    return await in_tx(request, lambda s: pool_out(p := _pool(s, name), _members(s, p), _live_pool(request, name)))


@admin_route
async def delete_pool(request: Request) -> Any:
    def run(s: Session) -> dict[str, Any]:
        p = _pool(s, request.path_params["name"])
        for r in _members(s, p):
            s.delete(r)
        s.delete(p)
        audit(s, "pool.delete", "pool", p.name)
        return {"object": "pool", "name": p.name, "deleted": True}

    return await change(request, run)


@admin_route
async def add_replica(request: Request) -> Any:
    body = await body_of(request, ReplicaIn)

    def run(s: Session) -> dict[str, Any]:
        p = _pool(s, request.path_params["name"])
        if any(r.name == body.name for r in _members(s, p)):
            raise WireError(409, f"Pool {p.name!r} has a replica {body.name!r}.", "conflict")
        s.add(PoolReplicaRow(pool_id=p.id, name=body.name, base_url=body.base_url, api_key=body.api_key,
                             draining=False))
        s.flush()
        audit(s, "pool.replica.add", "pool", p.name, {"replica": body.name, "base_url": body.base_url})
        return pool_out(p, _members(s, p), None)

    return 201, await change(request, run)


def _replica(s: Session, pool: str, name: str) -> PoolReplicaRow:
    p = _pool(s, pool)
    r = next((r for r in _members(s, p) if r.name == name), None)
    if r is None:
        raise WireError(404, f"Pool {pool!r} has no replica {name!r}.", "not_found")
    return r


def _wait_s(request: Request) -> float:
    raw = request.query_params.get("wait_s", "30")
    try:
        value = float(raw)
    except ValueError:
        raise WireError(400, "`wait_s` must be a number of seconds", "invalid_value", "wait_s") from None
    if not 0 <= value <= 3600:
        raise WireError(400, "`wait_s` must be between 0 and 3600", "invalid_value", "wait_s")
    return value


@admin_route
async def drain_replica(request: Request) -> Any:
    pool, name = request.path_params["name"], request.path_params["replica"]
    wait_s, remove = _wait_s(request), request.query_params.get("remove", "true") != "false"

    def mark(s: Session) -> None:
        _replica(s, pool, name).draining = True
        audit(s, "pool.replica.drain", "pool", pool, {"replica": name})

    await change(request, mark)
    live = _live_pool(request, pool)
    idle = await live.wait_idle(name, wait_s) if live is not None else True
    removed = False
    if idle and remove:
        await change(request, lambda s: s.delete(_replica(s, pool, name)))
        removed = True
    return {"object": "pool.replica", "pool": pool, "name": name, "draining": True, "idle": idle, "removed": removed}


@admin_route
async def remove_replica(request: Request) -> Any:
    pool, name = request.path_params["name"], request.path_params["replica"]

    def run(s: Session) -> None:
        s.delete(_replica(s, pool, name))
        audit(s, "pool.replica.remove", "pool", pool, {"replica": name})

    await change(request, run)
    return {"object": "pool.replica", "pool": pool, "name": name, "removed": True}


def routes() -> list[Route]:
    return [
        Route("/admin/pools", create_pool, methods=["POST"]),
        Route("/admin/pools", list_pools, methods=["GET"]),
        Route("/admin/pools/{name}", get_pool, methods=["GET"]),
        Route("/admin/pools/{name}", delete_pool, methods=["DELETE"]),
        Route("/admin/pools/{name}/replicas", add_replica, methods=["POST"]),
        Route("/admin/pools/{name}/replicas/{replica}/drain", drain_replica, methods=["POST"]),
        Route("/admin/pools/{name}/replicas/{replica}", remove_replica, methods=["DELETE"]),
    ]
