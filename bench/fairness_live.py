"""Live fairness: a real engine server on CPU behind the real gateway, two tenants, the flooder
sending 4x the light tenant's load; the engine's wait queue FCFS vs the fair queue (VTC).

For each queue: start `fairgate engine`-equivalent server (this script's `--serve-engine`
mode, so the queue can be chosen) and `fairgate serve` (SQLite, no embedded engine), create
the tenants "light" and "flood" with one key each through the admin API, register the engine
as a local backend, then run two open-loop phases through the gateway:

  alone   the light tenant only, Poisson at `light_rate`
  flood   the light tenant as before, plus the flooder at 4 x light_rate

Rates come from a calibration through the whole path (closed loop, four streams per sequence
slot): light = 0.3 x capacity, flood = 1.2 x capacity, so with the flooder the engine is
overloaded (1.5x) while the light tenant asks for less than its fair half. On a small shared
machine the capacity under a flood of open connections is lower than calibrated, so keep the
light share well under 0.5. Two rounds, the
queues' order alternating (vtc fcfs fcfs vtc), both queues seeing the same arrivals. TTFT is measured by the client (first streamed chunk); a request still without a token
when the phase ends counts with its waiting time so far (a lower bound: starvation shows).
Throughput is the engine's generated tokens per second during the flood phase (/stats).
The fair engine preempts for fairness (scheduler/fair_preemption.py) unless
`--no-fair-preemption`; preemptions (by cause) and the tokens resumes recomputed come from /stats.

    python bench/fairness_live.py [--duration 25] [--model DIR] [--light-share 0.3] [--direct]
    python bench/fairness_live.py --pool 2 [--duration 15] [--repeats 1] [--fair-slots N]

`--pool N`: N engine servers in one pool behind two gateways sharing PostgreSQL and Redis, each
tenant at one gateway only (skewed ingress), plus a phase with weights 3:1 both backlogged
(bench/fairness_pool.py; its JSON adds `weighted_share_error`). `--vllm VENV`: two vLLM CPU
servers straight and behind the gateway's fair queue (bench/fairness_vllm.py; `throughput_vs_direct`).

Prints a table; the last line is JSON: issue 36's `light_p99_vs_alone`, `light_p50_vs_alone`
(the fair engine's light tenant under the flood over alone), `throughput_vs_fcfs` (flood phase)
and `preemptions_per_request` (fair engine, flood phase, every cause), among others.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from bench.fairness_servers import (  # noqa: E402,F401
    ADMIN,
    SMALL,
    serve_engine,
    setup_tenants,
    start_engine,
    start_gateway,
)
from fairgate.backends.local.engine.metrics import TTFT_BUCKETS  # noqa: E402
from fairgate.scheduler.fairness import DEFAULT_ACTIVE_LEAD  # noqa: E402


# ---------------------------------------------------------------------- load
@dataclass(slots=True)
class Phase:
    ttft: dict[str, list[float]] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=dict)
    errors: int = 0
    tokens_per_s: float = 0.0
    wall_s: float = 0.0
    runs: int = 0
    requests: int = 0  # sent
    engine: dict[str, int] = field(default_factory=dict)  # /stats counter deltas (PREEMPTION_STATS)
    client_cpu_s: float = 0.0  # this client's own CPU time during the phase (a saturated client delays sends)
    # per tenant label, from the engines' /metrics histograms: [queue s summed, requests, engine TTFT s
    # summed, requests]: arrival at the engine to the first scheduled step, and to the first token;
    # then the engine TTFT histogram's cumulative bucket counts (TTFT_BUCKETS, +Inf last)
    latency: dict[str, list[float]] = field(default_factory=dict)
    # engine steps, their busy seconds, the tokens they ran (prompt + decode) and the sequences that
    # sampled (summed over steps: / steps is the mean batch)
    steps: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])


WARM_UP_S = 3.0  # seconds of thrown-away load on each fresh server before its first phase
WIDTH = 4 + len(TTFT_BUCKETS) + 1  # a tenant's entry in Phase.latency
STEPS = "\x00steps"  # engine_latency's entry for the engines' /stats steps, busy seconds, tokens, sampled
PREEMPTION_STATS = ("preemptions", "fairness_preemptions", "fairness_recomputed_tokens", "recomputed_tokens")
Stats = Callable[[list[str]], Awaitable[dict[str, int]]]  # servers -> counters (generation_tokens, PREEMPTION_STATS)
Drain = Callable[[list[str]], Awaitable[None]]  # waits until the servers run and hold nothing


def merge(into: Phase, ph: Phase) -> None:
    """Pool one run's samples into `into`; throughput is the mean over runs."""
    for tenant, ttfts in ph.ttft.items():
        into.ttft.setdefault(tenant, []).extend(ttfts)
        into.done[tenant] = into.done.get(tenant, 0) + ph.done[tenant]
    into.errors += ph.errors
    into.tokens_per_s = (into.tokens_per_s * into.runs + ph.tokens_per_s) / (into.runs + 1)
    into.wall_s += ph.wall_s
    into.runs += 1
    into.requests += ph.requests
    into.client_cpu_s += ph.client_cpu_s
    for k, v in ph.engine.items():
        into.engine[k] = into.engine.get(k, 0) + v
    into.steps = [a + b for a, b in zip(into.steps, ph.steps, strict=True)]
    for label, sums in ph.latency.items():
        into.latency[label] = [a + b for a, b in zip(into.latency.get(label, [0.0] * len(sums)), sums, strict=True)]


