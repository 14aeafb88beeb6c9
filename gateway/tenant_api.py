"""Tenant routes besides completions: /v1/models (what the key may use), /v1/usage (own usage)."""

from __future__ import annotations

import asyncio

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from backends.openai_wire import WireError, error_response
from gateway.admission import bearer_token
from gateway.auth import Principal
from gateway.completions import CompletionsEndpoint
from gateway.reports import parse_time, to_csv, usage_report
from gateway.state import state_of


async def _principal(request: Request) -> Principal:
    token = bearer_token({k: v for k, v in request.scope["headers"]})
    try:
        principal = await state_of(request.app).keys.fresh(token)
    except Exception as exc:  # the key check needs the config version: fail closed
        raise WireError(503, "The quota service is unavailable; retry shortly.", "quota_unavailable",
                        headers={"retry-after": "1"}) from exc
    if principal is None:
        raise WireError(401, "Incorrect API key provided.", "invalid_api_key")
    return principal


def _json(obj: object, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status, media_type="application/json")


async def list_models(request: Request) -> Response:
    try:
        principal = await _principal(request)
    except WireError as err:
        return error_response(err)
    names = [n for n in state_of(request.app).backends if principal.may_use(n)]
    return _json({"object": "list", "data": [
        {"id": n, "object": "model", "created": 0, "owned_by": "fairgate"} for n in sorted(names)]})


async def own_usage(request: Request) -> Response:
    """The caller's tenant only; asking for another tenant is refused, not silently narrowed."""
    try:
        principal = await _principal(request)
        q = request.query_params
        if q.get("tenant") not in (None, "", principal.tenant_id):
            raise WireError(403, "A tenant key may only read its own usage.", "forbidden", "tenant")
        start, end = parse_time(q.get("from"), "from"), parse_time(q.get("to"), "to")
        group_by = q.get("group_by", "day")

        def run() -> list[dict]:
            with state_of(request.app).sessions() as s:
                return usage_report(s, principal.tenant_id, start, end, group_by)

        rows = await asyncio.to_thread(run)
    except WireError as err:
        return error_response(err)
    if q.get("format") == "csv":
        return Response(to_csv(rows), media_type="text/csv")
    return _json({"object": "list", "tenant_id": principal.tenant_id, "group_by": group_by, "data": rows})


def routes() -> list[Route]:
    return [
        Route("/v1/chat/completions", CompletionsEndpoint("chat"), methods=["POST"]),
        Route("/v1/completions", CompletionsEndpoint("completion"), methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/usage", own_usage, methods=["GET"]),
    ]
