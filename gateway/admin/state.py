"""What the admin API reads of the gateway's state (gateway.state.GatewayState): it manages
the configuration (so it sees the config room's part and asks it to rebuild), reads the
operators' reports, checks the admin token and drops cached keys."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fairgate.gateway.config.state import ConfigState
from fairgate.gateway.observability.state import ObservabilityState
from fairgate.gateway.state import state_of

if TYPE_CHECKING:
    from fairgate.gateway.request.auth import KeyCache
    from fairgate.gateway.request.auth_throttle import AuthThrottle


class AdminState(ConfigState, ObservabilityState, Protocol):
    keys: KeyCache
    auth_throttle: AuthThrottle  # admin sign-in failures share the tenants' throttle


def admin_state(app: Any) -> AdminState:
    return state_of(app)
