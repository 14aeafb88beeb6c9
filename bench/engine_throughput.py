"""End-to-end generation throughput: transformers one-at-a-time, transformers static batches,
and the fairgate engine (continuous batching on the paged KV cache), on one mixed workload.

Workload (fixed seed): N requests, prompt lengths uniform in [32, 512], output lengths uniform
in [16, 256], ignore_eos, greedy. Models: random-weight models written with transformers into a
temp folder, fp32. `--arch llama` (default): Llamas "110m" (hidden 768, 12 layers, 12 heads,
intermediate 3072, vocab 32000) and "5m" (hidden 192, 4 layers, 6 heads, intermediate 512, vocab
8000). `--arch qwen3`: "qwen3-8l", Qwen3-0.6B's layer (hidden 1024, 16 query heads of head_dim 128
over 8 KV heads, intermediate 3072, per-head q/k norms, tied embeddings) at 8 of its 28 layers
and a 32000 vocabulary (~160M parameters: a --quick run takes a few minutes on 2 busy cores).
`--arch gemma3`: "gemma3-6l", Gemma 3 1B's layer (hidden 1152, 4 query heads of head_dim 256 over
1 KV head, intermediate 6912, GELU-tanh, four norms a layer, tied embeddings) at 6 of its 26
layers, 5 sliding (window 512, as the 1B) and 1 full, and a 32000 vocabulary: contexts up to 768
tokens, so the windowed attention is measured past its window (the roofline counts whole-context
attention in every layer, an upper bound for the sliding ones).
`--arch qwen3_moe`: "qwen3moe-8e", a small Qwen3-MoE (hidden 768, 8 layers, 12 query heads of
head_dim 64 over 4 KV heads, 8 experts of intermediate 512 with top-2 renormalised routing in every
layer, tied 32000 vocabulary: ~113M parameters, ~56M active per token); the roofline counts the
active parameters only (2 experts and the router). With `--also-max-num-seqs 1` the engine also
runs the workload one request at a time (`engine_seqs1_*`: batch 1) beside the default pass.

tokens_per_s counts generated tokens. The roofline is the same count at the machine's fp32
matmul rate (one large square matmul measured in this run, the faster of MKL's `torch.mm` and
pre-packed oneDNN; both are reported) for the workload's necessary FLOPs:
2 x block params x (prompt + generated) + 2 x lm_head params x generated + attention
(4 x layers x hidden x context per token, causal). Static batches generate to the longest
output in the batch, only each request's own tokens count.

    python bench/engine_throughput.py [--quick] [--arch llama|qwen3|gemma3|qwen3_moe] [--models 110m,5m] [--requests 64]
        [--threads N] [--also-kv-dtype float16] [--also-max-num-seqs 1] [--llama-cpp LLAMA_DIR [--llama-cpp-kv f16,f32]]
        [--vllm VLLM_VENV [--vllm-step-budgets 512,2048]] [--server-passes 2] [--no-server]
        [--gemm auto|native|onednn|torch] [--neighbours N]
Prints a table, then one JSON line (keys for the 110m model unprefixed, others prefixed).

Neighbours (issue 39, bench/neighbours.py): with `--neighbours N` the first model also runs
in-process passes with N busy Python threads beside the engine, alternating with passes alone
(`engine_neighbours_passes_tokens_per_s`, `engine_alone_passes_tokens_per_s`,
`engine_with_neighbours_vs_alone`), and every server pass (the engine server's and vLLM's alike)
runs with N busy processes on the machine.

Servers (bench/server_peers.py). For the first model, the same workload also goes through
`fairgate engine` over HTTP, driven by the shared standard-library client, so the server's own
cost is on record (`server_vs_in_process` = server tokens/s over in-process tokens/s, the latter
from an in-process pass run after each server pass, `in_process_passes_tokens_per_s`). With
`--vllm VENV`, vLLM's CPU build serves the same model folder with the same sequence limit and step
budget, and the two servers are driven alternately (A B A B, `--server-passes` each); each figure
is the mean over a server's passes. A second vLLM budget (its own default, 2048) runs the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fairgate.backends.local.engine.cores import default_omp_wait  # (no torch)

default_omp_wait()  # as `fairgate` does, before torch loads libgomp: the in-process passes run what users run

import torch  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.local.engine.async_engine import (  # noqa: E402
    AsyncEngine,
    EngineConfig,
)
from fairgate.backends.local.engine.types import SamplingParams  # noqa: E402

MODELS = {
    "110m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                 intermediate_size=3072, vocab_size=32000),
    "5m": dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=6,
               intermediate_size=512, vocab_size=8000),
    "qwen3-8l": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=8, num_attention_heads=16,
                     num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=32000,
                     tie_word_embeddings=True),
    "gemma3-6l": dict(model_type="gemma3", hidden_size=1152, num_hidden_layers=6, num_attention_heads=4,
                      num_key_value_heads=1, head_dim=256, intermediate_size=6912, vocab_size=32000,
                      tie_word_embeddings=True, sliding_window=512, query_pre_attn_scalar=256),
    "qwen3moe-8e": dict(model_type="qwen3_moe", hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                        num_key_value_heads=4, head_dim=64, intermediate_size=2048, moe_intermediate_size=512,
                        num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, vocab_size=32000,
                        tie_word_embeddings=True),
}
ARCH_MODELS = {"llama": "110m,5m", "qwen3": "qwen3-8l", "gemma3": "gemma3-6l",
               "qwen3_moe": "qwen3moe-8e"}  # --models' default for each --arch


@dataclass(slots=True)
class Req:
    prompt: list[int]
    max_tokens: int


def make_model(path: Path, spec: dict) -> Path:
    """A random Llama, Qwen3, Gemma 3 or Qwen3-MoE folder with a word-level tokenizer covering the whole vocabulary."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        AutoModelForCausalLM,
        Gemma3TextConfig,
        LlamaConfig,
        Qwen3Config,
        Qwen3MoeConfig,
    )

    spec = dict(spec)
    config_class = {"llama": LlamaConfig, "qwen3": Qwen3Config, "gemma3": Gemma3TextConfig,
                    "qwen3_moe": Qwen3MoeConfig}[spec.pop("model_type", "llama")]
    spec.setdefault("tie_word_embeddings", False)
    vocab = spec["vocab_size"]
    config = config_class(**spec, max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                          initializer_range=0.02)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(path)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "w1", "eos_token": "w2"}))
    return path


