"""What the dashboard reads of the gateway's state (gateway.state.GatewayState): the operators'
views (its panels are theirs), the key cache for tenants' sign-in, and the backends it lists."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fairgate.gateway.observability.state import ObservabilityState
from fairgate.gateway.state import state_of

if TYPE_CHECKING:
    from fairgate.backends.base import Backend
    from fairgate.gateway.request.auth import KeyCache


class DashboardState(ObservabilityState, Protocol):
    keys: KeyCache
    backends: dict[str, Backend]


def dashboard_state(app: Any) -> DashboardState:
    return state_of(app)
