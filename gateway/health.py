"""Health for load balancers and orchestrators: no auth, no prompt data, no credentials.

    GET /health/liveness   the process answers (no I/O)
    GET /health/readiness  200 when the database and Redis answer and every model (backend
                           name) has at least one backend that can take a request; 503 with
                           the failing checks otherwise, and while the gateway shuts down
    GET /version           the package version

A backend can take a request unless it is a pool with no routable replica (all ejected or
draining) or an upstream whose backend-wide circuit is open (a tenant's own back-off does
not count: the others are still served).
"""

from __future__ import annotations

import asyncio
from importlib import metadata
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fairgate.backends.breaker import State
from fairgate.backends.pool import PoolBackend
from fairgate.gateway.state import GatewayState, state_of

CHECK_TIMEOUT_S = 2.0


def version() -> str:
    try:
        return metadata.version("fairgate")
    except metadata.PackageNotFoundError:  # run from a checkout without installing
        return "0.1.0+checkout"


def backend_ready(backend: Any) -> bool:
    if isinstance(backend, PoolBackend):
        return any(r.routable for r in backend.replicas.values())
    breaker = backend.breaker  # an upstream's; open = an upstream outage
    return breaker is None or breaker.state is not State.OPEN


async def _db_ok(state: GatewayState) -> bool:
    def ping() -> None:
        with state.db.connect() as conn:
            conn.execute(text("SELECT 1"))

    try:
        await asyncio.wait_for(asyncio.to_thread(ping), CHECK_TIMEOUT_S)
        return True
    except Exception:  # noqa: BLE001 - any failure means not ready
        return False


async def _redis_ok(state: GatewayState) -> bool | None:
    if not state.settings.redis_url:
        return None  # the in-process store: nothing to reach
    try:
        await asyncio.wait_for(state.config.version(), CHECK_TIMEOUT_S)
        return True
    except Exception:  # noqa: BLE001
        return False


async def readiness_report(state: GatewayState, shutting_down: bool) -> tuple[bool, dict[str, Any]]:
    db, redis = await asyncio.gather(_db_ok(state), _redis_ok(state))
    models = {name: backend_ready(b) for name, b in sorted(state.backends.items())}
    checks: dict[str, Any] = {"database": db, "redis": redis, "models": models,
                              "shutting_down": shutting_down}
    ready = db and redis is not False and bool(models) and all(models.values()) and not shutting_down
    return ready, checks


async def liveness(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def readiness(request: Request) -> JSONResponse:
    shutting_down = bool(getattr(request.app.state, "shutting_down", False))
    ready, checks = await readiness_report(state_of(request.app), shutting_down)
    return JSONResponse({"status": "ready" if ready else "not_ready", "checks": checks}, 200 if ready else 503)


async def version_route(request: Request) -> JSONResponse:
    return JSONResponse({"name": "fairgate", "version": version()})


def routes() -> list[Route]:
    return [Route("/health/liveness", liveness, methods=["GET"]),
            Route("/health/readiness", readiness, methods=["GET"]),
            Route("/version", version_route, methods=["GET"])]