def workload(n: int, vocab: int, prompt_range: tuple[int, int], out_range: tuple[int, int]) -> list[Req]:
    rng = random.Random(1234)
    return [
        Req([rng.randrange(3, vocab) for _ in range(rng.randint(*prompt_range))], rng.randint(*out_range))
        for _ in range(n)
    ]


def workload_flops(spec: dict, reqs: list[Req]) -> float:
    h, layers, inter, vocab = spec["hidden_size"], spec["num_hidden_layers"], spec["intermediate_size"], spec["vocab_size"]
    head_dim = spec.get("head_dim") or h // spec["num_attention_heads"]  # Qwen3: not hidden / heads
    q, kv = head_dim * spec["num_attention_heads"], head_dim * spec["num_key_value_heads"]
    mlp = 3 * h * inter
    if "num_experts" in spec:  # MoE: the router and the top-k experts each token runs
        mlp = h * spec["num_experts"] + spec["num_experts_per_tok"] * 3 * h * spec["moe_intermediate_size"]
    block = layers * (h * q * 2 + h * kv * 2 + mlp)
    flops = 0.0
    for r in reqs:
        p, g = len(r.prompt), r.max_tokens
        contexts = (p * (p + 1)) // 2 + sum(range(p + 1, p + g))  # the last token is not fed back
        fed = p + g - 1
        flops += 2 * block * fed + 2 * h * vocab * g + 4 * layers * q * contexts
    return flops


