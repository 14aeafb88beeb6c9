"""The gateway's Redis client (gateway/quota/redis_client.py: redis-py with hiredis) pinned to
the behaviours the quota stores rely on, against real redis-server processes started here:
TLS that is really TLS, unix sockets, a refused AUTH, an undecodable reply, typed timeouts and
scripts reloaded after a flush."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis
from redis.exceptions import AuthenticationError

from gateway.quota import QuotaDenied, ScopeLimits, period_tags
from gateway.quota.redis_client import connect
from gateway.quota.redis_store import RedisQuotaStore
from tests.gateway.harness import REDIS_URL
from tests.helpers.redis_server import RedisServer, missing_reason, redis_server

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
PASSWORD = "redis-client-test"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One private server for the module: a password, a TLS port with its own CA, a unix socket."""
    with redis_server(tmp_path_factory.mktemp("redis"), password=PASSWORD, tls=True, unix=True) as srv:
        yield srv


async def _calls(url: str, *commands: tuple[object, ...]) -> list[object]:
    client = connect(url, timeout_s=2)
    try:
        return [await client.execute_command(*c) for c in commands]
    finally:
        await client.aclose()


async def test_rediss_speaks_tls_verified_against_the_ca_in_the_url(server: RedisServer):
    got = await _calls(server.tls_url, ("SET", "tls-k", "v"), ("GET", "tls-k"))
    assert got == [True, "v"]
    # the quota store takes the same URL: a reservation made and settled over TLS
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


async def test_tls_is_never_skipped_or_unverified(server: RedisServer):
    tls = f"localhost:{server.tls_port}/0"
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):  # our CA is not a system CA
        await _calls(f"rediss://:{PASSWORD}@{tls}", ("PING",))
    with pytest.raises(redis.ConnectionError):  # plaintext to the TLS port: refused, not answered
        await _calls(f"redis://:{PASSWORD}@{tls}", ("PING",))
    with pytest.raises((redis.ConnectionError, redis.TimeoutError)):  # TLS to a plaintext port
        await _calls(f"rediss://:{PASSWORD}@127.0.0.1:{server.port}/0?ssl_ca_certs={server.ca_file}", ("PING",))


async def test_unix_socket_urls_with_a_password_and_a_db(server: RedisServer):
    got = await _calls(server.unix_url + "?db=2", ("SET", "unix-k", "v"), ("GET", "unix-k"), ("CLIENT", "INFO"))
    assert got[:2] == [True, "v"] and " db=2 " in str(got[2])
    with server.admin() as r:
        assert r.get("unix-k") is None  # db 0 never saw it


async def test_unknown_schemes_are_refused():
    with pytest.raises(ValueError, match="redis://, rediss://, unix://"):
        connect("http://127.0.0.1:6379")


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


async def test_a_refused_auth_is_a_clear_error_and_leaves_no_connection_behind(lone_server: RedisServer):
    wrong = connect(f"redis://:not-the-password@127.0.0.1:{lone_server.port}/0", timeout_s=2)
    with lone_server.admin() as admin:
        me = admin.client_id()
        try:
            for _ in range(2):  # the second call does not ride on a connection the first one opened
                with pytest.raises(AuthenticationError, match="invalid username-password pair"):
                    await wrong.ping()
                assert await _others_gone(admin, me)
        finally:
            await wrong.aclose()
        right = connect(lone_server.url, timeout_s=2)
        try:
            assert await right.ping() is True
        finally:
            await right.aclose()


async def test_connections_the_server_closed_while_idle_are_replaced_not_failed(lone_server: RedisServer):
    client = connect(lone_server.url, timeout_s=2)
    try:
        await asyncio.gather(*(client.ping() for _ in range(8)))  # several pooled connections
        with lone_server.admin() as admin:
            assert admin.client_kill_filter(_type="normal", skipme=True) >= 2  # a restart, an idle timeout
        await asyncio.sleep(0.2)  # idle meanwhile: the client's loop sees the closes
        got = await asyncio.gather(*(client.incr("after-kill") for _ in range(8)), return_exceptions=True)
        assert sorted(got) == list(range(1, 9))  # each on a fresh connection, authenticated again
    finally:
        await client.aclose()


