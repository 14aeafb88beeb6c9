"""Admission: from raw request to a request that holds a quota reservation.

    authenticate → read + parse body → resolve priority → model access → max_tokens limit
                 → route (await) → context clamp → price → reserve

Each step is a small function that returns a value or raises `WireError` with nothing
reserved. Two things send admission round again, each with its own exception: `RouteRefresh`
(the model is unknown here, but a backend may have been registered through another replica a
moment ago: rebuild the registry once) and `StaleConfig` (the quota store saw that the cached
principal predates an admin change: reload it). `admit` holds the retry policy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fairgate.backends.base import GenerationRequest, Kind
from fairgate.backends.openai_wire import (
    WireError,
    WireRequest,
    completion_limit,
    parse_request,
    read_json_object,
)
from fairgate.backends.openai_wire.context import completion_too_long
from fairgate.backends.openai_wire.embeddings import parse_embeddings
from fairgate.backends.openai_wire.headers import bearer
from fairgate.backends.openai_wire.responses import random_request_id, response_id
from fairgate.backends.openai_wire.responses_output import ResponsesOutput
from fairgate.backends.types import Receive, Scope
from fairgate.gateway.quota import QuotaDenied, RateLimitState, StaleConfig
from fairgate.gateway.request.auth import TOKEN_WINDOWS, Principal
from fairgate.gateway.request.auth_throttle import client_address
from fairgate.gateway.request.pool_share import give_back_share, take_share
from fairgate.gateway.request.routing import RETRY_SOON, NoRouteError, RouteDecision, RouteRequest
from fairgate.gateway.request.state import RequestState

log = logging.getLogger("fairgate.request")
MAX_ATTEMPTS = 3  # one pass, plus retries after a route refresh or a stale principal


@dataclass(slots=True)
class Admitted:
    """A request that holds a reservation; `finish` (gateway.request.settlement) must run exactly once."""

    rid: str  # the response id ("chatcmpl-…"): usage rows, logs and the client know it by this
    kind: Kind
    principal: Principal
    parsed: WireRequest
    priority: str
    decision: RouteDecision
    gen: GenerationRequest
    t0: float
    ttft: float | None = None
    backend_s: float = 0.0  # time spent waiting on backends before the first byte went out
    trying: str | None = None  # the backend being called now (a cut request is billed to it)
    overhead_ms: float | None = None  # gateway time to the first byte, backend_s excluded
    prompt_version_header: bytes | None = None
    ratelimit: RateLimitState | None = None  # the tenant's windows after admission (x-ratelimit-*)
    route: str | None = None  # the usage row's route when not the kind's own (e.g. /v1/responses)
    output: ResponsesOutput | None = None  # the answer's wire format when not chat/completions (a ResponsesOutput)

    def response_headers(self, backend: str) -> list[tuple[bytes, bytes]]:
        """The gateway's own response headers, naming the backend (or pool) that answers (what
        `fairgate bench` groups routes by). Fixes the overhead: everything since arrival except
        waiting on backends."""
        self.overhead_ms = max(time.perf_counter() - self.t0 - self.backend_s, 0.0) * 1000
        out = [(b"x-request-id", self.rid.encode()), (b"x-fairgate-priority", self.priority.encode()),
               (b"x-fairgate-overhead-ms", b"%.3f" % self.overhead_ms), (b"x-fairgate-backend", backend.encode())]
        if self.ratelimit is not None:
            out += self.ratelimit.headers()
        return out


@dataclass(slots=True)
class Incoming:
    """What admission read from the request before any policy ran."""

    kind: Kind
    token: str = field(repr=False)  # never in a log line
    headers: dict[bytes, bytes] = field(repr=False)
    parsed: WireRequest = field(repr=False)  # holds the prompt: never in a log line
    request_id: str  # bare id; responses carry `rid`
    t0: float
    rid: str  # the response id: usage row, audit row, x-request-id and the answer's `id`


class RouteRefresh(Exception):
    """The router does not know the model; refreshing the registry may change that."""

    def __init__(self, error: WireError) -> None:
        super().__init__(error.message)
        self.error = error


def bearer_token(headers: dict[bytes, bytes]) -> str:
    """The key of `Authorization: Bearer <key>` (any case of `Bearer`, RFC 7235), or the 401.
    Several Authorization headers never get here: `HeaderGuard` refuses them with a 400."""
    token = bearer(headers.get(b"authorization"))
    if token is None:
        raise WireError(401, "You didn't provide an API key. Send it as `Authorization: Bearer <key>`.",
                        "missing_api_key")
    return token


async def admit(state: RequestState, kind: Kind, scope: Scope, receive: Receive,
                translate: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                id_prefix: str | None = None) -> Admitted:
    """Authenticate, validate, route and reserve; raises WireError with nothing reserved.
    `translate` turns another API's body into this kind's first (e.g. Responses into chat),
    `id_prefix` names its ids (e.g. "resp_" instead of the kind's "chatcmpl-")."""
    t0 = time.perf_counter()
    headers = dict(scope["headers"])
    token = bearer_token(headers)
    principal = await authenticate(state, token, reload=False, address=client_address(scope))
    try:
        return await _admit_principal(state, kind, headers, receive, token, principal, translate, id_prefix, t0)
    except WireError as err:
        err.tenant = principal.tenant_id  # known from here on: the refusal's log line names it
        raise


async def _admit_principal(state: RequestState, kind: Kind, headers: dict[bytes, bytes], receive: Receive,
                           token: str, principal: Principal,
                           translate: Callable[[dict[str, Any]], dict[str, Any]] | None, id_prefix: str | None,
                           t0: float) -> Admitted:
    body = await read_json_object(receive, headers, state.settings.max_body_bytes)
    if translate is not None:
        body = translate(body)
    limits = state.settings.wire_limits
    parsed = parse_embeddings(body, limits=limits) if kind == "embedding" else parse_request(kind, body, limits=limits)
    bare = random_request_id()
    rid = id_prefix + bare if id_prefix else response_id(kind, bare)
    incoming = Incoming(kind, token, headers, parsed, bare, t0, rid)
    if not state.usage.accepting():  # usage could not be kept (usage_on_db_unavailable): reserve nothing
        raise WireError(503, "Usage cannot be recorded right now (database unavailable); retry shortly.",
                        "usage_unavailable", headers={"retry-after": "1"})
    for attempt in range(MAX_ATTEMPTS):
        if attempt:  # an admin change happened since this principal was cached
            principal = await authenticate(state, token, reload=True)
        try:
            return await admit_once(state, incoming, principal)
        except RouteRefresh as exc:
            if attempt > 0 or not await state.refresh_config():
                raise exc.error from None
        except StaleConfig:
            continue
    raise WireError(503, "The gateway's configuration is changing; retry.", "config_changing")


async def admit_once(state: RequestState, req: Incoming, principal: Principal) -> Admitted:
    """One pass of the pipeline under one principal and one registry."""
    parsed = req.parsed
    priority = resolve_priority(principal, req.headers)
    check_model_access(principal, parsed)
    max_tokens = max_tokens_limit(state, principal, parsed)
    decision = await route(state, req, principal, priority)
    check_capabilities(decision, parsed)
    asked = parsed.max_tokens is not None
    if not asked:
        max_tokens = clamp_to_context(decision, parsed, max_tokens)
    else:
        check_context(decision, parsed)
    # every choice may run to max_tokens; embeddings generate nothing
    completion_bound = 0 if req.kind == "embedding" else max_tokens * parsed.num_choices
    check_can_ever_fit(principal, parsed, parsed.prompt_tokens_bound + completion_bound)
    cost = reserve_price(state, decision, parsed, completion_bound)
    rid = req.rid
    await take_share(state, rid, principal.tenant_id, decision)  # tenant_pool_share, before any reserve
    try:
        ratelimit = await reserve(state, rid, principal, parsed.prompt_tokens_bound + completion_bound, cost)
    except BaseException:
        await give_back_share(state, rid)
        raise
    # What we reserved bounds the generation: the reading carries it to every backend (the local
    # engine and our engine servers honour it); an upstream is sent it only when asked or to
    # enforce a key's limit, never otherwise (OpenAI's reasoning models refuse `max_tokens`).
    parsed.max_tokens = max_tokens
    parsed.send_max_tokens = req.kind != "embedding" and (asked or principal.max_tokens_per_request is not None)
    gen = GenerationRequest(
        req.request_id, parsed, tenant=principal.tenant_id, priority=priority,
        cache_salt=principal.cache_salt or principal.tenant_id, model=parsed.model)
    note_open(state, rid, req, principal, priority, decision)
    return Admitted(rid, req.kind, principal, parsed, priority, decision, gen, req.t0,
                    prompt_version_header=req.headers.get(b"x-prompt-version"), ratelimit=ratelimit)


async def authenticate(state: RequestState, token: str, *, reload: bool, fresh: bool = False,
                       address: str | None = None) -> Principal:
    """The key's principal or the 401; an address over its failed tries gets the throttle's
    429 for any key this replica does not already hold (gateway/request/auth_throttle.py)."""
    keys = state.keys
    if not reload:
        cached = keys.cached(token)
        if cached is None:
            state.auth_throttle.check(address)
        elif not fresh:
            return cached  # what keys.authenticate would return, without hashing the key again
    principal = await (keys.reload(token) if reload else keys.fresh(token) if fresh else keys.authenticate(token))
    if principal is None:
        state.auth_throttle.failed(address)
        raise WireError(401, "Incorrect API key provided.", "invalid_api_key")
    return principal


def resolve_priority(principal: Principal, headers: dict[bytes, bytes]) -> str:
    asked = header_text(headers, b"x-priority", "X-Priority")
    try:
        return principal.resolve_priority(asked or None)
    except ValueError as exc:
        raise WireError(400, str(exc), "invalid_priority", "X-Priority") from None


def header_text(headers: dict[bytes, bytes], name: bytes, shown: str) -> str | None:
    """A header's value as UTF-8 text, or a 400 naming the header."""
    raw = headers.get(name)
    try:
        return raw.decode("utf-8") if raw is not None else None
    except UnicodeDecodeError:
        raise WireError(400, f"The {shown} header is not valid UTF-8.", "invalid_header", shown) from None


def check_model_access(principal: Principal, parsed: WireRequest) -> None:
    assert parsed.model is not None  # the gateway parses with require_model
    if not principal.may_use(parsed.model):
        raise WireError(404, f"The model `{parsed.model}` does not exist or you do not have access to it.",
                        "model_not_found", "model")


def max_tokens_limit(state: RequestState, principal: Principal, parsed: WireRequest) -> int:
    """The completion tokens to reserve: what was asked (within the key's limit) or the default."""
    limit = principal.max_tokens_per_request
    if parsed.max_tokens is not None and limit is not None and parsed.max_tokens > limit:
        raise WireError(400, f"`{parsed.max_tokens_field}` is {parsed.max_tokens}, over this "
                             f"{principal.max_tokens_set_by}'s limit of {limit} tokens per request.",
                        "max_tokens_exceeded", parsed.max_tokens_field)
    return parsed.max_tokens or min(state.settings.default_max_tokens, limit or 1 << 30)


async def route(state: RequestState, req: Incoming, principal: Principal, priority: str) -> RouteDecision:
    cls = header_text(req.headers, b"x-data-classification", "X-Data-Classification")
    assert req.parsed.model is not None
    try:
        return await state.router.decide(RouteRequest(
            tenant_id=principal.tenant_id, tenant_name=principal.tenant_name, model=req.parsed.model,
            priority=priority, data_residency=principal.data_residency,
            classification_header=cls.strip().lower() if cls else None,
            texts=req.parsed.texts, prompt_tokens=req.parsed.prompt_tokens_bound,
            request_id=req.rid, body=req.parsed.body))
    except NoRouteError as exc:
        error = WireError(exc.status, str(exc), exc.code, "model" if exc.status == 404 else None,
                          headers=RETRY_SOON if exc.status == 503 else None)
        if exc.status == 404:
            raise RouteRefresh(error) from None
        raise error from None


def check_capabilities(decision: RouteDecision, parsed: WireRequest) -> None:
    """Refuse, before anything is reserved, a field the chosen backend declares it cannot honour."""
    if not decision.backends:
        return
    caps, name = decision.backends[0].capabilities, decision.backends[0].name
    if parsed.kind == "embedding" and not caps.embeddings:
        raise WireError(400, f"Embeddings are not served by the backend serving this model ({name}).",
                        "unsupported_parameter", "model")
    asks = [
        ("n", parsed.n > 1, caps.n),
        ("prompt", parsed.is_batched, caps.batched_prompts),
        ("tools", parsed.uses_tools, caps.tools),
        ("response_format", parsed.structured_output, caps.response_format),
        ("logprobs", parsed.wants_logprobs, caps.logprobs),
    ]
    for param, asked, supported in asks:
        if asked and not supported:
            raise WireError(400, f"`{param}` is not supported by the backend serving this model ({name}).",
                            "unsupported_parameter", param)


def clamp_to_context(decision: RouteDecision, parsed: WireRequest, max_tokens: int) -> int:
    """No max_tokens asked: what we reserve is sent as the limit, so keep it inside the model's
    context or a small local model would refuse a request the client never sized."""
    ctx = decision.backends[0].context_length if decision.backends else None
    return completion_limit(None, ctx, parsed.prompt_tokens_bound, default=max_tokens)


def check_context(decision: RouteDecision, parsed: WireRequest) -> None:
    """An asked max_tokens at or past the model's whole context can never fit (a prompt has a
    token at least); the backend checks the exact sum with the real prompt."""
    ctx = decision.backends[0].context_length if decision.backends else None
    if ctx is not None and parsed.max_tokens is not None and parsed.max_tokens >= ctx:
        raise WireError(400, completion_too_long(1, parsed.max_tokens, ctx), "context_length_exceeded",
                        "max_tokens")


def check_can_ever_fit(principal: Principal, parsed: WireRequest, tokens: int) -> None:
    """A reservation larger than a window's whole limit would be refused with a 429 forever:
    it is the request's size that is wrong, so say so with a 400."""
    ceiling = principal.token_ceiling()
    if ceiling < 0 or tokens <= ceiling:
        return  # every request of this size fits every window (the common case, checked once)
    for scope in principal.scopes:
        limits = scope.as_ints()
        for name, at in TOKEN_WINDOWS.items():
            if 0 <= limits[at] < tokens:
                param = "input" if parsed.kind == "embedding" else "max_tokens"
                raise WireError(400, f"This request may use up to {tokens} tokens (prompt bound plus max_tokens "
                                     f"for every choice), more than this key's {name} limit of {limits[at]}; it "
                                     "can never be admitted. Lower max_tokens, n or the prompt.",
                                "request_too_large", param)


def note_open(state: RequestState, rid: str, req: Incoming, principal: Principal, priority: str,
              decision: RouteDecision) -> None:
    """The request's would-be row, on disk until settlement (gateway/billing/open_requests.py):
    what a restart bills if this process dies first."""
    parsed = req.parsed
    state.usage.open.opened(rid, {
        "request_id": rid, "engine_request_id": req.request_id, "tenant_id": principal.tenant_id,
        "key_prefix": principal.prefix, "model": parsed.model or "", "priority": priority,
        "backend": decision.backends[0].name if decision.backends else None, "stream": parsed.stream,
        "prompt_tokens": parsed.prompt_tokens_bound, "kind": req.kind, "t": time.time()})


def reserve_price(state: RequestState, decision: RouteDecision, parsed: WireRequest, max_tokens: int) -> float:
    price = state.prices.get(decision.backends[0].name) if decision.backends else None
    return price.cost(parsed.prompt_tokens_bound, max_tokens) if price else 0.0


async def reserve(state: RequestState, rid: str, principal: Principal, tokens: int, cost: float) -> RateLimitState:
    """Check-and-reserve in every scope; StaleConfig passes up to `admit`'s retry."""
    try:
        return await state.quota.reserve(rid, principal.scopes, tokens, cost, principal.version)
    except StaleConfig:
        raise
    except QuotaDenied as d:
        headers = {"retry-after": str(d.retry_after_s)} | {k.decode(): v.decode() for k, v in d.state.headers()}
        raise WireError(429, f"Rate limit reached for this {d.scope}: {d.limit}. Retry after {d.retry_after_s} s.",
                        d.limit, headers=headers) from None
    except Exception as exc:  # the quota store is down: fail closed, never admit unchecked
        log.warning("quota store unavailable (%s)", type(exc).__name__)
        raise WireError(503, "The quota service is unavailable; retry shortly.", "quota_unavailable",
                        headers={"retry-after": "1"}) from None
