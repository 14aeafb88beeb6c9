"""Forward proxies for the upstream client (backends/http1.py), chosen as httpx chooses them.

`proxy_for(scheme, host, port, explicit)` picks the proxy for one upstream: a backend's own
`proxy_url` wins outright; otherwise the environment (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`,
lower case first, read by urllib like httpx's `trust_env`) minus `NO_PROXY`. `NO_PROXY` entries,
as httpx reads them: `*` turns every proxy off; `example.com` matches it and its subdomains,
`.example.com` only the subdomains; `localhost`, IPv4 and IPv6 addresses match exactly; a
`host:port` entry only that port; `http://host` only that scheme. Beyond httpx: an IPv4 or IPv6
network (`10.0.0.0/8`) matches every address in it (httpx reads it as its first address only).

An `http://` upstream goes through the proxy as absolute-form requests (`POST http://host/...`);
an `https://` one through a `CONNECT host:port` tunnel, then TLS end to end (`open_tunnel`).
Credentials in the proxy URL's userinfo become `Proxy-Authorization: Basic`, sent to the proxy
only (on every forwarded request, or on the CONNECT); only `http://` proxies are spoken.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import unquote, urlsplit
from urllib.request import getproxies

P = TypeVar("P", bound=asyncio.Protocol)
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_CONNECT_REPLY = 16384  # a proxy's answer to CONNECT is a status line and a few headers


@dataclass(slots=True, frozen=True)
class Proxy:
    """An HTTP proxy; `auth` holds the ready `Proxy-Authorization` line (out of repr)."""

    scheme: str
    host: str
    port: int
    auth: bytes = field(default=b"", repr=False)

    @classmethod
    def parse(cls, url: str) -> Proxy:
        u = urlsplit(url if "://" in url else f"http://{url}")  # HTTP_PROXY=host:3128 means http://
        if not u.hostname:
            raise ValueError("a proxy URL needs a host")
        auth = b""
        if u.username is not None or u.password is not None:
            pair = f"{unquote(u.username or '')}:{unquote(u.password or '')}".encode()
            auth = b"Proxy-Authorization: Basic " + base64.b64encode(pair) + b"\r\n"
        return cls(u.scheme.lower(), u.hostname, u.port or DEFAULT_PORTS.get(u.scheme.lower(), 80), auth)


@dataclass(slots=True, frozen=True)
class _Rule:
    """One mount, as httpx's URLPattern: scheme ("" any), host pattern, port; `proxy` None = direct."""

    scheme: str
    host: str
    port: int | None
    proxy: str | None
    network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None

    @property
    def priority(self) -> tuple[int, int, int]:  # the most specific rule first, as httpx sorts
        return (0 if self.port is not None else 1, -len(self.host), -len(self.scheme))

    def matches(self, scheme: str, host: str, port: int | None) -> bool:
        if self.scheme and self.scheme != scheme:
            return False
        if self.network is not None:
            try:
                if ipaddress.ip_address(host) not in self.network:
                    return False
            except ValueError:
                return False
        elif self.host and not _host_pattern(self.host).match(host):
            return False
        return self.port is None or self.port == port


def _host_pattern(host: str) -> re.Pattern[str]:
    if host.startswith("*."):
        return re.compile(f"^.+\\.{re.escape(host[2:])}$")  # subdomains only
    if host.startswith("*"):
        return re.compile(f"^(.+\\.)?{re.escape(host[1:])}$")  # the domain and its subdomains
    return re.compile(f"^{re.escape(host)}$")


def _no_proxy_rule(entry: str) -> _Rule:
    if "://" in entry:
        u = urlsplit(entry)
        return _Rule(u.scheme.lower() if u.scheme != "all" else "", (u.hostname or "").lower(), u.port, None)
    if "/" in entry:
        try:
            return _Rule("", entry, None, None, ipaddress.ip_network(entry, strict=False))
        except ValueError:
            pass
    host, port = entry, None
    bare = entry.strip("[]")
    if _is_ip(bare):
        return _Rule("", bare.lower(), None, None)
    if entry.count(":") == 1 and entry.rsplit(":", 1)[1].isdigit():
        host, port = entry.rsplit(":", 1)[0], int(entry.rsplit(":", 1)[1])
    host = host.lower()
    if (host == "localhost" and port is None) or _is_ip(host):
        return _Rule("", host, port, None)
    return _Rule("", f"*{host}", port, None)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def environment_rules(env: dict[str, str] | None = None) -> list[_Rule]:
    """The environment's proxies and exceptions, most specific first (httpx's mounts)."""
    info = getproxies() if env is None else env
    rules = [_Rule("" if scheme == "all" else scheme, "", None, info[scheme])
             for scheme in ("http", "https", "all") if info.get(scheme)]
    for entry in (e.strip() for e in info.get("no", "").split(",")):
        if entry == "*":
            return []
        if entry:
            rules.append(_no_proxy_rule(entry))
    return sorted(rules, key=lambda r: r.priority)


def proxy_for(scheme: str, host: str, port: int, explicit: str | None = None,
              env: dict[str, str] | None = None) -> Proxy | None:
    """The proxy to reach `scheme://host:port` through, or None to connect directly."""
    if explicit:
        return Proxy.parse(explicit)
    shown_port = None if DEFAULT_PORTS.get(scheme) == port else port  # httpx compares explicit ports
    for rule in environment_rules(env):
        if rule.matches(scheme, host.lower(), shown_port):
            return None if rule.proxy is None else Proxy.parse(rule.proxy)
    return None


class _ConnectReply(asyncio.Protocol):
    """Collects the proxy's answer to CONNECT; the TLS layer takes the connection over after."""

    def __init__(self) -> None:
        self.buf = b""
        self.done: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.done.done() and (b"\r\n\r\n" in self.buf or len(self.buf) > MAX_CONNECT_REPLY):
            self.done.set_result(self.buf)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError("the proxy closed the connection during CONNECT"))


class ProxyRefused(Exception):
    """The proxy answered CONNECT with something other than 2xx (its status line in the message)."""


async def open_tunnel(proxy: Proxy, host: str, port: int, tls: ssl.SSLContext,
                      factory: Callable[[], P]) -> tuple[asyncio.Transport, P]:
    """CONNECT through `proxy` to host:port, then TLS to the upstream over the tunnel; the
    returned transport carries `factory()`'s protocol, already told `connection_made`."""
    loop = asyncio.get_running_loop()
    raw, reply = await loop.create_connection(_ConnectReply, proxy.host, proxy.port)
    try:
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        raw.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n".encode() + proxy.auth + b"\r\n")
        head = await reply.done
        line = head.split(b"\r\n", 1)[0].decode("latin-1")[:200]
        parts = line.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit() or not 200 <= int(parts[1]) < 300:
            raise ProxyRefused(f"the proxy refused the tunnel to {authority}: {line!r}")
        if not head.endswith(b"\r\n\r\n"):
            raise ProxyRefused("the proxy sent bytes after its CONNECT answer")
        tunnel = await loop.start_tls(raw, reply, tls, server_hostname=host)
    except BaseException:
        raw.close()
        raise
    assert tunnel is not None
    protocol = factory()
    tunnel.set_protocol(protocol)
    protocol.connection_made(tunnel)
    return tunnel, protocol
