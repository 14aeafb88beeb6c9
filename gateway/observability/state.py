"""What the operators' views (/metrics, the cost gauges, `fairgate advise`) read of the gateway's
state (gateway.state.GatewayState): the cost reports' part, the admin token (a scrape with it sees
every tenant), the database and the app's own metrics registry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fairgate.gateway.admin.token import TokenState
from fairgate.gateway.billing.state import BillingState
from fairgate.gateway.state import state_of

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from fairgate.gateway.observability.metrics import GatewayMetrics


class ObservabilityState(BillingState, TokenState, Protocol):
    db: Engine
    metrics: GatewayMetrics


def observability_state(app: Any) -> ObservabilityState:
    return state_of(app)
