"""The gateway's OpenAPI document: the OpenAI routes (backends/openai_wire/openapi.py), the
tenant's usage, health, metrics, and the admin API with its bodies taken from the pydantic
models the handlers validate with. Served at `GET /openapi.json` and `GET /docs`."""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel
from starlette.routing import Route

from fairgate.backends.openai_wire.openapi import (
    Schema,
    document,
    openai_paths,
    openapi_routes,
    operation,
    path_param,
    query_param,
    ref,
    responses,
)
from fairgate.gateway.admin.pools import PoolIn, ReplicaIn
from fairgate.gateway.admin.schemas import (
    BackendCreate,
    BackendUpdate,
    KeyCreate,
    QuotaSet,
    TenantCreate,
    TenantUpdate,
)
from fairgate.gateway.billing.reports import GROUPS
from fairgate.scheduler.request import PRIORITY_CLASSES

MODELS: tuple[type[BaseModel], ...] = (TenantCreate, TenantUpdate, KeyCreate, QuotaSet, BackendCreate,
                                       BackendUpdate, PoolIn, ReplicaIn)
OBJ: Schema = {"type": "object"}
LIST: Schema = {"type": "object", "required": ["object", "data"], "properties": {
    "object": {"const": "list"}, "data": {"type": "array", "items": {"type": "object"}}}}
TIME = {"type": "string", "description": "ISO 8601 date or date-time (UTC)"}
STRINGS = {"type": "array", "items": {"type": "string"}}
NULLABLE_BOOL = {"type": ["boolean", "null"]}


def _model_schemas() -> dict[str, Schema]:
    out: dict[str, Schema] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        out.update(schema.pop("$defs", {}))
        out[model.__name__] = schema
    return out


def _usage_params(tenant_name: str) -> list[Schema]:
    return [query_param("from", TIME), query_param("to", TIME),
            query_param("group_by", {"enum": list(GROUPS)}), query_param("format", {"enum": ["json", "csv"]}),
            query_param(tenant_name, {"type": "string"})]


def _usage(summary: str, tenant_name: str) -> Schema:
    op = operation(summary, LIST, params=_usage_params(tenant_name))
    op["responses"]["200"]["content"]["text/csv"] = {"schema": {"type": "string"}}
    return op


def _tenant_paths() -> dict[str, Schema]:
    paths = openai_paths()
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings"):
        op = paths[path]["post"]
        op["parameters"] = [
            {"name": "X-Priority", "in": "header", "schema": {"enum": list(PRIORITY_CLASSES)}},
            {"name": "X-Data-Classification", "in": "header", "schema": {"enum": ["sensitive", "public"]}}]
    return {**paths, "/v1/usage": {"get": _usage("The caller's own usage.", "tenant")}}


def _ops() -> dict[str, Schema]:
    return {
        "/health": {"get": operation("Liveness.", OBJ, secured=False)},
        "/health/liveness": {"get": operation("The process answers.", OBJ, secured=False)},
        "/health/readiness": {"get": operation("Database, Redis and backends answer.", OBJ, secured=False)},
        "/version": {"get": operation("The package version.", OBJ, secured=False)},
        "/metrics": {"get": {"summary": "Prometheus metrics (metrics or admin token).",
                             "responses": responses({"type": "string"}, media="text/plain")}},
    }


