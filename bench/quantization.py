"""Weight and KV-cache quantization on the CPU, on the ~110M-parameter random Llama
(hidden 768, 12 layers, intermediate 3072, vocab 32000; bench/runner_step.py's model).

1. Decode-heavy tokens/s at batch 1, 16 and 64 for fp32, int8, int8-a8 (int8 weights and
   per-row int8 activations, integer dot products: kernels/ops/quant_a8.py) and int4-g64 weights: every
   batch prefills a 64-token prompt per sequence, then decodes; only the decode steps are
   timed. All three runners stay loaded and take turns round after round. The machine this
   runs on is shared by several jobs, so steps are timed by the process's CPU time per thread
   (what a step costs when it has the cores; `--wall` for wall time on a quiet machine), and
   tokens/s come from each configuration's fastest step; the mean over all its steps is in
   the JSON too, under "rounds".
2. A fixed KV budget (`--kv-budget-mib`) with long contexts (`--context` tokens each): how many
   sequences fit at once for fp32, int8 and 4-bit KV, and their decode tokens/s (fp32 weights).
   The contexts' KV is filled with random rows (codes and scales for the quantized pools)
   instead of being prefilled: attention's cost does not depend on the values.
3. With `--vllm VENV` (and/or `--llama-cpp DIR`, or `--peers`): `fairgate engine` int8 and
   int8-a8 against vLLM's CPU build and llama.cpp over HTTP at the same batches (bench/quant_peers.py).
Weight bytes are measured from the loaded modules; KV bytes per token from the pool's layout.

    python bench/quantization.py [--rounds 3] [--steps 8] [--kv-budget-mib 384] [--context 1024]
        [--vllm ~/.cache/fairgate-peers/vllm-cpu-venv] [--llama-cpp LLAMA_DIR] [--skip-kv]

Prints tables, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from bench import quant_peers  # noqa: E402
from bench.runner_step import ensure_model  # noqa: E402
from fairgate.backends.local.engine.types import (  # noqa: E402
    RunnerInput,
    SamplingParams,
)
from fairgate.backends.local.model.runner import ModelRunner  # noqa: E402
from fairgate.kernels.layers.quant_linear import QuantLinear  # noqa: E402

WEIGHTS = ("fp32", "int8", "int8-a8", "int4-g64")
KV_FORMATS = ("float32", "int8", "int4")
BATCHES = (1, 16, 64)
PROMPT = 64
GREEDY = SamplingParams(temperature=0.0)


def linear_bytes(runner: ModelRunner) -> int:
    """Bytes of the decoder linears' weights (what quantization changes)."""
    total = 0
    for m in runner.model.modules():
        if isinstance(m, QuantLinear):
            total += m.weight_bytes()
        elif hasattr(m, "packed") and hasattr(m, "in_features") and m is not runner.model.lm_head:
            total += m.in_features * m.out_features * 4
        elif isinstance(m, torch.nn.Linear) and m is not runner.model.lm_head:
            total += m.weight.numel() * m.weight.element_size()
    return total


class DecodeBatch:
    """B sequences on one runner: prefilled once, then decoded step by step."""

    def __init__(self, runner: ModelRunner, batch: int, blocks_per_seq: int, wall: bool) -> None:
        self.runner = runner
        self.wall = wall
        self.tables = [list(range(i * blocks_per_seq, (i + 1) * blocks_per_seq)) for i in range(batch)]
        self.pos = [0] * batch
        self.last = [0] * batch
        self.generated = 0

    def prefill(self, prompt_len: int) -> None:
        for i0 in range(0, len(self.tables), 8):  # 8 prompts a pass keeps the step small
            rows = range(i0, min(i0 + 8, len(self.tables)))
            inputs = [RunnerInput(f"s{i}", [3 + (i * 7 + j) % 997 for j in range(prompt_len)], 0,
                                  self.tables[i], True, GREEDY) for i in rows]
            for i, tok in zip(rows, self.runner.execute(inputs), strict=True):
                self.last[i], self.pos[i] = tok, prompt_len

    def decode(self, steps: int) -> list[float]:
        """Seconds of each of `steps` decode steps of the whole batch (process CPU time per
        thread, or wall time with --wall: see the module doc)."""
        times = []
        for _ in range(steps):
            self.generated += 1
            inputs = [RunnerInput(f"s{i}", [self.last[i]], self.pos[i], t, True, GREEDY, self.generated)
                      for i, t in enumerate(self.tables)]
            clock = time.perf_counter if self.wall else time.process_time
            start = clock()
            toks = self.runner.execute(inputs)
            times.append((clock() - start) / (1 if self.wall else torch.get_num_threads()))
            for i, tok in enumerate(toks):
                self.last[i], self.pos[i] = tok, self.pos[i] + 1
        return times


