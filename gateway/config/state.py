"""What the configuration room reads and replaces of the gateway's state
(gateway.state.GatewayState). It is the room that builds the rest: backends, prices and the
router are replaced whole when the cluster's config version moves (gateway.config.registry),
fairness weights are pushed to the engines (gateway.config.fairness), stored pools and routing
rules are loaded (pools_store, routing_store)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from fairgate.gateway.request.state import ClassifierState

if TYPE_CHECKING:
    import httpx
    from sqlalchemy import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from fairgate.backends.base import Backend
    from fairgate.backends.http1 import HTTP1Pool
    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.gateway.config.bus import ConfigBus
    from fairgate.gateway.config.registry import Price
    from fairgate.gateway.observability.routing_audit import RoutingAuditWriter
    from fairgate.gateway.quota import QuotaStore
    from fairgate.gateway.request.pool_clock import PoolClock
    from fairgate.gateway.request.routing import Router


class ConfigState(ClassifierState, Protocol):
    db: Engine
    sessions: sessionmaker[Session]
    config: ConfigBus
    config_lock: asyncio.Lock
    config_version: int
    backends: dict[str, Backend]
    prices: dict[str, Price]
    router: Router
    routing_audit: RoutingAuditWriter | None
    embedded: LocalBackend | None
    upstream_pool: HTTP1Pool
    http: httpx.AsyncClient
    quota: QuotaStore  # budget-scaled fairness weights read what tenants have used
    fairness_version: int
    fairness_weights: dict[str, float]
    pool_clock: PoolClock | None  # pools' fair-queue counters and slots shared by every replica
