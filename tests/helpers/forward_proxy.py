"""A real forward HTTP proxy on loopback (asyncio, no framework) that records what passed
through it: absolute-form requests for http:// upstreams, CONNECT tunnels for https:// ones.

    with ForwardProxy() as proxy:                     # or ForwardProxy(auth=("user", "pw"))
        proxy.url                                     # "http://127.0.0.1:<port>"
        proxy.seen                                    # [Seen(method, target, headers), ...]

A forwarded request goes to the upstream in origin form with `Connection: close` (and without
`Proxy-Authorization`), its answer relayed until the upstream closes; a tunnel is relayed byte
for byte both ways. With `auth`, a request without the right Basic credentials gets a 407.
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tests.helpers.loop_server import LoopServer


@dataclass(slots=True)
class Seen:
    method: str
    target: str  # the request target as sent to the proxy ("http://h:p/path?q" or "h:p")
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names


class ForwardProxy(LoopServer):
    def __init__(self, auth: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.auth = auth
        self.seen: list[Seen] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.auth is None:
            return True
        want = "Basic " + base64.b64encode(f"{self.auth[0]}:{self.auth[1]}".encode()).decode()
        return headers.get("proxy-authorization") == want

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *rest = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in rest if ":" in h)}
            self.seen.append(Seen(method, target, headers))
            if not self._authorized(headers):
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nproxy-authenticate: Basic\r\n"
                             b"content-length: 0\r\nconnection: close\r\n\r\n")
                await writer.drain()
                return
            if method == "CONNECT":
                await self._tunnel(target, reader, writer)
            else:
                await self._forward(method, target, rest, reader, writer, int(headers.get("content-length", "0")))
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def _tunnel(self, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = target.rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        await _relay_both(reader, writer, up_reader, up_writer)

    async def _forward(self, method: str, target: str, rest: list[str], reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, length: int) -> None:
        body = await reader.readexactly(length)
        u = urlsplit(target)
        kept = [h for h in rest if h and h.split(":", 1)[0].strip().lower() not in ("proxy-authorization", "connection")]
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        up_reader, up_writer = await asyncio.open_connection(u.hostname, u.port or 80)
        up_writer.write(f"{method} {path} HTTP/1.1\r\n".encode() + "\r\n".join([*kept, "Connection: close"]).encode()
                        + b"\r\n\r\n" + body)
        await up_writer.drain()
        await _pipe(up_reader, writer)
        up_writer.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except ConnectionError:
        pass


async def _relay_both(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Relay until either side closes, then close both."""
    tasks = [asyncio.ensure_future(_pipe(reader, up_writer)), asyncio.ensure_future(_pipe(up_reader, writer))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        up_writer.close()
