"""The embedded engine's cost (issue 39): the same client load against `fairgate serve` with its
in-process engine (the default `make run`: the gateway's event loop, auth, the personal-data
detector, quota, usage rows and the engine's compute threads in one process) and against a
standalone `fairgate engine` server on the same model with the same settings, alternating
(A B A B).

The load is bench/engine_throughput.py's workload (same generator and seed: token-id prompts of
32-512 tokens, 16-256 generated, greedy, `ignore_eos`), all requests streamed at once by one
httpx client. The gateway reads every prompt back as text and runs the detector on it, as for any
request; each pass is a fresh tenant (the gateway salts the prefix cache per tenant) and, on the
engine server, a fresh `cache_salt`, so no pass is flattered by the one before.
`embedded_vs_engine_server` = the embedded gateway's tokens/s over the engine server's (issue 39
asks >= 0.9). Prints a table, then one JSON line.

    python bench/engine_embedded.py [--quick] [--passes 2] [--requests 64] [--model DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from bench.engine_throughput import MODELS, Req, make_model, workload  # noqa: E402
from bench.fairness_servers import ADMIN, start_gateway  # noqa: E402
from bench.server_peers import running, start_engine  # noqa: E402


async def drive(base_url: str, model: str, reqs: list[Req], headers: dict[str, str],
                extra: dict[str, object]) -> dict[str, float]:
    """Every request at once, streamed; tokens/s over the pass's wall time and TTFT p50/p99."""
    ttfts: list[float] = []
    generated = 0

    async def one(client: httpx.AsyncClient, r: Req) -> None:
        nonlocal generated
        body = {"model": model, "prompt": r.prompt, "max_tokens": r.max_tokens, "temperature": 0.0,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}, **extra}
        t0, first = time.perf_counter(), None
        async with client.stream("POST", "/v1/completions", json=body, headers=headers) as resp:
            if resp.status_code != 200:
                raise RuntimeError(f"{base_url}: {resp.status_code} {(await resp.aread())[:300]!r}")
            async for line in resp.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if first is None and chunk.get("choices") and chunk["choices"][0].get("text"):
                    first = time.perf_counter() - t0
                if chunk.get("usage"):
                    assert chunk["usage"]["completion_tokens"] == r.max_tokens, chunk["usage"]
                    generated += r.max_tokens
        ttfts.append(first if first is not None else time.perf_counter() - t0)

    limits = httpx.Limits(max_connections=len(reqs) + 4)
    async with httpx.AsyncClient(base_url=base_url, timeout=3600, limits=limits) as client:
        t = time.perf_counter()
        await asyncio.gather(*(one(client, r) for r in reqs))
        wall = time.perf_counter() - t
    ttfts.sort()
    return {"tokens_per_s": generated / wall, "ttft_p50_s": statistics.median(ttfts),
            "ttft_p99_s": ttfts[min(len(ttfts) - 1, round(0.99 * (len(ttfts) - 1)))]}


def new_key(gateway: str) -> str:
    """A fresh tenant's key (its own prefix-cache salt)."""
    with httpx.Client(base_url=gateway, headers={"authorization": f"Bearer {ADMIN}"}, timeout=30) as c:
        tid = c.post("/admin/tenants", json={"name": f"bench-{uuid.uuid4().hex[:8]}"}).raise_for_status().json()["id"]
        return str(c.post(f"/admin/tenants/{tid}/keys", json={}).raise_for_status().json()["key"])


def run(args: argparse.Namespace) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="fg-embedded-"))
    model = Path(args.model) if args.model else make_model(tmp / "110m", MODELS["110m"])
    vocab = json.loads((model / "config.json").read_text())["vocab_size"]
    n = args.requests or (16 if args.quick else 64)
    reqs = workload(n, vocab, *(((32, 128), (8, 48)) if args.quick else ((32, 512), (16, 256))))
    warm = workload(2, vocab, (16, 32), (4, 8))
    name = model.name
    gateway = start_gateway(str(tmp), {"FAIRGATE_EMBEDDED_ENGINE": "true", "FAIRGATE_MODEL": str(model),
                                       "FAIRGATE_SERVED_MODEL_NAME": name})
    engine = start_engine(model, None, 64, 512, None, tmp / "engine.log")  # KV pool sized as the embedded one
    passes: dict[str, list[dict[str, float]]] = {"embedded": [], "engine_server": []}
    with running(engine), contextlib.ExitStack() as stack:
        stack.callback(gateway.stop)
        for r in range(args.passes):
            for which in (("embedded", "engine_server") if r % 2 == 0 else ("engine_server", "embedded")):
                if which == "embedded":
                    key = new_key(gateway.url)
                    headers, url, extra = {"authorization": f"Bearer {key}"}, gateway.url, {}
                else:
                    headers, url, extra = {}, engine.base_url, {"cache_salt": uuid.uuid4().hex}
                asyncio.run(drive(url, name, warm, headers, extra))
                passes[which].append(asyncio.run(drive(url, name, reqs, headers, extra)))
                print(f"{which:14s} pass {r + 1}: {passes[which][-1]['tokens_per_s']:.1f} tok/s", flush=True)
    out: dict = {"requests": n, "generated_tokens": sum(q.max_tokens for q in reqs)}
    for which, got in passes.items():
        out[f"{which}_passes_tokens_per_s"] = [round(p["tokens_per_s"], 2) for p in got]
        for k in ("tokens_per_s", "ttft_p50_s", "ttft_p99_s"):
            out[f"{which}_{k}"] = round(statistics.mean(p[k] for p in got), 4)
    out["embedded_vs_engine_server"] = round(out["embedded_tokens_per_s"] / out["engine_server_tokens_per_s"], 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None, help="model folder (default: the random 110m Llama)")
    ap.add_argument("--requests", type=int, default=None, help="default 64 (16 with --quick)")
    ap.add_argument("--quick", action="store_true", help="16 short requests (smoke run)")
    ap.add_argument("--passes", type=int, default=2, help="timed passes each, alternating")
    res = run(ap.parse_args(argv))
    print(f"\n{'server':16s}{'tok/s':>10s}{'TTFT p50':>10s}{'TTFT p99':>10s}")
    for which in ("embedded", "engine_server"):
        print(f"{which:16s}{res[f'{which}_tokens_per_s']:10.1f}{res[f'{which}_ttft_p50_s']:10.3f}"
              f"{res[f'{which}_ttft_p99_s']:10.3f}")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
