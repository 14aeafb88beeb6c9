"""POST /v1/chat/completions and /v1/completions: auth → reserve → route → backend → settle.

Raw ASGI endpoints (no Request/Response objects, no middleware) because this is the hot path.
Nothing is reserved until the request is known to be valid, allowed and routable; once it is
reserved, exactly one settle and one usage record follow, whatever happens after.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from backends.base import Backend, BackendError, GenerationRequest
from backends.prompt_version import prompt_version
from gateway.auth import Principal
from gateway.errors import ApiError
from gateway.quota import QuotaDenied, StaleConfig
from gateway.registry import refresh_if_stale
from gateway.routing import NoRouteError, RouteDecision, RouteRequest, sensitive_unavailable
from gateway.usage import UsageEvent
from gateway.validation import ParsedRequest, parse_body, validate

log = logging.getLogger("fairgate.request")
JSON_HEADERS = [(b"content-type", b"application/json")]
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


@dataclass(slots=True)
class Admitted:
    """A request that holds a reservation; `finish` must run exactly once for it."""

    rid: str
    kind: str
    principal: Principal
    parsed: ParsedRequest
    priority: str
    decision: RouteDecision
    gen: GenerationRequest
    t0: float
    ttft: float | None = None
    backend_s: float = 0.0  # time spent waiting on backends before the first byte went out
    overhead_ms: float | None = None  # gateway time to the first byte, backend_s excluded
    prompt_version_header: bytes | None = None


def bearer_token(headers: dict[bytes, bytes]) -> str:
    auth = headers.get(b"authorization", b"")
    if not auth.startswith(b"Bearer ") or len(auth) < 8:
        raise ApiError(401, "You didn't provide an API key. Send it as `Authorization: Bearer <key>`.",
                       "missing_api_key")
    return auth[7:].decode("latin-1").strip()


async def read_body(receive: Any, headers: dict[bytes, bytes], limit: int) -> bytes:
    too_big = ApiError(413, f"The request body is larger than the limit of {limit} bytes.", "request_too_large")
    length = headers.get(b"content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise too_big
    parts: list[bytes] = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise ApiError(400, "client disconnected", "client_disconnected")
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_big
        parts.append(chunk)
        if not msg.get("more_body"):
            return b"".join(parts)


async def admit(state: Any, kind: str, scope: dict[str, Any], receive: Any) -> Admitted:
    """Authenticate, validate, route and reserve; raises ApiError with nothing reserved."""
    t0 = time.perf_counter()
    headers = dict(scope["headers"])
    token = bearer_token(headers)
    principal = await state.keys.authenticate(token)
    if principal is None:
        raise ApiError(401, "Incorrect API key provided.", "invalid_api_key")
    body = parse_body(await read_body(receive, headers, state.settings.max_body_bytes))
    parsed = validate(kind, body)
    prio_header = headers.get(b"x-priority")
    cls_header = headers.get(b"x-data-classification")
    rid = ("chatcmpl-" if kind == "chat" else "cmpl-") + uuid.uuid4().hex
    for attempt in range(3):
        if attempt:  # an admin change happened since this principal was cached
            principal = await state.keys.reload(token)
            if principal is None:
                raise ApiError(401, "Incorrect API key provided.", "invalid_api_key")
        try:
            priority = principal.resolve_priority(prio_header.decode() if prio_header else None)
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_priority", "X-Priority") from None
        if not principal.may_use(parsed.model):
            raise ApiError(404, f"The model `{parsed.model}` does not exist or you do not have access to it.",
                           "model_not_found", "model")
        limit = principal.max_tokens_per_request
        if parsed.max_tokens is not None and limit is not None and parsed.max_tokens > limit:
            raise ApiError(400, f"`{parsed.max_tokens_field}` is {parsed.max_tokens}, over this key's limit "
                                f"of {limit} tokens per request.", "max_tokens_exceeded", parsed.max_tokens_field)
        max_tokens = parsed.max_tokens or min(state.settings.default_max_tokens, limit or 1 << 30)
        try:
            decision = await state.router.decide(RouteRequest(
                tenant_id=principal.tenant_id, tenant_name=principal.tenant_name, model=parsed.model,
                priority=priority, data_residency=principal.data_residency,
                classification_header=cls_header.decode().strip().lower() if cls_header else None,
                texts=parsed.texts, prompt_tokens=parsed.prompt_tokens_bound, request_id=rid, body=body))
        except NoRouteError as exc:
            # a backend registered through another replica a moment ago: refresh once, retry
            if exc.status == 404 and attempt == 0 and await refresh_if_stale(state):
                continue
            raise ApiError(exc.status, str(exc), exc.code, "model" if exc.status == 404 else None) from None
        if parsed.max_tokens is None and decision.backends:
            # no max_tokens asked: what we reserve is sent as the limit, so keep it inside the
            # model's context or a small local model would refuse a request the client never sized
            ctx = _context_len(decision.backends[0])
            if ctx is not None:
                max_tokens = max(1, min(max_tokens, ctx - parsed.prompt_tokens_bound))
        price = state.prices.get(decision.backends[0].name) if decision.backends else None
        cost = price.cost(parsed.prompt_tokens_bound, max_tokens) if price else 0.0
        try:
            await state.quota.reserve(rid, principal.scopes, parsed.prompt_tokens_bound + max_tokens,
                                      cost, principal.version)
        except StaleConfig:
            continue
        except QuotaDenied as d:
            raise ApiError(429, f"Rate limit reached for this {d.scope}: {d.limit}. "
                                f"Retry after {d.retry_after_s} s.", d.limit,
                           headers={"retry-after": str(d.retry_after_s)}) from None
        except Exception as exc:  # the quota store is down: fail closed, never admit unchecked
            log.warning("quota store unavailable (%s)", type(exc).__name__)
            raise ApiError(503, "The quota service is unavailable; retry shortly.", "quota_unavailable",
                           headers={"retry-after": "1"}) from None
        body[parsed.max_tokens_field] = max_tokens  # what we reserved is what may be generated
        gen = GenerationRequest(rid, kind, body, tenant=principal.tenant_id, priority=priority,  # type: ignore[arg-type]
                                cache_salt=principal.cache_salt or principal.tenant_id)
        return Admitted(rid, kind, principal, parsed, priority, decision, gen, t0,
                        prompt_version_header=headers.get(b"x-prompt-version"))
    raise ApiError(503, "The gateway's configuration is changing; retry.", "config_changing")


def _context_len(backend: Backend) -> int | None:
    info = getattr(backend, "info", None)  # the local engine's ModelInfo
    n = getattr(info, "max_model_len", None)
    return n if isinstance(n, int) else None


def allowed_backends(adm: Admitted) -> list[Backend]:
    # defence in depth: the router already filtered, but personal data never leaves local hardware
    return [b for b in adm.decision.backends if b.is_local or not adm.decision.sensitive]


def for_backend(gen: GenerationRequest, backend: Backend) -> GenerationRequest:
    own = getattr(backend, "model_name", None)
    if own is None:
        return gen
    return GenerationRequest(gen.request_id, gen.kind, {**gen.body, "model": own}, gen.tenant,
                             gen.priority, gen.cache_salt, gen.headers)


def no_backend_error(adm: Admitted, err: BackendError | None) -> ApiError:
    if adm.decision.sensitive and (err is None or err.retryable or err.status >= 500):  # local down/full: 503
        e = sensitive_unavailable(err)
        return ApiError(e.status, str(e), e.code)
    if err is None:
        return ApiError(503, "No local backend can take this sensitive request.", "no_local_backend")
    return ApiError(err.status if 400 <= err.status < 600 else 502, str(err),
                    getattr(err, "code", None) or ("upstream_error" if err.status >= 500 else "invalid_request"),
                    getattr(err, "param", None))


async def finish(state: Any, adm: Admitted, status: str, backend: str | None, http_status: int,
                 usage: dict[str, Any] | None, completion_seen: int = 0) -> None:
    """Settle the reservation with what was used and queue the usage record (exactly once)."""
    estimated = not (usage and isinstance(usage.get("prompt_tokens"), int))
    if estimated:
        prompt = adm.parsed.prompt_tokens_bound if backend is not None else 0
        completion = completion_seen
    else:
        prompt = usage["prompt_tokens"]  # type: ignore[index]
        completion = int(usage.get("completion_tokens") or 0)  # type: ignore[union-attr]
    price = state.prices.get(backend) if backend else None
    cost = price.cost(prompt, completion) if price else 0.0
    try:
        await state.quota.settle(adm.rid, prompt + completion, cost)
    except Exception as exc:  # the reservation's TTL releases it; the usage row still counts
        log.warning("settle failed for a request (%s)", type(exc).__name__)
    now = time.perf_counter()
    event = UsageEvent(
        request_id=adm.rid, tenant_id=adm.principal.tenant_id, key_prefix=adm.principal.prefix,
        model=adm.parsed.model, backend=backend, priority=adm.priority, status=status,
        stream=adm.parsed.stream, prompt_tokens=prompt, completion_tokens=completion,
        usage_estimated=estimated, cost=cost, http_status=http_status,
        ttft_ms=None if adm.ttft is None else (adm.ttft - adm.t0) * 1000, latency_ms=(now - adm.t0) * 1000,
        route=ROUTES.get(adm.kind, adm.kind), cached_tokens=_cached_tokens(usage), overhead_ms=adm.overhead_ms,
        prompt_version=prompt_version(adm.prompt_version_header, adm.gen.body))
    state.usage.record(event)
    for observer in state.request_observers:
        observer(event)


ROUTES = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}


def _cached_tokens(usage: dict[str, Any] | None) -> int:
    details = usage.get("prompt_tokens_details") if usage else None
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return cached if isinstance(cached, int) and cached >= 0 else 0