def load_client(connections: int) -> aiohttp.ClientSession:
    """The load's HTTP client. aiohttp, not httpx: httpcore's pool scans every connection on
    every request and response event (`_assign_requests_to_connections`), so with the flood's
    hundreds of open streams the client itself spent half its time there and sent the light
    tenant's requests late (py-spy, 2026-12-06)."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections, force_close=False),
                                 timeout=aiohttp.ClientTimeout(total=600))


async def one_request(client: aiohttp.ClientSession, entry: str, auth: dict[str, str], prompt: list[int],
                      max_tokens: int) -> float:
    """Stream one completion from `entry` (a gateway or engine root); return its TTFT (first
    chunk). Raises on an HTTP error."""
    body = {"model": "live", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True}
    start = time.perf_counter()
    ttft = -1.0
    async with client.post(entry + "/v1/completions", json=body, headers=auth) as r:
        if r.status != 200:
            raise RuntimeError(f"{r.status}: {(await r.text())[:200]}")
        async for line in r.content:
            if ttft < 0 and line.startswith(b"data:") and b'"choices":[{' in line:
                ttft = time.perf_counter() - start
    return ttft


async def engine_stats(engines: list[str]) -> dict[str, int]:
    """/stats counters summed over the engines."""
    out = dict.fromkeys(("generation_tokens", *PREEMPTION_STATS), 0)
    async with httpx.AsyncClient() as c:
        for engine in engines:
            s = (await c.get(engine + "/stats")).json()
            for k in out:
                out[k] += int(s.get(k, 0))
    return out


async def engine_latency(engines: list[str]) -> dict[str, list[float]]:
    """Per tenant label, summed over the engines: the queue-time and TTFT histograms' sums and
    counts (`fairgate_queue_time_seconds`, `fairgate_time_to_first_token_seconds`), then the TTFT
    histogram's cumulative bucket counts, so a tail can be placed inside or outside the engine."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[float]] = {}
    where = {"fairgate_queue_time_seconds_sum": 0, "fairgate_queue_time_seconds_count": 1,
             "fairgate_time_to_first_token_seconds_sum": 2, "fairgate_time_to_first_token_seconds_count": 3}
    async with httpx.AsyncClient() as c:
        for engine in engines:
            s = (await c.get(engine + "/stats")).json()
            out.setdefault(STEPS, [0.0, 0.0, 0.0, 0.0])
            for i, name in enumerate(("steps", "busy_seconds", "tokens_computed", "sampled_seqs")):
                out[STEPS][i] += s.get(name, 0)
            r = await c.get(engine + "/metrics")
            if r.status_code != 200:
                continue
            for family in text_string_to_metric_families(r.text):
                for sample in family.samples:
                    if sample.name in where:
                        out.setdefault(sample.labels.get("tenant", ""), [0.0] * WIDTH)[where[sample.name]] += sample.value
                    elif sample.name == "fairgate_time_to_first_token_seconds_bucket":
                        le = float(sample.labels["le"])
                        at = 4 + (TTFT_BUCKETS.index(le) if le in TTFT_BUCKETS else len(TTFT_BUCKETS))
                        out.setdefault(sample.labels.get("tenant", ""), [0.0] * WIDTH)[at] += sample.value
    return out


async def wait_drained(engines: list[str]) -> None:
    async with httpx.AsyncClient() as c:
        for engine in engines:
            for _ in range(600):
                s = (await c.get(engine + "/stats")).json()
                if s["running"] == 0 and s["waiting"] == 0:
                    break
                await asyncio.sleep(0.1)


