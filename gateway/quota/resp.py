"""A minimal pipelined Redis client (RESP2) for the quota scripts.

Redis answers commands on one connection in order, so one connection with a FIFO of futures
carries every concurrent admission: no pool, no locks, one write per command, and under load
one read brings many replies.

Kept over redis-py by the numbers (issue 18's rule: replace it if the library path is within
20% of ours in gateway CPU per request). bench/gateway_overhead.py, main vs a branch on
redis-py 8.1 + hiredis (one pool, no retries), 11 alternating pairs on a loaded 2-core machine:
0.60 vs 0.80 ms of gateway CPU per request at 50 concurrent (median pair ratio 1.37), 0.91 vs
1.23 ms at 1 (1.28). bench/upstream_clients.py: 15 vs 42 us per EVALSHA. Numbers and the
behaviours both clients are held to: docs/fleet.md, tests/gateway/test_resp_conformance.py.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit


class RespError(Exception):
    """An error reply from Redis (e.g. NOSCRIPT, WRONGTYPE)."""


def pack(args: tuple[Any, ...]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def parse(buf: bytes | bytearray, pos: int) -> tuple[Any, int] | None:
    """One reply starting at `pos`: (value, next pos), or None if it is not all here yet."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        return None
    kind, line = buf[pos:pos + 1], bytes(buf[pos + 1:end])
    nxt = end + 2
    if kind == b"+":
        return line.decode("utf-8", "replace"), nxt
    if kind == b"-":
        return RespError(line.decode("utf-8", "replace")), nxt
    if kind == b":":
        return int(line), nxt
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, nxt
        if len(buf) < nxt + n + 2:
            return None
        raw = bytes(buf[nxt:nxt + n])
        try:
            return raw.decode(), nxt + n + 2
        except UnicodeDecodeError:  # not text: the bytes as they are (one odd value breaks nothing else)
            return raw, nxt + n + 2
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, nxt
        items = []
        for _ in range(n):
            got = parse(buf, nxt)
            if got is None:
                return None
            item, nxt = got
            items.append(item)
        return items, nxt
    raise RespError(f"bad reply type {kind!r}")


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.pending: deque[asyncio.Future[Any]] = deque()
        self.buf = bytearray()
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos = 0
        while self.pending:
            got = parse(self.buf, pos)
            if got is None:
                break
            value, pos = got
            fut = self.pending.popleft()
            if not fut.done():  # a caller that timed out still owns its place in the queue
                fut.set_result(value)
        del self.buf[:pos]

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        while self.pending:
            fut = self.pending.popleft()
            if not fut.done():
                fut.set_exception(ConnectionError("redis connection lost"))


class RespClient:
    """`redis://`, `rediss://` (TLS, verified against the system CAs; `?ssl_cert_reqs=none`
    turns verification off) and `unix:///path/to/socket` URLs, with user, password and db."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        u = urlsplit(url)
        if u.scheme not in ("redis", "rediss", "unix"):
            raise ValueError(f"unsupported Redis URL scheme {u.scheme!r} (redis://, rediss:// or unix://)")
        self._unix_path = u.path if u.scheme == "unix" else None
        self._host, self._port = u.hostname or "127.0.0.1", u.port or 6379
        self._password = unquote(u.password) if u.password else None
        self._username = unquote(u.username) if u.username else None
        query = dict(parse_qsl(u.query))
        self._db = int(query.get("db", 0) if u.scheme == "unix" else (u.path.lstrip("/") or 0))
        self._ssl = _tls_context(query) if u.scheme == "rediss" else None
        self._timeout = timeout_s
        self._proto: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def _connection(self) -> _Protocol:
        proto = self._proto
        if proto is not None and not proto.lost:
            return proto
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._proto is None or self._proto.lost:
                self._proto = await self._open()
            return self._proto

    async def _open(self) -> _Protocol:
        """A new connection, authenticated and on its db; closed again if either fails, so a
        failed AUTH is never cached."""
        loop = asyncio.get_running_loop()
        if self._unix_path is not None:
            connect = loop.create_unix_connection(_Protocol, self._unix_path)
        else:
            connect = loop.create_connection(_Protocol, self._host, self._port, ssl=self._ssl,
                                             server_hostname=self._host if self._ssl else None)
        _, proto = await asyncio.wait_for(connect, self._timeout)
        try:
            if self._password:
                auth = (self._username, self._password) if self._username else (self._password,)
                await self._call(proto, ("AUTH", *auth))
            if self._db:
                await self._call(proto, ("SELECT", self._db))
        except BaseException:
            proto.transport.close()  # type: ignore[union-attr]
            raise
        return proto

    async def execute(self, *args: Any) -> Any:
        return await self._call(await self._connection(), args)

    async def _call(self, proto: _Protocol, args: tuple[Any, ...]) -> Any:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        proto.pending.append(fut)
        proto.transport.write(pack(args))  # type: ignore[union-attr]
        async with asyncio.timeout(self._timeout):
            value = await fut
        if isinstance(value, RespError):
            raise value
        return value

    async def aclose(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None


def _tls_context(query: dict[str, str]) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=query.get("ssl_ca_certs"))
    if query.get("ssl_cert_reqs", "required").lower() == "none":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class Script:
    """EVALSHA, loading the script on NOSCRIPT (after a Redis restart or flush, or on a
    Cluster node that has not seen it yet). `client`: a RespClient or anything with its
    `execute` (gateway.quota.cluster.ClusterClient)."""

    def __init__(self, client: Any, source: str) -> None:
        import hashlib

        self._client = client
        self._source = source
        self._sha = hashlib.sha1(source.encode()).hexdigest()

    async def __call__(self, keys: list[str], args: list[Any]) -> Any:
        try:
            return await self._client.execute("EVALSHA", self._sha, len(keys), *keys, *args)
        except RespError as exc:
            if not str(exc).startswith("NOSCRIPT"):
                raise
            return await self._client.execute("EVAL", self._source, len(keys), *keys, *args)
