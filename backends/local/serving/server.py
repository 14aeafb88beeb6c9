"""`fairgate engine`: the paged engine behind an OpenAI-compatible HTTP API (Starlette + uvicorn).

Routes: POST /v1/completions, POST /v1/chat/completions, POST /v1/responses (JSON or SSE),
POST /v1/embeddings, GET /v1/models[/{id}],
GET /v1/requests/{id}/usage (what a caller-named request used: backends/local/engine/request_ledger.py),
GET /health, GET /stats, GET /metrics (Prometheus), GET|PUT /control/fairness. The gateway in
front passes the tenant, priority class and cache salt in `X-Tenant`, `X-Priority`,
`X-Cache-Salt`; `X-Prompt-Version` labels the prefix-cache metrics. With `--api-key` those
headers (and every /v1 call) need `Authorization: Bearer <key>` (backends/local/serving/auth.py).

Every refusal is an OpenAI error body with a 4xx status; a client that disconnects (stream or
not) aborts its request, which frees its KV blocks at the next step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fairgate.backends.base import GenerationRequest, Kind
from fairgate.backends.collector import DEFAULT_THRESHOLD, settle
from fairgate.backends.local.engine.metrics import ServerMetrics
from fairgate.backends.local.engine.request_ledger import RequestLedger
from fairgate.backends.local.serving.auth import ANONYMOUS_TENANT, EngineAuth, check_bind
from fairgate.backends.local.serving.backend import LocalBackend
from fairgate.backends.local.serving.choices import choice_ids
from fairgate.backends.local.serving.control import fairness_body, secret_ok
from fairgate.backends.local.serving.listener import tcp_listener
from fairgate.backends.local.serving.openapi import engine_document
from fairgate.backends.local.serving.prepare import (
    EngineRequest,
    compile_grammar,
    prepare,
    read_for_engine,
)
from fairgate.backends.metrics_access import MetricsAccess
from fairgate.backends.openai_wire import (
    SSE_DONE,
    WireError,
    WireRequest,
    bad_value,
    error_response,
    read_json_object,
    sse,
)
from fairgate.backends.openai_wire.embeddings import parse_embeddings
from fairgate.backends.openai_wire.headers import HeaderGuard, HeaderLimits
from fairgate.backends.openai_wire.openapi import openapi_routes
from fairgate.backends.openai_wire.responses_output import ResponsesOutput
from fairgate.backends.openai_wire.responses_request import as_responses_error, responses_to_chat
from fairgate.scheduler.request import PRIORITY_CLASSES

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024


def build_app(
    backend: LocalBackend,
    control_secret: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    close_backend: bool = True,
    auth: EngineAuth | None = None,
    metrics: MetricsAccess | None = None,
    header_limits: HeaderLimits | None = None,
) -> Starlette:
    """The engine server app. The backend's engine is closed on shutdown when `close_backend`;
    `auth` (default: open) says who may call and who may name a tenant; `metrics` who may
    scrape (default: FAIRGATE_METRICS_*); `header_limits` when request headers are a 431."""
    server = EngineServer(backend, control_secret, max_body_bytes, auth or EngineAuth(), metrics)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_backend:
            await backend.aclose()

    routes = [
        Route("/v1/completions", server.completions, methods=["POST"]),
        Route("/v1/chat/completions", server.chat, methods=["POST"]),
        Route("/v1/responses", server.responses, methods=["POST"]),
        Route("/v1/embeddings", server.embeddings, methods=["POST"]),
        Route("/v1/models", server.models, methods=["GET"]),
        Route("/v1/models/{model:path}", server.model, methods=["GET"]),
        Route("/v1/requests/{rid}/usage", server.request_usage, methods=["GET"]),
        Route("/health", server.health, methods=["GET"]),
        Route("/stats", server.stats, methods=["GET"]),
        Route("/metrics", server.metrics.endpoint, methods=["GET"]),
        Route("/control/fairness", server.fairness, methods=["GET", "PUT"]),
        *openapi_routes(engine_document, "fairgate engine"),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error},
                    middleware=[Middleware(HeaderGuard, limits=header_limits)])
    app.state.engine_server = server
    return app


class EngineServer:
    """The engine server's routes over one `LocalBackend`."""

    def __init__(self, backend: LocalBackend, control_secret: str | None, max_body_bytes: int,
                 auth: EngineAuth | None = None, metrics: MetricsAccess | None = None) -> None:
        self.backend = backend
        self.auth = auth or EngineAuth()
        self.control_secret = control_secret
        self.max_body_bytes = max_body_bytes
        # GET /metrics and the engine hooks; the API key may scrape too
        self.metrics = ServerMetrics(backend.engine, backend.model_name, metrics, self.auth.api_key)
        self.ledger = RequestLedger()  # non-streaming requests named by a trusted caller

    async def completions(self, request: Request) -> Response:
        return await self._generate(request, "completion")

    async def chat(self, request: Request) -> Response:
        return await self._generate(request, "chat")

    async def responses(self, request: Request) -> Response:
        """POST /v1/responses: the Responses API on the chat path (openai_wire.responses_*)."""
        return await self._generate(request, "chat", responses=True)

    async def embeddings(self, request: Request) -> Response:
        """POST /v1/embeddings: mean-pooled hidden states of the served model."""
        try:
            trusted = self.auth.trusted(dict(request.headers))
            body = await _read_json(request, self.max_body_bytes)
            wire = parse_embeddings(body, require_model=False, limits=self.backend.info.limits)
            if wire.model is not None and wire.model != self.backend.model_name:
                raise WireError(404, f"The model `{wire.model}` does not exist.", "model_not_found", "model")
            greq = _generation_request(wire, request.headers if trusted else None)
            return JSONResponse(await self.backend.embed(greq), headers={"x-request-id": greq.request_id})
        except WireError as exc:
            return error_response(exc)

    async def _generate(self, request: Request, kind: Kind, responses: bool = False) -> Response:
        arrived = time.perf_counter()
        try:
            trusted = self.auth.trusted(dict(request.headers))  # before the body is even read
            body = await _read_json(request, self.max_body_bytes)
            asked, body = body, responses_to_chat(body) if responses else body
            wire = read_for_engine(kind, body, self.backend.info)
            greq = _generation_request(wire, request.headers if trusted else None)
            # `resp_<id>`: the same id as X-Request-Id, as `chatcmpl-<id>` is on the chat route
            output = ResponsesOutput(asked, greq.request_id) if responses else None
            prepared = prepare(wire, self.backend.info)
            await compile_grammar(prepared, self.backend.info)
            self.metrics.tag(greq.request_id, request.headers.get("x-prompt-version"), body,
                             choice_ids(greq.request_id, len(prepared.prompt_batch) or 1, prepared.n))
            caller_id = request.headers.get("x-request-id") if trusted else None
            if prepared.stream:
                return await self._stream(greq, prepared, output, caller_id)
            with self.ledger.track(caller_id, greq.used) as entry:
                response = await self._complete(request, greq, prepared, output, arrived)
                if entry is not None and response.status_code == 499:
                    entry.status = "cancelled"
                return response
        except WireError as exc:
            return error_response(as_responses_error(exc) if responses else exc)
        except Exception:  # a fault of ours: still OpenAI's format, never a plain-text 500
            log.exception("request failed")
            error = WireError(500, "The engine failed on this request.", "internal_error")
            return error_response(as_responses_error(error) if responses else error)

    async def _complete(self, request: Request, greq: GenerationRequest, prepared: EngineRequest,
                        output: ResponsesOutput | None, arrived: float) -> Response:
        """The whole answer; `x-fairgate-ttft-ms` says when its first token came (a gateway's TTFT
        for a request it did not stream)."""
        work = asyncio.ensure_future(self.backend.complete_prepared(prepared, greq))
        watch = asyncio.ensure_future(_wait_disconnect(request))
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not work.done():  # the client left (or we were cancelled): abort the request
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
        if work.cancelled():
            return Response(status_code=499)  # nobody is listening; nginx's "client closed"
        result = work.result() if output is None else output.response(work.result())
        headers = {"x-request-id": greq.request_id}
        if greq.used.first_token_at is not None:
            headers["x-fairgate-ttft-ms"] = f"{(greq.used.first_token_at - arrived) * 1000:.1f}"
        return JSONResponse(result, headers=headers)

    async def request_usage(self, request: Request) -> Response:
        """GET /v1/requests/{id}/usage: what a request named by `X-Request-Id` used, once it ended."""
        try:
            if not self.auth.trusted(dict(request.headers)):
                raise WireError(403, "Only a caller holding the engine's API key may read request usage.",
                                "usage_needs_key")
        except WireError as exc:
            return error_response(exc)
        found = await self.ledger.usage(request.path_params["rid"])
        if found is None:
            return error_response(WireError(404, "No request with this id is known here.", "request_not_found"))
        status, used = found
        return JSONResponse({"status": status, "usage": {
            "prompt_tokens": used.prompt_tokens or 0, "completion_tokens": used.completion_tokens or 0,
            "total_tokens": (used.prompt_tokens or 0) + (used.completion_tokens or 0)}})

    async def _stream(self, greq: GenerationRequest, prepared: EngineRequest,
                      output: ResponsesOutput | None, caller_id: str | None) -> Response:
        """The SSE response; a named stream is in the ledger too (for a killed gateway's successor)."""
        batches = self.backend.stream_prepared(prepared, greq, include_usage=prepared.include_usage)
        try:
            first = await batches.__anext__()  # admission errors become a plain 4xx here
        except WireError:
            await batches.aclose()
            raise

        def frame(batch: list[dict[str, Any]]) -> bytes:
            return output.frame(batch) if output is not None else b"".join(sse(c) for c in batch)

        async def events() -> AsyncIterator[bytes]:
            with self.ledger.track(caller_id, greq.used) as entry:
                try:
                    yield frame(first)
                    async for batch in batches:
                        yield frame(batch)
                except WireError as exc:  # failed mid-stream (engine error, shutdown): tell the client in-band
                    if output is not None:
                        yield output.failed(exc.message, exc.status)  # Responses: `response.failed`, no more
                        return
                    yield sse(exc.body())
                except BaseException:  # the client left: the request was aborted
                    if entry is not None:
                        entry.status = "cancelled"
                    raise
                finally:
                    await batches.aclose()  # on disconnect: aborts the request
                yield SSE_DONE if output is None else output.end()

        return StreamingResponse(
            events(), media_type="text/event-stream", headers={"x-request-id": greq.request_id}
        )

    def _model(self) -> dict[str, Any]:
        return {"id": self.backend.model_name, "object": "model", "created": 0, "owned_by": "fairgate",
                "max_model_len": self.backend.engine.max_model_len}

    async def models(self, request: Request) -> Response:
        try:
            self.auth.trusted(dict(request.headers))
        except WireError as exc:
            return error_response(exc)
        return JSONResponse({"object": "list", "data": [self._model()]})

    async def model(self, request: Request) -> Response:
        """GET /v1/models/{id}: the served model, or OpenAI's 404."""
        try:
            self.auth.trusted(dict(request.headers))
        except WireError as exc:
            return error_response(exc)
        name = request.path_params["model"]
        if name != self.backend.model_name:
            return error_response(WireError(404, f"The model `{name}` does not exist.", "model_not_found", "model"))
        return JSONResponse(self._model())

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "step_costs": _step_costs(self.backend)})

    async def stats(self, request: Request) -> Response:
        s = self.backend.engine.stats()
        return JSONResponse({**{f: getattr(s, f) for f in type(s).__slots__}, "step_costs": _step_costs(self.backend),
                             "kernels": self.backend.engine.runner.kernels.describe()})

    async def fairness(self, request: Request) -> Response:
        secret = self.control_secret or os.environ.get("FAIRGATE_CONTROL_SECRET")
        if not secret:  # closed unless configured: weights steer every tenant's service
            return error_response(WireError(403, "control API disabled: start the engine with --control-secret",
                                            "control_disabled"))
        if not secret_ok(request, secret):
            return error_response(WireError(401, "invalid control secret", "invalid_secret"))
        engine = self.backend.engine
        if request.method == "PUT":
            try:
                weights, version = fairness_body(await _read_json(request, self.max_body_bytes))
            except WireError as exc:
                return error_response(exc)
            engine.set_fairness(weights, version)
        return JSONResponse({"weights": engine.fairness_weights, "version": engine.fairness_version})


