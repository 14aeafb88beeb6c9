"""Engine servers and clients that leave for the fault scenarios: a tiny model with a long
context (a 3,000-token answer takes seconds on the CPU, so a client can leave mid-generation),
the engine's KV figures, and a raw-socket client that closes its connection on a condition."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson

LONG = 3000  # max_tokens of a request that is still generating when its client leaves


def engine_stats(url: str, key: str | None = None) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(url + "/stats", headers=headers, timeout=10).json()


def wait_drained(url: str, timeout: float = 30) -> dict[str, Any]:
    """The engine's stats once nothing runs, waits or holds a KV block."""
    deadline = time.time() + timeout
    while True:
        stats = engine_stats(url)
        if stats["running"] == 0 and stats["waiting"] == 0 and stats["kv_blocks_used"] == 0:
            return stats
        if time.time() > deadline:
            raise AssertionError(f"engine did not drain: {stats}")
        time.sleep(0.05)


def wait_until(pred: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.02)


def post_then_leave(url: str, path: str, body: dict[str, Any], leave_when: Callable[[bytes], bool],
                    headers: dict[str, str] | None = None, timeout: float = 60) -> bytes:
    """POST `body` on a raw socket, read what comes, close the connection as soon as
    `leave_when(bytes read so far)` holds (checked every 20 ms, also before anything arrived).
    Returns the bytes read before leaving."""
    u = httpx.URL(url)
    payload = orjson.dumps(body)
    lines = [f"POST {u.raw_path.decode().rstrip('/')}{path} HTTP/1.1", f"Host: {u.host}:{u.port}",
             "Content-Type: application/json", f"Content-Length: {len(payload)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    sock = socket.create_connection((u.host, u.port), timeout=timeout)
    got = b""
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        sock.settimeout(0.02)
        deadline = time.time() + timeout
        while not leave_when(got):
            if time.time() > deadline:
                raise AssertionError("the leave condition never held")
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                raise AssertionError(f"the server closed first: {got[-300:]!r}")
            got += data
    finally:
        sock.close()
    return got


def sse_chunks(raw: bytes) -> list[dict[str, Any]]:
    """The JSON events in raw SSE bytes (chunked transfer framing ignored)."""
    out = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {"):
            try:
                out.append(orjson.loads(line[6:]))
            except orjson.JSONDecodeError:
                pass  # a line cut by the transfer framing
    return out