def weights_part(model: Path, args: argparse.Namespace) -> dict:
    blocks_per_seq = -(-(PROMPT + args.rounds * args.steps + 1) // 16)
    runners = {w: ModelRunner(model, quantization=None if w == "fp32" else w, seed=0,
                              num_kv_blocks=max(BATCHES) * blocks_per_seq) for w in WEIGHTS}
    out: dict = {"weight_bytes": {w: r.weight_bytes for w, r in runners.items()},
                 "linear_weight_bytes": {w: linear_bytes(r) for w, r in runners.items()},
                 "tokens_per_s": {}, "rounds": {}}
    for bs in BATCHES:
        batches = {w: DecodeBatch(r, bs, blocks_per_seq, args.wall) for w, r in runners.items()}
        for b in batches.values():
            b.prefill(PROMPT)
            b.decode(1)  # warm-up step
        seen: dict[str, list[float]] = {w: [] for w in WEIGHTS}
        for _ in range(args.rounds):
            for w, b in batches.items():
                seen[w].extend(b.decode(args.steps))
        for w in WEIGHTS:
            out["tokens_per_s"][f"{w}_bs{bs}"] = round(bs / min(seen[w]), 2)
            out["rounds"][f"{w}_bs{bs}"] = round(bs * len(seen[w]) / sum(seen[w]), 2)  # mean over all steps
        print(f"  batch {bs}: " + ", ".join(f"{w} {bs / min(seen[w]):.1f} tok/s (mean {bs * len(seen[w]) / sum(seen[w]):.1f})"
                                             for w in WEIGHTS), flush=True)
    del runners
    return out


def fill_random(runner: ModelRunner, gen: torch.Generator) -> None:
    """Random rows in the whole pool: float values, or codes with plausible scales."""
    cache = runner.kv_cache
    if cache.dtype.is_floating_point:
        cache.copy_(torch.randn(cache.shape, generator=gen).to(cache.dtype))
        return
    lo, hi = (-127, 128) if cache.dtype == torch.int8 else (0, 256)
    cache.copy_(torch.randint(lo, hi, cache.shape, generator=gen, dtype=torch.int16).to(cache.dtype))
    scales = runner.kv_scales
    scales.copy_((torch.rand(scales.shape, generator=gen) * 0.02 + 0.005).to(scales.dtype))


def kv_part(model: Path, args: argparse.Namespace) -> dict:
    budget = args.kv_budget_mib * 2**20
    out: dict = {"budget_mib": args.kv_budget_mib, "context": args.context, "formats": {}}
    gen = torch.Generator().manual_seed(0)
    fp16 = ModelRunner(model, num_kv_blocks=1, kv_cache_dtype="float16")
    fp16_token_bytes = fp16.kv_block_bytes / fp16.block_size
    del fp16
    for fmt in KV_FORMATS:
        runner = ModelRunner(model, kv_cache_memory=budget, kv_cache_dtype=fmt, seed=0)
        fill_random(runner, gen)
        per_seq = -(-(args.context + args.rounds * args.steps + 2) // runner.block_size)
        seqs = runner.num_kv_blocks // per_seq
        batch = DecodeBatch(runner, seqs, per_seq, args.wall)
        batch.pos = [args.context] * seqs
        batch.last = [5] * seqs
        batch.decode(1)
        steps = [t for _ in range(args.rounds) for t in batch.decode(args.steps)]
        rates = [seqs / min(steps), seqs * len(steps) / sum(steps)]  # best step, mean
        token_bytes = runner.kv_block_bytes / runner.block_size
        out["formats"][fmt] = {
            "bytes_per_token": token_bytes, "sequences": seqs, "tokens_per_s": round(rates[0], 2),
            "tokens_per_s_mean": round(rates[1], 2),
            "tokens_per_gib_vs_fp16": round(fp16_token_bytes / token_bytes, 3),
        }
        print(f"  KV {fmt}: {token_bytes:.0f} B/token, {seqs} sequences of {args.context} tokens,"
              f" {rates[0]:.1f} tok/s (mean {rates[1]:.1f})", flush=True)
        del runner, batch
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/fairgate-bench-llama110m"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--kv-budget-mib", type=int, default=384)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--wall", action="store_true", help="time steps by wall clock (quiet machines)")
    quant_peers.add_arguments(ap)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = ensure_model(args.model_dir)
    print(f"weights (threads {torch.get_num_threads()}, {args.rounds} rounds x {args.steps} decode steps,"
          f" {'wall' if args.wall else 'CPU'} time):", flush=True)
    w = weights_part(model, args)
    peers = None
    if args.vllm or args.llama_cpp or args.peers:
        print("servers (wall time):", flush=True)
        with tempfile.TemporaryDirectory(prefix="fairgate-quant-peers-") as tmp:
            peers = quant_peers.peers_part(model, args, Path(tmp), torch.get_num_threads())
    kv = None
    if not args.skip_kv:
        print("KV cache:", flush=True)
        kv = kv_part(model, args)
    print_tables(w, kv, peers)
    print(json.dumps(summary(w, kv, peers, args)))


def print_tables(w: dict, kv: dict | None, peers: dict | None) -> None:
    tps = w["tokens_per_s"]
    print(f"\n{'weights':<10}{'bytes (all)':>14}{'linears':>12}{'x fp32':>8}" + "".join(f"{'bs' + str(b):>10}" for b in BATCHES))
    for name in WEIGHTS:
        lin = w["linear_weight_bytes"][name]
        print(f"{name:<10}{w['weight_bytes'][name] / 2**20:>12.1f}Mi{lin / 2**20:>10.1f}Mi"
              f"{lin / w['linear_weight_bytes']['fp32']:>8.3f}" + "".join(f"{tps[f'{name}_bs{b}']:>10.1f}" for b in BATCHES))
    if peers is not None:
        rates = peers["tokens_per_s"]
        print(f"\n{'server':<16}" + "".join(f"{'bs' + str(b):>10}" for b in BATCHES) + "   (wall tok/s)")
        for name in sorted({k.rsplit("_bs", 1)[0] for k in rates}):
            print(f"{name:<16}" + "".join(f"{rates.get(f'{name}_bs{b}', float('nan')):>10.1f}" for b in BATCHES))
        print(f"llama.cpp: {peers['llama_cpp']}")
    if kv is not None:
        print(f"\n{'KV':<10}{'B/token':>10}{'vs fp16':>9}{'seqs':>6}{'tok/s':>9}")
        for fmt, r in kv["formats"].items():
            print(f"{fmt:<10}{r['bytes_per_token']:>10.0f}{r['tokens_per_gib_vs_fp16']:>9.3f}{r['sequences']:>6}"
                  f"{r['tokens_per_s']:>9.1f}")


SHORT = {"int8": "int8", "int8-a8": "int8a8", "int4-g64": "int4"}  # JSON key stems


def summary(w: dict, kv: dict | None, peers: dict | None, args: argparse.Namespace) -> dict:
    """The last-line JSON: ratios first, then the raw figures."""
    tps, lin = w["tokens_per_s"], w["linear_weight_bytes"]
    out = {f"{SHORT[n]}_vs_fp32_bs{bs}": round(tps[f"{n}_bs{bs}"] / tps[f"fp32_bs{bs}"], 3)
           for n in WEIGHTS[1:] for bs in BATCHES}
    out.update({f"{SHORT[n]}_linear_bytes_vs_fp32": round(lin[n] / lin["fp32"], 4) for n in WEIGHTS[1:]})
    if peers is not None:
        out.update(quant_peers.peer_summary(peers))
    if kv is not None:
        fmts = kv["formats"]
        for fmt, short in (("int8", "int8"), ("int4", "4bit")):
            out[f"kv_{short}_tokens_per_gib_vs_fp16"] = fmts[fmt]["tokens_per_gib_vs_fp16"]
            base = fmts["float32"]
            out[f"kv_{short}_sequences_vs_fp32"] = round(fmts[fmt]["sequences"] / max(1, base["sequences"]), 3)
            out[f"kv_{short}_tokens_per_s_vs_fp32"] = round(fmts[fmt]["tokens_per_s"] / base["tokens_per_s"], 3)
    out.update({"threads": torch.get_num_threads(), "clock": "wall" if args.wall else "cpu per thread",
                "weights": w, "kv": kv, "peers": peers})
    return out


if __name__ == "__main__":
    main()