async def run_phase(entries: dict[str, str | list[str]], engines: list[str], keys: dict[str, dict[str, str]],
                    rates: dict[str, float], duration: float, args: argparse.Namespace, seed: int,
                    stats: Stats | None = None, drain: Drain | None = None) -> Phase:
    """Open-loop Poisson arrivals per tenant (each through its entry: skewed ingress in the
    pool mode; a list of entries is taken in turn, as a round-robin balancer would) for
    `duration` s; then cancel what is left. `stats` / `drain`: how to read the servers' counters
    and wait for them to be idle (default: our engine servers' /stats)."""
    stats, drain = stats or engine_stats, drain or wait_drained
    turns = {t: itertools.cycle([e] if isinstance(e, str) else e) for t, e in entries.items()}
    phase = Phase(ttft={t: [] for t in rates}, done=dict.fromkeys(rates, 0))
    # The client is the measuring instrument: its own collector passes (over thousands of open
    # streams, up to ~200 ms) would be counted as the servers' latency, so none run in a phase.
    gc.collect()
    gc.disable()
    try:
        return await _run_phase(phase, turns, entries, engines, keys, rates, duration, args, seed, stats, drain)
    finally:
        gc.enable()


async def _run_phase(phase: Phase, turns: dict, entries: dict[str, str | list[str]], engines: list[str],
                     keys: dict[str, dict[str, str]], rates: dict[str, float], duration: float,
                     args: argparse.Namespace, seed: int, stats: Stats, drain: Drain) -> Phase:
    async with load_client(4000) as client:
        pending: dict[asyncio.Task, tuple[str, float]] = {}

        async def tenant_loop(tenant: str, rate: float) -> None:
            rng = random.Random(f"{seed}:{tenant}")
            t_next = time.perf_counter()
            while True:
                t_next += rng.expovariate(rate)
                await asyncio.sleep(max(0.0, t_next - time.perf_counter()))
                if time.perf_counter() >= end:
                    return
                prompt = [rng.randrange(10, 400) for _ in range(args.prompt_tokens)]
                task = asyncio.create_task(one_request(client, next(turns[tenant]), keys[tenant], prompt,
                                                       args.max_tokens))
                phase.requests += 1
                pending[task] = (tenant, time.perf_counter())
                task.add_done_callback(collect)

        def collect(task: asyncio.Task) -> None:
            if task.cancelled() or task not in pending:
                return  # cancelled at the end of the phase: already counted
            tenant, _ = pending.pop(task)
            if task.exception() is not None:
                phase.errors += 1
                return
            phase.ttft[tenant].append(task.result())
            phase.done[tenant] += 1

        mine = stats is engine_stats  # our engine servers: their /metrics tell where the time went
        latency0 = await engine_latency(engines) if mine else {}
        stats0, start, cpu0 = await stats(engines), time.perf_counter(), time.process_time()
        end = start + duration
        await asyncio.gather(*(tenant_loop(t, r) for t, r in rates.items()))
        phase.wall_s, phase.client_cpu_s = time.perf_counter() - start, time.process_time() - cpu0
        tokens = (await stats(engines))["generation_tokens"]
        phase.tokens_per_s = (tokens - stats0["generation_tokens"]) / phase.wall_s
        now = time.perf_counter()
        for task, (tenant, t0) in list(pending.items()):
            if not task.done():
                # no token yet (or still streaming): starved ones count with their wait so far
                pending.pop(task)
                task.cancel()
                phase.ttft[tenant].append(now - t0)
        await asyncio.sleep(0.2)
    await drain(engines)
    stats1 = await stats(engines)
    phase.engine = {k: stats1[k] - stats0[k] for k in PREEMPTION_STATS}
    if mine:
        for label, sums in (await engine_latency(engines)).items():
            before = latency0.get(label, [0.0] * len(sums))
            if label == STEPS:
                phase.steps = [a - b for a, b in zip(sums, before, strict=True)]
            elif sums[1] > before[1]:
                phase.latency[label] = [a - b for a, b in zip(sums, before, strict=True)]
    return phase


