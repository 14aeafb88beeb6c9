"""The gateway app factory. All state is built in the lifespan as one `GatewayState`
(gateway/state.py), reached by handlers through `state_of(app)`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from fairgate.backends.collector import parse_threshold, settle
from fairgate.backends.http1 import HTTP1Pool
from fairgate.backends.openai_wire import WireError, error_response
from fairgate.backends.openai_wire.headers import HeaderGuard
from fairgate.gateway import dashboard, health, openapi
from fairgate.gateway.admin import advice as admin_advice
from fairgate.gateway.admin import classify as admin_classify
from fairgate.gateway.admin import costs as admin_costs
from fairgate.gateway.admin import pools as admin_pools
from fairgate.gateway.admin import routes as admin
from fairgate.gateway.admin import routing as admin_routing
from fairgate.gateway.admin import usage_log as admin_usage_log
from fairgate.gateway.admin.advice import advice_panel
from fairgate.gateway.admin.token import load_admin_token_hash
from fairgate.gateway.billing.budgets import budget_source
from fairgate.gateway.billing.usage import UsageRecorder
from fairgate.gateway.config.declarative import DeclaredFile
from fairgate.gateway.config.fairness import FairnessSync, push_weights
from fairgate.gateway.config.registry import load_backends, start_embedded_engine, watch_config
from fairgate.gateway.fast_lane import GatewayApp
from fairgate.gateway.observability.metrics import make_metrics, metrics_routes, watch_usage_backlog
from fairgate.gateway.quota import BudgetSource, QuotaStore
from fairgate.gateway.request import tenant_api
from fairgate.gateway.request.auth import KeyCache
from fairgate.gateway.request.auth_throttle import AuthThrottle
from fairgate.gateway.request.classification import warm_detectors
from fairgate.gateway.request.orphans import bill_orphans
from fairgate.gateway.request.pool_clock import make_pool_clock
from fairgate.gateway.request.pool_share import make_share_gate
from fairgate.gateway.request.request_log import log_request
from fairgate.gateway.settings import Settings
from fairgate.gateway.state import GatewayState
from fairgate.gateway.store.db import make_engine, make_sessionmaker, upgrade
from fairgate.gateway.store.secret_box import box_from_settings, check_readable


def make_quota_store(settings: Settings, budgets: BudgetSource | None = None) -> QuotaStore:
    """`budgets`: where lost budget counters are rebuilt from (gateway.quota.rebuild)."""
    if settings.redis_url:
        from fairgate.gateway.quota.redis_store import RedisQuotaStore

        return RedisQuotaStore(settings.redis_url, settings.redis_prefix, settings.reservation_ttl_s,
                               cluster=settings.redis_cluster, budgets=budgets)
    from fairgate.gateway.quota.memory import MemoryQuotaStore

    return MemoryQuotaStore(settings.reservation_ttl_s, budgets=budgets)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
    return error_response(WireError(exc.status_code, str(exc.detail), code))


async def _health(request: Request) -> JSONResponse:
    """Liveness for load balancers: no auth, no database round trip, no prompt data."""
    return JSONResponse({"status": "ok"})


async def _build_state(settings: Settings, migrate: bool, declared: DeclaredFile | None = None) -> GatewayState:
    secrets = box_from_settings(settings)  # upstream keys at rest (gateway/store/secret_box.py)
    if migrate:
        await asyncio.to_thread(upgrade, settings.database_url, "heads", secrets)
    db = make_engine(settings.database_url, secrets)
    await asyncio.to_thread(check_readable, db, secrets)
    sessions = make_sessionmaker(db)
    quota = make_quota_store(settings, budget_source(sessions))  # budgets rebuilt from the usage rows
    bus = quota.config_bus()
    if declared is not None:  # `serve --config FILE` with backends/pools/tenants/...: apply first
        from fairgate.gateway.config.cli import apply_in_db

        if await asyncio.to_thread(apply_in_db, sessions, declared.config):
            await bus.bump()
    usage = UsageRecorder.from_settings(db, settings)
    usage.start()
    embedded = await asyncio.to_thread(start_embedded_engine, settings)
    metrics = make_metrics(embedded, settings.metrics_tenant_labels)
    watch_usage_backlog(metrics, usage)
    st = GatewayState(
        settings=settings, db=db, sessions=sessions, quota=quota, config=bus,
        keys=KeyCache(sessions, bus), usage=usage, upstream_pool=HTTP1Pool(),
        http=httpx.AsyncClient(limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
                               timeout=settings.upstream_timeout_s),
        embedded=embedded, metrics=metrics, request_observers=[metrics.observe, log_request],
        auth_throttle=AuthThrottle(settings.auth_failures_max, settings.auth_failures_window_s),
        pool_share=make_share_gate(settings), pool_clock=make_pool_clock(settings))
    if not settings.admin_token:  # the token made on first start (gateway.first_run), hashed
        st.admin_token_hash = await asyncio.to_thread(load_admin_token_hash, sessions)
    try:
        st.config_version = await bus.version()
    except Exception:  # Redis down at start: serve 503s until it is back, then catch up
        st.config_version = -1
    from fairgate.gateway.observability.breaker_metrics import (
        BreakerCollector,  # every upstream's circuit breaker
    )
    from fairgate.gateway.observability.pool_metrics import (
        PoolCollector,  # per-replica gauges of backend pools
    )

    metrics.registry.register(PoolCollector(lambda: st.backends, settings.metrics_tenant_labels, st.pool_clock))
    metrics.registry.register(BreakerCollector(lambda: st.backends))
    await load_backends(st)
    await push_weights(st)
    st.fairness_sync = FairnessSync(st, settings.fairness_sync_interval_s).start()
    return st


async def _close_state(st: GatewayState) -> None:
    if st.fairness_sync is not None:
        await st.fairness_sync.stop()
    await st.usage.stop()
    if st.routing_audit is not None:  # built with the first router; queued rows are written now
        await st.routing_audit.stop()
    for backend in st.backends.values():
        await backend.aclose()
    if st.embedded is not None and st.embedded.name not in st.backends:
        await st.embedded.aclose()
    await st.http.aclose()
    await st.upstream_pool.aclose()
    await st.quota.aclose()
    if st.pool_share is not None:
        await st.pool_share.aclose()
    if st.pool_clock is not None:  # after the pools: their last slot releases went out
        await st.pool_clock.aclose()
    if st.classifier is not None:
        st.classifier.close()  # the detectors' worker processes
    st.db.dispose()


def create_app(settings: Settings | None = None, *, migrate: bool = True,
               declared: DeclaredFile | None = None) -> Starlette:
    """The gateway app; `declared` (a parsed declarative file) is applied at start."""
    settings = settings or Settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        st = await _build_state(settings, migrate, declared)
        app.state.gateway = st
        watcher = asyncio.get_running_loop().create_task(watch_config(st), name="config-watcher")
        # a killed predecessor's requests out: billed once the journal's rows are in
        orphans = asyncio.get_running_loop().create_task(bill_orphans(st), name="bill-orphans")
        # everything built so far lives as long as the app: keep it out of the collector's
        # full passes, which otherwise pause the request path for milliseconds, and make those
        # passes rarer (backends/collector.py). The detectors' tables too: built now, not by the
        # first request (~70 ms) and then scanned by the young collections that follow it (7-10 ms
        # pauses)
        warm_detectors()
        settle(parse_threshold(settings.gc_threshold))
        try:
            yield
        finally:
            watcher.cancel()
            orphans.cancel()
            await _close_state(st)

    routes = [Route("/health", _health, methods=["GET"])]
    routes += tenant_api.routes() + admin.routes() + admin_routing.routes() + metrics_routes()
    routes += admin_classify.routes() + admin_pools.routes() + health.routes() + openapi.routes()
    routes += admin_costs.routes() + admin_usage_log.routes() + admin_advice.routes()
    routes += dashboard.routes(advice=advice_panel)
    # the OpenAI POST endpoints skip Starlette's layers, with the same header checks (gateway/fast_lane.py)
    return GatewayApp(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error},
                      middleware=[Middleware(HeaderGuard, limits=settings.header_limits())],
                      limits=settings.header_limits())
