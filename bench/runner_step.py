"""Model-runner step time on CPU for a ~110M-parameter Llama (fp32).

Cases: 48 decodes (contexts 32..512) + one 256-token prefill chunk, 64 decodes alone, and the
prefill chunk alone. Reports step time, tokens/s, the model's matmul GFLOP/s in the step, and
the machine's fp32 matmul roofline (a large square matmul). Last line: JSON.

    python bench/runner_step.py [--steps 5] [--model-dir /tmp/fairgate-bench-llama110m]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from backends.local.runner import ModelRunner  # noqa: E402
from backends.local.types import RunnerInput, SamplingParams  # noqa: E402

LLAMA_110M = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                  intermediate_size=3072, vocab_size=32000, max_position_embeddings=2048,
                  initializer_range=0.02)


def ensure_model(path: Path) -> Path:
    if not (path / "config.json").is_file():
        from tests.helpers.tiny_models import make_tiny_model

        make_tiny_model(path, "llama", **LLAMA_110M)
    return path


def matmul_roofline(n: int = 2048, reps: int = 5) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    t = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b)
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def linear_flops(runner: ModelRunner, tokens: int, sampled: int) -> float:
    """FLOPs of every weight matmul in one step (attention score/value products excluded)."""
    per_token = sum(
        p.numel() for n, p in runner.model.named_parameters() if n.endswith(".weight") and "layers" in n and p.dim() == 2
    )
    return 2.0 * (per_token * tokens + runner.model.lm_head.weight.numel() * sampled)


def make_case(runner: ModelRunner, decodes: int, prefill: int, seed: int = 0) -> list[RunnerInput]:
    rng = random.Random(seed)
    bs, free = runner.block_size, list(range(runner.num_kv_blocks))
    rng.shuffle(free)
    greedy = SamplingParams(temperature=0.0)
    inputs = []
    for i in range(decodes):
        ctx = rng.randint(32, 512)
        table = [free.pop() for _ in range((ctx + bs - 1) // bs)]
        inputs.append(RunnerInput(f"d{i}", [rng.randrange(32000)], ctx - 1, table, True, greedy, 1))
    if prefill:
        table = [free.pop() for _ in range((prefill + bs - 1) // bs)]
        ids = [rng.randrange(32000) for _ in range(prefill)]
        inputs.append(RunnerInput("p", ids, 0, table, True, greedy))
    return inputs


def time_step(runner: ModelRunner, inputs: list[RunnerInput], steps: int) -> float:
    runner.execute(inputs)  # warm-up
    t = time.perf_counter()
    for _ in range(steps):
        runner.execute(inputs)
    return (time.perf_counter() - t) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/fairgate-bench-llama110m"))
    args = ap.parse_args()
    runner = ModelRunner(ensure_model(args.model_dir), num_kv_blocks=2048)
    torch.nn.init.normal_(runner.kv_cache)  # realistic values; zeros could hit fast paths
    peak = matmul_roofline()
    rows, result = [], {"threads": torch.get_num_threads(), "matmul_roofline_gflops": round(peak, 1)}
    for name, dec, pre in [("48 decode + 256 prefill", 48, 256), ("64 decode", 64, 0), ("256 prefill", 0, 256)]:
        inputs = make_case(runner, dec, pre)
        step = time_step(runner, inputs, args.steps)
        tokens, sampled = dec + pre, dec + (1 if pre else 0)
        gflops = linear_flops(runner, tokens, sampled) / step / 1e9
        rows.append((name, step * 1e3, tokens / step, gflops, gflops / peak))
        key = name.replace(" + ", "_").replace(" ", "_")
        result[key] = {"step_ms": round(step * 1e3, 1), "tokens_per_s": round(tokens / step, 1),
                       "matmul_gflops": round(gflops, 1), "roofline_frac": round(gflops / peak, 3)}
    print(f"fp32 matmul roofline (2048^3 mm, {torch.get_num_threads()} threads): {peak:.1f} GFLOP/s")
    print(f"{'case':<26}{'step ms':>10}{'tok/s':>10}{'GFLOP/s':>10}{'of peak':>9}")
    for name, ms, tps, gf, frac in rows:
        print(f"{name:<26}{ms:>10.1f}{tps:>10.1f}{gf:>10.1f}{frac:>9.0%}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