async def calibrate(gw: str, engines: list[str], key: dict[str, str], args: argparse.Namespace,
                    drain: Drain | None = None) -> float:
    """Requests per second the whole path completes with every sequence slot busy."""
    async with load_client(1000) as client:
        count = 0
        end = time.perf_counter() + args.calibrate_s

        async def worker(i: int) -> None:
            nonlocal count
            rng = random.Random(i)
            while time.perf_counter() < end:
                await one_request(client, gw, key, [rng.randrange(10, 400) for _ in range(args.prompt_tokens)],
                                  args.max_tokens)
                count += 1

        start = time.perf_counter()
        # 4 streams per slot: a queue and many open connections, as under the flood
        await asyncio.gather(*(worker(i) for i in range(args.max_num_seqs * 4 * len(engines))))
        rate = count / (time.perf_counter() - start)
    await (drain or wait_drained)(engines)
    return rate


async def warm_servers(entries: dict[str, str | list[str]], engines: list[str], keys: dict[str, dict[str, str]],
                       light: float, args: argparse.Namespace, stats: Stats | None = None,
                       drain: Drain | None = None) -> None:
    """A short phase of both tenants, thrown away: a fresh server's first requests (first batch
    shapes, first connections) would otherwise land in the first measured phase, as a tail that
    has nothing to do with the queue."""
    await run_phase(entries, engines, keys, {"light": light, "flood": 4 * light}, WARM_UP_S, args, 99_999,
                    stats, drain)


