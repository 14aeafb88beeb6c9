"""Soak: a gateway process in front of an engine server (tiny model) and an instant upstream,
under a bounded mixed load for N minutes, then the books are checked.

    python bench/soak.py [--minutes 2] [--concurrency 6] [--window-s 20] [--database-url URL]

The load mixes, per client loop: non-streaming and streaming requests to the engine, streams
cut by the client after a few chunks, non-streaming requests whose client leaves mid-way,
requests to the instant upstream, and bad inputs (broken JSON, bad fields, unknown model, bad
key) that must get a 4xx. Every window reports requests, unexpected errors, p50/p99 latency of
the engine's non-streaming answers and the gateway's and engine's RSS.

At the end, with the load drained: KV blocks still used by the engine, reservations still in
Redis, usage rows against the requests that were admitted (missing, duplicated), RSS growth of
the gateway and the engine after the first window (warm-up; use a `--window-s` of a minute or
two for long runs), circuit opens. A table, then a last line of JSON.

The requests whose client leaves go out under a tenant of their own: such a client may be gone
before the gateway has read its request, so the client cannot know that a row is owed. For that
tenant the gateway's own record is the reference: every request it routed (a routing audit row)
must have exactly one usage row (`left_rows_lost`), and no more rows than requests were sent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from tests.gateway.harness import PG_ADMIN, REDIS_URL, free_port  # noqa: E402
from tests.helpers.engine_proc import EngineProcess  # noqa: E402
from tests.helpers.tiny_models import make_tiny_model  # noqa: E402

ADMIN = "soak-admin-token"
ENGINE_KEY = "soak-engine-key"
BAD_BODIES: list[Any] = [b"{not json", {"model": "eng", "messages": "x"}, {"model": "eng", "max_tokens": -1,
                         "messages": [{"role": "user", "content": "x"}]}, {"model": "nope",
                         "messages": [{"role": "user", "content": "x"}]}]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Window:
    start: float
    counts: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # engine non-stream answers, seconds
    rss_gateway: float = 0.0
    rss_engine: float = 0.0
    load1: float = 0.0  # the machine's 1-minute load average at the window's end

    def row(self, t0: float) -> dict[str, Any]:
        lat = sorted(self.latencies)
        p = (lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 1)) if lat else (lambda q: None)
        return {"t_s": round(self.start - t0), "requests": sum(self.counts.values()),
                "unexpected": sum(n for k, n in self.counts.items() if k.startswith(("5", "transport"))),
                "p50_ms": p(0.5), "p99_ms": p(0.99), "rss_gateway_mb": round(self.rss_gateway, 1),
                "rss_engine_mb": round(self.rss_engine, 1), "load1": round(self.load1, 2)}


@dataclass
class Books:
    admitted: dict[str, int] = field(default_factory=Counter)  # per tenant: requests that must have a row
    left: tuple[str, str] = ("", "")  # the tenant (id, key) whose clients leave mid-way
    left_sent: int = 0
    windows: list[Window] = field(default_factory=list)
    totals: Counter[str] = field(default_factory=Counter)

    def note(self, outcome: str, latency: float | None = None) -> None:
        self.windows[-1].counts[outcome] += 1
        self.totals[outcome] += 1
        if latency is not None:
            self.windows[-1].latencies.append(latency)


def chat(model: str, stream: bool, max_tokens: int) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": f"soak {random.random():.6f} merhaba"}],
            "max_tokens": max_tokens, "temperature": 0, "stream": stream, "ignore_eos": model == "eng"}


async def one(c: httpx.AsyncClient, books: Books, tenant: str, key: str) -> None:
    """One request of a random kind; counts its outcome and whether it must leave a usage row."""
    kind = random.choices(["eng", "eng_stream", "cut_stream", "left", "up", "up_stream", "bad"],
                          [30, 20, 10, 8, 15, 10, 7])[0]
    if kind == "left":
        tenant, key = books.left
    h = {"authorization": f"Bearer {key}"}
    t0 = time.monotonic()
    try:
        if kind == "bad":
            await _bad(c, books, h)
            return
        model = "up" if kind.startswith("up") else "eng"
        stream = kind in ("eng_stream", "cut_stream", "up_stream")
        body = chat(model, stream, 48 if kind == "left" else 12)
        if kind == "left":
            books.left_sent += 1  # a row only if the gateway read it before the client left
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.15):  # leave mid-generation: httpx closes the connection
                    await c.post("/v1/chat/completions", headers=h, json=body)
            books.note("left")
            return
        books.admitted[tenant] += 1  # well formed: admitted, so exactly one row
        if not stream:
            r = await c.post("/v1/chat/completions", headers=h, json=body)
            books.note(str(r.status_code), time.monotonic() - t0 if model == "eng" and r.status_code == 200 else None)
            return
        async with c.stream("POST", "/v1/chat/completions", headers=h, json=body) as r:
            n = 0
            async for line in r.aiter_lines():
                n += line.startswith("data: {")
                if kind == "cut_stream" and n >= 3:
                    break
            books.note("cut" if kind == "cut_stream" else str(r.status_code))
    except httpx.TransportError as exc:
        books.note(f"transport:{type(exc).__name__}")


async def _bad(c: httpx.AsyncClient, books: Books, h: dict[str, str]) -> None:
    body = random.choice(BAD_BODIES + ["badkey"])
    if body == "badkey":
        r = await c.post("/v1/chat/completions", headers={"authorization": "Bearer fg-wrong"}, json=chat("eng", False, 2))
    elif isinstance(body, bytes):
        r = await c.post("/v1/chat/completions", headers={**h, "content-type": "application/json"}, content=body)
    else:
        r = await c.post("/v1/chat/completions", headers=h, json=body)
    ok = 400 <= r.status_code < 500 and "error" in r.json()
    books.note(f"bad:{r.status_code}" if ok else f"{r.status_code}:bad_input_not_refused")


async def drive(url: str, tenants: list[tuple[str, str]], left: tuple[str, str], minutes: float,
                concurrency: int, window_s: float, pids: tuple[int, int]) -> Books:
    books = Books(left=left)
    t0 = time.monotonic()
    end = t0 + minutes * 60
    books.windows.append(Window(t0))

    async def client(i: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            while time.monotonic() < end:
                tenant, key = tenants[i % len(tenants)]
                await one(c, books, tenant, key)

    async def sampler() -> None:
        while time.monotonic() < end:
            await asyncio.sleep(min(window_s, max(0.0, end - time.monotonic())))
            w = books.windows[-1]
            w.rss_gateway, w.rss_engine, w.load1 = rss_mb(pids[0]), rss_mb(pids[1]), os.getloadavg()[0]
            if time.monotonic() < end:
                books.windows.append(Window(time.monotonic()))

    await asyncio.gather(sampler(), *(client(i) for i in range(concurrency)))
    return books


def settle(url: str, engine_url: str, db: str, prefix: str, tenants: list[tuple[str, str]], books: Books,
           timeout_s: float = 60) -> dict[str, Any]:
    """Wait for the load to drain, then read the books."""
    import redis
    from sqlalchemy import func, select, text

    from fairgate.gateway.store.db import make_engine
    from fairgate.gateway.store.tables import UsageRecord

    def left_lost(conn: Any) -> tuple[int, int]:
        """(requests the gateway routed for the leaving tenant with no usage row, its usage rows)."""
        tid = books.left[0]
        audited = {r for (r,) in conn.execute(text("SELECT request_id FROM routing_audit WHERE tenant_id = :t"),
                                               {"t": tid})}
        rows = {r for (r,) in conn.execute(select(UsageRecord.request_id).where(UsageRecord.tenant_id == tid))}
        return len(audited - rows), len(rows)

    deadline = time.monotonic() + timeout_s
    r = redis.Redis.from_url(REDIS_URL)
    engine = make_engine(db)
    try:
        while True:
            stats = httpx.get(engine_url + "/stats", timeout=10).json()
            with engine.connect() as conn:
                rows, distinct = conn.execute(select(func.count(), func.count(UsageRecord.request_id.distinct())).where(
                    UsageRecord.tenant_id.in_([t for t, _ in tenants]))).one()
                lost, left_rows = left_lost(conn)
            reservations = len(list(r.scan_iter(f"{prefix}:r:*")))
            drained = stats["running"] == stats["waiting"] == stats["kv_blocks_used"] == 0 and reservations == 0
            if (drained and rows >= sum(books.admitted.values()) and not lost) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        engine.dispose()
        r.close()
    expected = sum(books.admitted.values())
    return {**breaker_opens(url), "kv_blocks_leaked": stats["kv_blocks_used"], "reservations_leaked": reservations,
            "usage_records_missing": max(0, expected - distinct), "usage_records_duplicated": rows - distinct,
            "usage_records": rows, "requests_admitted": expected, "engine_aborted": stats["requests_aborted"],
            "left_sent": books.left_sent, "left_rows": left_rows, "left_rows_lost": lost,
            "left_rows_over_sent": max(0, left_rows - books.left_sent)}


def breaker_opens(url: str) -> dict[str, Any]:
    """Circuit opens over the run, per backend: a healthy load (bad inputs and clients that leave
    included) must open none."""
    text = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {ADMIN}"}, timeout=10).text
    out: dict[str, dict[str, float]] = {"breaker_opened": {}, "breaker_tenant_opened": {}}
    for line in text.splitlines():
        for key, metric in (("breaker_opened", "fairgate_backend_breaker_opened_total{"),
                            ("breaker_tenant_opened", "fairgate_backend_breaker_tenant_opened_total{")):
            if line.startswith(metric):
                out[key][line.split('backend="', 1)[1].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


def start_stack(args: argparse.Namespace, work: Path) -> tuple[list[Any], str, str, str, str]:
    """Engine server, instant upstream, gateway process: (procs and the backends to register,
    gateway url, engine url, db, prefix)."""
    model = make_tiny_model(work / "tiny", "llama", max_position_embeddings=4096)
    eng = EngineProcess(model, "--api-key", ENGINE_KEY, "--max-model-len", "4096", "--num-kv-blocks", "1024",
                        "--max-num-batched-tokens", "256").start()
    up = subprocess.Popen([sys.executable, "-m", "tests.helpers.upstream", "--port", "0"], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    up_port = int(up.stdout.readline().split()[1])  # type: ignore[union-attr]
    db = args.database_url or _fresh_pg()
    from fairgate.gateway.store.db import upgrade

    upgrade(db)
    prefix = f"soak-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAIRGATE_DATABASE_URL": db, "FAIRGATE_REDIS_URL": REDIS_URL,
           "FAIRGATE_REDIS_PREFIX": prefix, "FAIRGATE_ADMIN_TOKEN": ADMIN, "FAIRGATE_EMBEDDED_ENGINE": "false",
           "FAIRGATE_PORT": str(port), "FAIRGATE_HOST": "127.0.0.1",
           "FAIRGATE_USAGE_JOURNAL_PATH": str(work / "usage.journal"),
           # the engine key is stored encrypted (a throwaway key unless one is set)
           "FAIRGATE_SECRETS_KEY": os.environ.get("FAIRGATE_SECRETS_KEY") or _fernet_key()}
    gw = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve"], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=open(work / "gateway.log", "wb"))  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url + "/health/liveness", timeout=1)
            break
        time.sleep(0.2)
    admin = httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30)
    backends = [  # registered by main, inside its cleanup
        {"name": "eng", "base_url": eng.url + "/v1", "model": "tiny", "kind": "local", "api_key": ENGINE_KEY},
        {"name": "up", "base_url": f"http://127.0.0.1:{up_port}/v1", "model": "up-model", "kind": "local"}]
    return [eng, up, gw, admin, backends], url, eng.url, db, prefix


def _fernet_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def _drop_pg(url: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def _fresh_pg() -> str:
    import psycopg

    name = f"fg_soak_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def tenants_of(admin: httpx.Client, n: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        t = admin.post("/admin/tenants", json={"name": f"soak-{i}-{uuid.uuid4().hex[:6]}"}).json()
        out.append((t["id"], admin.post(f"/admin/tenants/{t['id']}/keys", json={}).json()["key"]))
    return out


def report(books: Books, end: dict[str, Any], t0: float) -> dict[str, Any]:
    rows = [w.row(t0) for w in books.windows if w.counts]
    cols = list(rows[0]) if rows else []
    print("  ".join(f"{c:>14}" for c in cols))
    for row in rows:
        print("  ".join(f"{'-' if row[c] is None else row[c]:>14}" for c in cols))
    p99s = [r["p99_ms"] for r in rows if r["p99_ms"] is not None]
    growth = {f"{k}_growth_{unit}": v for k in ("rss_gateway", "rss_engine")
              for unit, v in zip(("mb", "pct"), _growth(rows, f"{k}_mb"), strict=True)}
    loads = [r["load1"] for r in rows]
    summary = {**end, "requests": sum(books.totals.values()),
               "errors_unexpected": sum(n for k, n in books.totals.items() if k.startswith(("5", "transport"))),
               "bad_inputs_refused": sum(n for k, n in books.totals.items() if k.startswith("bad:")),
               "bad_inputs_not_refused": sum(n for k, n in books.totals.items() if "not_refused" in k),
               **growth, "p99_ms_first": p99s[0] if p99s else None, "p99_ms_last": p99s[-1] if p99s else None,
               "p99_ms_median": statistics.median(p99s) if p99s else None, "p99_ms_max": max(p99s, default=None),
               "load1_mean": round(statistics.mean(loads), 2) if loads else None, "outcomes": dict(books.totals)}
    print()
    for k, v in summary.items():
        if k != "outcomes":
            print(f"{k:>26}  {v}")
    return summary


def _books_off(end: dict[str, Any]) -> bool:
    return any(end.get(k) for k in ("usage_records_missing", "usage_records_duplicated", "left_rows_lost",
                                    "left_rows_over_sent"))


def _growth(rows: list[dict[str, Any]], col: str) -> tuple[float | None, float | None]:
    """RSS growth from the end of the first window (the warm-up) to the end of the last."""
    if len(rows) < 2 or not rows[0][col]:
        return None, None
    warm, last = rows[0][col], rows[-1][col]
    return round(last - warm, 1), round(100 * (last - warm) / warm, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--tenants", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=20.0)
    ap.add_argument("--database-url", default=None, help="default: a fresh PostgreSQL database")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fg-soak-") as tmp:
        procs, url, engine_url, db, prefix = start_stack(args, Path(tmp))
        end: dict[str, Any] = {}
        eng, up, gw, admin, backends = procs
        try:
            for backend in backends:
                admin.post("/admin/backends", json=backend).raise_for_status()
            *tenants, left = tenants_of(admin, args.tenants + 1)
            t0, cpu0 = time.monotonic(), cpu_s(gw.pid)
            books = asyncio.run(drive(url, tenants, left, args.minutes, args.concurrency, args.window_s,
                                      (gw.pid, eng.proc.pid)))
            cpu = cpu_s(gw.pid) - cpu0
            end = settle(url, engine_url, db, prefix, tenants, books)
            end["gateway_cpu_ms_per_request"] = round(1000 * cpu / max(1, sum(books.totals.values())), 2)
            summary = report(books, end, t0)
        finally:
            admin.close()
            gw.terminate()
            gw.wait(30)
            up.terminate()
            eng.stop()
            if args.database_url is None and not _books_off(end):
                _drop_pg(db)  # the fresh database this run made; kept to look into when the books are off
    if _books_off(end):
        print(f"database kept: {db}", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
