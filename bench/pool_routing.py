"""Routing inside an engine pool: prefix hit rate and TTFT for affinity-with-load-bound vs
round-robin vs least-loaded, across real engine servers on loopback.

Workload (fixed seed): `--tenants` tenants (default 7), each with its own `--system-tokens`
system prompt (default 896 token ids, so a prefill is worth saving), `--per-tenant` requests each (default 8) = system prompt
+ a distinct 16-token question, greedy, max_tokens 4, ignore_eos, streamed, sent `--concurrency`
at a time (default 4) in a shuffled order. Engines:
`--replicas` (default 3) `fairgate engine` processes on the bench's "5m" random Llama (hidden 192,
4 layers, 6 heads, vocab 8000), each with a KV pool that holds the whole workload.

Each policy drives the gateway's own `PoolBackend` over the same engines, with a fresh cache
salt namespace per policy (so no run finds another's cached prefix). Hit rate = cached prompt
tokens / prompt tokens, from the engines' usage; TTFT = from the call to the first streamed
batch, in the caller's loop.

    python bench/pool_routing.py [--replicas 3] [--tenants 6] [--per-tenant 8] [--quick]
Prints a table, then one JSON line with affinity_hit_rate, round_robin_hit_rate,
least_loaded_hit_rate, ttft p50/p99 per policy and ttft_p50_speedup (round-robin p50 / affinity p50).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402

from fairgate.backends.base import GenerationRequest  # noqa: E402
from fairgate.backends.http1 import HTTP1Pool  # noqa: E402
from fairgate.backends.openai_compat import OpenAICompatBackend  # noqa: E402
from fairgate.backends.pool import PoolBackend, PoolOptions, ReplicaSpec  # noqa: E402
from fairgate.backends.pool_prefix import PrefixKeyer  # noqa: E402

SPEC_5M = dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=6,
               intermediate_size=512, vocab_size=8000)
POLICIES = ("affinity", "round_robin", "least_loaded")


def start_engines(model: Path, n: int, blocks: int) -> list[tuple[subprocess.Popen[str], str]]:
    out = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(n):
        p = subprocess.Popen([sys.executable, "-m", "fairgate.gateway.cli", "engine", "--model", str(model), "--port", "0",
                              "--served-model-name", "m", "--num-kv-blocks", str(blocks), "--max-model-len", "1024",
                              "--max-num-batched-tokens", "1024"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert p.stdout is not None
        for line in p.stdout:
            if line.startswith("fairgate engine listening on "):
                out.append((p, line.split(" on ", 1)[1].strip()))
                break
        else:
            raise RuntimeError("engine exited before listening")
    return out


def workload(tenants: int, per_tenant: int, system_tokens: int, seed: int = 0) -> list[tuple[str, list[int]]]:
    rng = random.Random(seed)
    systems = [[rng.randrange(3, 8000) for _ in range(system_tokens)] for _ in range(tenants)]
    work = [(f"t{t}", systems[t] + [rng.randrange(3, 8000) for _ in range(16)])
            for _ in range(per_tenant) for t in range(tenants)]
    rng.shuffle(work)  # arrival order: no tenant/replica pattern that round robin could ride on
    return work


async def run_policy(policy: str, urls: list[str], work: list[tuple[str, list[int]]],
                     concurrency: int) -> dict[str, float]:
    http1 = HTTP1Pool()
    async with httpx.AsyncClient() as http:
        pool = PoolBackend("bench", "local", [ReplicaSpec(f"r{i}", u + "/v1") for i, u in enumerate(urls)],
                           lambda s: OpenAICompatBackend(s.name, s.base_url, http1, model="m", is_local=True,
                                                         max_retries=0),
                           http, keyer=PrefixKeyer(None, 16, 4), options=PoolOptions(policy=policy))  # type: ignore[arg-type]
        sem = asyncio.Semaphore(concurrency)
        ttfts: list[float] = []
        prompt = cached = 0

        async def one(i: int, tenant: str, ids: list[int]) -> None:
            nonlocal prompt, cached
            body = {"model": "m", "prompt": ids, "max_tokens": 4, "temperature": 0, "ignore_eos": True}
            req = GenerationRequest.from_body(f"{policy}-{i}", "completion", body, tenant=tenant,
                                    cache_salt=f"{policy}:{tenant}")
            async with sem:
                t0 = time.perf_counter()
                first = True
                async for batch in pool.stream_batches(req):
                    if first:
                        ttfts.append(time.perf_counter() - t0)
                        first = False
                    for chunk in batch:
                        if chunk.get("usage"):
                            prompt += chunk["usage"]["prompt_tokens"]
                            cached += (chunk["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)

        await asyncio.gather(*(one(i, t, ids) for i, (t, ids) in enumerate(work)))
        status = pool.status()
        spread = sorted(r["requests"] for r in status)
        spills = sum(r["routed"].get("spill", 0) for r in status)
        await http1.aclose()
    ttfts.sort()
    return {"hit_rate": cached / prompt, "ttft_p50_ms": statistics.median(ttfts) * 1000,
            "ttft_p99_ms": ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))] * 1000,
            "min_replica_requests": spread[0], "max_replica_requests": spread[-1], "spills": spills}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--tenants", type=int, default=7)
    ap.add_argument("--per-tenant", type=int, default=8)
    ap.add_argument("--system-tokens", type=int, default=896)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="2 replicas, 5 tenants, 4 requests each")
    args = ap.parse_args()
    if args.quick:
        args.replicas, args.tenants, args.per_tenant, args.system_tokens = 2, 5, 4, 256
    from prefix_cache import make_model

    work = workload(args.tenants, args.per_tenant, args.system_tokens)
    blocks = len(POLICIES) * len(work) * (args.system_tokens // 16 + 3) + 64  # nothing evicted
    with tempfile.TemporaryDirectory() as tmp:
        make_model(Path(tmp), SPEC_5M)
        engines = start_engines(Path(tmp), args.replicas, blocks)
        try:
            results = {p: asyncio.run(run_policy(p, [u for _, u in engines], work, args.concurrency))
                       for p in POLICIES}
        finally:
            for proc, _ in engines:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=20)
    print(f"{len(work)} requests, {args.tenants} tenants x {args.per_tenant}, {args.replicas} engine servers, "
          f"system prompt {args.system_tokens} tokens, concurrency {args.concurrency}")
    print(f"{'policy':<14}{'hit rate':>10}{'TTFT p50 ms':>14}{'TTFT p99 ms':>14}{'requests/replica':>20}"
          f"{'spills':>8}")
    for p, r in results.items():
        print(f"{p:<14}{r['hit_rate']:>10.3f}{r['ttft_p50_ms']:>14.1f}{r['ttft_p99_ms']:>14.1f}"
              f"{r['min_replica_requests']:>16}..{r['max_replica_requests']:<2}{r['spills']:>8}")
    a, rr, ll = results["affinity"], results["round_robin"], results["least_loaded"]
    print(json.dumps({"affinity_hit_rate": round(a["hit_rate"], 4), "round_robin_hit_rate": round(rr["hit_rate"], 4),
                      "least_loaded_hit_rate": round(ll["hit_rate"], 4),
                      **{f"{p}_ttft_p50_ms": round(r["ttft_p50_ms"], 2) for p, r in results.items()},
                      **{f"{p}_ttft_p99_ms": round(r["ttft_p99_ms"], 2) for p, r in results.items()},
                      "ttft_p50_speedup": round(rr["ttft_p50_ms"] / a["ttft_p50_ms"], 3),
                      "replicas": args.replicas, "requests": len(work)}))


if __name__ == "__main__":
    main()
