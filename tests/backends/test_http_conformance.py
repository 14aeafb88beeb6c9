"""Our upstream HTTP client (backends/http1.py) held to httpx's behaviour: each case runs the
same exchange through both against a scripted raw server on loopback and compares what the
server saw and what the client returned. bench/upstream_clients.py says why we keep our own
(CPU per call); these say it behaves like the library where it matters. Proxies, TLS, extra
headers and query, and the size cap have their cases beside this file: test_http_proxy.py,
test_http_tls.py, test_http_transport.py."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from fairgate.backends.base import BackendError, GenerationRequest
from fairgate.backends.http1 import HTTP1Pool, HTTPError, Origin
from fairgate.backends.openai_compat import OpenAICompatBackend
from fairgate.backends.upstream_answer import retry_after_s

JSON = b'{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0}}'


class Scripted:
    """A raw server: `answer(request head) -> bytes`, written whole; closes after it when the
    answer has no length (close-delimited) or `close` is set. Records every request head."""

    def __init__(self, answer: Callable[[bytes], bytes], host: str = "127.0.0.1", close: bool = False) -> None:
        self.answer, self.host, self.close = answer, host, close
        self.heads: list[bytes] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self._ready.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._server = self._loop.run_until_complete(asyncio.start_server(self._serve, self.host, 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(x.split(b":")[1]) for x in head.split(b"\r\n")
                               if x.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                self.heads.append(head)
                out = self.answer(head)
                writer.write(out)
                await writer.drain()
                if self.close or b"content-length" not in out.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    def url(self, path: str = "/v1") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(_shutdown(self._server), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


async def _shutdown(server: asyncio.Server) -> None:
    """Close the listener and end every connection task, so nothing is left pending."""
    server.close()
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def ok(body: bytes = JSON) -> Callable[[bytes], bytes]:
    return lambda head: b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body), body)


async def ours(base: str, path: str = "/chat/completions", timeout: float = 5) -> tuple[int, dict, bytes]:
    pool = HTTP1Pool()
    try:
        resp = await pool.post(Origin.parse(base), path, b"Content-Type: application/json\r\n", b"{}", timeout)
        return resp.status, resp.headers, await resp.read()
    finally:
        await pool.aclose()


async def library(base: str, path: str = "/chat/completions", timeout: float = 5) -> tuple[int, dict, bytes]:
    u = httpx.URL(base)
    url = u.copy_with(path=u.path.rstrip("/") + path)  # base path + path, the base's query kept
    async with httpx.AsyncClient(timeout=timeout) as c:
        r = await c.post(url, content=b"{}", headers={"content-type": "application/json"})
        return r.status_code, {k.encode(): v.encode() for k, v in r.headers.items()}, r.content


def both(base: str, **kw) -> tuple[tuple, tuple]:  # type: ignore[no-untyped-def]
    return asyncio.run(ours(base, **kw)), asyncio.run(library(base, **kw))


def test_request_line_and_host_header_match_httpx():
    s = Scripted(ok())
    both(s.url("/v1?api-version=2024-10-21"))
    mine, theirs = s.heads
    line = lambda h: h.split(b"\r\n")[0]  # noqa: E731
    host = lambda h: next(x for x in h.split(b"\r\n") if x.lower().startswith(b"host:")).split(b":", 1)[1].strip()  # noqa: E731
    assert line(mine) == line(theirs) == b"POST /v1/chat/completions?api-version=2024-10-21 HTTP/1.1"
    assert host(mine) == host(theirs) == f"127.0.0.1:{s.port}".encode()
    s.stop()


def _has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6(), reason="no IPv6 loopback here")
def test_ipv6_host_header_is_bracketed_like_httpx():
    s = Scripted(ok(), host="::1")
    (st1, _, b1), (st2, _, b2) = both(s.url())
    hosts = [next(x for x in h.split(b"\r\n") if x.lower().startswith(b"host:")) for h in s.heads]
    assert st1 == st2 == 200 and b1 == b2 == JSON
    assert hosts[0].lower() == hosts[1].lower() == f"host: [::1]:{s.port}".encode()
    s.stop()


def test_close_delimited_body_is_read_like_httpx():
    s = Scripted(lambda head: b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + JSON)
    (st1, _, b1), (st2, _, b2) = both(s.url())
    assert (st1, b1) == (st2, b2) == (200, JSON)
    s.stop()


def test_cut_body_with_a_length_is_an_error_in_both():
    s = Scripted(lambda head: b"HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n" + JSON, close=True)
    with pytest.raises(HTTPError):
        asyncio.run(ours(s.url()))
    with pytest.raises(httpx.RemoteProtocolError):
        asyncio.run(library(s.url()))
    s.stop()


def test_redirect_is_shown_not_followed_like_httpx_and_refused_by_the_backend():
    s = Scripted(lambda head: b"HTTP/1.1 307 Temporary Redirect\r\nlocation: http://elsewhere.invalid/v1\r\n"
                              b"content-length: 0\r\n\r\n")
    (st1, h1, _), (st2, h2, _) = both(s.url())
    assert st1 == st2 == 307 and h1[b"location"] == h2[b"location"] == b"http://elsewhere.invalid/v1"

    async def backend_calls() -> list[BackendError]:
        pool = HTTP1Pool()
        b = OpenAICompatBackend("r", s.url(), pool, max_retries=0)
        req = GenerationRequest.from_body("id1", "chat", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
        errors = []
        for call in (lambda: b.complete(req), lambda: anext(b.stream_batches(req))):
            try:
                await call()
            except BackendError as exc:
                errors.append(exc)
        await pool.aclose()
        return errors

    errors = asyncio.run(backend_calls())
    assert [(e.status, e.code, e.retryable) for e in errors] == [(502, "upstream_redirect", False)] * 2
    assert "elsewhere.invalid" in str(errors[0]) and "redirect" in str(errors[0])
    s.stop()


def test_timeouts_are_typed_in_both():
    s = Scripted(lambda head: time.sleep(1.5) or b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
    with pytest.raises(HTTPError) as mine:
        asyncio.run(ours(s.url(), timeout=0.3))
    assert mine.value.timeout
    with pytest.raises(httpx.TimeoutException):
        asyncio.run(library(s.url(), timeout=0.3))
    s.stop()


def test_retry_after_is_honoured():
    answers = [b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\n{}", ok()(b"")]
    s = Scripted(lambda head: answers.pop(0), close=True)

    async def call() -> float:
        pool = HTTP1Pool()
        b = OpenAICompatBackend("r", s.url(), pool, max_retries=1, backoff_s=0.0)
        t0 = time.monotonic()
        await b.complete(GenerationRequest.from_body("id1", "chat", {"messages": [{"role": "user", "content": "x"}]}))
        await pool.aclose()
        return time.monotonic() - t0

    assert asyncio.run(call()) >= 1.0 and len(s.heads) == 2
    assert retry_after_s(b"2.5") == 2.5 and retry_after_s(b"soon") is None
    assert retry_after_s(b"Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: now
    s.stop()
