"""bench/fairness_live.py --pool N: fleet-wide fairness with skewed ingress (issue 36).

N engine servers (the bench's own child mode, FCFS or fair wait queue) in one local pool "live"
behind two gateway processes that share a fresh PostgreSQL database and Redis (a fresh key
prefix per round). Every tenant arrives at one gateway only:

  alone   the light tenant (weight 1) at gateway 1, Poisson at light_share x capacity
  flood   the light tenant as before, the flooder (weight 1) at gateway 2 at 4x that rate
  share   gold (weight 3) at gateway 1 and std (weight 1) at gateway 2, both backlogged (closed
          loop, 1.5x the pool's slots each); streamed chunks per tenant after a warm-up fifth

Rounds: `fcfs` (FCFS engines, no gateway queue: requests go out as they come) and `fair` (fair
engines with fairness preemption, and the gateways' pool queue `pool_fair_slots` on the shared
Redis clock, backends/pool_fleet_gate.py), alternating. Each engine gets cores / N compute
threads (`--engine-threads`), so N engines do not oversubscribe the machine. Capacity is calibrated once, closed loop
through gateway 1. The last line is JSON: `light_p99_vs_alone`, `light_p50_vs_alone` (fair
round), `throughput_vs_fcfs` (flood phase, engines' generated tokens/s), `preemptions_per_request`
(fair engines, flood phase), `weighted_share_error` (|gold/std - 3| / 3 in the fair round; the
FCFS round's beside it) and the shared clock's Redis calls and milliseconds per request (from the
gateways' /metrics over the flood phase). The run reported in issue 36's note (about 4 minutes):

    python bench/fairness_live.py --pool 2 --duration 12 --repeats 2 --max-num-seqs 4 --max-tokens 32
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.fairness_live import (
    Phase,
    calibrate,
    issue36_keys,
    merge,
    p,
    print_phases,
    run_phase,
    wait_drained,
    warm_servers,
)
from bench.fairness_servers import ADMIN, SMALL, Proc, setup_pool, start_engine, start_gateway
from bench.fairness_vllm import gate_waits, tenant_ids, wait_figures

WEIGHTS = {"light": 1.0, "flood": 1.0, "gold": 3.0, "std": 1.0}
CLOCK = ("fairgate_pool_clock_redis_calls_total", "fairgate_pool_clock_redis_seconds_total")


async def share_phase(entries: dict[str, str], keys: dict[str, dict[str, str]], engines: list[str],
                      workers: int, args: argparse.Namespace) -> dict[str, int]:
    """Both tenants backlogged for `duration` s; chunks streamed to each after the warm-up."""
    chunks = dict.fromkeys(entries, 0)
    start = time.perf_counter()
    warm, end = start + args.duration / 5, start + args.duration

    async def worker(client: httpx.AsyncClient, tenant: str, i: int) -> None:
        rng = random.Random(f"{tenant}:{i}")
        while time.perf_counter() < end:
            body = {"model": "live", "prompt": [rng.randrange(10, 400) for _ in range(args.prompt_tokens)],
                    "max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True}
            async with client.stream("POST", entries[tenant] + "/v1/completions", json=body,
                                     headers=keys[tenant]) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:") and '"choices":[{' in line and warm <= time.perf_counter() < end:
                        chunks[tenant] += 1

    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=2000)) as client:
        tasks = [asyncio.create_task(worker(client, t, i)) for t in entries for i in range(workers)]
        await asyncio.sleep(max(0.0, end - time.perf_counter()))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await wait_drained(engines)
    return chunks


def scrape(gw: Proc, *prefixes: str) -> list[float]:
    """Per prefix, the sum of the gateway's /metrics samples whose line starts with it (one scrape)."""
    lines = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {ADMIN}"}, timeout=30).text.splitlines()
    return [sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(p)) for p in prefixes]


def clock_cost(gateways: list[Proc]) -> tuple[float, float]:
    """The shared clock's Redis calls and seconds, summed over the gateways' /metrics."""
    got = [scrape(gw, CLOCK[0] + " ", CLOCK[1] + " ") for gw in gateways]
    return sum(g[0] for g in got), sum(g[1] for g in got)


