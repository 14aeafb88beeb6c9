"""One conformance suite for our RESP client (gateway/quota/resp.py) and redis-py with hiredis
(configured as the gateway would use it: one pool, timeouts, no retries), against real
redis-server processes started here: TLS that is really TLS, unix sockets, a refused AUTH,
an undecodable reply, typed timeouts, connections the server closed, a burst of calls.
Each behaviour runs against both clients; bench/upstream_clients.py and
bench/gateway_overhead.py say why the gateway keeps its own (CPU per request, docs/fleet.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError
from redis.maint_notifications import MaintNotificationsConfig

from fairgate.gateway.quota import QuotaDenied, ScopeLimits, period_tags
from fairgate.gateway.quota.redis_store import RedisQuotaStore
from fairgate.gateway.quota.resp import RespClient, RespError, Script
from tests.gateway.harness import REDIS_URL
from tests.helpers.redis_server import RedisServer, missing_reason, redis_server

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
PASSWORD = "redis-client-test"
GONE = (OSError, redis.ConnectionError, redis.TimeoutError)  # a connection that could not be made or was lost
TIMEOUT = (TimeoutError, redis.TimeoutError)


class Client:
    """Both clients behind one small surface: `call(*args)`, `script(source)(keys, args)`."""

    def __init__(self, kind: str, url: str, timeout_s: float) -> None:
        self.kind = kind
        if kind == "ours":
            self._ours = RespClient(url, timeout_s)
        else:
            self._lib = aredis.Redis.from_pool(aredis.BlockingConnectionPool.from_url(
                url, max_connections=64, timeout=timeout_s, decode_responses=True, socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
                # while "auto", redis-py 8 does not check that a pooled connection is still open
                maint_notifications_config=MaintNotificationsConfig(enabled=False)))

    async def call(self, *args: Any) -> Any:
        if self.kind == "ours":
            return await self._ours.execute(*args)
        return await self._lib.execute_command(*args)

    def script(self, source: str) -> Callable[[list[str], list[Any]], Awaitable[Any]]:
        if self.kind == "ours":
            return Script(self._ours, source)
        s = self._lib.register_script(source)
        return lambda keys, args: s(keys=keys, args=args)

    async def aclose(self) -> None:
        await (self._ours.aclose() if self.kind == "ours" else self._lib.aclose())


@pytest.fixture(params=["ours", "redis-py"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One private server for the module: a password, a TLS port with its own CA, a unix socket."""
    with redis_server(tmp_path_factory.mktemp("redis"), password=PASSWORD, tls=True, unix=True) as srv:
        yield srv


async def _calls(kind: str, url: str, *commands: tuple[object, ...]) -> list[object]:
    client = Client(kind, url, timeout_s=2)
    try:
        return [await client.call(*c) for c in commands]
    finally:
        await client.aclose()


async def test_rediss_speaks_tls_verified_against_the_ca_in_the_url(server: RedisServer, kind: str):
    got = await _calls(kind, server.tls_url, ("SET", "tls-k", "v"), ("GET", "tls-k"))
    assert got[0] in ("OK", True) and got[1] == "v"


async def test_the_quota_store_works_over_tls(server: RedisServer):
    store = RedisQuotaStore(server.tls_url, prefix=f"fgtls-{uuid.uuid4().hex[:6]}")
    try:
        version = await store.config_bus().version()
        await store.reserve("r1", [ScopeLimits("t:a", max_concurrent=1)], 5, 0.0, version)
        with pytest.raises(QuotaDenied):
            await store.reserve("r2", [ScopeLimits("t:a", max_concurrent=1)], 5, 0.0, version)
        assert await store.settle("r1", 3, 0.0) is True
        assert (await store.counters("t:a"))["daily_tokens"] == 3
    finally:
        await store.aclose()