def _admin_paths() -> dict[str, Schema]:
    tid, name = [path_param("id")], [path_param("name")]
    limit = [query_param("limit", {"type": "integer", "minimum": 1, "maximum": 1000})]
    return {
        "/admin/tenants": {"post": operation("Create a tenant.", OBJ, body=ref("TenantCreate"), status="201"),
                           "get": operation("List tenants.", LIST)},
        "/admin/tenants/{id}": {"get": operation("One tenant.", OBJ, params=tid),
                                "patch": operation("Change a tenant.", OBJ, body=ref("TenantUpdate"), params=tid),
                                "put": operation("Change a tenant.", OBJ, body=ref("TenantUpdate"), params=tid),
                                "delete": operation("Disable a tenant.", OBJ, params=tid)},
        "/admin/tenants/{id}/keys": {"post": operation("Create an API key.", OBJ, body=ref("KeyCreate"),
                                                       params=tid, status="201"),
                                     "get": operation("A tenant's keys.", LIST, params=tid)},
        "/admin/keys/{prefix}": {"delete": operation("Revoke a key.", OBJ, params=[path_param("prefix")])},
        "/admin/tenants/{id}/quota": {"put": operation("Set a tenant's quota.", OBJ, body=ref("QuotaSet"), params=tid),
                                      "get": operation("A tenant's quota.", OBJ, params=tid)},
        "/admin/keys/{prefix}/quota": {"put": operation("Set a key's quota.", OBJ, body=ref("QuotaSet"),
                                                        params=[path_param("prefix")])},
        "/admin/backends": {"post": operation("Register a backend.", OBJ, body=ref("BackendCreate"), status="201"),
                            "get": operation("List backends.", LIST)},
        "/admin/backends/{name}": {"get": operation("One backend (credentials never shown).", OBJ, params=name),
                                   "patch": operation("Change a backend.", OBJ, body=ref("BackendUpdate"),
                                                      params=name),
                                   "delete": operation("Remove a backend.", OBJ, params=name)},
        "/admin/usage": {"get": _usage("Usage of every tenant.", "tenant")},
        "/admin/audit": {"get": operation("Recent admin changes.", LIST, params=limit)},
        "/admin/routes": {"get": operation("The routing rules.", OBJ),
                          "put": operation("Replace the routing rules.", OBJ, body={"anyOf": [
                              {"type": "array", "items": OBJ},
                              {"type": "object", "properties": {"rules": {"type": "array", "items": OBJ}}}]})},
        "/admin/routes/explain": {"post": operation("Explain a routing decision.", OBJ, body={
            "type": "object", "required": ["request"], "properties": {
                "tenant_id": {"type": "string"}, "priority": {"type": "string"},
                "classification": {"type": "string"}, "request": OBJ}})},
        "/admin/tenants/{id}/sensitivity": {
            "get": operation("A tenant's patterns, keywords and detection options.", OBJ, params=tid),
            "put": operation("Set them (an option left out or null: its default).", OBJ, params=tid, body={
                "type": "object", "properties": {
                    "patterns": STRINGS, "keywords": STRINGS, "strict_names": NULLABLE_BOOL,
                    "legal_person_data": NULLABLE_BOOL, "institutional_contacts": NULLABLE_BOOL}})},
        "/admin/routing/audit": {"get": operation("Recent routing decisions.", LIST, params=[
            *limit, query_param("tenant_id", {"type": "string"}), query_param("request_id", {"type": "string"})])},
        "/admin/classify": {"post": operation("Dry-run the personal-data detectors.", OBJ, body={
            "type": "object", "required": ["text"], "properties": {
                "text": {"type": "string"}, "patterns": STRINGS, "keywords": STRINGS,
                "tenant_id": {"type": "string"}}})},
        **_pool_paths(),
    }


def _pool_paths() -> dict[str, Schema]:
    name, both = [path_param("name")], [path_param("name"), path_param("replica")]
    return {
        "/admin/pools": {"post": operation("Create a pool.", OBJ, body=ref("PoolIn"), status="201"),
                         "get": operation("List pools.", LIST)},
        "/admin/pools/{name}": {"get": operation("One pool.", OBJ, params=name),
                                "delete": operation("Remove a pool.", OBJ, params=name)},
        "/admin/pools/{name}/replicas": {"post": operation("Add a replica.", OBJ, body=ref("ReplicaIn"),
                                                           params=name, status="201")},
        "/admin/pools/{name}/replicas/{replica}/drain": {"post": operation("Drain a replica.", OBJ, params=both)},
        "/admin/pools/{name}/replicas/{replica}": {"delete": operation("Remove a replica.", OBJ, params=[
            *both, query_param("wait_s", {"type": "number", "minimum": 0, "maximum": 600})])},
    }


def gateway_document() -> dict[str, Any]:
    paths = {**_tenant_paths(), **_ops(), **_admin_paths()}
    doc = document("fairgate gateway", "OpenAI-compatible multi-tenant gateway: tenant keys on /v1, the "
                   "admin token on /admin.", paths, _model_schemas())
    for schema in ("ChatCompletionRequest", "CompletionRequest"):  # the gateway routes by model
        s = doc["components"]["schemas"][schema] = copy.deepcopy(doc["components"]["schemas"][schema])
        s["required"] = ["model", *s["required"]]
    return doc


def routes() -> list[Route]:
    return openapi_routes(gateway_document, "fairgate gateway")
