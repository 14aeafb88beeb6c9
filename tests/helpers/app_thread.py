"""An ASGI app under uvicorn in a background thread, for tests that need a real server on loopback.

    with serve_app(app) as (url, port):   # "http://127.0.0.1:<port>", once it listens
        ...
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


def wait_started(server: uvicorn.Server, thread: threading.Thread, timeout_s: float, what: str) -> None:
    """Block until `server`, running in `thread`, listens; raise if the thread ends first or
    `timeout_s` passes."""
    deadline = time.time() + timeout_s
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.02)


@contextlib.contextmanager
def serve_app(app: Any, **config: Any) -> Iterator[tuple[str, int]]:
    """Serve `app` on a loopback socket bound here, so no other process can take the port between
    choosing and listening; yield (base URL, port) once it listens, stop it on exit. `config`:
    more `uvicorn.Config` options."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="error", lifespan="on", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_started(server, thread, 60, "server")
    try:
        yield f"http://127.0.0.1:{port}", port
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
