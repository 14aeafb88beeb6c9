"""`fairgate engine`: the paged engine behind an OpenAI-compatible HTTP API (Starlette + uvicorn).

Routes: POST /v1/completions, POST /v1/chat/completions (JSON or SSE), GET /v1/models,
GET /health, GET /stats, GET /metrics (Prometheus), GET|PUT /control/fairness. The gateway in
front passes the tenant, priority class and cache salt in `X-Tenant`, `X-Priority`,
`X-Cache-Salt`; `X-Prompt-Version` labels the prefix-cache metrics.

Every refusal is an OpenAI error body with a 4xx status; a client that disconnects (stream or
not) aborts its request, which frees its KV blocks at the next step.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from backends.base import GenerationRequest
from backends.local.backend import LocalBackend
from backends.local.metrics import ServerMetrics
from backends.local.openai_api import APIError, error_body
from scheduler.request import PRIORITY_CLASSES

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 4 * 1024 * 1024


def build_app(
    backend: LocalBackend,
    control_secret: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    close_backend: bool = True,
) -> Starlette:
    """The engine server app. The backend's engine is closed on shutdown when `close_backend`."""
    metrics = ServerMetrics(backend.engine, backend.model_name)  # GET /metrics, engine hooks

    async def completions(request: Request) -> Response:
        return await _generate(request, "completion")

    async def chat(request: Request) -> Response:
        return await _generate(request, "chat")

    async def _generate(request: Request, kind: Any) -> Response:
        try:
            body = await _read_json(request, max_body_bytes)
            greq = GenerationRequest(
                request_id=uuid.uuid4().hex,
                kind=kind,
                body=body,
                tenant=request.headers.get("x-tenant") or "default",
                priority=_priority(request.headers.get("x-priority")),
                cache_salt=request.headers.get("x-cache-salt") or None,
            )
            parsed = backend.prepare(greq)
            metrics.tag(greq.request_id, request.headers.get("x-prompt-version"), body)
            if parsed.stream:
                return await _stream(request, greq, parsed)
            return await _complete(request, greq, parsed)
        except APIError as exc:
            return _error(exc)

    async def _complete(request: Request, greq: GenerationRequest, parsed: Any) -> Response:
        work = asyncio.ensure_future(backend.complete_parsed(parsed, greq))
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
        return JSONResponse(work.result(), headers={"x-request-id": greq.request_id})

    async def _stream(request: Request, greq: GenerationRequest, parsed: Any) -> Response:
        chunks = backend.stream_parsed(parsed, greq, include_usage=parsed.include_usage)
        try:
            first = await chunks.__anext__()  # admission errors become a plain 4xx here
        except APIError:
            await chunks.aclose()
            raise

        async def sse() -> AsyncIterator[bytes]:
            try:
                yield _sse(first)
                async for c in chunks:
                    yield _sse(c)
            except APIError as exc:  # failed mid-stream: tell the client in-band
                yield _sse(exc.body())
            finally:
                await chunks.aclose()  # on disconnect: aborts the request
            yield b"data: [DONE]\n\n"

        return StreamingResponse(
            sse(), media_type="text/event-stream", headers={"x-request-id": greq.request_id}
        )

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": backend.model_name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "fairgate",
                        "max_model_len": backend.engine.max_model_len,
                    }
                ],
            }
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def stats(request: Request) -> Response:
        s = backend.engine.stats()
        return JSONResponse({f: getattr(s, f) for f in type(s).__slots__})

    async def fairness(request: Request) -> Response:
        secret = control_secret or os.environ.get("FAIRGATE_CONTROL_SECRET")
        if not secret:  # closed unless configured: weights steer every tenant's service
            return _error(APIError("control API disabled: start the engine with --control-secret",
                                   403, "permission_error", "control_disabled"))
        if not _secret_ok(request, secret):
            return _error(APIError("invalid control secret", 401, "authentication_error", "invalid_secret"))
        engine = backend.engine
        if request.method == "PUT":
            try:
                body = await _read_json(request, max_body_bytes)
                weights, version = _fairness_body(body)
            except APIError as exc:
                return _error(exc)
            engine.set_fairness(weights, version)
        return JSONResponse({"weights": engine.fairness_weights, "version": engine.fairness_version})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        return JSONResponse(error_body(str(exc.detail), kind, None), status_code=exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_backend:
            await backend.aclose()

    routes = [
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/metrics", metrics.endpoint, methods=["GET"]),
        Route("/control/fairness", fairness, methods=["GET", "PUT"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})


# ---------------------------------------------------------------------- request helpers
async def _read_json(request: Request, limit: int) -> Any:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise APIError(f"request body is larger than {limit} bytes", 413, code="body_too_large")
    raw = bytearray()
    async for part in request.stream():
        raw += part
        if len(raw) > limit:
            raise APIError(f"request body is larger than {limit} bytes", 413, code="body_too_large")
    try:
        text = bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        raise APIError("request body is not valid UTF-8", code="invalid_encoding") from None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise APIError(f"request body is not valid JSON: {exc}", code="invalid_json") from None


def _priority(header: str | None) -> str:
    if not header:
        return "standard"
    if header not in PRIORITY_CLASSES:
        raise APIError(
            f"X-Priority must be one of {', '.join(PRIORITY_CLASSES)}", code="invalid_value", param="X-Priority"
        )
    return header


def _fairness_body(body: Any) -> tuple[dict[str, float], int | None]:
    weights = body.get("weights") if isinstance(body, dict) else None
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool) and v > 0
        for k, v in weights.items()
    ):
        raise APIError("weights must be an object of tenant -> positive number", param="weights")
    version = body.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise APIError("version must be an integer", param="version")
    return {k: float(v) for k, v in weights.items()}, version


def _secret_ok(request: Request, secret: str) -> bool:
    import hmac

    given = request.headers.get("x-control-secret") or ""
    auth = request.headers.get("authorization") or ""
    if auth.lower().startswith("bearer "):
        given = given or auth[7:]
    return hmac.compare_digest(given.encode(), secret.encode())


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _error(exc: APIError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


# ---------------------------------------------------------------------- `fairgate engine`
def run_engine_server(args: argparse.Namespace) -> int:
    """Load the model, bind the port (0: any free one), print where it listens, serve."""
    import uvicorn

    from backends.local.engine import AsyncEngine
    from backends.local.engine_config import EngineConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections made before uvicorn starts wait in the backlog
    host, port = sock.getsockname()[:2]

    async def serve() -> None:
        # The engine is built inside the server's loop so its streams deliver to that loop.
        engine = AsyncEngine(EngineConfig.from_args(args))
        app = build_app(LocalBackend(engine, name="engine"), control_secret=args.control_secret)
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
        server = uvicorn.Server(config)
        shown = f"[{host}]" if ":" in host else host
        print(f"fairgate engine listening on http://{shown}:{port}", flush=True)
        await server.serve(sockets=[sock])

    asyncio.run(serve())
    return 0
