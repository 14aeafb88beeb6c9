"""Who may talk to an engine server, and who may speak for a tenant.

An engine server schedules by `X-Tenant` / `X-Priority` and salts its prefix cache by
`X-Cache-Salt`; whoever can set those can take another tenant's share or probe its cache. So:

- with an API key (`--api-key` or `FAIRGATE_ENGINE_API_KEY`) every /v1 call must carry
  `Authorization: Bearer <key>` (401 otherwise); the gateway sends the backend row's key;
- with `--allow-anonymous` as well, a caller without the key may still generate as the tenant
  `anonymous` at `standard` priority, but a tenant header from it is refused (403);
- without a key the server trusts its callers, and `fairgate engine` refuses to bind anything
  but loopback (see `check_bind`), so only processes on the same host can reach it.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field

from fairgate.backends.openai_wire import WireError

TENANT_HEADERS = ("x-tenant", "x-priority", "x-cache-salt")
ANONYMOUS_TENANT = "anonymous"


@dataclass(slots=True, frozen=True)
class EngineAuth:
    """The engine server's caller check. `api_key` None: an open (loopback-only) server."""

    api_key: str | None = field(default=None, repr=False)
    allow_anonymous: bool = False

    def trusted(self, headers: dict[str, str]) -> bool:
        """True when the caller may name a tenant; raises the 401/403 `WireError` for a
        caller that may not call at all or sent tenant headers without the key."""
        if self.api_key is None:
            return True
        given = _bearer(headers.get("authorization"))
        if given is not None and hmac.compare_digest(given.encode(), self.api_key.encode()):
            return True
        if given is not None:
            raise WireError(401, "Incorrect API key provided.", "invalid_api_key")
        if not self.allow_anonymous:
            raise WireError(401, "This engine server needs `Authorization: Bearer <key>`.", "missing_api_key")
        named = [h for h in TENANT_HEADERS if headers.get(h)]
        if named:
            raise WireError(403, f"{named[0]} is accepted only from a caller holding the engine's API key.",
                            "tenant_header_needs_key", named[0])
        return False


def _bearer(value: str | None) -> str | None:
    if not value or not value.lower().startswith("bearer "):
        return None
    return value[7:].strip() or None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None, insecure: bool) -> None:
    """Refuse to serve a trusting (keyless) engine beyond loopback unless told so explicitly."""
    if api_key is None and not insecure and not is_loopback(host):
        raise SystemExit(f"refusing to listen on {host} without --api-key: any host that reaches it could "
                         "claim any tenant and priority (pass --insecure-no-auth to do it anyway)")
