"""Real servers for gateway tests: the gateway under uvicorn in a thread or a process, throwaway
PostgreSQL databases, unique Redis prefixes, and admin calls over httpx."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
import uvicorn

from fairgate.backends.http_protocol import limited_protocol
from fairgate.gateway.app import create_app
from fairgate.gateway.quota import QuotaStore
from fairgate.gateway.quota.memory import MemoryQuotaStore
from fairgate.gateway.quota.redis_store import RedisQuotaStore
from fairgate.gateway.settings import Settings
from fairgate.gateway.state import GatewayState, state_of
from tests.helpers.app_thread import wait_started
from tests.helpers.procs import stop_process

REDIS_URL = "redis://127.0.0.1:6379/0"
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
ADMIN_TOKEN = "test-admin-token"
ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database on the machine's server; dropped afterwards."""
    name = f"fg_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def redis_prefix() -> Iterator[str]:
    prefix = f"fgtest-{uuid.uuid4().hex[:10]}"
    yield prefix
    r = redis.Redis.from_url(REDIS_URL)
    keys = list(r.scan_iter(f"{prefix}:*"))
    if keys:
        r.delete(*keys)
    r.close()


@contextlib.asynccontextmanager
async def quota_store(kind: str, reservation_ttl_s: int) -> AsyncIterator[QuotaStore]:
    """A fresh quota store, closed afterwards: "memory", or "redis" on the machine's Redis under
    a throwaway prefix (its keys deleted afterwards)."""
    with contextlib.ExitStack() as es:
        if kind == "memory":
            store: QuotaStore = MemoryQuotaStore(reservation_ttl_s=reservation_ttl_s)
        else:
            store = RedisQuotaStore(REDIS_URL, prefix=es.enter_context(redis_prefix()),
                                    reservation_ttl_s=reservation_ttl_s)
        try:
            yield store
        finally:
            await store.aclose()


class GatewayThread:
    """The gateway app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, settings: Settings) -> None:
        self.app = create_app(settings)
        # the socket is bound here and handed to uvicorn, so no other process can take the port
        # between choosing it and listening on it (suites running side by side on one machine)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        # the protocol `fairgate serve` runs (header limits enforced while parsing)
        cfg = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error",
                             access_log=False, lifespan="on", http=limited_protocol(settings.header_limits()))
        self.server = uvicorn.Server(cfg)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._loop: Any = None
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> GatewayState:
        return state_of(self.app)

    @property
    def server_loop(self) -> Any:
        """The gateway's event loop, for `asyncio.run_coroutine_threadsafe` on its state."""
        return self._loop

    def _run(self) -> None:
        import asyncio

        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self.server.serve(sockets=[self._sock]))
        self._loop.close()

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the gateway's loop (its Redis connections live there)."""
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> GatewayThread:
        self.thread.start()
        wait_started(self.server, self.thread, 60, "gateway")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self._sock.close()


@contextlib.contextmanager
def gateway_and_admin(database_url: str, **settings: Any) -> Iterator[tuple[GatewayThread, Admin]]:
    """A GatewayThread over `database_url` with the test admin token (`settings`: the rest);
    yields it and an admin client, closed afterwards."""
    with GatewayThread(Settings(admin_token=ADMIN_TOKEN, database_url=database_url, **settings)) as gw:
        admin = Admin(gw.url)
        try:
            yield gw, admin
        finally:
            admin.close()


def embedded_gateway(tmp_path: Path, model_dir: Path,
                     **settings: Any) -> contextlib.AbstractContextManager[tuple[GatewayThread, Admin]]:
    """The gateway serving `model_dir` with its embedded engine, over a SQLite file in `tmp_path`."""
    return gateway_and_admin(f"sqlite:///{tmp_path}/gw.db", model=str(model_dir), **settings)


def routing_gateway(database_url: str) -> contextlib.AbstractContextManager[tuple[GatewayThread, Admin]]:
    """The gateway with no embedded engine and no retries: each request reaches exactly the one
    backend its route names, as registered by the test."""
    return gateway_and_admin(database_url, embedded_engine=False, upstream_max_retries=0)


class GatewayProcess:
    """`fairgate serve` as a real separate process (env-configured), for multi-replica tests."""

    def __init__(self, env: dict[str, str], start_timeout_s: float = 60) -> None:
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full = {**os.environ, **env, "FAIRGATE_PORT": str(self.port), "FAIRGATE_HOST": "127.0.0.1"}
        # a file, not a pipe: a full pipe nobody reads would block the server on its next log line
        import tempfile

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve"], cwd=ROOT, env=full,
                                     stdout=subprocess.DEVNULL, stderr=self.log)

    def log_tail(self, n: int = 4000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:]

    def __enter__(self) -> GatewayProcess:
        deadline = time.time() + self.start_timeout_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {self.log_tail()}")
            try:
                httpx.get(self.url + "/v1/models", timeout=1)
                return self
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("gateway process did not start")

    def __exit__(self, *exc: object) -> None:
        stop_process(self.proc)
        self.log.close()


class Admin:
    """The admin API over httpx with the admin token."""

    def __init__(self, url: str, token: str = ADMIN_TOKEN) -> None:
        self.client = httpx.Client(base_url=url, headers={"authorization": f"Bearer {token}"}, timeout=30)

    def tenant(self, name: str | None = None, **fields: Any) -> dict[str, Any]:
        r = self.client.post("/admin/tenants", json={"name": name or f"t-{uuid.uuid4().hex[:8]}", **fields})
        assert r.status_code == 201, r.text
        return r.json()

    def key(self, tenant_id: str, **fields: Any) -> dict[str, Any]:
        r = self.client.post(f"/admin/tenants/{tenant_id}/keys", json=fields)
        assert r.status_code == 201, r.text
        return r.json()

    def quota(self, tenant_id: str, **limits: Any) -> dict[str, Any]:
        r = self.client.put(f"/admin/tenants/{tenant_id}/quota", json=limits)
        assert r.status_code == 200, r.text
        return r.json()

    def backend(self, name: str, base_url: str, **fields: Any) -> dict[str, Any]:
        r = self.client.post("/admin/backends", json={"name": name, "base_url": base_url, **fields})
        assert r.status_code == 201, r.text
        return r.json()

    def routes(self, rules: list[dict[str, Any]]) -> dict[str, Any]:
        """Replace the routing rules (PUT /admin/routes)."""
        r = self.client.put("/admin/routes", json=rules)
        assert r.status_code == 200, r.text
        return r.json()

    def close(self) -> None:
        self.client.close()
