"""Our RESP client (gateway/quota/resp.py) held to redis-py's behaviour against the real Redis:
odd bytes, a failed AUTH, TLS URLs, unix sockets. bench/upstream_clients.py says why we keep
our own (CPU per command); these say it behaves like the library where it matters."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis

from gateway.quota.resp import RespClient, RespError

URL = "redis://127.0.0.1:6379/0"
PASSWORD = "resp-conformance"


async def _ours(url: str, *commands: tuple) -> list:
    client = RespClient(url, timeout_s=2)
    try:
        return [await client.execute(*c) for c in commands]
    finally:
        await client.aclose()


async def _library(url: str, *commands: tuple) -> list:
    client = aredis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        return [await client.execute_command(*c) for c in commands]
    finally:
        await client.aclose()


def test_a_value_that_is_not_utf8_comes_back_as_bytes_and_breaks_nothing():
    key = f"fgtest-resp-{uuid.uuid4().hex[:8]}"
    odd = b"\xff\xfe\x00tail"
    r = redis.Redis.from_url(URL)
    r.set(key, odd)
    try:
        mine = asyncio.run(_ours(URL, ("GET", key), ("PING",), ("SET", key + ":b", "ok"), ("GET", key + ":b")))
        theirs = asyncio.run(_library(URL, ("GET", key), ("PING",)))
    finally:
        r.delete(key, key + ":b")
        r.close()
    assert mine[0] == theirs[0] == odd
    assert mine[1:] == ["PONG", "OK", "ok"] and theirs[1] is True


def test_rediss_never_falls_back_to_plaintext():
    url = "rediss://127.0.0.1:6379/0"  # a plaintext server: the TLS handshake must fail
    for call in (_ours, _library):
        with pytest.raises((OSError, TimeoutError, redis.RedisError)):
            asyncio.run(call(url, ("PING",)))


def test_unknown_schemes_are_refused():
    with pytest.raises(ValueError, match="unsupported Redis URL scheme"):
        RespClient("http://127.0.0.1:6379")


@pytest.fixture
def unix_redis(tmp_path: Path) -> Iterator[Path]:
    """A private redis-server on a unix socket, with a password."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed here")
    sock = tmp_path / "redis.sock"
    proc = subprocess.Popen([exe, "--port", "0", "--unixsocket", str(sock), "--requirepass", PASSWORD,
                             "--save", "", "--appendonly", "no",
                             "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while not sock.exists():
            assert time.time() < deadline and proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)
        yield sock
    finally:
        proc.terminate()
        proc.wait(10)


def test_a_failed_auth_is_not_cached_in_either(unix_redis: Path):
    url = f"unix://:not-the-password@{unix_redis}"

    async def twice(client) -> list[str]:  # type: ignore[no-untyped-def]
        outcomes = []
        for _ in range(2):  # the second call must not ride on a connection the first one opened
            try:
                await client.execute_command("PING") if hasattr(client, "execute_command") else \
                    await client.execute("PING")
                outcomes.append("answered")
            except (RespError, redis.RedisError) as exc:
                outcomes.append("refused" if "WRONGPASS" in str(exc) or "invalid" in str(exc) else str(exc))
        await client.aclose()
        return outcomes

    mine = asyncio.run(twice(RespClient(url, timeout_s=2)))
    theirs = asyncio.run(twice(aredis.Redis.from_url(url, socket_timeout=2)))
    assert mine == theirs == ["refused", "refused"]


def test_unix_socket_urls_work_like_redis_py(unix_redis: Path):
    url = f"unix://:{PASSWORD}@{unix_redis}?db=2"
    mine = asyncio.run(_ours(url, ("SET", "k", "v"), ("GET", "k"), ("CLIENT", "INFO")))
    theirs = asyncio.run(_library(url, ("GET", "k"), ("CLIENT", "INFO")))
    assert mine[:2] == ["OK", "v"] and theirs[0] == b"v"
    assert " db=2 " in mine[2] and b" db=2 " in theirs[1]
