"""What usage and cost reports read of the gateway's state (gateway.state.GatewayState): the
database, the settings' hourly cost of the embedded engine, and where the engines' measured step
costs come from (the in-process engine, or engine servers over `http`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import httpx
    from sqlalchemy.orm import Session, sessionmaker

    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.gateway.settings import Settings


class BillingState(Protocol):
    settings: Settings
    sessions: sessionmaker[Session]
    http: httpx.AsyncClient
    embedded: LocalBackend | None
