"""Admin REST for routing (admin token, like the rest of /admin):

    GET  /admin/routes                     → {"object": "routing_rules", "rules": [...], "problems": [...]}
    PUT  /admin/routes                     ← [rule, ...] or {"rules": [...]}; replaces the list
    POST /admin/routes/explain             ← {"tenant_id"?, "priority"?, "classification"?,
                                              "request": {...}} → the decision, nothing sent
    GET  /admin/tenants/{id}/sensitivity   → {"patterns": [...], "keywords": [...]}
    PUT  /admin/tenants/{id}/sensitivity   ← {"patterns": [...], "keywords": [...]}
    GET  /admin/routing/audit?tenant_id=&request_id=&limit=   → recent routing decisions

A rule is {"id"?, "match": {tenant?, model?, sensitivity?, priority?, max_prompt_tokens?,
min_prompt_tokens?, max_complexity?}, "backend", "fallbacks"}. A PUT is rejected with 400 and
every problem listed when a rule names an unknown backend, or could match a sensitive request
and names an external backend. Saved rules reach every replica through the config version.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError
from fairgate.gateway.admin.routes import admin_route, audit, found, in_tx
from fairgate.gateway.admin.state import AdminState, admin_state
from fairgate.gateway.config.registry import load_backends
from fairgate.gateway.config.routing_store import read_rules, write_rules
from fairgate.gateway.request.routing import NoRouteError, Router, RouteRequest
from fairgate.gateway.store.pool_tables import PoolRow
from fairgate.gateway.store.routing_tables import OPTION_FIELDS, RoutingAudit, TenantSensitivity
from fairgate.gateway.store.tables import BackendRow, Tenant
from fairgate.policies.detection_options import DEFAULT_OPTIONS
from fairgate.policies.routing import Rule, validate_rules
from fairgate.policies.routing_schema import RuleSchemaError, parse_rules, rule_to_dict
from fairgate.policies.sensitivity import validate_tenant_patterns

MAX_RULES = 500
MAX_TENANT_TERMS = 200


async def _json_body(request: Request) -> Any:
    try:
        return orjson.loads(await request.body() or b"null")
    except orjson.JSONDecodeError:
        raise WireError(400, "The body is not valid JSON.", "invalid_json") from None


def backend_locality(s: Session, state: AdminState) -> dict[str, bool]:
    """Every enabled backend and pool by name → is it local. The database is the source of truth
    (a backend registered on another replica counts at once); the embedded engine and pools
    (engine servers or vLLM on our hardware) are local."""
    out = {b.name: b.kind == "local" for b in s.scalars(select(BackendRow).where(BackendRow.enabled.is_(True)))}
    for name in s.scalars(select(PoolRow.name).where(PoolRow.enabled.is_(True))):
        out.setdefault(name, True)
    if state.embedded is not None:
        out.setdefault(state.embedded.name, True)
    return out


@admin_route
async def get_routes(request: Request) -> Any:
    state = admin_state(request.app)

    def run(s: Session) -> tuple[list[Rule], list[str]]:
        rules = read_rules(s)
        # Rules were valid when saved; a backend deleted or re-registered since shows up here.
        return rules, validate_rules(rules, backend_locality(s, state))

    rules, problems = await in_tx(request, run)
    return {"object": "routing_rules", "rules": [rule_to_dict(r) for r in rules], "problems": problems}


@admin_route
async def explain_route(request: Request) -> Any:
    """Dry run: where would this request go, and why? Nothing is sent, stored or audited."""
    body = await _json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
        raise WireError(400, "Expected {\"tenant_id\"?, \"priority\"?, \"classification\"?, "
                            "\"request\": {OpenAI request body}}.", "invalid_value", "request")
    cls = body.get("classification")
    if cls is not None and not isinstance(cls, str):
        raise WireError(400, "`classification` must be \"sensitive\" or \"public\".", "invalid_value", "classification")
    state = admin_state(request.app)
    tid = body.get("tenant_id")

    def tenant(s: Session) -> Tenant | None:
        return None if tid is None else _tenant_or_404(s, str(tid))

    t = await in_tx(request, tenant)
    live: Router = state.router
    router = Router(live.backends, live.aliases, rules=live.rules, tenants=live.tenants,
                    fail_closed=live.fail_closed, classifier=live.classifier)
    model = body["request"].get("model")
    req = RouteRequest(
        tenant_id=t.id if t else "", tenant_name=t.name if t else "", model=str(model or ""),
        priority=str(body.get("priority") or (t.default_priority if t else "standard")),
        data_residency=t.data_residency if t else "any", classification_header=cls,
        body=body["request"])
    try:
        d = await router.decide(req)
    except NoRouteError as exc:
        return {"object": "route_explanation", "routed": False, "status": exc.status, "code": exc.code,
                "message": str(exc)}
    return {"object": "route_explanation", "routed": True, "backends": [b.name for b in d.backends],
            "rule_id": d.rule_id, "sensitive": d.sensitive, "finding_kinds": d.finding_kinds,
            "reason": d.reason}


@admin_route
async def put_routes(request: Request) -> Any:
    data = await _json_body(request)
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k != "object"}
    try:
        rules = parse_rules(data)
    except RuleSchemaError as exc:
        raise WireError(400, "Invalid routing rules: " + "; ".join(exc.errors), "invalid_routing_rules") from None
    if len(rules) > MAX_RULES:
        raise WireError(400, f"At most {MAX_RULES} routing rules.", "invalid_routing_rules")
    state = admin_state(request.app)

    def run(s: Session) -> list[dict[str, Any]]:
        errors = validate_rules(rules, backend_locality(s, state))
        if errors:
            raise WireError(400, "Invalid routing rules: " + "; ".join(errors), "invalid_routing_rules")
        write_rules(s, rules)
        audit(s, "routes.replace", "routes", "all", {"rules": [r.id for r in rules]})
        return [rule_to_dict(r) for r in rules]

    out = await in_tx(request, run)
    await routing_changed(request)
    return {"object": "routing_rules", "rules": out}


async def routing_changed(request: Request) -> None:
    """Bump the shared config version (other replicas rebuild their routers from it) and
    rebuild this replica's router at once, so the admin's next request already sees the change."""
    state = admin_state(request.app)
    await state.config.bump()
    await load_backends(state)


def _tenant_or_404(s: Session, tenant_id: str) -> Tenant:
    return found(s.get(Tenant, tenant_id), "such tenant")


@admin_route
async def get_sensitivity(request: Request) -> Any:
    tid = request.path_params["id"]

    def run(s: Session) -> dict[str, Any]:
        _tenant_or_404(s, tid)
        return sensitivity_out(tid, s.get(TenantSensitivity, tid))

    return await in_tx(request, run)


def sensitivity_out(tid: str, row: TenantSensitivity | None) -> dict[str, Any]:
    options = row.options() if row else DEFAULT_OPTIONS
    return {"object": "tenant_sensitivity", "tenant_id": tid,
            "patterns": list(row.patterns) if row else [], "keywords": list(row.keywords) if row else [],
            **{f: getattr(options, f) for f in OPTION_FIELDS}}


def _options(body: dict[str, Any]) -> dict[str, bool | None]:
    """The detection options the body sets (a missing or null one: the default)."""
    out: dict[str, bool | None] = {}
    for f in OPTION_FIELDS:
        v = body.get(f)
        if v is not None and not isinstance(v, bool):
            raise WireError(400, f"`{f}` must be a boolean.", "invalid_value", f)
        out[f] = v
    return out


def _terms(body: dict[str, Any], key: str) -> list[str]:
    v = body.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, str) and 0 < len(x) <= 500 for x in v):
        raise WireError(400, f"`{key}` must be a list of strings (1-500 characters each).", "invalid_value", key)
    if len(v) > MAX_TENANT_TERMS:
        raise WireError(400, f"At most {MAX_TENANT_TERMS} {key}.", "invalid_value", key)
    return v


@admin_route
async def put_sensitivity(request: Request) -> Any:
    tid = request.path_params["id"]
    body = await _json_body(request)
    if not isinstance(body, dict) or set(body) - {"patterns", "keywords", *OPTION_FIELDS}:
        raise WireError(400, "Expected {\"patterns\": [...], \"keywords\": [...]} and the detection options "
                             f"({', '.join(OPTION_FIELDS)}: booleans).", "invalid_value")
    patterns, keywords, options = _terms(body, "patterns"), _terms(body, "keywords"), _options(body)
    errors = validate_tenant_patterns(patterns)
    if errors:
        raise WireError(400, "; ".join(errors), "invalid_value", "patterns")

    def run(s: Session) -> dict[str, Any]:
        _tenant_or_404(s, tid)
        row = s.get(TenantSensitivity, tid)
        if row is None:
            row = TenantSensitivity(tenant_id=tid)
            s.add(row)
        row.patterns, row.keywords = patterns, keywords
        for f, v in options.items():
            setattr(row, f, v)
        # counts only: the patterns themselves may describe confidential projects
        audit(s, "tenant.sensitivity", "tenant", tid,
              {"patterns": len(patterns), "keywords": len(keywords), **options})
        return sensitivity_out(tid, row)

    out = await in_tx(request, run)
    await routing_changed(request)
    return out


def audit_out(r: RoutingAudit) -> dict[str, Any]:
    return {"id": r.id, "at": r.at.isoformat() + "Z", "request_id": r.request_id, "tenant_id": r.tenant_id,
            "model": r.model, "priority": r.priority, "sensitive": r.sensitive, "reasons": r.reasons,
            "finding_kinds": r.finding_kinds, "finding_spans": r.finding_spans or [],
            "rule_id": r.rule_id, "backends": r.backends,
            "decision": r.decision, "status": r.status}


@admin_route
async def list_routing_audit(request: Request) -> Any:
    q = request.query_params
    try:
        limit = min(max(int(q.get("limit", "100")), 1), 1000)
    except ValueError:
        raise WireError(400, "`limit` must be an integer.", "invalid_value", "limit") from None
    writer = admin_state(request.app).routing_audit
    if writer is not None:
        await writer.flush()  # include decisions still queued on this replica

    def run(s: Session) -> list[dict[str, Any]]:
        stmt = select(RoutingAudit).order_by(RoutingAudit.id.desc()).limit(limit)
        if "tenant_id" in q:
            stmt = stmt.where(RoutingAudit.tenant_id == q["tenant_id"])
        if "request_id" in q:
            stmt = stmt.where(RoutingAudit.request_id == q["request_id"])
        return [audit_out(r) for r in s.scalars(stmt)]

    return {"object": "list", "data": await in_tx(request, run)}


def routes() -> list[Route]:
    return [
        Route("/admin/routes", get_routes, methods=["GET"]),
        Route("/admin/routes", put_routes, methods=["PUT"]),
        Route("/admin/routes/explain", explain_route, methods=["POST"]),
        Route("/admin/tenants/{id}/sensitivity", get_sensitivity, methods=["GET"]),
        Route("/admin/tenants/{id}/sensitivity", put_sensitivity, methods=["PUT"]),
        Route("/admin/routing/audit", list_routing_audit, methods=["GET"]),
    ]
