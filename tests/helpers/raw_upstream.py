"""Upstreams that misbehave at the TCP level, on loopback: raw asyncio servers (no HTTP
framework), so a test controls every byte and how the connection ends.

    with RawUpstream("hang") as up:      # reads the request, never answers
    with RawUpstream("reset") as up:     # a 200 head and two SSE events (or half a JSON body), then RST
    with RawUpstream("trickle") as up:   # a valid answer, one byte every `interval_s`
    up.base_url; up.open_connections     # connections the gateway has not closed yet
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Literal

from tests.helpers.loop_server import LoopServer

Mode = Literal["hang", "reset", "trickle"]
EVENT = b'data: {"id":"x","object":"chat.completion.chunk","model":"m","choices":[{"index":0,' \
        b'"delta":{"content":"w"},"finish_reason":null}]}\n\n'
JSON = b'{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":' \
       b'{"role":"assistant","content":"w0"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,' \
       b'"completion_tokens":1,"total_tokens":3}}'


class RawUpstream(LoopServer):
    def __init__(self, mode: Mode, interval_s: float = 1.0) -> None:
        super().__init__()
        self.mode = mode
        self.interval_s = interval_s
        self.open_connections = 0
        self.requests = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open_connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            body = await reader.readexactly(length)
            self.requests += 1
            stream = b'"stream":true' in body
            if self.mode == "hang":
                await reader.read()  # until the gateway gives up and closes
            elif self.mode == "reset":
                await self._reset(writer, stream)
            else:
                await self._trickle(reader, writer, stream)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.open_connections -= 1
            writer.close()

    async def _reset(self, writer: asyncio.StreamWriter, stream: bool) -> None:
        if stream:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            for _ in range(2):
                writer.write(b"%x\r\n%s\r\n" % (len(EVENT), EVENT))
        else:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                         % (len(JSON), JSON[: len(JSON) // 2]))
        await writer.drain()
        await asyncio.sleep(0.2)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close → RST
        writer.transport.abort()

    async def _trickle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, stream: bool) -> None:
        if stream:
            payload = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (
                len(EVENT) * 50, EVENT * 50)
            writer.write(payload[: payload.index(b"\r\n\r\n") + 4])  # the head at once, then the trickle
            payload = payload[payload.index(b"\r\n\r\n") + 4:]
        else:
            payload = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
                len(JSON), JSON)
            head = payload.index(b"\r\n\r\n") + 4
            writer.write(payload[:head])
            payload = payload[head:]
        for i in range(len(payload)):
            writer.write(payload[i:i + 1])
            await writer.drain()
            await asyncio.sleep(self.interval_s)
