"""What the dashboard reads of the gateway's state (gateway.state.GatewayState): the operators'
views (its panels are theirs), the key cache for tenants' sign-in, the failed-authentication
throttle its sign-in shares with the admin API and the request path, and the backends it lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fairgate.gateway.observability.state import ObservabilityState
from fairgate.gateway.state import state_of

if TYPE_CHECKING:
    from fairgate.backends.base import Backend
    from fairgate.gateway.request.auth import KeyCache
    from fairgate.gateway.request.auth_throttle import AuthThrottle


class DashboardState(ObservabilityState, Protocol):
    keys: KeyCache
    auth_throttle: AuthThrottle
    backends: dict[str, Backend]


def dashboard_state(app: Any) -> DashboardState:
    return state_of(app)
