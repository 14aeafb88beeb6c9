"""The engine server's pre-bound listener: the connections it accepts run without Nagle's
algorithm, on the asyncio loop the server runs on (and on uvloop), so a kept-alive connection's
streamed chunks are not held for the peer's delayed ACK."""

from __future__ import annotations

import asyncio
import socket

import pytest

from fairgate.backends.local.serving.listener import tcp_listener


def _loops() -> list:
    loops = [asyncio.new_event_loop]
    try:
        import uvloop
    except ImportError:
        return loops
    return [*loops, uvloop.new_event_loop]


def accepted_nodelay(listener: socket.socket, new_loop) -> int:
    """TCP_NODELAY of the server side of one connection accepted on `listener`."""
    loop = new_loop()
    seen: asyncio.Future[int] = loop.create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    async def run() -> int:
        server = await loop.create_server(Probe, sock=listener)
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


@pytest.mark.parametrize("new_loop", _loops())
def test_accepted_connections_have_nodelay(new_loop):
    assert accepted_nodelay(tcp_listener("127.0.0.1", 0), new_loop) != 0


def test_a_listener_without_the_protocol_number_keeps_nagle_on():
    # why the listener names IPPROTO_TCP: asyncio's loop (the engine server runs on the one
    # asyncio.run makes) sets TCP_NODELAY only on sockets that report TCP
    plain = socket.socket(socket.AF_INET)
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    assert accepted_nodelay(plain, asyncio.new_event_loop) == 0
