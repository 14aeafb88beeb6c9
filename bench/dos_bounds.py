"""Issue 35's DoS table, rerun: one heavy request at a time against a real `fairgate engine` and a
`fairgate serve` with the embedded engine (both on a tiny random model, on loopback), while
another client polls `/health` every 100 ms.

Each row: the request, the status it got (200 or a 400 naming the field), seconds to the answer,
the `/health` p99 while it ran (a poll that timed out at 2 s counts as 2,000 ms) and the server's
RSS growth. The last line is JSON with the figures the issue's goals are judged by
(`max_answer_s` < 5, `health_p99_ms_max` < 100, `rss_growth_mb_max` < 100).

    python bench/dos_bounds.py [--only engine|gateway]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # for tests.helpers; last, so our kernels/ never shadows HF's

from bench.gateway_overhead import free_port, stop, wait_http  # noqa: E402

ADMIN = "bench-admin-token"
MSG = [{"role": "user", "content": "Answer."}]


def props(n: int, seed: int = 0) -> dict[str, Any]:
    return {"type": "object", "properties": {f"s{seed}_field_{i}": {"type": "integer"} for i in range(n)}}


def deep(levels: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(levels):
        out = {"a": out}
    return out


def requests(model: str) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(row name, path, bodies sent one after another)."""
    chat = {"model": model, "messages": MSG, "max_tokens": 4}
    return [
        ("guided_choice 80k (1.4 MB)", "/v1/chat/completions",
         [chat | {"guided_choice": [f"choice-number-{i:06d}" for i in range(80_000)]}]),
        ("guided_choice 40k short", "/v1/chat/completions",
         [chat | {"guided_choice": [f"c{i}" for i in range(40_000)]}]),
        ("guided_choice 4k (within limits)", "/v1/chat/completions",
         [chat | {"guided_choice": [f"c{i}" for i in range(4_000)]}]),
        ("response_format 5,000 properties", "/v1/chat/completions",
         [chat | {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": props(5000)}}}]),
        ("12 distinct 2,000-property schemas", "/v1/chat/completions",
         [chat | {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": props(2000, s)}}}
          for s in range(12)]),
        ("12 distinct 250-property schemas", "/v1/chat/completions",
         [chat | {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": props(250, s)}}}
          for s in range(12)]),
        ("n=128 top_logprobs=20 200 tokens", "/v1/chat/completions",
         [{"model": model, "messages": MSG, "n": 128, "logprobs": True, "top_logprobs": 20, "max_tokens": 200}]),
        ("max_tokens 2^31-1", "/v1/chat/completions", [chat | {"max_tokens": 2**31 - 1}]),
        ("metadata 900 deep", "/v1/chat/completions", [chat | {"metadata": deep(900)}]),
        ("prompt [-1] echo", "/v1/completions", [{"model": model, "prompt": [-1], "echo": True, "max_tokens": 1}]),
        ("prompt [99999999999] echo", "/v1/completions",
         [{"model": model, "prompt": [99999999999], "echo": True, "max_tokens": 1}]),
    ]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class HealthPoller:
    """GET /health every 100 ms from its own client; `window()` gives the latencies since `mark()`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[tuple[float, float]] = []  # (sent at, ms)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        with httpx.Client(timeout=2) as c:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    c.get(self.url + "/health")
                    ms = (time.perf_counter() - t0) * 1000
                except httpx.HTTPError:
                    ms = 2000.0
                self.samples.append((t0, ms))
                time.sleep(max(0.0, 0.1 - (time.perf_counter() - t0)))

    def p99(self, since: float, until: float) -> tuple[float, int]:
        lat = sorted(ms for t, ms in self.samples if since <= t <= until)
        if not lat:
            return 0.0, 0
        return lat[min(len(lat) - 1, int(0.99 * len(lat)))], len(lat)


def run_rows(name: str, url: str, pid: int, headers: dict[str, str], model: str) -> list[dict[str, Any]]:
    rows = []
    with HealthPoller(url) as poller, httpx.Client(timeout=600, headers=headers) as client:
        # one ordinary request first: the table is about heavy requests, not a cold first call
        client.post(url + "/v1/chat/completions", json={"model": model, "messages": MSG, "max_tokens": 2})
        time.sleep(0.5)
        for label, path, bodies in requests(model):
            rss0 = rss_mb(pid)
            t0 = time.perf_counter()
            statuses, worst, params = [], 0.0, set()
            for body in bodies:
                raw = json.dumps(body).encode()
                s0 = time.perf_counter()
                r = client.post(url + path, content=raw, headers={"content-type": "application/json"})
                worst = max(worst, time.perf_counter() - s0)
                statuses.append(r.status_code)
                if r.status_code != 200:
                    err = r.json().get("error", {}) if r.headers.get("content-type", "").startswith("application/json") \
                        else {"code": "not-json"}
                    params.add(f"{err.get('param')}:{err.get('code')}")
            time.sleep(0.25)  # a poll or two after the answer
            p99, n = poller.p99(t0, time.perf_counter())
            rows.append({"server": name, "request": label, "status": "/".join(str(s) for s in sorted(set(statuses))),
                         "refusal": ",".join(sorted(params)), "answer_s": round(worst, 3),
                         "health_p99_ms": round(p99, 1), "health_polls": n,
                         "rss_growth_mb": round(rss_mb(pid) - rss0, 1), "bytes": sum(len(json.dumps(b)) for b in bodies)})
            print(f"  {name:8s} {label:36s} {rows[-1]['status']:8s} {rows[-1]['refusal']:40s} "
                  f"{worst:7.3f}s p99 {p99:7.1f} ms ({n} polls) RSS +{rows[-1]['rss_growth_mb']:.1f} MB", flush=True)
    return rows


def start_engine(model_dir: Path, tmp: Path) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(model_dir),
                          "--served-model-name", "tiny", "--port", "0", "--num-kv-blocks", "512",
                          "--max-model-len", "512", "--stats-interval", "0", "--log-level", "warning"],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                         stderr=(tmp / "engine.err").open("w"), text=True, start_new_session=True)
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith("fairgate engine listening on "):
            return p, line.split(" on ", 1)[1].strip()
    raise RuntimeError("engine did not start: " + (tmp / "engine.err").read_text()[-2000:])


def start_gateway(model_dir: Path, tmp: Path) -> tuple[subprocess.Popen[str], str, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAIRGATE_ADMIN_TOKEN": ADMIN,
           "FAIRGATE_DATABASE_URL": f"sqlite:///{tmp}/gw.db", "FAIRGATE_MODEL": str(model_dir),
           "FAIRGATE_SERVED_MODEL_NAME": "tiny", "FAIRGATE_MAX_BODY_BYTES": str(4 << 20),
           "FAIRGATE_LOG_LEVEL": "warning", "FAIRGATE_DEFAULT_MAX_TOKENS": "64"}
    p = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve", "--port", str(port)], cwd=tmp,
                         env=env, stdout=(tmp / "gw.log").open("w"), stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health", timeout=240)
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {ADMIN}"}, timeout=60) as admin:
        tid = admin.post("/admin/tenants", json={"name": "dos"}).raise_for_status().json()["id"]
        admin.put(f"/admin/tenants/{tid}/quota", json={"tokens_per_minute": 2_000_000,
                                                       "requests_per_minute": 100_000}).raise_for_status()
        key = admin.post(f"/admin/tenants/{tid}/keys", json={}).raise_for_status().json()["key"]
    return p, url, key


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["engine", "gateway"], default=None)
    args = ap.parse_args()
    from tests.helpers.tiny_models import make_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="fg-dos-"))
    model_dir = make_tiny_model(tmp / "tiny", "llama")
    rows: list[dict[str, Any]] = []
    if args.only in (None, "engine"):
        proc, url = start_engine(model_dir, tmp)
        try:
            wait_http(url + "/health", timeout=240)
            rows += run_rows("engine", url, proc.pid, {}, "tiny")
        finally:
            stop(proc)
    if args.only in (None, "gateway"):
        proc, url, key = start_gateway(model_dir, tmp)
        try:
            rows += run_rows("gateway", url, proc.pid, {"authorization": f"Bearer {key}"}, "tiny")
        finally:
            stop(proc)
    print()
    print("| server | request | status | refusal (param:code) | seconds | /health p99 ms | RSS growth MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['server']} | {r['request']} | {r['status']} | {r['refusal']} | {r['answer_s']} | "
              f"{r['health_p99_ms']} | {r['rss_growth_mb']} |")
    ok_status = all(s in ("200", "400") for r in rows for s in r["status"].split("/"))
    summary = {"max_answer_s": max(r["answer_s"] for r in rows),
               "health_p99_ms_max": max(r["health_p99_ms"] for r in rows),
               "rss_growth_mb_max": max(r["rss_growth_mb"] for r in rows),
               "all_200_or_400": ok_status, "rows": len(rows)}
    summary["goals_met"] = bool(ok_status and summary["max_answer_s"] < 5 and summary["health_p99_ms_max"] < 100
                                and summary["rss_growth_mb_max"] < 100)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
