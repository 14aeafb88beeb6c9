"""Everything the gateway holds while it runs, built once in the app's lifespan (gateway.app).

Handlers reach it through `state_of(app)`; background tasks get it passed in. Each room sees
only its part, a Protocol in the room's own `state.py` (gateway/request/state.py: the request
path's; config/, admin/, billing/, observability/, dashboard/ likewise), which this class meets
structurally (mypy checks it where a room's accessor returns `state_of(app)`). Fields that
change at run time (`backends`, `prices`, `router`, the versions) are replaced whole by
gateway.config.registry when the configuration moves, never edited in place.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fairgate.gateway.request.auth_throttle import AuthThrottle
from fairgate.gateway.request.routing import Router

if TYPE_CHECKING:
    import httpx
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from fairgate.backends.base import Backend
    from fairgate.backends.http1 import HTTP1Pool
    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.gateway.billing.usage import UsageEvent, UsageRecorder
    from fairgate.gateway.config.bus import ConfigBus
    from fairgate.gateway.config.fairness import FairnessSync
    from fairgate.gateway.config.registry import Price
    from fairgate.gateway.observability.metrics import GatewayMetrics
    from fairgate.gateway.observability.routing_audit import RoutingAuditWriter
    from fairgate.gateway.quota import QuotaStore
    from fairgate.gateway.request.auth import KeyCache
    from fairgate.gateway.request.classification import Classifier
    from fairgate.gateway.request.pool_clock import PoolClock
    from fairgate.gateway.request.pool_share import ShareGate
    from fairgate.gateway.settings import Settings


@dataclass(slots=True)
class GatewayState:
    settings: Settings
    db: Engine
    sessions: sessionmaker[Session]
    quota: QuotaStore
    config: ConfigBus  # the cluster's config version (admin changes bump it)
    keys: KeyCache
    usage: UsageRecorder
    upstream_pool: HTTP1Pool  # backends' calls: the lean client, see backends/http1.py
    http: httpx.AsyncClient  # admin-side calls (fairness pushes)
    embedded: LocalBackend | None  # the in-process engine, if any
    metrics: GatewayMetrics
    request_observers: list[Callable[[UsageEvent], None]] = field(default_factory=list)
    backends: dict[str, Backend] = field(default_factory=dict)  # name → Backend
    prices: dict[str, Price] = field(default_factory=dict)  # backend name → price
    router: Router = field(default_factory=lambda: Router({}))
    routing_audit: RoutingAuditWriter | None = None
    classifier: Classifier | None = None  # detectors in capped worker processes (gateway.request.classification)
    config_version: int = -1  # the version backends/router were built under (-1: not yet)
    config_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    fairness_sync: FairnessSync | None = None
    fairness_version: int = 0
    fairness_weights: dict[str, float] = field(default_factory=dict)
    auth_throttle: AuthThrottle = field(default_factory=lambda: AuthThrottle(0, 60.0))  # off unless set
    admin_token_hash: str | None = None  # the first start's token (gateway.first_run), hashed
    pool_share: ShareGate | None = None  # tenant_pool_share: slots on pools across the fleet
    pool_clock: PoolClock | None = None  # pool_fair_slots + Redis: the pools' fair queue, fleet-wide

    async def refresh_config(self) -> bool:
        """Rebuild backends and router if the cluster's config version moved (an admin change on
        any replica); True if it had. The request path asks this of the config room."""
        from fairgate.gateway.config.registry import refresh_if_stale

        return await refresh_if_stale(self)


def state_of(app: Any) -> GatewayState:
    """The running app's state (set by the lifespan)."""
    state: GatewayState = app.state.gateway
    return state