def matmul_rates(n: int = 2048, reps: int = 6) -> dict[str, float]:
    """Best-of fp32 FLOP/s of a large square matmul through each GEMM library torch carries:
    `torch.mm` (MKL on x86; on AMD it takes its AVX2 path) and oneDNN with the weight pre-packed
    (what the engine's CPU linears run, kernels/layers/panel_linear.py). The best is the machine's peak."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    calls = {"mkl": lambda: torch.mm(a, b)}
    if torch.backends.mkldnn.is_available():
        packed = torch.ops.mkldnn._reorder_linear_weight(b.t().contiguous())
        calls["onednn"] = lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], "")
    rates = {}
    for name, call in calls.items():
        call()
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t)
        rates[name] = 2 * n**3 / best
    return rates


@torch.inference_mode()
def hf_sequential(model, reqs: list[Req]) -> float:
    t = time.perf_counter()
    for r in reqs:
        ids = torch.tensor([r.prompt])
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=r.max_tokens,
                             min_new_tokens=r.max_tokens, do_sample=False, pad_token_id=0)
        assert out.shape[1] == len(r.prompt) + r.max_tokens
    return time.perf_counter() - t


@torch.inference_mode()
def hf_static(model, reqs: list[Req], batch: int = 16) -> float:
    t = time.perf_counter()
    for i in range(0, len(reqs), batch):
        group = reqs[i : i + batch]
        width = max(len(r.prompt) for r in group)
        ids = torch.tensor([[0] * (width - len(r.prompt)) + r.prompt for r in group])  # left padding
        mask = torch.tensor([[0] * (width - len(r.prompt)) + [1] * len(r.prompt) for r in group])
        longest = max(r.max_tokens for r in group)
        model.generate(ids, attention_mask=mask, max_new_tokens=longest, min_new_tokens=longest,
                       do_sample=False, pad_token_id=0)
    return time.perf_counter() - t


async def engine_run(engine: AsyncEngine, reqs: list[Req]) -> tuple[float, list[float]]:
    async def one(i: int, r: Req) -> float:
        sampling = SamplingParams(max_tokens=r.max_tokens, temperature=0.0, ignore_eos=True)
        t0 = time.perf_counter()
        ttft = None
        n = 0
        async for delta in engine.add_request(f"b{i}", r.prompt, sampling):
            if ttft is None:
                ttft = time.perf_counter() - t0
            n += len(delta.token_ids)
        assert n == r.max_tokens, (n, r.max_tokens)
        return ttft or 0.0

    t = time.perf_counter()
    ttfts = await asyncio.gather(*(one(i, r) for i, r in enumerate(reqs)))
    return time.perf_counter() - t, list(ttfts)


def progress(name: str, res: dict) -> None:
    """Partial results on stderr, so a long run that is cut short still says something."""
    print(f"[{name}] " + json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}),
          file=sys.stderr, flush=True)


def run_model(name: str, args: argparse.Namespace, tmp: Path) -> dict:
    from transformers import AutoModelForCausalLM

    spec = MODELS[name]
    path = make_model(tmp / name, spec)
    n = args.requests or (16 if args.quick else 64)
    prompt_range, out_range = ((32, 128), (8, 48)) if args.quick else ((32, 512), (16, 256))
    reqs = workload(n, spec["vocab_size"], prompt_range, out_range)
    gen = sum(r.max_tokens for r in reqs)
    prompt = sum(len(r.prompt) for r in reqs)
    res: dict = {"requests": n, "prompt_tokens": prompt, "generated_tokens": gen}

    rates = matmul_rates()
    rate = max(rates.values())
    res["matmul_gflops"] = rate / 1e9
    res.update({f"matmul_gflops_{lib}": r / 1e9 for lib, r in rates.items()})
    res["roofline_tokens_per_s"] = gen / (workload_flops(spec, reqs) / rate)

    warm = workload(2, spec["vocab_size"], (16, 32), (4, 8))
    if not args.skip_hf:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        hf_sequential(model, warm)
        res["hf_sequential_tokens_per_s"] = gen / hf_sequential(model, reqs)
        progress(name, res)
        res["hf_static_tokens_per_s"] = gen / hf_static(model, reqs)
        progress(name, res)
        del model

    # KV pool: room for the whole workload at once (as a GPU would have), unless given.
    blocks = args.num_kv_blocks or sum(-(-(len(r.prompt) + r.max_tokens) // 16) for r in reqs) + 64
    runs = [("engine", "auto", args.max_num_seqs)] + [(f"engine_{d}_kv", d, args.max_num_seqs)
                                                      for d in args.also_kv_dtype.split(",") if d]
    runs += [(f"engine_seqs{s}", "auto", int(s)) for s in args.also_max_num_seqs.split(",") if s]

    def engine(kv_dtype: str = "auto", max_num_seqs: int = args.max_num_seqs) -> AsyncEngine:
        return AsyncEngine(EngineConfig(
            str(path), max_num_seqs=max_num_seqs, kv_cache_dtype=kv_dtype,
            max_num_batched_tokens=args.max_num_batched_tokens, num_kv_blocks=blocks,
            **({} if args.gemm == "auto" else {"gemm": args.gemm})))  # (auto: older trees too)

    for key, kv_dtype, seqs in runs:
        res.update(engine_figures(key, engine(kv_dtype, seqs), reqs, warm, gen))
        gc.collect()  # a closed engine sits in reference cycles: free its KV pool before the next one
        if "hf_sequential_tokens_per_s" in res:
            res[f"{key}_vs_hf_sequential"] = res[f"{key}_tokens_per_s"] / res["hf_sequential_tokens_per_s"]
            res[f"{key}_vs_hf_static"] = res[f"{key}_tokens_per_s"] / res["hf_static_tokens_per_s"]
        res[f"{key}_vs_roofline"] = res[f"{key}_tokens_per_s"] / res["roofline_tokens_per_s"]
        progress(name, res)
    if args.llama_cpp:
        from bench import llamacpp_peer

        for kv in args.llama_cpp_kv.split(","):
            rate = llamacpp_peer.run(Path(args.llama_cpp), path, reqs, warm, torch.get_num_threads(), kv_type=kv)
            res[f"llamacpp_{kv}_kv_tokens_per_s"] = rate
            res[f"engine_vs_llamacpp_{kv}_kv"] = res["engine_tokens_per_s"] / rate
            progress(name, res)
    if args.neighbours and name == args.server_model:
        res.update(neighbour_figures(lambda: engine_figures("engine", engine(), reqs, warm, gen), args.neighbours))
        progress(name, res)
    if name == args.server_model and not args.no_server:
        from bench import server_peers

        def in_process() -> float:  # one more in-process pass, right after an engine-server pass
            rate = engine_figures("engine", engine(), reqs, warm, gen)["engine_tokens_per_s"]
            gc.collect()
            return rate

        res.update(server_figures(server_peers, path, blocks, args, n, spec["vocab_size"], tmp, in_process))
        passes = res["in_process_passes_tokens_per_s"]
        res["server_vs_in_process"] = res["engine_server_tokens_per_s"] / (sum(passes) / len(passes))
        progress(name, res)
    return res


def neighbour_figures(one_pass: Callable[[], dict], n: int, pairs: int = 2) -> dict:
    """Passes alone and with `n` busy threads beside the engine, alternating (A B A B)."""
    from bench.neighbours import busy_threads

    alone: list[float] = []
    crowded: list[float] = []
    for _ in range(pairs):
        alone.append(one_pass()["engine_tokens_per_s"])
        gc.collect()
        with busy_threads(n):
            crowded.append(one_pass()["engine_tokens_per_s"])
        gc.collect()
    return {"neighbours": n, "engine_alone_passes_tokens_per_s": [round(t, 2) for t in alone],
            "engine_neighbours_passes_tokens_per_s": [round(t, 2) for t in crowded],
            "engine_with_neighbours_vs_alone": round(sum(crowded) / sum(alone), 4)}


def server_figures(peers, path: Path, blocks: int, args: argparse.Namespace, n: int, vocab: int,
                   tmp: Path, in_process: Callable[[], float]) -> dict:
    """`fairgate engine` over HTTP, alternating with vLLM at each step budget when `--vllm` is given:
    every vLLM budget gets its own A B A B block, and `engine_vs_<key>` divides the engine passes of
    that block by vLLM's, so a drift between blocks does not enter a ratio. Each engine-server pass
    is followed by an in-process pass (`in_process`, its tokens/s), so `server_vs_in_process` too
    compares passes that ran side by side (the box drifts by 10-20% within minutes)."""
    out: dict = {}
    engine_passes: list[dict] = []
    in_process_passes: list[float] = []

    def drive_engine() -> dict:
        result = peers.drive(engine, n, args.quick, vocab)
        progress("engine server", result)
        in_process_passes.append(in_process())
        return result

    from bench.neighbours import busy_processes

    engine = peers.start_engine(path, blocks, args.max_num_seqs, args.max_num_batched_tokens, args.threads,
                                tmp / "engine-server.log", () if args.gemm == "auto" else ("--gemm", args.gemm))
    with peers.running(engine), busy_processes(args.neighbours):
        budgets = [int(b) for b in args.vllm_step_budgets.split(",")] if args.vllm else []
        if not budgets:
            engine_passes = [drive_engine() for _ in range(args.server_passes)]
        for i, budget in enumerate(budgets):
            key = "vllm" if i == 0 else f"vllm_{budget}"
            vllm = peers.start_vllm(Path(args.vllm), path, args.max_num_seqs, budget, tmp / f"{key}.log")
            vllm_passes, block = [], []
            with peers.running(vllm):
                for _ in range(args.server_passes):  # A B A B
                    block.append(drive_engine())
                    vllm_passes.append(peers.drive(vllm, n, args.quick, vocab))
                    progress(key, vllm_passes[-1])
            engine_passes += block
            out.update({f"{key}_{k}": v for k, v in peers.mean_of(vllm_passes).items()})
            out[f"{key}_step_budget"] = budget
            out[f"{key}_passes_tokens_per_s"] = [p["tokens_per_s"] for p in vllm_passes]
            out[f"{key}_engine_passes_tokens_per_s"] = [p["tokens_per_s"] for p in block]
            out[f"engine_vs_{key}"] = peers.mean_of(block)["tokens_per_s"] / out[f"{key}_tokens_per_s"]
    out.update({f"engine_server_{k}": v for k, v in peers.mean_of(engine_passes).items()})
    out["engine_server_passes_tokens_per_s"] = [p["tokens_per_s"] for p in engine_passes]
    out["in_process_passes_tokens_per_s"] = [round(t, 2) for t in in_process_passes]
    return out


def engine_figures(key: str, engine: AsyncEngine, reqs: list[Req], warm: list[Req], gen: int) -> dict:
    """One timed pass of the workload through `engine` (after a warm-up), then close it."""

    async def go() -> tuple[float, list[float], float, int, float]:
        try:
            await engine_run(engine, warm)
            before = engine.stats()
            cpu0 = time.process_time()
            wall, ttfts = await engine_run(engine, reqs)
            return wall, ttfts, before.busy_seconds, before.steps, time.process_time() - cpu0
        finally:
            await engine.aclose()

    wall, ttfts, busy0, steps0, cpu = asyncio.run(go())
    stats = engine.stats()
    return {
        f"{key}_tokens_per_s": gen / wall,
        f"{key}_wall_s": wall,
        # CPU seconds of this process (all threads) over the pass: steadier than wall on a shared box
        f"{key}_cpu_s": cpu,
        f"{key}_tokens_per_cpu_s": gen / cpu,
        f"{key}_busy_fraction": (stats.busy_seconds - busy0) / wall,  # time inside runner.execute
        f"{key}_steps": stats.steps - steps0,
        f"{key}_preemptions": stats.preemptions,
        f"{key}_ttft_p50_s": sorted(ttfts)[len(ttfts) // 2],
    }


def print_servers(results: dict) -> None:
    """Through HTTP, one client: the engine server and vLLM (mean of the alternating passes)."""
    rows = [(name, key) for name, r in results.items() for key in ("engine_server", "vllm", "vllm_2048")
            if f"{key}_tokens_per_s" in r]
    if not rows:
        return
    print(f"\n{'model':6} {'server':22} {'tok/s':>7} {'TTFT p50':>9} {'TTFT p99':>9} {'ITL p50':>8} {'ITL p99':>8}"
          f"  passes")
    for name, key in rows:
        r = results[name]
        label = "fairgate engine" if key == "engine_server" else f"vLLM CPU, budget {r[f'{key}_step_budget']}"
        cells = " ".join(f"{r.get(f'{key}_{k}', float('nan')):{w}.3f}"
                         for k, w in (("ttft_p50_s", 9), ("ttft_p99_s", 9), ("itl_p50_s", 8), ("itl_p99_s", 8)))
        print(f"{name:6} {label:22} {r[f'{key}_tokens_per_s']:7.1f} {cells}  {r[f'{key}_passes_tokens_per_s']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="16 short requests (smoke run)")
    ap.add_argument("--arch", default="llama", choices=sorted(ARCH_MODELS),
                    help="the family of the default --models (qwen3: per-head q/k norms, head_dim 128;"
                         " gemma3: sliding-window layers, head_dim 256)")
    ap.add_argument("--models", default=None, help="comma list of " + ", ".join(MODELS) + " (default: --arch's)")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--max-num-seqs", type=int, default=64)
    ap.add_argument("--max-num-batched-tokens", type=int, default=512)
    ap.add_argument("--num-kv-blocks", type=int, default=None, help="default: the whole workload fits")
    ap.add_argument("--skip-hf", action="store_true", help="engine and roofline only (profiling)")
    ap.add_argument("--also-kv-dtype", default="float16",
                    help="comma list of KV-cache dtypes to run the engine with as well, after the default"
                         " (the weights' dtype); float16 is llama.cpp's default KV type. '' for none")
    ap.add_argument("--also-max-num-seqs", default="",
                    help="comma list of --max-num-seqs to run the engine with as well (1: batch 1), keyed engine_seqsN")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads for every contender (default: torch's choice); 1 is steadier "
                         "on a shared machine, where spinning thread pools lose their slices")
    ap.add_argument("--llama-cpp", default=None, metavar="DIR",
                    help="a llama.cpp source tree with a built llama-server: run it as a peer (bench/llamacpp_peer.py)")
    ap.add_argument("--llama-cpp-kv", default="f16,f32", help="its KV cache types to run (f16 is its default)")
    ap.add_argument("--vllm", default=None, metavar="VENV",
                    help="vLLM CPU venv (../shared/peers/vllm-cpu/install.sh): run it as a server peer")
    ap.add_argument("--vllm-step-budgets", default="512,2048",
                    help="vLLM --max-num-batched-tokens per run: the first should match ours, 2048 is its default")
    ap.add_argument("--server-passes", type=int, default=2, help="timed passes per server (alternating)")
    ap.add_argument("--server-model", default=None, help="model to run through the servers (default: the first)")
    ap.add_argument("--no-server", action="store_true", help="in-process figures only")
    ap.add_argument("--neighbours", type=int, default=0, metavar="N",
                    help="N busy threads beside the in-process engine (alternating with passes alone) and N busy "
                         "processes during the server passes (issue 39)")
    ap.add_argument("--gemm", default="auto", choices=["auto", "native", "onednn", "torch"],
                    help="the engine's float32 CPU linears (torch: F.linear, for an A/B against oneDNN)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    names = [m.strip() for m in (args.models or ARCH_MODELS[args.arch]).split(",") if m.strip()]
    args.server_model = args.server_model or names[0]
    results = {}
    load_start = [round(x, 2) for x in os.getloadavg()]  # the box is shared: say how busy it was
    with tempfile.TemporaryDirectory(prefix="fairgate-bench-") as tmp:
        for name in names:
            results[name] = run_model(name, args, Path(tmp))

    print(f"{'model':6} {'engine':16} {'gen tok':>8} {'hf seq':>8} {'hf static':>9} {'engine':>8} {'roofline':>8}"
          f" {'vs seq':>7} {'vs static':>9} {'vs roof':>8} {'busy':>5}")
    for name, r in results.items():
        def cell(key: str, width: int, digits: int = 1, r: dict = r) -> str:
            return f"{r[key]:{width}.{digits}f}" if key in r else f"{'-':>{width}}"

        for key in [k[: -len("_tokens_per_s")] for k in r if k.startswith("engine") and k.endswith("_tokens_per_s")
                    and not k.startswith("engine_server") and isinstance(r[k], float)]:
            label = ("KV " + (key.split("_")[1] if key != "engine" else "= weights")) if "seqs" not in key else (
                f"max seqs {key.removeprefix('engine_seqs')}")
            print(f"{name:6} {label:16} {r['generated_tokens']:8d} {cell('hf_sequential_tokens_per_s', 8)}"
                  f" {cell('hf_static_tokens_per_s', 9)} {cell(f'{key}_tokens_per_s', 8)}"
                  f" {cell('roofline_tokens_per_s', 8)} {cell(f'{key}_vs_hf_sequential', 7, 2)}"
                  f" {cell(f'{key}_vs_hf_static', 9, 2)} {cell(f'{key}_vs_roofline', 8, 2)}"
                  f" {cell(f'{key}_busy_fraction', 5, 2)}")
        for key in [k for k in r if k.startswith("llamacpp_") and k.endswith("_tokens_per_s")]:
            rate, label = r[key], "llama.cpp KV " + key.split("_")[1]
            ratios = [rate / r[k] if k in r else float("nan")
                      for k in ("hf_sequential_tokens_per_s", "hf_static_tokens_per_s", "roofline_tokens_per_s")]
            print(f"{name:6} {label:16} {r['generated_tokens']:8d} {cell('hf_sequential_tokens_per_s', 8)}"
                  f" {cell('hf_static_tokens_per_s', 9)} {rate:8.1f} {cell('roofline_tokens_per_s', 8)}"
                  f" {ratios[0]:7.2f} {ratios[1]:9.2f} {ratios[2]:8.2f} {'-':>5}")
        if "engine_with_neighbours_vs_alone" in r:
            print(f"{name:6} with {r['neighbours']} busy thread(s): {r['engine_neighbours_passes_tokens_per_s']} tok/s "
                  f"vs alone {r['engine_alone_passes_tokens_per_s']}: {r['engine_with_neighbours_vs_alone']:.2f}x")
    print("(tokens/s = generated tokens per second; busy = share of engine wall time inside the forward pass)")
    for name, r in results.items():
        libs = ", ".join(f"{k[len('matmul_gflops_'):]} {v:.0f}" for k, v in r.items() if k.startswith("matmul_gflops_"))
        print(f"({name} roofline at {r['matmul_gflops']:.0f} fp32 GFLOP/s, the best of: {libs})")
    print_servers(results)
    flat: dict = {}
    main_name = "110m" if "110m" in results else names[0]
    for name, r in results.items():
        prefix = "" if name == main_name else f"{name}_"
        flat.update({f"{prefix}{k}": round(v, 4) if isinstance(v, float) else v for k, v in r.items()})
    flat["model"] = main_name
    flat["torch_threads"] = torch.get_num_threads()
    flat["quick"] = args.quick
    flat["load_average_start"] = load_start
    flat["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(flat))


if __name__ == "__main__":
    main()