def cpu_s(procs: list[Proc]) -> list[float]:
    """CPU seconds (user + system) each process has used so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = []
    for proc in procs:
        fields = Path(f"/proc/{proc.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out.append((int(fields[11]) + int(fields[12])) / tick)
    return out


def snapshot(queue: str, gateways: list[Proc], engines: list[Proc]) -> None:
    """Where requests are at the end of the flood phase: held at the gateways or running."""
    stats = [httpx.get(e.url + "/stats", timeout=30).json() for e in engines]
    gws = [scrape(g, "fairgate_pool_replica_healthy{", "fairgate_pool_fair_in_flight{", "fairgate_pool_fair_waiting{")
           for g in gateways]  # one scrape each, one after the other: not one instant on a loaded machine
    print(f"  {queue} end of flood: per gateway (healthy replicas, fair-queue slots held, waiting) {gws}"
          f"; per engine (running, waiting) {[(s['running'], s['waiting']) for s in stats]}", flush=True)


def warm_up(gateways: list[Proc], key: dict[str, str]) -> None:
    """Until every gateway serves the pool (the second learns it from the config version)."""
    body = {"model": "live", "prompt": [11, 12, 13], "max_tokens": 2, "stream": False}
    for gw in gateways:
        for _ in range(100):
            if httpx.post(gw.url + "/v1/completions", json=body, headers=key, timeout=120).status_code == 200:
                break
            time.sleep(0.3)


def start_fleet(es: contextlib.ExitStack, queue: str, args: argparse.Namespace,
                workdir: str) -> tuple[list[Proc], list[Proc], dict[str, dict[str, str]]]:
    from tests.gateway.harness import REDIS_URL, pg_database, redis_prefix

    engines = []
    threads = args.engine_threads or max(1, (os.cpu_count() or 1) // args.pool)
    for _ in range(args.pool):
        engines.append(start_engine(queue, args, threads))
        es.callback(engines[-1].stop)
    env = {"FAIRGATE_DATABASE_URL": es.enter_context(pg_database()), "FAIRGATE_REDIS_URL": REDIS_URL,
           "FAIRGATE_REDIS_PREFIX": es.enter_context(redis_prefix())}
    if queue == "vtc":
        env["FAIRGATE_POOL_FAIR_SLOTS"] = str(args.fair_slots or args.max_num_seqs)
        env["FAIRGATE_METRICS_TENANT_LABELS"] = "true"  # the light tenant's time at the gate
        env["FAIRGATE_POOL_FAIR_RESERVE"] = str(args.fair_reserve)  # headroom in the fleet queue
        if args.active_lead is not None:  # the gateways' fleet queue takes the engines' lead
            env["FAIRGATE_POOL_FAIR_ACTIVE_LEAD"] = str(args.active_lead)
    gateways = []
    for _ in range(2):  # one after the other: the first migrates the fresh database
        gateways.append(start_gateway(tempfile.mkdtemp(dir=workdir), env))
        es.callback(gateways[-1].stop)
    keys = {t: {"authorization": f"Bearer {k}"}
            for t, k in setup_pool(gateways[0].url, [e.url for e in engines], WEIGHTS).items()}
    warm_up(gateways, keys["flood"])
    return engines, gateways, keys


def run_pool(args: argparse.Namespace) -> dict:
    workdir = tempfile.mkdtemp(prefix="fairness-pool-")
    if args.model is None:
        from tests.helpers.tiny_models import make_tiny_model

        args.model = str(make_tiny_model(Path(workdir) / "model", "llama", **SMALL))
    results: dict[str, dict[str, Phase]] = {q: {"alone": Phase(), "flood": Phase()} for q in ("vtc", "fcfs")}
    shares: dict[str, dict[str, int]] = {q: {"gold": 0, "std": 0} for q in ("vtc", "fcfs")}
    cost = [0.0, 0.0, 0]  # Redis calls, seconds, requests (fair rounds' flood phases)
    gate: list[dict[str, float]] = []  # the light tenant's time at gateway 1's fleet queue (fair rounds' floods)
    capacity = args.capacity or 0.0  # --capacity: the same rates in runs compared with each other
    order = [q for i in range(args.repeats) for q in (("vtc", "fcfs") if i % 2 == 0 else ("fcfs", "vtc"))]
    for queue in order:
        with contextlib.ExitStack() as es:
            engines, gws, keys = start_fleet(es, queue, args, workdir)
            urls = [e.url for e in engines]
            if not capacity:
                capacity = asyncio.run(calibrate(gws[0].url, urls, keys["flood"], args))
            light = args.light_share * capacity
            seed = 100 * results[queue]["alone"].runs  # both rounds see the same arrivals
            entries = {"light": gws[0].url, "flood": gws[1].url}  # skewed ingress
            asyncio.run(warm_servers(entries, urls, keys, light, args))
            merge(results[queue]["alone"], asyncio.run(
                run_phase(entries, urls, keys, {"light": light}, args.duration, args, seed)))
            before, waits0 = clock_cost(gws), gate_waits(gws[0].url)
            timer = threading.Timer(args.duration * 0.9, snapshot, (queue, gws, engines))  # near its end
            timer.start()
            cpu0 = cpu_s([*gws, *engines])
            flood = asyncio.run(run_phase(entries, urls, keys, {"light": light, "flood": 4 * light},
                                          args.duration, args, seed + 1))
            timer.join()
            cpu = [round(b - a, 1) for a, b in zip(cpu0, cpu_s([*gws, *engines]), strict=True)]
            print(f"  {queue} flood phase CPU s: gateways {cpu[:2]}, engines {cpu[2:]}", flush=True)
            merge(results[queue]["flood"], flood)
            if queue == "vtc":
                after = clock_cost(gws)
                cost = [cost[0] + after[0] - before[0], cost[1] + after[1] - before[1], cost[2] + flood.requests]
                light_id = tenant_ids(gws[0].url)["light"]
                gate.append(wait_figures(waits0.get(light_id, {}), gate_waits(gws[0].url).get(light_id, {})))
            workers = max(2, (args.fair_slots or args.max_num_seqs) * args.pool * 3 // 2)
            got = asyncio.run(share_phase({"gold": gws[0].url, "std": gws[1].url}, keys, urls, workers, args))
            for t, n in got.items():
                shares[queue][t] += n
    return report(args, results, shares, capacity, cost, gate)


def report(args: argparse.Namespace, results: dict[str, dict[str, Phase]], shares: dict[str, dict[str, int]],
           capacity: float, cost: list[float], gate: list[dict[str, float]]) -> dict:
    print(f"path: client -> 2 gateways (skewed ingress, shared PostgreSQL + Redis) -> pool of {args.pool} "
          f"engine servers; fair = fair engines + the gateways' fleet queue ({args.fair_slots or args.max_num_seqs}"
          " slots per replica), fcfs = FCFS engines, no gateway queue")
    print(f"capacity {capacity:.1f} req/s; light {args.light_share * capacity:.2f} req/s at gateway 1, "
          f"flood {4 * args.light_share * capacity:.2f} req/s at gateway 2; {args.duration:.0f} s per phase")
    print_phases(results)
    for g in gate:
        print(f"fair  flood  light at gateway 1's fleet queue: {g['n']:.0f} requests, mean {g['mean_s']:.3f} s, "
              f"p50 <= {g['p50_le_s']} s, p99 <= {g['p99_le_s']} s (histogram bucket bounds)")
    ratio = {q: s["gold"] / max(s["std"], 1) for q, s in shares.items()}
    for q, s in shares.items():
        print(f"{q:<6}share  gold (w3) at gw1 {s['gold']} chunks, std (w1) at gw2 {s['std']}: {ratio[q]:.2f}:1")
    v, f = results["vtc"], results["fcfs"]
    summary: dict = {
        "mode": f"pool {args.pool}", "active_lead": args.active_lead, "fair_reserve": args.fair_reserve,
        "capacity_req_s": round(capacity, 2),
        "light_alone_ttft_p99_s": round(p(v["alone"].ttft["light"], 99), 4),
        "vtc_light_ttft_p99_s": round(p(v["flood"].ttft["light"], 99), 4),
        "fcfs_light_ttft_p99_s": round(p(f["flood"].ttft["light"], 99), 4),
        "vtc_throughput_tok_s": round(v["flood"].tokens_per_s, 1),
        "fcfs_throughput_tok_s": round(f["flood"].tokens_per_s, 1),
        "errors": sum(ph.errors for phs in results.values() for ph in phs.values()),
        "share_ratio": round(ratio["vtc"], 3), "fcfs_share_ratio": round(ratio["fcfs"], 3),
        "fcfs_weighted_share_error": round(abs(ratio["fcfs"] - 3) / 3, 3),
        "redis_calls_per_request": round(cost[0] / cost[2], 2) if cost[2] else None,
        "redis_ms_per_request": round(1000 * cost[1] / cost[2], 3) if cost[2] else None,
        "fair_light_gate_wait_mean_s": round(sum(g["mean_s"] for g in gate) / len(gate), 4) if gate else None,
    }
    summary["vtc_vs_alone"] = round(summary["vtc_light_ttft_p99_s"] / max(summary["light_alone_ttft_p99_s"], 1e-9), 2)
    summary["fcfs_vs_alone"] = round(summary["fcfs_light_ttft_p99_s"] / max(summary["light_alone_ttft_p99_s"], 1e-9), 2)
    summary["throughput_ratio"] = round(summary["vtc_throughput_tok_s"] / max(summary["fcfs_throughput_tok_s"], 1e-9), 3)
    summary.update(issue36_keys(v, summary, args))
    summary["weighted_share_error"] = round(abs(ratio["vtc"] - 3) / 3, 3)
    return summary
