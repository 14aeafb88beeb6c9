"""The gateway app factory. All state is built in the lifespan and lives on `app.state`:

settings, db/sessions, quota (store), keys (KeyCache), usage (UsageRecorder), http (shared
httpx client), embedded (in-process engine or None), backends (name → Backend), prices,
router, request_observers (callables fed each finished request's UsageEvent, for metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backends.http1 import HTTP1Pool
from gateway import admin, admin_classify, admin_routes, openai_api
from gateway.auth import KeyCache
from gateway.db import make_engine, make_sessionmaker, upgrade
from gateway.errors import ApiError, error_response
from gateway.fairness import FairnessSync, push_weights
from gateway.metrics import install_metrics, metrics_routes
from gateway.quota import QuotaStore
from gateway.registry import load_backends, start_embedded_engine, watch_config
from gateway.settings import Settings
from gateway.usage import UsageRecorder


def make_quota_store(settings: Settings) -> QuotaStore:
    if settings.redis_url:
        from gateway.quota.redis_store import RedisQuotaStore

        return RedisQuotaStore(settings.redis_url, settings.redis_prefix, settings.reservation_ttl_s)
    from gateway.quota.memory import MemoryQuotaStore

    return MemoryQuotaStore(settings.reservation_ttl_s)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    return error_response(ApiError(exc.status_code, str(exc.detail), code))


async def _health(request: Request) -> JSONResponse:
    """Liveness for load balancers: no auth, no database round trip, no prompt data."""
    return JSONResponse({"status": "ok"})


def create_app(settings: Settings | None = None, *, migrate: bool = True) -> Starlette:
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        st = app.state
        st.settings = settings
        if migrate:
            await asyncio.to_thread(upgrade, settings.database_url)
        st.db = make_engine(settings.database_url)
        st.sessions = make_sessionmaker(st.db)
        st.quota = make_quota_store(settings)
        st.keys = KeyCache(st.sessions, st.quota)
        st.usage = UsageRecorder(st.db, settings.usage_batch_size, settings.usage_flush_interval_s)
        st.usage.start()
        st.upstream_pool = HTTP1Pool()  # backends' calls: the lean client, see backends/http1.py
        st.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
                                    timeout=settings.upstream_timeout_s)
        st.request_observers = []
        st.embedded = await asyncio.to_thread(start_embedded_engine, settings)
        install_metrics(st)  # st.metrics for GET /metrics, fed through request_observers
        st.backends = {}
        try:
            st.config_version = await st.quota.version()
        except Exception:  # Redis down at start: serve 503s until it is back, then catch up
            st.config_version = -1
        st.config_lock = asyncio.Lock()
        await load_backends(st)
        await push_weights(st)
        st.fairness_sync = FairnessSync(st, settings.fairness_sync_interval_s).start()
        watcher = asyncio.get_running_loop().create_task(watch_config(st), name="config-watcher")
        # everything built so far lives as long as the app: keep it out of the collector's
        # full passes, which otherwise pause the request path for milliseconds
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            watcher.cancel()
            await st.fairness_sync.stop()
            await st.usage.stop()
            for backend in st.backends.values():
                await backend.aclose()
            if st.embedded is not None and st.embedded.name not in st.backends:
                await st.embedded.aclose()
            await st.http.aclose()
            await st.upstream_pool.aclose()
            await st.quota.aclose()
            if getattr(st, "classifier", None) is not None:
                st.classifier.close()  # the detectors' worker processes
            st.db.dispose()

    routes = [Route("/health", _health, methods=["GET"])]
    routes += openai_api.routes() + admin.routes() + admin_routes.routes() + metrics_routes()
    routes += admin_classify.routes()
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
