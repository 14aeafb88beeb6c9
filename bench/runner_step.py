"""Model-runner step time on CPU for a ~110M-parameter Llama (fp32).

Cases: 48 decodes (prompt 32..512 + 1..128 generated tokens) + one 256-token prefill chunk,
64 decodes alone, and the prefill chunk alone. Reports step time, tokens/s, the model's matmul GFLOP/s in the step, and
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

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

from fairgate.backends.local.engine.types import RunnerInput, SamplingParams  # noqa: E402
from fairgate.backends.local.model.runner import ModelRunner  # noqa: E402

LLAMA_110M = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                  intermediate_size=3072, vocab_size=32000, max_position_embeddings=2048,
                  initializer_range=0.02)


def ensure_model(path: Path) -> Path:
    if not (path / "config.json").is_file():
        from tests.helpers.tiny_models import make_tiny_model

        make_tiny_model(path, "llama", **LLAMA_110M)
    return path


def matmul_roofline(n: int = 2048, reps: int = 5) -> tuple[float, float]:
    """GFLOP/s of a large square fp32 matmul: (by wall time, by process CPU time per thread)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    t, c = time.perf_counter(), time.process_time()
    for _ in range(reps):
        torch.mm(a, b)
    flops = 2 * n**3 * reps
    return flops / (time.perf_counter() - t) / 1e9, flops / ((time.process_time() - c) / torch.get_num_threads()) / 1e9


def linear_flops(runner: ModelRunner, tokens: int, sampled: int) -> float:
    """FLOPs of every weight matmul in one step (attention score/value products excluded)."""
    def size(m: torch.nn.Module) -> int:  # packed linears keep no `weight`, so count by shape
        return m.in_features * m.out_features

    per_token = sum(size(m) for n, m in runner.model.named_modules()
                    if "layers" in n and hasattr(m, "in_features") and hasattr(m, "out_features"))
    return 2.0 * (per_token * tokens + size(runner.model.lm_head) * sampled)


def make_case(runner: ModelRunner, decodes: int, prefill: int, seed: int = 0) -> list[RunnerInput]:
    """Decodes with a prompt of 32..512 tokens in consecutive blocks (allocated in one go, as the
    block manager does) plus 0..128 generated tokens in scattered blocks (allocated one by one
    between other sequences); the prefill chunk's blocks are consecutive."""
    rng = random.Random(seed)
    bs = runner.block_size
    scattered = list(range(runner.num_kv_blocks // 2, runner.num_kv_blocks))
    rng.shuffle(scattered)
    next_block = 0

    def consecutive(count: int) -> list[int]:
        nonlocal next_block
        next_block += count
        return list(range(next_block - count, next_block))

    greedy = SamplingParams(temperature=0.0)
    inputs = []
    for i in range(decodes):
        prompt, generated = rng.randint(32, 512), rng.randint(1, 128)
        table = consecutive(prompt // bs)
        table += [scattered.pop() for _ in range((prompt + generated + bs - 1) // bs - len(table))]
        ctx = prompt + generated
        inputs.append(RunnerInput(f"d{i}", [rng.randrange(32000)], ctx - 1, table, True, greedy, generated))
    if prefill:
        ids = [rng.randrange(32000) for _ in range(prefill)]
        inputs.append(RunnerInput("p", ids, 0, consecutive((prefill + bs - 1) // bs), True, greedy))
    return inputs


def time_step(runner: ModelRunner, inputs: list[RunnerInput], steps: int) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) per step. CPU time shows what the step costs when
    other processes share the cores; with one thread it is the uncontended step time."""
    runner.execute(inputs)  # warm-up
    t, c = time.perf_counter(), time.process_time()
    for _ in range(steps):
        runner.execute(inputs)
    return (time.perf_counter() - t) / steps, (time.process_time() - c) / steps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/fairgate-bench-llama110m"))
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--kv-cache-dtype", default=None, help="e.g. bfloat16 (default: model dtype)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    runner = ModelRunner(ensure_model(args.model_dir), num_kv_blocks=2048, kv_cache_dtype=args.kv_cache_dtype)
    torch.nn.init.normal_(runner.kv_cache)  # realistic values; zeros could hit fast paths
    peak, peak_cpu = matmul_roofline()
    threads = torch.get_num_threads()
    rows, result = [], {"threads": threads, "kv_cache_dtype": str(runner.kv_cache_dtype),
                        "matmul_roofline_gflops": round(peak, 1),
                        "matmul_roofline_gflops_cpu_time": round(peak_cpu, 1)}
    for name, dec, pre in [("48 decode + 256 prefill", 48, 256), ("64 decode", 64, 0), ("256 prefill", 0, 256)]:
        inputs = make_case(runner, dec, pre)
        step, cpu = time_step(runner, inputs, args.steps)
        tokens, sampled = dec + pre, dec + (1 if pre else 0)
        gflops = linear_flops(runner, tokens, sampled) / step / 1e9
        # The same ratio on CPU time: what the step reaches when nothing else shares the cores.
        frac_cpu = linear_flops(runner, tokens, sampled) / (cpu / threads) / 1e9 / peak_cpu
        rows.append((name, step * 1e3, cpu * 1e3, tokens / step, gflops, gflops / peak, frac_cpu))
        key = name.replace(" + ", "_").replace(" ", "_")
        result[key] = {"step_ms": round(step * 1e3, 1), "cpu_ms": round(cpu * 1e3, 1),
                       "tokens_per_s": round(tokens / step, 1),
                       "matmul_gflops": round(gflops, 1), "roofline_frac": round(gflops / peak, 3),
                       "roofline_frac_cpu_time": round(frac_cpu, 3)}
    print(f"fp32 matmul roofline (2048^3 mm, {threads} threads): {peak:.1f} GFLOP/s wall, "
          f"{peak_cpu:.1f} GFLOP/s per thread by CPU time")
    print(f"{'case':<26}{'step ms':>10}{'cpu ms':>10}{'tok/s':>10}{'GFLOP/s':>10}{'of peak':>9}{'(cpu)':>7}")
    for name, ms, cpu_ms, tps, gf, frac, frac_cpu in rows:
        print(f"{name:<26}{ms:>10.1f}{cpu_ms:>10.1f}{tps:>10.1f}{gf:>10.1f}{frac:>9.0%}{frac_cpu:>7.0%}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
