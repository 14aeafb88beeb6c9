"""The engine server's listening socket, bound before uvicorn starts (so the port is known and
early connections wait in the backlog).

It is made with `IPPROTO_TCP` named: an accepted socket inherits its listener's protocol number,
and asyncio and uvloop turn Nagle's algorithm off (`TCP_NODELAY`) only on sockets that report
TCP. A listener made with `socket.socket(AF_INET)` reports 0, so every accepted connection kept
Nagle on: on a kept-alive connection a streamed answer's small chunks then waited for the
client's delayed ACK (~40 ms on Linux) and arrived together at the end (uvicorn#3149 describes
the same for its own pre-bound sockets)."""

from __future__ import annotations

import socket


def tcp_listener(host: str, port: int, backlog: int = 128) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock
