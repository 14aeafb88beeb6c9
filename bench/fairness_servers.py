"""The servers of bench/fairness_live.py: the engine server with a chosen wait queue (the
bench's own `--serve-engine` child mode, so FCFS and the fair queue can be compared), the
gateway in front of it, and the two tenants."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent

ADMIN, SECRET = "live-admin-token", "live-control-secret"
# big enough that the engine, not the HTTP path, is the bottleneck on a few CPU cores
SMALL = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
             num_attention_heads=8, num_key_value_heads=4)


# ---------------------------------------------------------------------- the two servers
def serve_engine(args: argparse.Namespace) -> int:
    """Child mode: the engine server app with the chosen wait queue on a free port."""
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from fairgate.backends.collector import DEFAULT_THRESHOLD, parse_threshold, settle
    from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig
    from fairgate.backends.local.serving.backend import LocalBackend
    from fairgate.backends.local.serving.listener import tcp_listener
    from fairgate.backends.local.serving.server import build_app
    from fairgate.scheduler.fair_queue import FairQueue
    from fairgate.scheduler.queue import FCFSQueue

    sock = tcp_listener("127.0.0.1", 0, 256)  # as `fairgate engine`'s: accepted connections get TCP_NODELAY

    async def serve() -> None:
        cfg = EngineConfig(args.model, num_kv_blocks=args.num_kv_blocks, max_num_seqs=args.max_num_seqs,
                           max_num_batched_tokens=args.max_num_batched_tokens,
                           fairness_preemption=not args.no_fair_preemption,
                           fairness_slot_share=not args.no_slot_share,
                           **({} if args.active_lead is None else {"fairness_active_lead": args.active_lead}))
        queue = FCFSQueue() if args.serve_engine == "fcfs" else FairQueue(cfg.fairness_config())
        engine = AsyncEngine(cfg, wait_queue=queue)
        app = build_app(LocalBackend(engine, name="live", model_name="live"), control_secret=SECRET)

        async def tenants(request: Request) -> JSONResponse:  # which tenants the engine saw
            return JSONResponse(sorted({r.tenant for r in engine.scheduler.requests.values()}
                                       | set(seen)))

        seen: set[str] = set()
        add = engine.add_request

        def add_and_note(*a, **kw):  # type: ignore[no-untyped-def]
            seen.add(kw.get("tenant", "default"))
            return add(*a, **kw)

        engine.add_request = add_and_note  # type: ignore[method-assign]
        app.router.routes.append(Route("/bench/tenants", tenants))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        # as `fairgate engine` does: startup's objects out of the collector's full passes, and its
        # thresholds (the run's --gc-threshold, which the gateways read from the same variable)
        settle(parse_threshold(os.environ.get("FAIRGATE_GC_THRESHOLD", DEFAULT_THRESHOLD)))
        print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        await server.serve(sockets=[sock])

    asyncio.run(serve())
    return 0


@dataclass(slots=True)
class Proc:
    popen: subprocess.Popen
    url: str

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def start_engine(queue: str, args: argparse.Namespace, threads: int | None = None) -> Proc:
    """`threads`: the engine's compute threads (OMP_NUM_THREADS; several engines on a few cores
    must not oversubscribe them); default torch's choice."""
    cmd = [sys.executable, str(ROOT / "bench" / "fairness_live.py"), "--serve-engine", queue, "--model", args.model,
           "--max-num-seqs", str(args.max_num_seqs), "--num-kv-blocks", str(args.num_kv_blocks),
           "--max-num-batched-tokens", str(args.max_num_batched_tokens)]
    cmd += ["--no-fair-preemption"] if args.no_fair_preemption else []
    cmd += ["--no-slot-share"] if args.no_slot_share else []
    cmd += ["--active-lead", str(args.active_lead)] if getattr(args, "active_lead", None) is not None else []
    env = {**os.environ, "FAIRGATE_METRICS_TENANT_LABELS": "true"}  # per-tenant queue time and TTFT
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    line = p.stdout.readline()  # type: ignore[union-attr]
    if not line.startswith("listening on "):
        p.kill()
        raise RuntimeError("engine server did not start")
    return Proc(p, line.split(" on ", 1)[1].strip())


def start_gateway(workdir: str, extra_env: dict[str, str] | None = None) -> Proc:
    """`fairgate serve` (SQLite in `workdir` unless `extra_env` names a database, no embedded
    engine) on a free port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAIRGATE_DATABASE_URL": f"sqlite:///{workdir}/gw.db",
           "FAIRGATE_ADMIN_TOKEN": ADMIN, "FAIRGATE_EMBEDDED_ENGINE": "false",
           "FAIRGATE_CONTROL_SECRET": SECRET, "FAIRGATE_HOST": "127.0.0.1", "FAIRGATE_PORT": str(port),
           **(extra_env or {})}
    log = open(Path(workdir) / "gateway.log", "w")  # noqa: SIM115 - lives as long as the process
    p = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "serve"], cwd=workdir, env=env,
                         stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline and p.poll() is None:
        try:
            httpx.get(url + "/v1/models", timeout=2)
            return Proc(p, url)
        except httpx.TransportError:
            time.sleep(0.3)
    p.kill()
    raise RuntimeError(f"gateway did not start: {(Path(workdir) / 'gateway.log').read_text()[-1500:]}")


def setup_tenants(gw: str, engine: str) -> dict[str, str]:
    """Tenants light and flood with a key each; the engine as local backend "live"."""
    with httpx.Client(base_url=gw, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30) as c:
        keys = {}
        for name in ("light", "flood"):
            tid = c.post("/admin/tenants", json={"name": name}).raise_for_status().json()["id"]
            keys[name] = c.post(f"/admin/tenants/{tid}/keys", json={}).raise_for_status().json()["key"]
        c.post("/admin/backends", json={"name": "live", "base_url": engine + "/v1", "kind": "local",
                                        "model": "live"}).raise_for_status()
    return keys


def setup_pool(gw: str, engines: list[str], weights: dict[str, float], kind: str = "local") -> dict[str, str]:
    """Tenants with the given fairness weights and a key each; the engines as pool "live" of
    `kind` (local: our engine servers; vllm)."""
    with httpx.Client(base_url=gw, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30) as c:
        keys = {}
        for name, weight in weights.items():
            tid = c.post("/admin/tenants", json={"name": name, "weight": weight}).raise_for_status().json()["id"]
            keys[name] = c.post(f"/admin/tenants/{tid}/keys", json={}).raise_for_status().json()["key"]
        c.post("/admin/pools", json={"name": "live", "kind": kind, "model": "live", "replicas": [
            {"name": f"e{i}", "base_url": url + "/v1"} for i, url in enumerate(engines)]}).raise_for_status()
    return keys