# ---------------------------------------------------------------------- report
def p(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(-(-len(s) * q // 100)) - 1))]


def print_phases(results: dict[str, dict[str, Phase]]) -> None:
    """One row per queue, phase and tenant: requests, TTFT p50/p99, errors, the phase's tokens/s."""
    print(f"{'queue':<8}{'phase':<7}{'tenant':<7}{'reqs':>6}{'ttft p50':>10}{'ttft p99':>10}"
          f"{'errors':>8}{'tok/s':>8}{'client cpu':>11}")
    for queue, phases in results.items():
        for name, ph in phases.items():
            for tenant, ttfts in ph.ttft.items():
                print(f"{queue:<8}{name:<7}{tenant:<7}{len(ttfts):>6}{p(ttfts, 50):>10.3f}"
                      f"{p(ttfts, 99):>10.3f}{ph.errors:>8}{ph.tokens_per_s:>8.0f}"
                      f"{ph.client_cpu_s / max(ph.wall_s, 1e-9):>10.0%}")


def print_latency(results: dict[str, dict[str, Phase]], names: dict[str, str]) -> None:
    """Where a request's time to first token went, means per tenant: in the engine's queue,
    arrival at the engine to the first token, and what the client saw (the rest is the HTTP
    path: the gateway, the SSE relay, the client's own loop); and the engine's mean step (its
    busy seconds per step), the floor under any wait for the step in flight, with what a step
    carried (tokens run, prompt and decode, and the sequences that sampled). The client's mean
    counts requests cut at the phase's end with their wait so far, the engine's only those that
    got a token, so under the flood `path` can come out negative."""
    print(f"{'queue':<8}{'phase':<7}{'tenant':<8}{'client ttft':>12}{'engine ttft':>12}{'engine queue':>13}"
          f"{'path':>8}{'step':>8}  (means, s){'client p99':>12}{'engine p99 in':>16}{'tok/step':>10}{'batch':>7}")
    for queue, phases in results.items():
        for name, ph in phases.items():
            step = ph.steps[1] / max(ph.steps[0], 1)
            carried = f"{ph.steps[2] / max(ph.steps[0], 1):>10.1f}{ph.steps[3] / max(ph.steps[0], 1):>7.1f}"
            for label, (q_sum, q_n, t_sum, t_n, *buckets) in sorted(ph.latency.items()):
                tenant = names.get(label, label)
                client = ph.ttft.get(tenant, [])
                mean = sum(client) / len(client) if client else float("nan")
                engine_ttft = t_sum / max(t_n, 1)
                print(f"{queue:<8}{name:<7}{tenant:<8}{mean:>12.3f}{engine_ttft:>12.3f}{q_sum / max(q_n, 1):>13.3f}"
                      f"{mean - engine_ttft:>8.3f}{step:>8.3f}{'':>11}{p(client, 99):>12.3f}"
                      f"{bucket_range(buckets, 0.99 * t_n):>16}{carried}")


def bucket_range(cumulative: list[float], rank: float) -> str:
    """The engine TTFT histogram's bucket that holds the observation of `rank` (the engine's own
    p99, against the client's: it places a tail inside or outside the engine)."""
    for i, count in enumerate(cumulative):
        if count >= rank:
            low = TTFT_BUCKETS[i - 1] if i else 0.0
            high = f"{TTFT_BUCKETS[i]:g}" if i < len(TTFT_BUCKETS) else "inf"
            return f"{low:g}-{high}"
    return "-"


def run(args: argparse.Namespace) -> dict:
    workdir = tempfile.mkdtemp(prefix="fairness-live-")
    if args.model is None:
        from tests.helpers.tiny_models import make_tiny_model

        args.model = str(make_tiny_model(Path(workdir) / "model", "llama", **SMALL))
    results: dict[str, dict[str, Phase]] = {q: {"alone": Phase(), "flood": Phase()} for q in ("vtc", "fcfs")}
    seen: dict[str, list[str]] = {}
    names: dict[str, str] = {}  # the engine's tenant label -> the tenant's name
    capacity = args.capacity or 0.0  # --capacity: the same rates in runs compared with each other
    # ABBA...: the machine's other load drifts; alternating spreads it over both queues
    order = [q for i in range(args.repeats) for q in (("vtc", "fcfs") if i % 2 == 0 else ("fcfs", "vtc"))]
    for queue in order:
        engine = start_engine(queue, args, args.engine_threads)
        gw = None
        try:
            gw = None if args.direct else start_gateway(tempfile.mkdtemp(dir=workdir))
            if args.direct:  # straight to the engine server, naming the tenant ourselves
                entry = engine.url
                keys = {t: {"x-tenant": t} for t in ("light", "flood")}
            else:
                entry = gw.url
                keys = {t: {"authorization": f"Bearer {k}"}
                        for t, k in setup_tenants(gw.url, engine.url).items()}
            if not capacity:
                capacity = asyncio.run(calibrate(entry, [engine.url], keys["flood"], args))
            light = args.light_share * capacity
            seed = 100 * results[queue]["alone"].runs  # both queues see the same arrivals
            entries = {"light": entry, "flood": entry}
            asyncio.run(warm_servers(entries, [engine.url], keys, light, args))
            merge(results[queue]["alone"], asyncio.run(
                run_phase(entries, [engine.url], keys, {"light": light}, args.duration, args, seed)))
            merge(results[queue]["flood"], asyncio.run(
                run_phase(entries, [engine.url], keys, {"light": light, "flood": 4 * light},
                          args.duration, args, seed + 1)))
            seen[queue] = httpx.get(engine.url + "/bench/tenants").json()
            if gw is not None:
                listed = httpx.get(gw.url + "/admin/tenants", headers={"authorization": f"Bearer {ADMIN}"}).json()
                names.update({t["id"]: t["name"] for t in (listed.get("data", listed) if isinstance(listed, dict)
                                                          else listed)})
        finally:
            if gw is not None:
                gw.stop()
            engine.stop()

    print(f"path: {'client -> engine server' if args.direct else 'client -> gateway -> engine server'}"
          f"; tenants the engine saw: {seen}")
    print(f"capacity {capacity:.1f} req/s; light {args.light_share * capacity:.2f} req/s, "
          f"flood {4 * args.light_share * capacity:.2f} req/s; {args.duration:.0f} s per phase")
    print_phases(results)
    print_latency(results, names)
    v, f = results["vtc"], results["fcfs"]
    alone = p(v["alone"].ttft["light"], 99)
    summary = {
        "capacity_req_s": round(capacity, 2),
        "light_alone_ttft_p99_s": round(alone, 4),
        "fcfs_light_alone_ttft_p99_s": round(p(f["alone"].ttft["light"], 99), 4),
        "vtc_light_ttft_p99_s": round(p(v["flood"].ttft["light"], 99), 4),
        "fcfs_light_ttft_p99_s": round(p(f["flood"].ttft["light"], 99), 4),
        "vtc_light_ttft_p50_s": round(p(v["flood"].ttft["light"], 50), 4),
        "fcfs_light_ttft_p50_s": round(p(f["flood"].ttft["light"], 50), 4),
        "vtc_throughput_tok_s": round(v["flood"].tokens_per_s, 1),
        "fcfs_throughput_tok_s": round(f["flood"].tokens_per_s, 1),
        "path": "direct" if args.direct else "gateway",
        "tenants_seen": sorted(set(seen["vtc"]) - {"default"}),
        "errors": sum(ph.errors for phs in results.values() for ph in phs.values()),
    }
    summary["vtc_vs_alone"] = round(summary["vtc_light_ttft_p99_s"] / max(alone, 1e-9), 2)
    summary["fcfs_vs_alone"] = round(summary["fcfs_light_ttft_p99_s"] / max(alone, 1e-9), 2)
    summary["throughput_ratio"] = round(
        summary["vtc_throughput_tok_s"] / max(summary["fcfs_throughput_tok_s"], 1e-9), 3)
    summary.update(issue36_keys(v, summary, args))
    return summary


def issue36_keys(v: dict[str, Phase], summary: dict, args: argparse.Namespace) -> dict:
    """The fair engine's figures under the names issue 36 fixes, with preemptions by cause."""
    flood = v["flood"]
    fair = flood.engine.get("fairness_preemptions", 0)
    return {
        "fair_preemption": not args.no_fair_preemption,
        "slot_share": not args.no_slot_share,
        "active_lead": DEFAULT_ACTIVE_LEAD if args.active_lead is None else args.active_lead,
        "light_p99_vs_alone": summary["vtc_vs_alone"],
        "light_p50_vs_alone": round(p(flood.ttft["light"], 50) / max(p(v["alone"].ttft["light"], 50), 1e-9), 2),
        "throughput_vs_fcfs": summary["throughput_ratio"],
        "preemptions_per_request": round(flood.engine.get("preemptions", 0) / max(flood.requests, 1), 4),
        "fairness_preemptions": fair,
        "kv_preemptions": flood.engine.get("preemptions", 0) - fair,
        "recomputed_tokens_per_fairness_preemption": round(
            flood.engine.get("fairness_recomputed_tokens", 0) / fair, 2) if fair else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model folder (default: a small random Llama)")
    ap.add_argument("--duration", type=float, default=25.0, help="seconds per phase")
    ap.add_argument("--calibrate-s", type=float, default=6.0)
    ap.add_argument("--capacity", type=float, default=0.0,
                    help="req/s to take as the capacity instead of calibrating (runs to compare see the same rates)")
    ap.add_argument("--light-share", type=float, default=0.3, help="light rate / capacity")
    ap.add_argument("--repeats", type=int, default=2, help="rounds, alternating the queues' order")
    ap.add_argument("--prompt-tokens", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--max-num-seqs", type=int, default=8)
    ap.add_argument("--num-kv-blocks", type=int, default=256)
    ap.add_argument("--max-num-batched-tokens", type=int, default=256)
    ap.add_argument("--direct", action="store_true", help="skip the gateway (engine scheduling only)")
    ap.add_argument("--no-fair-preemption", action="store_true",
                    help="the fair engine only orders admissions (never preempts for fairness)")
    ap.add_argument("--no-slot-share", action="store_true",
                    help="the fair engine preempts on the counter gap only, not for a tenant under its slot share")
    ap.add_argument("--active-lead", type=float, default=None,
                    help="the fair engine's --fairness-active-lead and, --pool and --vllm, the gateways' "
                         "pool_fair_active_lead (default: theirs, 1024; 0: a returning tenant starts level, "
                         "the VTC paper's lift)")
    ap.add_argument("--pool", type=int, default=0, help="N engine servers in a pool behind two gateways")
    ap.add_argument("--engine-threads", type=int, default=None,
                    help="compute threads per engine (default: torch's choice; --pool: cores / N), e.g. 1 to "
                         "leave a core to the gateway and the client")
    ap.add_argument("--fair-reserve", type=int, default=0,
                    help="--vllm, --pool: the gateways' pool_fair_reserve in the fair round (headroom slots)")
    ap.add_argument("--fair-slots", type=int, default=None,
                    help="--pool, --vllm: the gateways' pool_fair_slots (per replica) in the fair round "
                         "(default --max-num-seqs)")
    ap.add_argument("--vllm", default=None, metavar="VENV",
                    help="two vLLM CPU servers (the shared peers' venv) direct vs behind the gateway's fair queue")
    ap.add_argument("--gc-threshold", default=None, metavar="G0,G1,G2",
                    help="Python's collector thresholds in the engine servers and gateways (default: "
                         "theirs, 700,10,100, backends/collector.py; 700,10,10 is Python's own)")
    ap.add_argument("--serve-engine", choices=["fcfs", "vtc"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.gc_threshold:
        os.environ["FAIRGATE_GC_THRESHOLD"] = args.gc_threshold  # every server this run starts reads it
    if args.serve_engine:
        return serve_engine(args)
    if args.vllm:
        from bench.fairness_vllm import run_vllm

        print(json.dumps(run_vllm(args)))
        return 0
    if args.pool:
        from bench.fairness_pool import run_pool

        print(json.dumps(run_pool(args)))
        return 0
    print(json.dumps(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
