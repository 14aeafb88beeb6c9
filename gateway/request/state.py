"""What the request path reads of the gateway's state.

`gateway.state.GatewayState` holds everything the gateway runs on; the request path (admission,
classification, the pool share, settlement, the tenant API) sees only this part of it, so a
change elsewhere (admin, the dashboard, the config loaders) cannot reach into a request, and a
reader sees here what a request depends on. The one thing it asks of another room is a rebuild
when a model is unknown here but may have been registered through another replica a moment ago
(`refresh_config`, gateway.config.registry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fairgate.gateway.billing.state import BillingState
from fairgate.gateway.state import state_of

if TYPE_CHECKING:
    from fairgate.backends.base import Backend
    from fairgate.gateway.billing.usage import UsageEvent, UsageRecorder
    from fairgate.gateway.config.registry import Price
    from fairgate.gateway.observability.metrics import GatewayMetrics
    from fairgate.gateway.quota import QuotaStore
    from fairgate.gateway.request.auth import KeyCache
    from fairgate.gateway.request.auth_throttle import AuthThrottle
    from fairgate.gateway.request.classification import Classifier
    from fairgate.gateway.request.pool_share import ShareGate
    from fairgate.gateway.request.routing import Router
    from fairgate.gateway.settings import Settings


class ClassifierState(Protocol):
    """What `classifier_for` needs: it starts the detectors' workers on first use."""

    settings: Settings
    metrics: GatewayMetrics
    classifier: Classifier | None


class RequestState(ClassifierState, Protocol):
    keys: KeyCache
    auth_throttle: AuthThrottle
    quota: QuotaStore
    usage: UsageRecorder
    request_observers: list[Callable[[UsageEvent], None]]
    backends: dict[str, Backend]  # replaced whole by gateway.config.registry, never edited
    prices: dict[str, Price]
    router: Router
    pool_share: ShareGate | None
    fairness_weights: dict[str, float]

    async def refresh_config(self) -> bool:
        """Rebuild backends and router if the cluster's configuration moved; True if it had."""
        ...


def request_state(app: Any) -> RequestState:
    """The running app's state, as the request path sees it."""
    return state_of(app)


class UsageApiState(RequestState, BillingState, Protocol):
    """A tenant's own /v1/usage reads the cost reports' part besides the request path's."""


def usage_state(app: Any) -> UsageApiState:
    return state_of(app)
