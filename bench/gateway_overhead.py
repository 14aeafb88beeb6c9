"""Gateway overhead: direct calls to a fast upstream vs the same calls through fairgate (auth,
Redis quotas, routing, usage recording all on) vs through LiteLLM's proxy, in one run.

    python bench/gateway_overhead.py [--quick] [--database-url URL] [--litellm PATH]

Load comes from `hey` (Go; far cheaper per request than a Python client on a small machine).
Each server runs as its own process; CPU per request is read from /proc for that process (and
its children). Prints a table, then a last line of JSON.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "bench-admin-token"
LITELLM_KEY = "sk-bench-master"
BODY = {"model": "up", "messages": [{"role": "user", "content": "Say hello in five words"}], "max_tokens": 8}
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """utime+stime of a process and its live children (LiteLLM forks a worker)."""
    total = 0.0
    pids = [pid]
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        pids += [int(k) for k in kids]
    except OSError:
        pass
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICK
        except OSError:
            pass
    return total


def unlimited_key(admin: httpx.Client, name: str) -> str:
    """A new tenant `name` whose quota never binds (the bench measures the gateway, not its limits);
    returns a new API key of it. `admin`: a client on the gateway with the admin token."""
    tenant = admin.post("/admin/tenants", json={"name": name}).json()
    big = 10**12
    admin.put(f"/admin/tenants/{tenant['id']}/quota", json={
        "requests_per_minute": big, "tokens_per_minute": big, "max_concurrent": 100000, "daily_tokens": big,
        "monthly_tokens": big, "monthly_cost": 1e9, "max_tokens_per_request": 4096}).raise_for_status()
    return admin.post(f"/admin/tenants/{tenant['id']}/keys", json={}).json()["key"]


def wait_http(url: str, headers: dict[str, str] | None = None, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if httpx.get(url, headers=headers, timeout=2).status_code < 500:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


@dataclass
class Run:
    target: str
    stream: bool
    concurrency: int
    n: int
    p50_ms: float
    p99_ms: float
    rps: float
    cpu_ms_per_req: float | None
    errors: int


def hey(url: str, key: str | None, body: dict, n: int, c: int, pid: int | None) -> tuple[list[float], float, float | None, int]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(body, f)
    cmd = ["hey", "-n", str(n), "-c", str(c), "-m", "POST", "-T", "application/json", "-D", f.name,
           "-t", "60", "-o", "csv"]
    if key:
        cmd += ["-H", f"Authorization: Bearer {key}"]
    cpu0 = cpu_seconds(pid) if pid else 0.0
    t0 = time.perf_counter()
    out = subprocess.run(cmd + [url], capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - t0
    cpu = (cpu_seconds(pid) - cpu0) if pid else None
    os.unlink(f.name)
    rows = list(csv.DictReader(io.StringIO(out)))
    lat = sorted(float(r["response-time"]) * 1000 for r in rows if r["status-code"] == "200")
    errors = sum(1 for r in rows if r["status-code"] != "200")
    return lat, wall, (cpu * 1000 / n if cpu is not None else None), errors


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop(p: subprocess.Popen | None) -> None:
    if p is None or p.poll() is not None:
        return
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def litellm_bin(explicit: str | None) -> str | None:
    for cand in (explicit, os.environ.get("LITELLM_BIN"), "/work/litellm-venv/bin/litellm"):
        if cand and Path(cand).exists():
            return cand
    return shutil.which("litellm") if explicit is None else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    ap.add_argument("--database-url", default=None, help="default: a SQLite file in a temp dir")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--litellm", default=None, help="path to the litellm executable")
    ap.add_argument("--no-litellm", action="store_true")
    args = ap.parse_args()
    scale = 0.25 if args.quick else 1.0
    tmp = Path(tempfile.mkdtemp(prefix="fg-bench-"))
    procs: list[subprocess.Popen] = []
    prefix = f"fgbench-{uuid.uuid4().hex[:8]}"
    try:
        # upstream: a real instant OpenAI-compatible server, its own process
        up = subprocess.Popen([sys.executable, "-m", "tests.helpers.upstream", "--port", "0"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
        procs.append(up)
        up_port = int(up.stdout.readline().split()[1])  # type: ignore[union-attr]
        up_url = f"http://127.0.0.1:{up_port}/v1"
        wait_http(up_url + "/models")

        gw_port = free_port()
        db_url = args.database_url or f"sqlite:///{tmp}/gateway.store.db"
        gw = start([sys.executable, "-m", "fairgate.gateway.cli", "serve", "--port", str(gw_port)], {
            "FAIRGATE_ADMIN_TOKEN": ADMIN, "FAIRGATE_DATABASE_URL": db_url, "FAIRGATE_REDIS_URL": args.redis_url,
            "FAIRGATE_REDIS_PREFIX": prefix, "FAIRGATE_EMBEDDED_ENGINE": "false"}, tmp / "gateway.log")
        procs.append(gw)
        gw_url = f"http://127.0.0.1:{gw_port}"
        wait_http(gw_url + "/v1/models")
        admin = httpx.Client(base_url=gw_url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30)
        admin.post("/admin/backends", json={"name": "up", "base_url": up_url, "model": "up-model",
                                            "input_cost_per_mtok": 0.1, "output_cost_per_mtok": 0.2}).raise_for_status()
        key = unlimited_key(admin, "bench")

        ll_bin = None if args.no_litellm else litellm_bin(args.litellm)
        ll_url = ll = None
        if ll_bin:
            cfg = tmp / "litellm.yaml"
            cfg.write_text(
                "model_list:\n  - model_name: up\n    litellm_params:\n      model: openai/up-model\n"
                f"      api_base: {up_url}\n      api_key: sk-upstream\n"
                f"general_settings:\n  master_key: {LITELLM_KEY}\n"
                "litellm_settings:\n  telemetry: false\n  drop_params: true\n")
            ll_port = free_port()
            ll = start([ll_bin, "--config", str(cfg), "--host", "127.0.0.1", "--port", str(ll_port),
                        "--num_workers", "1"], {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False",
                                                "LITELLM_LOG": "ERROR", "DISABLE_SCHEMA_UPDATE": "True"},
                       tmp / "litellm.log")
            procs.append(ll)
            ll_url = f"http://127.0.0.1:{ll_port}"
            try:
                wait_http(ll_url + "/health/liveliness", timeout=180)
            except RuntimeError:
                print("litellm did not start; see", tmp / "litellm.log", file=sys.stderr)
                ll_url = None

        targets = [("direct", up_url, None, up.pid), ("fairgate", gw_url + "/v1", key, gw.pid)]
        if ll_url and ll:
            targets.append(("litellm", ll_url + "/v1", LITELLM_KEY, ll.pid))
        runs: list[Run] = []
        plan = [(False, 1, 1000), (False, 10, 3000), (False, 50, 4000), (True, 1, 500), (True, 50, 2000)]
        for name, base, k, pid in targets:
            for stream, c, n in plan:
                n = max(c * 4, int(n * scale * (0.25 if name == "litellm" else 1)))
                body = {**BODY, "stream": stream}
                hey(base + "/chat/completions", k, body, min(n, 200), c, None)  # warm-up
                lat, wall, cpu, errors = hey(base + "/chat/completions", k, body, n, c, pid)
                runs.append(Run(name, stream, c, n, pct(lat, 0.5), pct(lat, 0.99), n / wall, cpu, errors))
                r = runs[-1]
                print(f"{name:9s} stream={str(stream):5s} c={c:3d} n={n:5d}  p50={r.p50_ms:7.2f} ms  "
                      f"p99={r.p99_ms:7.2f} ms  rps={r.rps:8.1f}  cpu/req={r.cpu_ms_per_req or 0:6.2f} ms  "
                      f"errors={errors}", flush=True)
    finally:
        for p in reversed(procs):
            stop(p)
        import redis

        r = redis.Redis.from_url(args.redis_url)
        keys = list(r.scan_iter(f"{prefix}:*"))
        if keys:
            r.delete(*keys)

    def get(t: str, stream: bool, c: int) -> Run | None:
        return next((r for r in runs if r.target == t and r.stream == stream and r.concurrency == c), None)

    d1, g1, g50, l50 = get("direct", False, 1), get("fairgate", False, 1), get("fairgate", False, 50), get("litellm", False, 50)
    l1 = get("litellm", False, 1)
    assert d1 and g1 and g50
    print()
    print(f"{'target':9s} {'stream':6s} {'conc':>4s} {'p50 ms':>8s} {'p99 ms':>8s} {'req/s':>8s} {'cpu ms/req':>10s}")
    for r in runs:
        cpu = f"{r.cpu_ms_per_req:10.2f}" if r.cpu_ms_per_req is not None else f"{'-':>10s}"
        print(f"{r.target:9s} {str(r.stream):6s} {r.concurrency:4d} {r.p50_ms:8.2f} {r.p99_ms:8.2f} {r.rps:8.1f} {cpu}")
    result = {
        "overhead_p50_ms": round(g1.p50_ms - d1.p50_ms, 3),
        "overhead_p99_ms": round(g1.p99_ms - d1.p99_ms, 3),
        "gateway_cpu_ms_per_req": round(g50.cpu_ms_per_req or 0, 3),
        "gateway_cpu_ms_per_req_c1": round(g1.cpu_ms_per_req or 0, 3),
        "gateway_rps": round(g50.rps, 1),
        "direct_rps": round(get("direct", False, 50).rps, 1),  # type: ignore[union-attr]
        "gateway_stream_rps": round(get("fairgate", True, 50).rps, 1),  # type: ignore[union-attr]
        "litellm_rps": round(l50.rps, 1) if l50 else None,
        "litellm_overhead_p50_ms": round(l1.p50_ms - d1.p50_ms, 3) if l1 else None,
        "litellm_overhead_p99_ms": round(l1.p99_ms - d1.p99_ms, 3) if l1 else None,
        "litellm_cpu_ms_per_req": round(l50.cpu_ms_per_req, 3) if l50 and l50.cpu_ms_per_req else None,
        "gateway_vs_litellm_rps": round(g50.rps / l50.rps, 2) if l50 and l50.rps else None,
        "errors": sum(r.errors for r in runs),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
