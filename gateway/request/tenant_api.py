"""Tenant routes besides completions: /v1/models and /v1/models/{id} (what the key may use:
backends, router aliases, and the literal model names routing rules match), /v1/usage (own usage)."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fairgate.backends.openai_wire import WireError, error_response
from fairgate.gateway.billing.cost_sources import costed_report
from fairgate.gateway.billing.reports import GROUPS, parse_time, to_csv
from fairgate.gateway.request.admission import authenticate, bearer_token
from fairgate.gateway.request.auth import Principal
from fairgate.gateway.request.auth_throttle import client_address
from fairgate.gateway.request.completions import CompletionsEndpoint
from fairgate.gateway.request.responses import ResponsesEndpoint
from fairgate.gateway.request.state import request_state, usage_state


async def _principal(request: Request) -> Principal:
    token = bearer_token({k: v for k, v in request.scope["headers"]})
    try:
        return await authenticate(request_state(request.app), token, reload=False, fresh=True,
                                  address=client_address(request.scope))
    except WireError:
        raise
    except Exception as exc:  # the key check needs the config version: fail closed
        raise WireError(503, "The quota service is unavailable; retry shortly.", "quota_unavailable",
                        headers={"retry-after": "1"}) from exc


USAGE_FORMATS = ("json", "csv")


def _json(obj: object, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status, media_type="application/json")


def model_names(request: Request, principal: Principal) -> list[str]:
    """Every model name a client may send: backend names, aliases, and rule models that are
    plain names (a glob such as `gpt-*` names no model)."""
    state = request_state(request.app)
    router = state.router
    names = set(state.backends) | set(router.aliases)
    names |= {r.match.model for r in router.rules if r.match.model and not any(c in r.match.model for c in "*?[")}
    return sorted(n for n in names if principal.may_use(n))


def _model(request: Request, name: str) -> dict[str, object]:
    """The model object; `max_model_len` (vLLM's name, which clients such as `fairgate bench`
    read to size prompts) where the backend behind the name knows its context length."""
    model: dict[str, object] = {"id": name, "object": "model", "created": 0, "owned_by": "fairgate"}
    state = request_state(request.app)
    backend = state.backends.get(state.router.aliases.get(name, name))
    if backend is not None and backend.context_length is not None:
        model["max_model_len"] = backend.context_length
    return model


async def list_models(request: Request) -> Response:
    try:
        principal = await _principal(request)
    except WireError as err:
        return error_response(err)
    return _json({"object": "list", "data": [_model(request, n) for n in model_names(request, principal)]})


async def get_model(request: Request) -> Response:
    """GET /v1/models/{id}: the model object, or OpenAI's 404 for one this key cannot use."""
    try:
        principal = await _principal(request)
        name = request.path_params["model"]
        if name not in model_names(request, principal):
            raise WireError(404, f"The model `{name}` does not exist or you do not have access to it.",
                            "model_not_found", "model")
    except WireError as err:
        return error_response(err)
    return _json(_model(request, name))


async def own_usage(request: Request) -> Response:
    """The caller's tenant only; asking for another tenant is refused, not silently narrowed."""
    try:
        principal = await _principal(request)
        q = request.query_params
        if q.get("tenant") not in (None, "", principal.tenant_id):
            raise WireError(403, "A tenant key may only read its own usage.", "forbidden", "tenant")
        start, end = parse_time(q.get("from"), "from"), parse_time(q.get("to"), "to")
        group_by = q.get("group_by", "day")
        if group_by not in GROUPS:
            raise WireError(400, f"`group_by` must be one of {', '.join(GROUPS)}", "invalid_value", "group_by")
        fmt = q.get("format", "json")
        if fmt not in USAGE_FORMATS:
            raise WireError(400, f"`format` must be one of {', '.join(USAGE_FORMATS)}, not {fmt[:50]!r}.",
                            "invalid_value", "format")
        # its share of the hardware cost (gateway/billing/cost.py); other tenants' shares are not shown
        report = await costed_report(usage_state(request.app), principal.tenant_id, start, end, group_by)
    except WireError as err:
        return error_response(err)
    if fmt == "csv":
        return Response(to_csv(report.rows), media_type="text/csv")
    return _json({"object": "list", "tenant_id": principal.tenant_id, "group_by": group_by, "data": report.rows,
                  "refusals": [{"reason": r["reason"], "requests": r["requests"]} for r in report.refusals]})


def routes() -> list[Route]:
    return [
        Route("/v1/chat/completions", CompletionsEndpoint("chat"), methods=["POST"]),
        Route("/v1/completions", CompletionsEndpoint("completion"), methods=["POST"]),
        Route("/v1/responses", ResponsesEndpoint(), methods=["POST"]),
        Route("/v1/embeddings", CompletionsEndpoint("embedding"), methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
        Route("/v1/usage", own_usage, methods=["GET"]),
    ]
