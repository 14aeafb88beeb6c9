"""The admin token: FAIRGATE_ADMIN_TOKEN when set, else the one made on first start, of which
the database keeps only the SHA-256 (`admin_credentials`). Both are compared in constant time."""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from fairgate.gateway.request.keys import hash_key
from fairgate.gateway.store.tables import AdminCredential

if TYPE_CHECKING:
    from fairgate.gateway.settings import Settings

ADMIN = "admin"  # the row's fixed name


class TokenState(Protocol):
    """What the token checks read of the gateway's state (gateway.state.GatewayState)."""

    settings: Settings
    admin_token_hash: str | None


def stored_hash(session: Session) -> str | None:
    return session.scalar(select(AdminCredential.token_hash).where(AdminCredential.name == ADMIN))


def load_admin_token_hash(sessions: sessionmaker[Session]) -> str | None:
    with sessions() as s:
        return stored_hash(s)


def admin_enabled(state: TokenState) -> bool:
    return bool(state.settings.admin_token or state.admin_token_hash)


def admin_token_ok(state: TokenState, given: str) -> bool:
    """Whether `given` is the admin token (False while there is none)."""
    token = state.settings.admin_token
    if token:
        return hmac.compare_digest(given.encode(), token.encode())
    if state.admin_token_hash:
        return hmac.compare_digest(hash_key(given).encode(), state.admin_token_hash.encode())
    return False


def admin_secret(state: TokenState) -> str | None:
    """A stable per-deployment digest of the admin token (the same on every replica), for
    keys derived from it (dashboard sessions); None when there is no admin token."""
    if state.settings.admin_token:
        return hash_key(state.settings.admin_token)
    return state.admin_token_hash
