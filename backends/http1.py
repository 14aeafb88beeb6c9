"""A small keep-alive HTTP/1.1 client on asyncio protocols and httptools (uvicorn's parser).

Why not httpx here: on the gateway's hot path httpx's pool, anyio and h11 layers cost a few
ms of CPU per upstream call, more than the rest of the gateway together (bench/upstream_clients.py:
about 0.13 ms per POST here against 2.3-3.8 ms for httpx 0.28, where the whole gateway spends
about 2.5 ms per request). tests/backends/test_http_conformance.py (with test_http_proxy.py,
test_http_tls.py and test_http_transport.py) holds it to httpx's behaviour. This client does one
thing — POST a body, read a status, headers and a (possibly chunked, possibly streamed) body
over pooled connections — for `http://` and `https://` upstreams, directly or through an HTTP
proxy (backends/http_proxy.py), with per-backend TLS settings (backends/http_tls.py). A body
is read under a size cap, and a connection stops reading while a slow consumer has
`HIGH_WATER` bytes queued, so memory stays bounded whatever the upstream sends.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httptools

from fairgate.backends.http_proxy import Proxy, ProxyRefused, open_tunnel
from fairgate.backends.http_tls import TLSSettings, tls_failure

HIGH_WATER = 4 * 2**20  # bytes queued unread before the connection stops reading
LOW_WATER = 1 * 2**20
END_WAIT_S = 0.25  # how long a finished stream waits for its body's end before its connection is dropped


class HTTPError(Exception):
    """Transport failure. `before_response`: nothing of a response arrived (safe to retry);
    `timeout`: the upstream did not answer in time (a 504 to the client, not a 502); `code`:
    the OpenAI error code the gateway answers with (None: `upstream_error`)."""

    def __init__(self, message: str, before_response: bool, timeout: bool = False, code: str | None = None) -> None:
        super().__init__(message)
        self.before_response = before_response
        self.timeout = timeout
        self.code = code or ("upstream_timeout" if timeout else None)


class ResponseTooLarge(HTTPError):
    """The upstream sent more than the cap allows (a whole body, or one line of a stream)."""

    def __init__(self, limit: int, what: str = "response body") -> None:
        super().__init__(f"upstream {what} over the limit of {limit} bytes (max_response_bytes)", False,
                         code="upstream_response_too_large")
        self.limit = limit


@dataclass(slots=True, frozen=True)
class Origin:
    """Where an upstream lives. `query`: the base URL's query string, kept on every request
    (e.g. Azure OpenAI's `api-version`); `proxy`: the HTTP proxy to go through (None: direct);
    `tls`: the backend's own TLS settings (None: the system's trust store, verified)."""

    scheme: str
    host: str
    port: int
    base_path: str
    query: str = ""
    proxy: Proxy | None = None
    tls: TLSSettings | None = None
    # an http:// upstream through a proxy: absolute-form targets, the proxy's credentials on each
    _prefix: str = field(default="", init=False, compare=False, repr=False)
    proxy_headers: bytes = field(default=b"", init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.proxy is not None and self.scheme == "http":
            object.__setattr__(self, "_prefix", f"http://{self.host_header}")
            object.__setattr__(self, "proxy_headers", self.proxy.auth)

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
            return f"{self._prefix}{self.base_path}{path}"
        return f"{self._prefix}{self.base_path}{path}{'&' if '?' in path else '?'}{self.query}"


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
        self.queued = 0  # body bytes in `body` not read yet
        self.paused = False

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
            why = f" ({tls_failure(exc, 'the upstream')})" if isinstance(exc, ssl.SSLError) else ""
            self._fail(HTTPError(f"connection closed by upstream{why}", not self.got_bytes))

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
        self.queued += len(body)
        if self.queued > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True  # the consumer is slower than the upstream: let TCP push back
            self.transport.pause_reading()

    def taken(self, size: int) -> None:
        self.queued -= size
        if self.paused and self.queued <= LOW_WATER and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def on_message_complete(self) -> None:
        self.complete = True
        self.body.put_nowait(_EOF)


class Response:
    def __init__(self, pool: HTTP1Pool, origin: Origin, conn: _Connection, status: int, timeout: float) -> None:
        self.status = status
        self.headers = dict(conn.headers)
        self._pool, self._origin, self._conn, self._timeout = pool, origin, conn, timeout
        self._done = False

    async def _next(self) -> bytes | None:
        """The next piece of the body; None at its end."""
        if self._done:
            return None
        try:
            async with asyncio.timeout(self._timeout):
                item = await self._conn.body.get()
        except TimeoutError:
            self.close()
            raise HTTPError("upstream read timed out", False, timeout=True) from None
        if item is _EOF:
            self._release()
            return None
        if isinstance(item, HTTPError):
            self.close()
            raise item
        self._conn.taken(len(item))  # type: ignore[arg-type]
        return item  # type: ignore[return-value]

    async def iter_bytes(self) -> AsyncIterator[bytes]:
        while (chunk := await self._next()) is not None:
            yield chunk

    async def read(self, limit: int | None = None) -> bytes:
        """The whole body; `ResponseTooLarge` (the connection closed) past `limit` bytes."""
        if limit is not None and int(self.headers.get(b"content-length", b"0") or b"0") > limit:
            self.close()  # announced too large: not one byte of it is read
            raise ResponseTooLarge(limit)
        chunks, size = [], 0
        while (chunk := await self._next()) is not None:
            size += len(chunk)
            if limit is not None and size > limit:
                self.close()
                raise ResponseTooLarge(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def finish(self, wait_s: float = END_WAIT_S) -> None:
        """After a stream's last event the server sends only the body's end (the chunked
        encoding's last chunk): read it, for at most `wait_s`, so the connection goes back to the
        pool. Closing it instead costs a new connection per streamed request on both sides, and a
        closed connection's parser and protocol (a reference cycle) for the collector."""
        if self._done:
            return
        try:
            async with asyncio.timeout(wait_s):
                while (chunk := await self._next()) is not None:
                    if chunk.strip():
                        break  # more than the end: not a clean one, the connection goes
        except (TimeoutError, HTTPError):
            pass
        self.close()  # nothing once the end was read (the connection is back in the pool)

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
        self._busy: dict[Origin, set[_Connection]] = {}  # a request out on each: `fail_in_flight`
        self._max_idle = max_idle_per_origin
        self._connect_timeout = connect_timeout
        self._ssl: dict[TLSSettings | None, ssl.SSLContext] = {}  # one context per distinct setting

    def _tls(self, origin: Origin) -> ssl.SSLContext | None:
        if origin.scheme != "https":
            return None
        ctx = self._ssl.get(origin.tls)
        if ctx is None:
            try:
                ctx = origin.tls.context() if origin.tls is not None else ssl.create_default_context()
            except ValueError as exc:
                raise HTTPError(str(exc), True) from None
            self._ssl[origin.tls] = ctx
        return ctx

    async def _connect(self, origin: Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        ctx, proxy = self._tls(origin), origin.proxy
        if proxy is not None and proxy.scheme != "http":
            raise HTTPError(f"cannot use the proxy: only http:// proxies are supported, not {proxy.scheme}://", True)
        try:
            async with asyncio.timeout(self._connect_timeout):
                if proxy is None:
                    _, conn = await loop.create_connection(_Connection, origin.host, origin.port, ssl=ctx)
                elif ctx is None:  # http:// upstream: absolute-form requests to the proxy
                    _, conn = await loop.create_connection(_Connection, proxy.host, proxy.port)
                else:  # https:// upstream: a CONNECT tunnel, TLS with the upstream inside it
                    _, conn = await open_tunnel(proxy, origin.host, origin.port, ctx, _Connection)
        except ProxyRefused as exc:
            raise HTTPError(str(exc), True) from None
        except ssl.SSLError as exc:
            raise HTTPError(tls_failure(exc, origin.host_header), True) from None
        except (OSError, TimeoutError) as exc:
            where = "upstream" if proxy is None else f"the proxy {proxy.host}:{proxy.port}"
            raise HTTPError(f"cannot connect to {where}: {type(exc).__name__}", True) from None
        return conn

    def put_back(self, origin: Origin, conn: _Connection, keep: bool) -> None:
        self._busy[origin].discard(conn)
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
                f"Content-Length: {len(body)}\r\n").encode() + origin.proxy_headers + headers + b"\r\n"
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
            busy = self._busy.setdefault(origin, set())
            busy.add(conn)
            conn.transport.writelines((head, body))  # type: ignore[union-attr]
            try:
                async with asyncio.timeout(timeout):
                    status = await conn.head
            except HTTPError as exc:
                busy.discard(conn)
                # a kept-alive connection the server had just closed: retry once on a fresh one
                if reused and exc.before_response and attempt == 0:
                    continue
                if not reused and exc.before_response and origin.scheme == "https" and not (
                        origin.tls is not None and origin.tls.client_cert):
                    # TLS 1.3: a server wanting a client certificate hangs up after the handshake
                    raise HTTPError(f"{exc}; a TLS upstream that closes a new connection at once may require a "
                                    "client certificate (set the backend's client_cert)", True) from None
                raise
            except TimeoutError:
                busy.discard(conn)
                conn.transport.close()  # type: ignore[union-attr]
                raise HTTPError("upstream timed out", False, timeout=True) from None
            except asyncio.CancelledError:
                busy.discard(conn)
                conn.transport.close()  # type: ignore[union-attr]
                raise
            return Response(self, origin, conn, status, timeout)
        raise AssertionError("unreachable")

    def in_flight(self, origin: Origin) -> int:
        """Requests out on `origin` now (sent, their response not yet read to its end)."""
        return len(self._busy.get(origin, ()))

    def fail_in_flight(self, origin: Origin, why: str) -> int:
        """End every request out on `origin` now with `HTTPError(why, code="upstream_hung")` and
        close their connections: the upstream stopped answering (backends/liveness.py). A request
        waiting for its head gets it from `post`; one reading its body, from the next read.
        Returns how many were ended."""
        ended = list(self._busy.get(origin, ()))
        for conn in ended:
            conn._fail(HTTPError(why, False, code="upstream_hung"))
            if conn.transport is not None:
                conn.transport.close()
        return len(ended)

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()