async def test_a_reply_that_is_not_utf8_fails_only_its_own_call(server: RedisServer):
    with server.admin() as r:
        r.set("odd", b"\xff\xfe\x00tail")
    client = connect(server.url, timeout_s=2)

    async def echo(i: int) -> object:
        return await client.echo(f"call-{i}")

    try:
        got = await asyncio.gather(*(echo(i) for i in range(10)), client.get("odd"), *(echo(i) for i in range(10, 20)),
                                   return_exceptions=True)
        assert isinstance(got[10], UnicodeDecodeError)
        assert got[:10] + got[11:] == [f"call-{i}" for i in range(20)]
        assert await client.echo("after") == "after"
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
        assert isinstance(got[0], UnicodeDecodeError)
        assert not [g for g in got[1:] if isinstance(g, BaseException)]
        assert (await store.counters("t:fine"))["requests"] == 20
    finally:
        await store.aclose()
        keys = [k async for k in plain.scan_iter(f"{prefix}:*")]
        if keys:
            await plain.delete(*keys)
        await plain.aclose()


async def test_a_timeout_is_typed_and_its_late_reply_reaches_no_one(server: RedisServer):
    client = connect(server.url, timeout_s=0.3)
    try:
        await client.set("timeout-k", "mine")
        with server.admin() as admin:
            admin.execute_command("CLIENT", "PAUSE", 1000, "ALL")
        with pytest.raises(redis.TimeoutError):
            await client.echo("late")
        await asyncio.sleep(1.2)  # the pause is over; the late ECHO's answer went to a closed socket
        assert await client.get("timeout-k") == "mine"
    finally:
        await client.aclose()


SLOW_INCR = """
local t0 = redis.call('TIME')
repeat local t = redis.call('TIME') until (t[1] - t0[1]) * 1000000 + t[2] - t0[2] > 500000
return redis.call('INCR', KEYS[1])
"""


async def test_a_script_whose_reply_times_out_is_not_sent_again(server: RedisServer):
    client = connect(server.url, timeout_s=0.2)
    try:
        slow = client.register_script(SLOW_INCR)
        await client.script_load(SLOW_INCR)
        with pytest.raises(redis.TimeoutError):  # the script runs 0.5 s; a retry would INCR twice
            await slow(keys=["once"])
        client2 = connect(server.url, timeout_s=5)
        try:
            assert await client2.get("once") == "1"  # queued behind the script: read after it ended
        finally:
            await client2.aclose()
    finally:
        await client.aclose()


async def test_scripts_are_loaded_again_after_a_script_flush(server: RedisServer):
    store = RedisQuotaStore(server.url, prefix=f"fgflush-{uuid.uuid4().hex[:6]}")
    try:
        version = await store.config_bus().version()
        await store.reserve("r1", [ScopeLimits("t:a")], 1, 0.0, version)
        with server.admin() as admin:
            admin.script_flush()
        await store.reserve("r2", [ScopeLimits("t:a")], 1, 0.0, version)  # NOSCRIPT → SCRIPT LOAD → EVALSHA
        assert await store.settle("r1", 1, 0.0) is True and await store.settle("r2", 1, 0.0) is True
        assert (await store.counters("t:a"))["daily_tokens"] == 2
    finally:
        await store.aclose()


async def test_a_redis_that_goes_away_fails_the_call_and_the_next_call_after_it_returns_connects_afresh(
        tmp_path: Path):
    with redis_server(tmp_path, password=PASSWORD) as srv:
        client = connect(srv.url, timeout_s=2)
        await client.set("k", "before")
    try:
        with pytest.raises(redis.ConnectionError):  # gone: an error, never a hang or a stale answer
            await client.get("k")
        with redis_server(tmp_path, password=PASSWORD, port=srv.port):
            assert await client.get("k") is None  # a fresh server: the same client reconnects and authenticates
    finally:
        await client.aclose()
