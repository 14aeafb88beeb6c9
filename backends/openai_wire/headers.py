"""Request headers both front doors check before any route runs: size and count limits (431),
one `Authorization` header at most (400), and the bearer scheme read case-insensitively
(RFC 7235: `bearer KEY` is `Bearer KEY`).

`HeaderGuard` is the ASGI middleware; `backends/http_protocol.py` applies the same limits
inside uvicorn's parser, so an oversized header is refused before it is held in memory whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from fairgate.backends.openai_wire.asgi import send_error
from fairgate.backends.openai_wire.errors import WireError
from fairgate.backends.types import ASGIApp, RawHeaders, Receive, Scope, Send


@dataclass(slots=True, frozen=True)
class HeaderLimits:
    """Per header (name + value), all headers together, and how many; in bytes."""

    max_header_bytes: int = 16_384
    max_total_bytes: int = 65_536
    max_count: int = 100


def too_large(what: str) -> WireError:
    return WireError(431, f"Request header fields too large: {what}.", "request_header_fields_too_large")


def check_headers(headers: RawHeaders, limits: HeaderLimits) -> WireError | None:
    """The refusal for these request headers, or None when they pass."""
    if len(headers) > limits.max_count:
        return too_large(f"{len(headers)} headers, over the limit of {limits.max_count}")
    total = 0
    auth = 0
    for name, value in headers:
        size = len(name) + len(value)
        if size > limits.max_header_bytes:
            shown = name[:64].decode("latin-1")
            return too_large(f"`{shown}` is {size} bytes, over the limit of {limits.max_header_bytes}")
        total += size
        auth += name.lower() == b"authorization"
    if total > limits.max_total_bytes:
        return too_large(f"{total} bytes of headers, over the limit of {limits.max_total_bytes}")
    if auth > 1:
        return WireError(400, "Send one Authorization header, not several.", "duplicate_authorization",
                         "Authorization")
    return None


def bearer(value: bytes | str | None) -> str | None:
    """The credential of `Bearer <credential>` (scheme in any case), or None."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    scheme, _, credential = text.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return credential.strip() or None


class HeaderGuard:
    """ASGI middleware: refuse a request whose headers break `limits` before the app sees it."""

    def __init__(self, app: ASGIApp, limits: HeaderLimits | None = None) -> None:
        self.app = app
        self.limits = limits or HeaderLimits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = check_headers(scope["headers"], self.limits)
            if refusal is not None:
                await send_error(send, refusal)
                return
        await self.app(scope, receive, send)
