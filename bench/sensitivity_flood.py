"""The flood part of `bench/sensitivity_speed.py`: a real `fairgate serve` on loopback, clients
sending 1 MB pathological prompts back to back, and a probe timing `GET /health`.

The gateway runs as its own process (SQLite, in-process quotas, no embedded engine) in front of
a real instant upstream (`tests.helpers.upstream`) registered as a local backend, so every
flood request is authenticated, parsed, classified and routed like any other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.gateway_overhead import ADMIN, free_port, stop, unlimited_key, wait_http

ROOT = Path(__file__).resolve().parents[1]


def _setup(gw_url: str, up_url: str) -> str:
    """Register the upstream as a local backend, a tenant with no limits; return its key."""
    admin = httpx.Client(base_url=gw_url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30)
    admin.post("/admin/backends", json={"name": "up", "base_url": up_url, "model": "up-model",
                                        "kind": "local"}).raise_for_status()
    key = unlimited_key(admin, "flood")
    admin.close()
    return key


def _sender(url: str, key: str, bodies: list[bytes], done: threading.Event, count: list[int]) -> None:
    with httpx.Client(timeout=60, headers={"authorization": f"Bearer {key}",
                                           "content-type": "application/json"}) as c:
        i = 0
        while not done.is_set():
            try:
                c.post(url + "/v1/chat/completions", content=bodies[i % len(bodies)])
                count[0] += 1
            except httpx.HTTPError:
                pass
            i += 1


def _probe(url: str, seconds: float) -> list[float]:
    lat: list[float] = []
    with httpx.Client(timeout=10) as c:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            c.get(url + "/health").raise_for_status()
            lat.append((time.perf_counter() - t0) * 1000)
            time.sleep(0.01)
    return sorted(lat)


def flood(seconds: float, prompts: dict[str, str], clients: int = 4) -> dict[str, float | int]:
    """/health latency (ms: p50, p99, max) while `clients` threads send `prompts` for `seconds`."""
    import orjson

    tmp = Path(tempfile.mkdtemp(prefix="fg-flood-"))
    up = subprocess.Popen([sys.executable, "-m", "tests.helpers.upstream", "--port", "0"], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, start_new_session=True)
    procs = [up]
    try:
        up_url = f"http://127.0.0.1:{int(up.stdout.readline().split()[1])}/v1"  # type: ignore[union-attr]
        port = free_port()
        env = {**os.environ, "FAIRGATE_ADMIN_TOKEN": ADMIN, "FAIRGATE_DATABASE_URL": f"sqlite:///{tmp}/gw.db",
               "FAIRGATE_EMBEDDED_ENGINE": "false", "FAIRGATE_MAX_BODY_BYTES": str(4 << 20),
               "PYTHONPATH": str(ROOT)}
        gw = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve", "--port", str(port)], cwd=ROOT,
                              env=env, stdout=(tmp / "gw.log").open("w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
        procs.append(gw)
        url = f"http://127.0.0.1:{port}"
        wait_http(url + "/health", timeout=60)
        key = _setup(url, up_url)
        bodies = [orjson.dumps({"model": "up", "max_tokens": 2, "messages": [{"role": "user", "content": p}]})
                  for p in prompts.values()]
        senders_done, count = threading.Event(), [0]
        threads = [threading.Thread(target=_sender, args=(url, key, bodies, senders_done, count), daemon=True)
                   for _ in range(clients)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # let the flood build up
        lat = _probe(url, seconds)
        senders_done.set()
        for t in threads:
            t.join(90)
        return {"p50_ms": round(lat[len(lat) // 2], 2), "p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
                "max_ms": round(lat[-1], 2), "probes": len(lat), "requests": count[0], "clients": clients}
    finally:
        for p in reversed(procs):
            stop(p)