async def test_tls_is_never_skipped_or_unverified(server: RedisServer, kind: str):
    tls = f"localhost:{server.tls_port}/0"
    with pytest.raises(GONE, match="CERTIFICATE_VERIFY_FAILED"):  # our CA is not a system CA
        await _calls(kind, f"rediss://:{PASSWORD}@{tls}", ("PING",))
    with pytest.raises(GONE):  # plaintext to the TLS port: refused, not answered
        await _calls(kind, f"redis://:{PASSWORD}@{tls}", ("PING",))
    with pytest.raises(GONE):  # TLS to a plaintext port
        await _calls(kind, f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0?ssl_ca_certs={server.ca_file}", ("PING",))


async def test_unix_socket_urls_with_a_password_and_a_db(server: RedisServer, kind: str):
    key = f"unix-{kind}"
    got = await _calls(kind, server.unix_url + "?db=2", ("SET", key, "v"), ("GET", key), ("CLIENT", "INFO"))
    assert got[0] in ("OK", True) and got[1] == "v" and " db=2 " in str(got[2])
    with server.admin() as r:
        assert r.get(key) is None  # db 0 never saw it


async def test_unknown_schemes_are_refused(kind: str):
    with pytest.raises(ValueError, match="scheme"):
        Client(kind, "http://127.0.0.1:6379", 2)


@pytest.fixture
def lone_server(tmp_path: Path) -> Iterator[RedisServer]:
    with redis_server(tmp_path, password=PASSWORD) as srv:
        yield srv


async def _others_gone(admin: redis.Redis, me: int) -> bool:
    """True once the server lists no connection but `admin`'s (a closed socket is seen by the
    server a moment later: asyncio closes transports on the next loop turns)."""
    for _ in range(100):
        if [c["id"] for c in admin.client_list()] == [str(me)]:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_refused_auth_is_a_clear_error_and_leaves_no_connection_behind(lone_server: RedisServer,
                                                                                kind: str):
    wrong = Client(kind, f"redis://:not-the-password@127.0.0.1:{lone_server.port}/0", timeout_s=2)
    with lone_server.admin() as admin:
        me = admin.client_id()
        try:
            for _ in range(2):  # the second call does not ride on a connection the first one opened
                with pytest.raises((RespError, AuthenticationError), match="invalid username-password pair"):
                    await wrong.call("PING")
                assert await _others_gone(admin, me)
        finally:
            await wrong.aclose()
    assert await _calls(kind, lone_server.url, ("INCR", f"right-{kind}")) == [1]


async def test_connections_the_server_closed_while_idle_are_replaced_not_failed(lone_server: RedisServer,
                                                                                 kind: str):
    client = Client(kind, lone_server.url, timeout_s=2)
    try:
        await asyncio.gather(*(client.call("PING") for _ in range(8)))
        with lone_server.admin() as admin:
            assert admin.client_kill_filter(_type="normal", skipme=True) >= 1  # a restart, an idle timeout
        await asyncio.sleep(0.2)  # idle meanwhile: the client's loop sees the closes
        got = await asyncio.gather(*(client.call("INCR", "after-kill") for _ in range(8)), return_exceptions=True)
        assert sorted(got) == list(range(1, 9))  # on fresh connections, authenticated again
    finally:
        await client.aclose()


async def test_a_burst_of_calls_larger_than_any_pool_is_served(server: RedisServer, kind: str):
    client = Client(kind, server.url, timeout_s=5)
    try:
        got = await asyncio.gather(*(client.call("INCR", f"burst-{kind}") for _ in range(300)))
        assert sorted(got) == list(range(1, 301))
    finally:
        await client.aclose()


async def test_a_reply_that_is_not_utf8_touches_only_its_own_call(server: RedisServer, kind: str):
    odd = b"\xff\xfe\x00tail"
    with server.admin() as r:
        r.set("odd", odd)
    client = Client(kind, server.url, timeout_s=2)
    try:
        echoes = [client.call("ECHO", f"call-{i}") for i in range(20)]
        got = await asyncio.gather(*echoes[:10], client.call("GET", "odd"), *echoes[10:], return_exceptions=True)
        assert got[10] == odd or isinstance(got[10], UnicodeDecodeError)  # ours: the bytes; redis-py: an error
        assert got[:10] + got[11:] == [f"call-{i}" for i in range(20)]
        assert await client.call("ECHO", "after") == "after"
    finally:
        await client.aclose()


async def test_an_undecodable_counter_fails_one_read_not_the_concurrent_admissions():
    prefix = f"fgtest-odd-{uuid.uuid4().hex[:8]}"
    store = RedisQuotaStore(REDIS_URL, prefix=prefix)
    plain = aredis.Redis.from_url(REDIS_URL)
    day, _ = period_tags()
    try:
        await plain.set(f"{store.base('t:odd')}:q:t:odd:d:{day}", b"\xff\xfe")
        version = await store.config_bus().version()
        reserves = [store.reserve(f"r{i}", [ScopeLimits("t:fine", requests_per_minute=100)], 1, 0.0, version)
                    for i in range(20)]
        got = await asyncio.gather(store.counters("t:odd"), *reserves, return_exceptions=True)
        assert isinstance(got[0], ValueError)  # not a number
        assert not [g for g in got[1:] if isinstance(g, BaseException)]
        assert (await store.counters("t:fine"))["requests"] == 20
    finally:
        await store.aclose()
        keys = [k async for k in plain.scan_iter(f"{prefix}:*")]
        if keys:
            await plain.delete(*keys)
        await plain.aclose()


async def test_a_timeout_is_typed_and_its_late_reply_reaches_no_one(server: RedisServer, kind: str):
    client = Client(kind, server.url, timeout_s=0.3)
    key = f"timeout-{kind}"
    try:
        await client.call("SET", key, "mine")
        with server.admin() as admin:
            admin.execute_command("CLIENT", "PAUSE", 1000, "ALL")
        with pytest.raises(TIMEOUT):
            await client.call("ECHO", "late")
        await asyncio.sleep(1.2)  # the pause is over; the late ECHO's answer must not reach this GET
        assert await client.call("GET", key) == "mine"
    finally:
        await client.aclose()


SLOW_INCR = """
local t0 = redis.call('TIME')
repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1000000 + t[2] - t0[2] > 500000
return redis.call('INCR', KEYS[1])
"""


async def test_a_script_whose_reply_times_out_is_not_sent_again(server: RedisServer, kind: str):
    client = Client(kind, server.url, timeout_s=0.2)
    key = f"once-{kind}"
    try:
        await client.call("SCRIPT", "LOAD", SLOW_INCR)
        with pytest.raises(TIMEOUT):  # the script runs 0.5 s; a retry would INCR twice
            await client.script(SLOW_INCR)([key], [])
    finally:
        await client.aclose()
    assert await _calls(kind, server.url, ("GET", key)) == ["1"]  # queued behind the script


async def test_scripts_are_loaded_again_after_a_script_flush(server: RedisServer, kind: str):
    client = Client(kind, server.url, timeout_s=2)
    try:
        incr = client.script("return redis.call('INCR', KEYS[1])")
        assert await incr([f"flush-{kind}"], []) == 1
        with server.admin() as admin:
            admin.script_flush()
        assert await incr([f"flush-{kind}"], []) == 2  # NOSCRIPT, loaded again
    finally:
        await client.aclose()


async def test_the_quota_store_survives_a_script_flush(server: RedisServer):
    store = RedisQuotaStore(server.url, prefix=f"fgflush-{uuid.uuid4().hex[:6]}")
    try:
        version = await store.config_bus().version()
        await store.reserve("r1", [ScopeLimits("t:a")], 1, 0.0, version)
        with server.admin() as admin:
            admin.script_flush()
        await store.reserve("r2", [ScopeLimits("t:a")], 1, 0.0, version)
        assert await store.settle("r1", 1, 0.0) is True and await store.settle("r2", 1, 0.0) is True
        assert (await store.counters("t:a"))["daily_tokens"] == 2
    finally:
        await store.aclose()


async def test_a_redis_that_goes_away_fails_the_call_and_the_next_call_after_it_returns_connects_afresh(
        tmp_path: Path, kind: str):
    with redis_server(tmp_path, password=PASSWORD) as srv:
        client = Client(kind, srv.url, timeout_s=2)
        await client.call("SET", "k", "before")
    try:
        with pytest.raises(GONE):  # gone: an error, never a hang or a stale answer
            await client.call("GET", "k")
        with redis_server(tmp_path, password=PASSWORD, port=srv.port):
            assert await client.call("GET", "k") is None  # a fresh server: reconnected and authenticated
    finally:
        await client.aclose()
