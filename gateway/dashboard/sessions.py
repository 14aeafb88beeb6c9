"""Who is looking at the dashboard: a bearer header, or a session cookie set by the login form.

The cookie is signed (itsdangerous, HMAC-SHA256 over the payload and its timestamp), HttpOnly,
SameSite=Strict and expires after `SESSION_S`; `Secure` when the request came over HTTPS. Its
signing key is derived from the admin token's digest, so every replica accepts it and changing
the admin token ends every session. A tenant session names the key's id only: each page load
checks the key is still active (a revoked key's session ends at once). Tokens are compared in
constant time (`gateway.admin.token`); the tenant key goes through the key cache's hash lookup.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import Response

from fairgate.gateway.admin.token import admin_secret, admin_token_ok
from fairgate.gateway.dashboard.state import DashboardState, dashboard_state
from fairgate.gateway.request.auth import Principal, load_principal
from fairgate.gateway.store.tables import ApiKey

COOKIE = "fairgate_dashboard"
SESSION_S = 8 * 3600


@dataclass(slots=True)
class Viewer:
    """An admin (sees every tenant) or one tenant (sees its own usage)."""

    admin: bool
    tenant_id: str | None = None
    tenant_name: str | None = None


class SessionSigner:
    """Signs and reads session cookies; the key comes from the admin token, else from a random
    secret of this process (a gateway with no admin token: tenant sessions only, one replica)."""

    def __init__(self, fallback_secret: bytes) -> None:
        self._fallback = fallback_secret

    def _serializer(self, state: DashboardState) -> URLSafeTimedSerializer:
        digest = admin_secret(state)
        base = digest.encode() if digest else self._fallback
        key = hmac.new(base, b"fairgate-dashboard-session", hashlib.sha256).hexdigest()
        return URLSafeTimedSerializer(key, salt="fairgate.dashboard")

    def dumps(self, state: DashboardState, payload: dict[str, Any]) -> str:
        return self._serializer(state).dumps(payload)

    def loads(self, state: DashboardState, cookie: str) -> dict[str, Any] | None:
        try:
            data = self._serializer(state).loads(cookie, max_age=SESSION_S)
        except BadSignature:  # forged, tampered with, expired, or signed before a token change
            return None
        return data if isinstance(data, dict) else None


def set_session(request: Request, response: Response, value: str) -> None:
    response.set_cookie(COOKIE, value, max_age=SESSION_S, path="/", httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


def clear_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")


def bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    return auth[7:].strip() if auth.startswith("Bearer ") else None


async def tenant_principal(state: DashboardState, key: str) -> Principal | None:
    try:
        return await state.keys.fresh(key)
    except Exception:  # the key check needs the config version: fail closed
        return None


async def _tenant_by_key_id(state: DashboardState, key_id: str) -> Principal | None:
    def load() -> Principal | None:
        with state.sessions() as s:
            digest = s.scalar(select(ApiKey.key_hash).where(ApiKey.id == key_id))
            return load_principal(s, digest, 0) if digest else None

    return await asyncio.to_thread(load)


async def viewer_of(request: Request, signer: SessionSigner) -> Viewer | None:
    """The viewer from the bearer header (admin token or tenant key) or the session cookie."""
    state = dashboard_state(request.app)
    token = bearer(request)
    if token:
        if admin_token_ok(state, token):
            return Viewer(admin=True)
        principal = await tenant_principal(state, token)
        return Viewer(False, principal.tenant_id, principal.tenant_name) if principal else None
    cookie = request.cookies.get(COOKIE)
    data = signer.loads(state, cookie) if cookie else None
    if data is None:
        return None
    if data.get("role") == "admin":
        return Viewer(admin=True) if admin_secret(state) else None
    if data.get("role") == "tenant" and isinstance(data.get("key_id"), str):
        principal = await _tenant_by_key_id(state, data["key_id"])
        return Viewer(False, principal.tenant_id, principal.tenant_name) if principal else None
    return None