def _step_costs(backend: LocalBackend) -> dict[str, Any] | None:
    """The measured cost weights (backends/local/engine/step_cost.py) the gateway allocates cost by."""
    costs = backend.engine.step_costs()
    return None if costs is None else costs.as_dict()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(WireError(exc.status_code, str(exc.detail)))


# ---------------------------------------------------------------------- request helpers
def _generation_request(wire: WireRequest, headers: Any | None) -> GenerationRequest:
    """`headers` None: an anonymous caller, who never names a tenant (see server_auth)."""
    if headers is None:
        return GenerationRequest(uuid.uuid4().hex, wire, tenant=ANONYMOUS_TENANT)
    return GenerationRequest(
        request_id=uuid.uuid4().hex,
        wire=wire,
        tenant=headers.get("x-tenant") or "default",
        priority=_priority(headers.get("x-priority")),
        cache_salt=headers.get("x-cache-salt") or None,
    )


async def _read_json(request: Request, limit: int) -> dict[str, Any]:
    # engine clients know an oversized body by this code
    return await read_json_object(request.receive, dict(request.scope["headers"]), limit, "body_too_large")


def _priority(header: str | None) -> str:
    if not header:
        return "standard"
    if header not in PRIORITY_CLASSES:
        raise bad_value(f"X-Priority must be one of {', '.join(PRIORITY_CLASSES)}", "X-Priority")
    return header


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


# ---------------------------------------------------------------------- `fairgate engine`
def run_engine_server(args: argparse.Namespace) -> int:
    """Load the model, bind the port (0: any free one), print where it listens, serve."""
    import uvicorn

    from fairgate.backends.http_protocol import limited_protocol
    from fairgate.backends.local.engine.async_engine import AsyncEngine
    from fairgate.backends.local.engine.config import EngineConfig
    from fairgate.backends.local.model.config import ModelConfigError
    from fairgate.backends.local.serving.shutdown import EngineUvicorn

    level = getattr(args, "log_level", "info")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    auth = EngineAuth(args.api_key or os.environ.get("FAIRGATE_ENGINE_API_KEY") or None, args.allow_anonymous)
    check_bind(args.host, auth.api_key, args.insecure_no_auth)
    env = MetricsAccess.from_env()
    metrics = MetricsAccess(env.token, env.anonymous or getattr(args, "metrics_anonymous", False),
                            env.tenant_labels or getattr(args, "metrics_tenant_labels", False))
    sock = tcp_listener(args.host, args.port)  # connections made before uvicorn starts wait in the backlog
    host, port = sock.getsockname()[:2]

    async def serve() -> None:
        # The engine is built inside the server's loop so its streams deliver to that loop.
        engine = AsyncEngine(EngineConfig.from_args(args))
        backend = LocalBackend(engine, name="engine")
        app = build_app(backend, control_secret=args.control_secret, auth=auth, metrics=metrics)
        if getattr(args, "log_requests", False) and app.state.engine_server.metrics.requests is not None:
            app.state.engine_server.metrics.requests.log_requests = True
        config = uvicorn.Config(app, log_level=level, access_log=False, lifespan="on", timeout_graceful_shutdown=5,
                                http=limited_protocol(HeaderLimits()))
        server = EngineUvicorn(config, backend)  # ends unfinished requests in-band when stopping
        # the model and imports live as long as the process: frozen, full collections skip them; and
        # full collections, which stop the engine thread too, ten times rarer (backends/collector.py)
        settle(getattr(args, "gc_threshold", DEFAULT_THRESHOLD))
        shown = f"[{host}]" if ":" in host else host
        print(f"fairgate engine listening on http://{shown}:{port}", flush=True)
        await server.serve(sockets=[sock])

    try:
        asyncio.run(serve())
    except ModelConfigError as exc:  # a folder this engine cannot run: the reason, not a traceback
        print(f"fairgate engine: {exc}", file=sys.stderr)
        return 2
    return 0
