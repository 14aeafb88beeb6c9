"""HTTP1Pool against real loopback servers: keep-alive reuse, chunked streaming, a server that
closes idle connections, refused connections and timeouts."""

from __future__ import annotations

import asyncio
import socket

import pytest

from fairgate.backends.http1 import HTTP1Pool, HTTPError, Origin
from tests.helpers.upstream import UpstreamServer

H = b"Content-Type: application/json\r\n"


@pytest.fixture(scope="module")
def upstream():
    with UpstreamServer() as up:
        yield up


async def test_post_and_reuse_connection(upstream):
    pool = HTTP1Pool()
    origin = Origin.parse(upstream.base_url)
    for _ in range(3):
        resp = await pool.post(origin, "/completions", H, b'{"prompt": "a b", "max_tokens": 2}', 10)
        assert resp.status == 200 and resp.headers[b"content-type"] == b"application/json"
        assert b'"text":"w0 w1"' in await resp.read()
    assert len(pool._idle[origin]) == 1  # one connection served all three
    await pool.aclose()


async def test_stream_chunks_arrive_in_order(upstream):
    pool = HTTP1Pool()
    origin = Origin.parse(upstream.base_url)
    resp = await pool.post(origin, "/completions", H, b'{"prompt": "a", "max_tokens": 5, "stream": true}', 10)
    data = b"".join([c async for c in resp.iter_bytes()])
    assert data.count(b"data: {") == 6 and data.endswith(b"data: [DONE]\n\n")
    await pool.aclose()


async def test_a_finished_stream_keeps_its_connection(upstream):
    # read to the last event only (as the SSE reader does), then finish(): the body's end is
    # read and the connection serves the next stream
    pool = HTTP1Pool()
    origin = Origin.parse(upstream.base_url)
    conns = []
    for _ in range(3):
        resp = await pool.post(origin, "/completions", H, b'{"prompt": "a", "max_tokens": 3, "stream": true}', 10)
        conns.append(resp._conn)
        data = b""
        async for chunk in resp.iter_bytes():
            data += chunk
            if data.endswith(b"data: [DONE]\n\n"):
                break
        await resp.finish()
        assert len(pool._idle[origin]) == 1
    assert conns[0] is conns[1] is conns[2] and not conns[0].closed
    await pool.aclose()


async def test_finish_drops_a_connection_whose_body_does_not_end(upstream):
    # a body that goes on after the caller is done: finish() waits its bound, then the connection goes
    pool = HTTP1Pool()
    origin = Origin.parse(upstream.base_url)
    upstream.behaviour.token_delay_s = 0.05
    try:
        resp = await pool.post(origin, "/completions", H, b'{"prompt": "a", "max_tokens": 50, "stream": true}', 10)
        async for _ in resp.iter_bytes():
            break
        await resp.finish(wait_s=0.02)
        assert len(pool._idle.get(origin, ())) == 0 and resp._conn.transport.is_closing()
    finally:
        upstream.behaviour.token_delay_s = 0.0
    await pool.aclose()


async def test_abandoned_stream_closes_its_connection(upstream):
    pool = HTTP1Pool()
    origin = Origin.parse(upstream.base_url)
    upstream.behaviour.token_delay_s = 0.02
    try:
        resp = await pool.post(origin, "/completions", H, b'{"prompt": "a", "max_tokens": 50, "stream": true}', 10)
        async for _ in resp.iter_bytes():
            break
        resp.close()
        assert len(pool._idle.get(origin, ())) == 0
    finally:
        upstream.behaviour.token_delay_s = 0.0
    await pool.aclose()


async def _one_shot_server(handler) -> tuple[asyncio.AbstractServer, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


async def test_server_closing_idle_connection_is_retried_transparently():
    served = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(2)
        served += 1
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # keep-alive promised, connection dropped: the pool must cope

    server, url = await _one_shot_server(handler)
    pool = HTTP1Pool()
    origin = Origin.parse(url)
    for _ in range(3):
        resp = await pool.post(origin, "/x", H, b"{}", 5)
        assert await resp.read() == b"ok"
        await asyncio.sleep(0.05)
    assert served == 3
    await pool.aclose()
    server.close()


async def test_refused_connection_is_before_response():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(HTTPError) as e:
        await HTTP1Pool().post(Origin.parse(f"http://127.0.0.1:{port}"), "/x", H, b"{}", 5)
    assert e.value.before_response


async def test_timeout_waiting_for_headers():
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)
        writer.close()

    server, url = await _one_shot_server(handler)
    with pytest.raises(HTTPError) as e:
        await HTTP1Pool().post(Origin.parse(url), "/x", H, b"{}", 0.2)
    assert "timed out" in str(e.value) and not e.value.before_response
    server.close()


def test_origin_parse():
    o = Origin.parse("https://api.example.com/v1/")
    assert (o.scheme, o.host, o.port, o.base_path) == ("https", "api.example.com", 443, "/v1")
    with pytest.raises(ValueError):
        Origin.parse("ftp://x")
