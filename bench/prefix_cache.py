"""Prefix caching: time to first token with a shared 1,024-token system prompt, cache off vs on.

Workload (fixed seed): 64 requests = one 1,024-token system prompt (token ids) + a distinct
32-token question each, greedy, max_tokens 8, ignore_eos. Model: a random-weight Llama (~27M
params: hidden 512, 6 layers, 8 heads, intermediate 1376, vocab 8000, fp32) written with
transformers into a temp folder, big enough that prefill dominates a request.

Both runs happen in this process, one engine each, same config but `enable_prefix_caching`:
- cold: cache off, every request prefills all 1,056 tokens;
- warm: cache on, and one priming request (same system prompt, another question, not
  measured) has cached the system prompt before the 64 measured requests, so each of them
  finds its first 1,024 tokens cached and prefills only its question.
Requests go `--concurrency` at a time (default 1: TTFT is then the prefill latency itself,
not queueing). TTFT is measured in the caller's event loop, from `add_request` to the first
delta. Hit rate = prefix-cache hits / queries in tokens over the measured warm requests (the
block manager's counters). Greedy outputs of both runs are compared token by token.

    python bench/prefix_cache.py [--requests 64] [--concurrency 1] [--quick]
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.local.engine.async_engine import AsyncEngine, EngineConfig  # noqa: E402
from fairgate.backends.local.engine.types import SamplingParams  # noqa: E402

SPEC = dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=8,
            intermediate_size=1376, vocab_size=8000)
QUICK_SPEC = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                  intermediate_size=688, vocab_size=4000)


def make_model(path: Path, spec: dict) -> int:
    """A random Llama folder with a word-level tokenizer over the whole vocabulary; returns params."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, LlamaConfig

    vocab = spec["vocab_size"]
    config = LlamaConfig(**spec, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False, initializer_range=0.02)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "w1", "eos_token": "w2"}))
    return sum(p.numel() for p in model.parameters())


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


async def run(engine: AsyncEngine, prompts: list[list[int]], max_tokens: int, concurrency: int,
              tag: str) -> tuple[float, list[float], list[list[int]], int, int]:
    """Wall time, TTFTs, outputs, prompt tokens and cached tokens (from usage)."""
    sampling = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
    gate = asyncio.Semaphore(concurrency)
    cached = 0

    async def one(i: int, prompt: list[int]) -> tuple[float, list[int]]:
        nonlocal cached
        async with gate:
            t0 = time.perf_counter()
            ttft = None
            tokens: list[int] = []
            async with engine.add_request(f"{tag}-{i}", prompt, sampling, tenant="bench") as stream:
                async for delta in stream:
                    if ttft is None and delta.token_ids:
                        ttft = time.perf_counter() - t0
                    tokens += delta.token_ids
                    if delta.finished:
                        cached += delta.usage.cached_tokens
            assert len(tokens) == max_tokens and ttft is not None
            return ttft, tokens

    t = time.perf_counter()
    results = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    wall = time.perf_counter() - t
    return wall, [r[0] for r in results], [r[1] for r in results], sum(map(len, prompts)), cached


def measure(path: Path, cache: bool, prompts: list[list[int]], prime: list[int], args: argparse.Namespace) -> dict:
    blocks = (len(prompts[0]) // 16 + 2) * (args.concurrency + 2) + 16
    engine = AsyncEngine(EngineConfig(str(path), enable_prefix_caching=cache, num_kv_blocks=blocks))
    rng = random.Random(99)
    warmup = [[rng.randrange(3, 1000) for _ in range(64)]]  # first forward passes are slower

    async def go() -> dict:
        try:
            await run(engine, warmup, 2, 1, "warmup")
            if cache:
                await run(engine, [prime], args.max_tokens, 1, "prime")
            bm = engine.block_manager
            q0, h0, steps0 = bm.prefix_cache_queries, bm.prefix_cache_hits, engine.stats().steps
            wall, ttfts, outs, prompt_tokens, cached = await run(
                engine, prompts, args.max_tokens, args.concurrency, "m")
            queries, hits = bm.prefix_cache_queries - q0, bm.prefix_cache_hits - h0
            return {
                "wall_s": wall, "ttfts": ttfts, "outputs": outs,
                "hit_rate": hits / queries if queries else 0.0,
                "usage_cached_fraction": cached / prompt_tokens,
                "steps": engine.stats().steps - steps0,
            }
        finally:
            await engine.aclose()

    return asyncio.run(go())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--system-tokens", type=int, default=1024)
    ap.add_argument("--question-tokens", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="smaller model, 16 requests (a smoke run)")
    args = ap.parse_args()
    spec = QUICK_SPEC if args.quick else SPEC
    n = 16 if args.quick and args.requests == 64 else args.requests

    rng = random.Random(1234)
    vocab = spec["vocab_size"]
    system = [rng.randrange(3, vocab) for _ in range(args.system_tokens)]
    questions = [[rng.randrange(3, vocab) for _ in range(args.question_tokens)] for _ in range(n + 1)]
    prompts = [system + q for q in questions[:n]]
    prime = system + questions[n]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "llama"
        params = make_model(path, spec)
        cold = measure(path, False, prompts, prime, args)
        warm = measure(path, True, prompts, prime, args)

    rows = []
    for name, r in (("cold (cache off)", cold), ("warm (cache on)", warm)):
        rows.append((name, statistics.median(r["ttfts"]), percentile(r["ttfts"], 99), n / r["wall_s"],
                     n * args.max_tokens / r["wall_s"], r["hit_rate"]))
    print(f"model: random Llama, {params / 1e6:.1f}M params, fp32, CPU ({torch.get_num_threads()} threads); "
          f"{n} requests = {args.system_tokens}-token system prompt + {args.question_tokens}-token question, "
          f"max_tokens {args.max_tokens}, concurrency {args.concurrency}")
    print(f"{'run':<18}{'ttft p50 s':>12}{'ttft p99 s':>12}{'req/s':>9}{'gen tok/s':>11}{'hit rate':>10}")
    for name, p50, p99, rps, tps, hit in rows:
        print(f"{name:<18}{p50:>12.4f}{p99:>12.4f}{rps:>9.2f}{tps:>11.1f}{hit:>10.3f}")
    identical = cold["outputs"] == warm["outputs"]
    print(f"greedy outputs identical cold vs warm: {identical}")
    result = {
        "model_params_m": round(params / 1e6, 1),
        "requests": n,
        "system_tokens": args.system_tokens,
        "question_tokens": args.question_tokens,
        "max_tokens": args.max_tokens,
        "concurrency": args.concurrency,
        "ttft_p50_cold_s": rows[0][1],
        "ttft_p50_warm_s": rows[1][1],
        "ttft_p50_speedup": rows[0][1] / rows[1][1],
        "ttft_p99_cold_s": rows[0][2],
        "ttft_p99_warm_s": rows[1][2],
        "throughput_cold_rps": rows[0][3],
        "throughput_warm_rps": rows[1][3],
        "throughput_speedup": rows[1][3] / rows[0][3],
        "hit_rate": warm["hit_rate"],
        "hit_rate_cold": cold["hit_rate"],
        "usage_cached_fraction_warm": warm["usage_cached_fraction"],
        "outputs_identical": identical,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
