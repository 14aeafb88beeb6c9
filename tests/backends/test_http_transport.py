"""A backend's extra query, extra headers and auth header (Azure OpenAI's shape), held to what
httpx sends for the same settings, and the response size cap with its bounded memory, against
raw servers on loopback."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from fairgate.backends.base import BackendError, GenerationRequest
from fairgate.backends.http1 import HIGH_WATER, HTTP1Pool, ResponseTooLarge
from fairgate.backends.http_transport import Transport, header_block, origin_for
from fairgate.backends.openai_compat import OpenAICompatBackend
from tests.backends.test_http_conformance import JSON, Scripted, _shutdown, ok

AZURE = "/openai/deployments/gpt4o?api-version=2024-06-01"
SSE = b'data: {"id":"x","object":"chat.completion.chunk","choices":[]}\n\ndata: [DONE]\n\n'


def _line(head: bytes) -> bytes:
    return head.split(b"\r\n")[0]


def _headers(head: bytes) -> dict[bytes, bytes]:
    pairs = (h.split(b":", 1) for h in head.split(b"\r\n")[1:] if b":" in h)
    return {k.strip().lower(): v.strip() for k, v in pairs}


def test_base_query_and_extra_query_reach_the_upstream_as_httpx_sends_the_whole_url():
    """httpx 0.28's `params=` replaces a URL's query (the defect this fixes for us): so the
    reference is httpx sending the URL with the whole query written out."""
    s = Scripted(ok())
    t = Transport(extra_query=(("trace", "a b"),))
    asyncio.run(_post(origin_for(s.url(AZURE), t), header_block(None, t)))
    with httpx.Client() as c:
        c.post(s.url("/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01&trace=a%20b"), content=b"{}")
    assert _line(s.heads[0]) == _line(s.heads[1]) == (
        b"POST /openai/deployments/gpt4o/chat/completions?api-version=2024-06-01&trace=a%20b HTTP/1.1")
    s.stop()


def test_an_extra_query_value_replaces_the_base_urls():
    s = Scripted(ok())
    t = Transport(extra_query=(("api-version", "2025-01-01"),))
    asyncio.run(_post(origin_for(s.url(AZURE), t), header_block(None, t)))
    with httpx.Client() as c:
        c.post(s.url("/openai/deployments/gpt4o/chat/completions?api-version=2025-01-01"), content=b"{}")
    assert _line(s.heads[0]) == _line(s.heads[1])
    s.stop()


async def _post(origin, headers: bytes) -> bytes:  # type: ignore[no-untyped-def]
    pool = HTTP1Pool()
    try:
        resp = await pool.post(origin, "/chat/completions", headers, b"{}", 5)
        return await resp.read()
    finally:
        await pool.aclose()


def test_azure_openai_every_call_carries_api_version_and_the_api_key_header():
    answers = [JSON, SSE, JSON]  # complete, stream, embed
    s = Scripted(lambda head: b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(answers[0]), answers.pop(0)))
    t = Transport(auth_header="api-key", extra_headers=(("X-Org", "fg"),))

    async def calls() -> None:
        pool = HTTP1Pool()
        b = OpenAICompatBackend("az", s.url(AZURE), pool, api_key="az-secret", transport=t, max_retries=0)
        req = GenerationRequest.from_body("r1", "chat", {"model": "gpt4o", "messages": [{"role": "user", "content": "x"}]})
        await b.complete(req)
        [batch async for batch in b.stream_batches(req)]
        await b.embed(GenerationRequest.from_body("r2", "embedding", {"model": "e", "input": "x"}))
        await pool.aclose()

    asyncio.run(calls())
    assert [_line(h).split(b" ")[1] for h in s.heads] == [
        b"/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01",
        b"/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01",
        b"/openai/deployments/gpt4o/embeddings?api-version=2024-06-01"]
    for head in s.heads:
        h = _headers(head)
        assert h[b"api-key"] == b"az-secret" and h[b"x-org"] == b"fg" and b"authorization" not in h
    s.stop()


def test_a_bearer_key_by_default_and_an_extra_header_of_that_name_wins():
    assert b"Authorization: Bearer k\r\n" in header_block("k", Transport())
    own = header_block("k", Transport(extra_headers=(("authorization", "Basic abc"),)))
    assert b"Bearer" not in own and b"authorization: Basic abc\r\n" in own


@pytest.mark.parametrize("name, value", [("X-A", "v\r\nInjected: 1"), ("X-A", "v\nx"), ("Bad Name", "v"),
                                         ("Host", "evil"), ("Content-Length", "0"), ("X-Tenant", "t")])
def test_header_injection_and_overrides_are_refused(name, value):
    with pytest.raises(ValueError):
        Transport(extra_headers=((name, value),))


def test_a_line_break_in_a_header_is_refused_by_httpx_too():
    s = Scripted(ok())
    with pytest.raises(httpx.LocalProtocolError), httpx.Client() as c:
        c.post(s.url(), headers={"X-A": "v\r\nInjected: 1"})
    assert s.heads == []  # nothing of it reached the server
    s.stop()


class Flood:
    """A raw server that answers a 200 with a huge body (chunked, or one endless SSE line) as
    fast as the client takes it, counting the bytes it got out before the client hung up."""

    def __init__(self, piece: bytes, total: int) -> None:
        self.piece, self.total, self.sent = piece, total, 0
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait(10)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            while self.sent < self.total:
                writer.write(b"%x\r\n%s\r\n" % (len(self.piece), self.piece))
                self.sent += len(self.piece)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        writer.close()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(_shutdown(self._server), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_a_body_over_the_cap_is_a_typed_error_and_stops_reading():
    f = Flood(b"x" * 65536, 2**30)  # 1 GiB on offer

    async def read() -> ResponseTooLarge:
        pool = HTTP1Pool()
        resp = await pool.post(origin_for(f.url(), Transport()), "/x", b"", b"", 5)
        with pytest.raises(ResponseTooLarge) as exc:
            await resp.read(2**20)
        await pool.aclose()
        return exc.value

    err = asyncio.run(read())
    assert err.code == "upstream_response_too_large" and err.limit == 2**20
    assert f.sent < 64 * 2**20  # the client hung up near the cap, not at the end of the gigabyte
    f.stop()


def test_an_announced_length_over_the_cap_is_refused_before_reading():
    s = Scripted(lambda head: b"HTTP/1.1 200 OK\r\ncontent-length: 999999999\r\n\r\n" + b"x" * 1000, close=True)

    async def read() -> None:
        pool = HTTP1Pool()
        resp = await pool.post(origin_for(s.url(), Transport()), "/x", b"", b"", 5)
        with pytest.raises(ResponseTooLarge):
            await resp.read(2**20)
        await pool.aclose()

    asyncio.run(read())
    s.stop()


def test_a_slow_reader_holds_a_bounded_amount_in_memory():
    """The upstream pushes 1 GiB; a consumer that took one chunk and waits makes the connection
    stop reading, so what left the server is the high-water mark plus the sockets' buffers."""
    f = Flood(b"x" * 65536, 2**30)

    async def stall() -> int:
        pool = HTTP1Pool()
        resp = await pool.post(origin_for(f.url(), Transport()), "/x", b"", b"", 5)
        async for _ in resp.iter_bytes():
            break
        await asyncio.sleep(1.0)
        queued = resp._conn.queued
        resp.close()
        await pool.aclose()
        return queued

    queued = asyncio.run(stall())
    assert queued <= HIGH_WATER + 2**20 and f.sent < HIGH_WATER + 48 * 2**20
    f.stop()


@pytest.mark.parametrize("stream", [False, True])
def test_the_backend_answers_a_huge_response_with_a_typed_502(stream):
    f = Flood(b"data: " + b"x" * 65536 if stream else b"x" * 65536, 2**30)  # one endless line when streamed

    async def call() -> BackendError:
        pool = HTTP1Pool()
        b = OpenAICompatBackend("big", f.url(), pool, max_retries=0,
                                transport=Transport(max_response_bytes=2 * 2**20))
        req = GenerationRequest.from_body("r1", "chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        with pytest.raises(BackendError) as exc:
            if stream:
                [batch async for batch in b.stream_batches(req)]
            else:
                await b.complete(req)
        await pool.aclose()
        return exc.value

    err = asyncio.run(call())
    assert (err.status, err.code, err.retryable) == (502, "upstream_response_too_large", False)
    assert "max_response_bytes" in str(err) and f.sent < 64 * 2**20
    f.stop()
