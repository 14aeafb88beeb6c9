"""Who is looking at the dashboard: a bearer header, or a session cookie set by the login form.

The cookie is signed (itsdangerous, HMAC-SHA256 over the payload and its timestamp), HttpOnly,
SameSite=Strict and expires after `SESSION_S`; `Secure` when the request came over HTTPS. Its
signing key is derived from the admin token's digest, so every replica accepts it and changing
the admin token ends every session. Each cookie names a random session id whose hash is a row of
`dashboard_sessions`; logout deletes the row, so a cookie replayed after logout is refused on
every replica (the signature alone would keep it good for `SESSION_S`). A tenant session names
the key's id only: each page load checks the key is still active (a revoked key's session ends
at once). Tokens are compared in constant time (`gateway.admin.token`); the tenant key goes
through the key cache's hash lookup. Tokens given at sign-in (the forms, a bearer header) count
into the gateway's one failed-authentication throttle (gateway/request/auth_throttle.py), the
admin API's and the request path's: an address over its failed tries gets its 429.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy import delete, select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import Response

from fairgate.gateway.admin.token import admin_secret, admin_token_ok
from fairgate.gateway.dashboard.state import DashboardState, dashboard_state
from fairgate.gateway.request.auth import Principal, load_principal
from fairgate.gateway.request.auth_throttle import client_address
from fairgate.gateway.store.tables import ApiKey, DashboardSession, utcnow

COOKIE = "fairgate_dashboard"
SESSION_S = 8 * 3600
MAX_SESSIONS = 20  # live sessions of the admin, and of each key: past it the oldest ends (rows stay bounded)


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


def _id_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


async def open_session(state: DashboardState, signer: SessionSigner, viewer: Viewer, key_id: str | None) -> str:
    """A new server-side session for `viewer` (its row written, expired rows swept, the oldest of
    its owner's ended past `MAX_SESSIONS`): the signed cookie value that names it."""
    session_id = secrets.token_urlsafe(32)
    role = "admin" if viewer.admin else "tenant"

    def write() -> None:
        now = utcnow()
        same = DashboardSession.key_id.is_(None) if key_id is None else DashboardSession.key_id == key_id
        with state.sessions.begin() as s:
            s.execute(delete(DashboardSession).where(DashboardSession.expires_at <= now))
            oldest = s.scalars(select(DashboardSession.id_hash).where(DashboardSession.role == role, same)
                               .order_by(DashboardSession.expires_at.desc()).offset(MAX_SESSIONS - 1)).all()
            if oldest:
                s.execute(delete(DashboardSession).where(DashboardSession.id_hash.in_(oldest)))
            s.add(DashboardSession(id_hash=_id_hash(session_id), role=role, key_id=key_id,
                                   expires_at=now + timedelta(seconds=SESSION_S)))

    await asyncio.to_thread(write)
    payload: dict[str, Any] = {"role": role, "sid": session_id}
    if key_id is not None:
        payload["key_id"] = key_id
    return signer.dumps(state, payload)


async def end_session(state: DashboardState, signer: SessionSigner, cookie: str | None) -> None:
    """Delete the cookie's session row: the cookie is no good anywhere from now on."""
    data = signer.loads(state, cookie) if cookie else None
    session_id = data.get("sid") if data else None
    if not isinstance(session_id, str):
        return

    def drop() -> None:
        with state.sessions.begin() as s:
            s.execute(delete(DashboardSession).where(DashboardSession.id_hash == _id_hash(session_id)))

    await asyncio.to_thread(drop)


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


async def sign_in(state: DashboardState, request: Request, token: str, accept: str = "any"
                  ) -> tuple[Viewer, str | None] | None:
    """The viewer `token` signs in as (`accept`: "admin" token, "tenant" key, or "any") and the
    key's id for a tenant, or None, counted as a failure of the client's address. Raises the
    throttle's WireError (429) while the address is over its failed tries, for the admin token
    as for the admin API, and for any key this replica does not already hold (as the request path)."""
    address = client_address(request.scope)
    if accept == "admin" or state.keys.cached(token) is None:
        state.auth_throttle.check(address)
    if accept != "tenant" and admin_token_ok(state, token):
        return Viewer(admin=True), None
    principal = await tenant_principal(state, token) if accept != "admin" else None
    if principal is None:
        state.auth_throttle.failed(address)
        return None
    return Viewer(False, principal.tenant_id, principal.tenant_name), principal.key_id


def _session_viewer(s: Session, data: dict[str, Any]) -> Viewer | None:
    """The cookie's viewer if its session row is live (not logged out, not expired)."""
    session_id, role, key_id = data.get("sid"), data.get("role"), data.get("key_id")
    if not isinstance(session_id, str):
        return None  # a cookie from before sessions were kept server-side
    row = s.get(DashboardSession, _id_hash(session_id))
    if row is None or row.expires_at <= utcnow() or row.role != role or row.key_id != key_id:
        return None
    if role == "admin":
        return Viewer(admin=True)
    digest = s.scalar(select(ApiKey.key_hash).where(ApiKey.id == key_id)) if isinstance(key_id, str) else None
    principal = load_principal(s, digest, 0) if digest else None
    return Viewer(False, principal.tenant_id, principal.tenant_name) if principal else None


async def viewer_of(request: Request, signer: SessionSigner) -> Viewer | None:
    """The viewer from the bearer header (admin token or tenant key) or the session cookie.
    A bearer token signs in (see `sign_in`: throttled, its 429 raised as WireError)."""
    state = dashboard_state(request.app)
    token = bearer(request)
    if token:
        signed = await sign_in(state, request, token)
        return signed[0] if signed else None
    cookie = request.cookies.get(COOKIE)
    data = signer.loads(state, cookie) if cookie else None
    if data is None or data.get("role") not in ("admin", "tenant"):
        return None
    if data["role"] == "admin" and not admin_secret(state):
        return None

    def load() -> Viewer | None:
        with state.sessions() as s:
            return _session_viewer(s, data)

    return await asyncio.to_thread(load)
