"""A backend's transport settings (the `backends` table's columns) turned into what the
upstream client sends: the `Origin` to dial (proxy and TLS included) and the header block.

    t = Transport(auth_header="api-key", extra_query={"api-version": "2024-06-01"})
    origin = origin_for("https://x.openai.azure.com/openai/deployments/d", t)
    headers = header_block("the-key", t)   # b"Content-Type: ...\r\napi-key: the-key\r\n"

Header names and values are checked here (`header_problem`), so a value never carries a line
break into the raw request and no header can replace one the client or gateway sets itself;
the admin API refuses the same with a 400 naming the field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode

from fairgate.backends.http1 import Origin
from fairgate.backends.http_proxy import proxy_for
from fairgate.backends.http_tls import DEFAULT_TLS, TLSSettings

DEFAULT_MAX_RESPONSE_BYTES = 64 * 2**20  # a whole non-streamed body
MAX_EVENT_BYTES = 8 * 2**20  # one line of a stream (capped by max_response_bytes when smaller)
TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")  # an RFC 9110 header name
# set by the client or the gateway: an extra header must not replace or duplicate them
RESERVED = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type", "upgrade",
                      "proxy-authorization", "te", "trailer", "keep-alive", "x-tenant", "x-priority",
                      "x-cache-salt", "x-request-id"})


def header_problem(name: str, value: str | None = None) -> str | None:
    """Why `name: value` cannot be sent as an extra header (None: it can)."""
    if not TOKEN.match(name):
        return f"header name {name[:100]!r} is not a valid token (letters, digits, !#$%&'*+.^_`|~-)"
    if name.lower() in RESERVED:
        return f"header {name!r} is set by the gateway and cannot be overridden"
    if value is not None and (len(value) > 8192 or any(not (32 <= ord(c) < 127 or c == "\t") for c in value)):
        return f"the value of header {name!r} must be printable ASCII (no line breaks), at most 8192 characters"
    return None


@dataclass(slots=True, frozen=True)
class Transport:
    """How one backend is reached. `auth_header`: None sends the key as `Authorization: Bearer`,
    a name sends it raw under that name (Azure OpenAI: `api-key`)."""

    proxy_url: str | None = field(default=None, repr=False)  # None: the environment's, as httpx
    tls: TLSSettings = DEFAULT_TLS
    extra_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold secrets
    extra_query: tuple[tuple[str, str], ...] = ()
    auth_header: str | None = None
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def __post_init__(self) -> None:
        for name, value in self.extra_headers:
            problem = header_problem(name, value)
            if problem:
                raise ValueError(problem)
        if self.auth_header is not None and (problem := header_problem(self.auth_header)):
            raise ValueError(f"auth_header: {problem}")
        if self.max_response_bytes < 1:
            raise ValueError("max_response_bytes must be positive")

    @classmethod
    def of(cls, *, proxy_url: str | None = None, tls_verify: bool | None = True, ca_bundle: str | None = None,
           client_cert: str | None = None, client_key: str | None = None,
           extra_headers: Mapping[str, str] | None = None, extra_query: Mapping[str, str] | None = None,
           auth_header: str | None = None, max_response_bytes: int | None = None) -> Transport:
        """From the backend's stored fields (None: the default)."""
        return cls(proxy_url or None, TLSSettings(tls_verify is not False, ca_bundle, client_cert, client_key),
                   tuple((extra_headers or {}).items()), tuple((extra_query or {}).items()), auth_header or None,
                   max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES)

    @property
    def max_event_bytes(self) -> int:
        return min(self.max_response_bytes, MAX_EVENT_BYTES)


def merged_query(base: str, extra: tuple[tuple[str, str], ...]) -> str:
    """The base URL's query with `extra` added; a key in both takes extra's value (as httpx's
    `params=` merges into a URL's query). The base query stays byte for byte when nothing is added."""
    if not extra:
        return base
    names = {k for k, _ in extra}
    pairs = [(k, v) for k, v in parse_qsl(base, keep_blank_values=True) if k not in names]
    return urlencode([*pairs, *extra], quote_via=quote)


def origin_for(base_url: str, transport: Transport, env: dict[str, str] | None = None) -> Origin:
    """Where to send a backend's requests: its URL, query, proxy (`env`: urllib's proxies map,
    default the process environment) and TLS settings."""
    o = Origin.parse(base_url)
    proxy = proxy_for(o.scheme, o.host, o.port, transport.proxy_url, env)
    tls = None if transport.tls.is_default else transport.tls
    return dataclasses.replace(o, query=merged_query(o.query, transport.extra_query), proxy=proxy, tls=tls)


def header_block(api_key: str | None, transport: Transport) -> bytes:
    """The raw header lines every request of this backend carries (each ending in CRLF)."""
    lines = ["Content-Type: application/json"]
    own = {name.lower() for name, _ in transport.extra_headers}
    key_name = transport.auth_header or "Authorization"
    if api_key and key_name.lower() not in own:  # an extra header of that name is the credential
        lines.append(f"{key_name}: {api_key}" if transport.auth_header else f"Authorization: Bearer {api_key}")
    lines += [f"{name}: {value}" for name, value in transport.extra_headers]
    return ("\r\n".join(lines) + "\r\n").encode()
