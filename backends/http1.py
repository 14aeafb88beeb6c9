"""A small keep-alive HTTP/1.1 client on asyncio protocols and httptools (uvicorn's parser).

Why not httpx here: on the gateway's hot path httpx's pool, anyio and h11 layers cost a few
ms of CPU per upstream call, more than the rest of the gateway together (bench/upstream_clients.py:
about 0.13 ms per POST here against 2.3-3.8 ms for httpx 0.28, where the whole gateway spends
about 2.5 ms per request). tests/backends/test_http_conformance.py holds it to httpx's behaviour. This client does one
thing — POST a body, read a status, headers and a (possibly chunked, possibly streamed) body
over pooled connections — for `http://` and `https://` upstreams.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools


class HTTPError(Exception):
    """Transport failure. `before_response`: nothing of a response arrived (safe to retry);
    `timeout`: the upstream did not answer in time (a 504 to the client, not a 502)."""

    def __init__(self, message: str, before_response: bool, timeout: bool = False) -> None:
        super().__init__(message)
        self.before_response = before_response
        self.timeout = timeout


@dataclass(slots=True, frozen=True)
class Origin:
    """Where an upstream lives. `query`: the base URL's query string, kept on every request
    (e.g. Azure OpenAI's `api-version`)."""

    scheme: str
    host: str
    port: int
    base_path: str
    query: str = ""

    @classmethod
    def parse(cls, url: str) -> Origin:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"unsupported upstream URL: {url!r}")
        return cls(u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80), u.path.rstrip("/"), u.query)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # IPv6 literals in brackets (RFC 7230)
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"

    def target(self, path: str) -> str:
        if not self.query:
            return f"{self.base_path}{path}"
        return f"{self.base_path}{path}{'&' if '?' in path else '?'}{self.query}"


_EOF = object()


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self._reset()

    def _reset(self) -> None:
        self.headers: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.body: asyncio.Queue[object] = asyncio.Queue()
        self.complete = False
        self.got_bytes = False
        self.in_flight = False  # only a connection with a request out has someone to tell
        self.keep_alive = False

    # asyncio callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HTTPError(f"bad HTTP response: {exc}", False))
            self.transport.close()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.in_flight and not self.complete:
            if exc is None and self.head.done() and self._close_delimited():
                self.complete = True  # HTTP/1.0 style: the body ends where the connection does
                self.body.put_nowait(_EOF)
                return
            self._fail(HTTPError("connection closed by upstream", not self.got_bytes))

    def _close_delimited(self) -> bool:
        names = {name for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _fail(self, err: HTTPError) -> None:
        if not self.head.done():
            self.head.set_exception(err)
        else:
            self.body.put_nowait(err)

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        # read now: the parser forgets it once the message is complete
        self.keep_alive = self.parser.should_keep_alive()
        if not self.head.done():
            self.head.set_result(self.parser.get_status_code())

    def on_body(self, body: bytes) -> None:
        self.body.put_nowait(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.body.put_nowait(_EOF)


class Response:
    def __init__(self, pool: HTTP1Pool, origin: Origin, conn: _Connection, status: int, timeout: float) -> None:
        self.status = status
        self.headers = dict(conn.headers)
        self._pool, self._origin, self._conn, self._timeout = pool, origin, conn, timeout
        self._done = False

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        while not self._done:
            try:
                async with asyncio.timeout(self._timeout):
                    item = await self._conn.body.get()
            except TimeoutError:
                self.close()
                raise HTTPError("upstream read timed out", False, timeout=True) from None
            if item is _EOF:
                self._release()
                return
            if isinstance(item, HTTPError):
                self.close()
                raise item
            yield item  # type: ignore[misc]

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.iter_bytes()])

    def _release(self) -> None:
        self._done = True
        keep = self._conn.keep_alive and not self._conn.closed
        self._pool.put_back(self._origin, self._conn, keep)

    def close(self) -> None:
        """Abandon the response: a connection with unread body cannot be reused."""
        if not self._done:
            self._done = True
            self._pool.put_back(self._origin, self._conn, False)


class HTTP1Pool:
    def __init__(self, max_idle_per_origin: int = 512, connect_timeout: float = 5.0) -> None:
        self._idle: dict[Origin, deque[_Connection]] = {}
        self._max_idle = max_idle_per_origin
        self._connect_timeout = connect_timeout
        self._ssl: ssl.SSLContext | None = None

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        ctx = None
        if origin.scheme == "https":
            ctx = self._ssl = self._ssl or ssl.create_default_context()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(
                _Connection, origin.host, origin.port, ssl=ctx), self._connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise HTTPError(f"cannot connect to upstream: {type(exc).__name__}", True) from None
        return conn

    def put_back(self, origin: Origin, conn: _Connection, keep: bool) -> None:
        idle = self._idle.setdefault(origin, deque())
        if keep and len(idle) < self._max_idle:
            conn._reset()
            idle.append(conn)
        elif conn.transport is not None:
            conn.transport.close()

    async def post(self, origin: Origin, path: str, headers: bytes, body: bytes, timeout: float,
                   method: str = "POST") -> Response:
        """Send a POST (or `method`); return once the status line and headers are in.
        `headers`: extra raw header lines, each ending in CRLF."""
        head = (f"{method} {origin.target(path)} HTTP/1.1\r\nHost: {origin.host_header}\r\n"
                f"Content-Length: {len(body)}\r\n").encode() + headers + b"\r\n"
        idle = self._idle.get(origin)
        for attempt in range(2):
            reused = False
            conn = None
            while idle:
                c = idle.pop()
                if not c.closed and c.transport is not None and not c.transport.is_closing():
                    conn, reused = c, True
                    break
            if conn is None:
                conn = await self._connect(origin)
            conn.in_flight = True
            conn.transport.writelines((head, body))  # type: ignore[union-attr]
            try:
                async with asyncio.timeout(timeout):
                    status = await conn.head
            except HTTPError as exc:
                # a kept-alive connection the server had just closed: retry once on a fresh one
                if reused and exc.before_response and attempt == 0:
                    continue
                raise
            except TimeoutError:
                conn.transport.close()  # type: ignore[union-attr]
                raise HTTPError("upstream timed out", False, timeout=True) from None
            except asyncio.CancelledError:
                conn.transport.close()  # type: ignore[union-attr]
                raise
            return Response(self, origin, conn, status, timeout)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
