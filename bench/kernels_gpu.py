"""GPU check and benchmark of the Triton kernels (issue 7). Needs CUDA; finishes in < 5 minutes.

    python bench/kernels_gpu.py [--skip-engine] [--budget-s 270]

1. correctness: every Triton kernel against its torch reference (fp32/fp16/bf16, GQA 1/4/8,
   block sizes 16/32, contexts ending mid-block) at small-but-real sizes;
2. the device's copy bandwidth (torch copy_, read + write), the yardstick for the rest;
3. decode attention at a Llama-3-8B head layout (32 q heads, 8 KV heads, head_dim 128, bf16,
   block 16), batch 64, context 1k-8k: median time (triton.testing.do_bench), achieved
   bandwidth and its fraction of the copy bandwidth (target: >= 70% at batch 64, context 4k),
   plus a small sweep of tile/warps/splits at 4k and the torch reference for comparison;
4. prefill (chunked, 2k new tokens after a 2k prefix) TFLOP/s and write_kv bandwidth;
5. engine decode throughput (ModelRunner, random 2-layer model with the 8B attention layout,
   batch 64, 1k prompts) with FAIRGATE_KERNELS=triton vs reference, and whether greedy tokens match.
Prints tables as it goes; the last line is one JSON object with every number.
Exit status: 0 if all checks pass, 1 if a check fails, 2 without CUDA/triton.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # last: its kernels/ would shadow HF's (tests/conftest.py)

import torch  # noqa: E402

HEADS, KV_HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16  # Llama-3-8B attention layout
TARGET_FRACTION = 0.70
# correctness shapes: contexts ending mid-block and past several splits; prefill prompts and chunks
CHECK_DECODE_LENS = [1, 37, 1000, 2053, 4099]
CHECK_PREFILL = ([1, 300, 64, 517], [1, 300, 1000, 2053])  # (new tokens, context incl. them)


def _fail_without_cuda() -> None:
    why = None
    if not torch.cuda.is_available():
        why = "no CUDA device: this benchmark runs only on a GPU machine"
    else:
        try:
            import triton  # noqa: F401
        except ImportError as exc:
            why = f"triton is not importable: {exc}"
    if why:
        print(f"kernels_gpu: {why}", file=sys.stderr)
        print(json.dumps({"ok": False, "error": why}))
        sys.exit(2)


def _bench_ms(fn) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=50, return_mode="median"))


def copy_bandwidth(device: torch.device) -> float:
    """Bytes/s of a 1 GiB device-to-device copy, counting the read and the write."""
    src = torch.empty(2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = _bench_ms(lambda: dst.copy_(src))
    return 2 * 2**30 / (ms * 1e-3)


def check_kernels(device: torch.device) -> list[dict]:
    """Triton vs reference on the GPU, with the test suite's per-dtype tolerances."""
    from fairgate.kernels.ops import reference
    from fairgate.kernels.triton.cache import write_kv
    from fairgate.kernels.triton.decode import decode_attention
    from fairgate.kernels.triton.prefill import prefill_attention
    from tests.kernels.paged_inputs import TOLERANCE, random_paged_kv

    rows = []
    cases = [(16, 64, 1, torch.float32), (32, 128, 4, torch.float16), (16, 128, 8, torch.bfloat16),
             (32, 128, 4, torch.bfloat16)]
    for block_size, head_dim, group, dtype in cases:
        gen = torch.Generator().manual_seed(block_size + head_dim + group)
        lens = CHECK_DECODE_LENS
        kv = random_paged_kv(lens, 2, head_dim, block_size, dtype, device, gen)
        scale = head_dim**-0.5
        q = torch.randn(len(lens), 2 * group, head_dim, generator=gen).to(dtype).to(device)
        ref = reference.paged_decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale)
        for splits in (1, None):
            out = decode_attention(q, kv.k_cache, kv.v_cache, kv.block_tables, kv.seq_lens, scale,
                                   num_splits=splits)
            rows.append(_compare(f"decode bs{block_size} d{head_dim} g{group} splits={splits}", out, ref, TOLERANCE))
        q_lens, ctx = CHECK_PREFILL
        kv = random_paged_kv(ctx, 2, head_dim, block_size, dtype, device, gen)
        starts = torch.tensor([0, *torch.tensor(q_lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
        q = torch.randn(sum(q_lens), 2 * group, head_dim, generator=gen).to(dtype).to(device)
        args = (q, kv.k_cache, kv.v_cache, kv.block_tables, starts, kv.seq_lens, scale)
        rows.append(_compare(f"prefill bs{block_size} d{head_dim} g{group}",
                             prefill_attention(*args), reference.paged_prefill_attention(*args), TOLERANCE))
        key = torch.randn(64, 2, head_dim, generator=gen).to(device)  # fp32 in, cast on the way
        slots = torch.randperm(kv.k_cache.shape[0] * block_size, generator=gen)[:64].to(device)
        got = (kv.k_cache.clone(), kv.v_cache.clone())
        want = (kv.k_cache.clone(), kv.v_cache.clone())
        write_kv(key, -key, *got, slots)
        reference.write_kv(key, -key, *want, slots)
        same = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        rows.append({"check": f"write_kv bs{block_size} d{head_dim} {str(dtype)[6:]}", "max_err": 0.0 if same else None,
                     "tol": 0.0, "ok": same})
    return rows


def _compare(name: str, out: torch.Tensor, ref: torch.Tensor, tolerance: dict) -> dict:
    atol, rtol = tolerance[ref.dtype]
    err = (out.float() - ref.float()).abs()
    ok = bool(torch.isfinite(out).all()) and bool((err <= atol + rtol * ref.float().abs()).all())
    return {"check": f"{name} {str(ref.dtype)[6:]}", "max_err": float(err.max()), "tol": atol, "ok": ok}


class DecodeSetup:
    """Batch 64 sequences with their blocks scattered over one bf16 cache sized for 8k."""

    def __init__(self, device: torch.device, batch: int = 64, max_ctx: int = 8192) -> None:
        self.batch = batch
        blocks_per_seq = max_ctx // BLOCK
        num_blocks = batch * blocks_per_seq
        shape = (num_blocks, BLOCK, KV_HEADS, HEAD_DIM)
        self.k_cache = torch.randn(shape, dtype=torch.bfloat16, device=device)
        self.v_cache = torch.randn(shape, dtype=torch.bfloat16, device=device)
        perm = torch.randperm(num_blocks, device=device, dtype=torch.int32)
        self.block_tables = perm.view(batch, blocks_per_seq)  # [B, blocks] scattered, like a busy pool
        self.query = torch.randn(batch, HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
        self.scale = HEAD_DIM**-0.5

    def seq_lens(self, ctx: int) -> torch.Tensor:
        return torch.full((self.batch,), ctx, dtype=torch.int32, device=self.query.device)

    def kv_bytes(self, ctx: int) -> int:
        return 2 * self.batch * ctx * KV_HEADS * HEAD_DIM * 2  # K and V, bf16

    def run(self, ctx: int, impl=None, **knobs):
        from fairgate.kernels.triton.decode import decode_attention

        lens = self.seq_lens(ctx)
        if impl is not None:
            return lambda: impl(self.query, self.k_cache, self.v_cache, self.block_tables, lens, self.scale, ctx)
        return lambda: decode_attention(self.query, self.k_cache, self.v_cache, self.block_tables, lens,
                                        self.scale, ctx, **knobs)


def bench_decode(device: torch.device, copy_bw: float, deadline: float,
                 ctxs: tuple[int, ...] = (1024, 2048, 4096, 8192), batch: int = 64) -> dict:
    from fairgate.kernels.ops import reference

    setup = DecodeSetup(device, batch, max(ctxs))
    target_ctx = 4096 if 4096 in ctxs else ctxs[-1]
    rows = []
    for ctx in ctxs:
        ms = _bench_ms(setup.run(ctx))
        bw = setup.kv_bytes(ctx) / (ms * 1e-3)
        rows.append({"ctx": ctx, "impl": "triton", "ms": ms, "GB/s": bw / 1e9, "fraction": bw / copy_bw})
    for ctx in (ctxs[0], target_ctx):
        ms = _bench_ms(setup.run(ctx, impl=reference.paged_decode_attention))
        bw = setup.kv_bytes(ctx) / (ms * 1e-3)
        rows.append({"ctx": ctx, "impl": "reference", "ms": ms, "GB/s": bw / 1e9, "fraction": bw / copy_bw})
    _table(f"decode attention, batch {batch}, {HEADS}/{KV_HEADS} heads x {HEAD_DIM}, bf16, block {BLOCK}", rows)

    sweep = []  # tile / warps / stages at 4k, then splits at the best of those
    for block_n in (32, 64, 128):
        for warps in (4, 8):
            for stages in (2, 3):
                if time.monotonic() > deadline:
                    break
                knobs = {"block_n": block_n, "num_warps": warps, "num_stages": stages}
                sweep.append({**knobs, "num_splits": None, "ms": _bench_ms(setup.run(target_ctx, **knobs))})
    best = min(sweep, key=lambda r: r["ms"])
    for splits in (1, 2, 4, 8):
        if time.monotonic() > deadline:
            break
        knobs = {k: best[k] for k in ("block_n", "num_warps", "num_stages")}
        sweep.append({**knobs, "num_splits": splits, "ms": _bench_ms(setup.run(target_ctx, num_splits=splits, **knobs))})
    for r in sweep:
        r["fraction"] = setup.kv_bytes(target_ctx) / (r["ms"] * 1e-3) / copy_bw
    _table(f"decode sweep at batch {batch}, context {target_ctx} (num_splits None = automatic)", sweep)
    default_4k = next(r for r in rows if r["ctx"] == target_ctx and r["impl"] == "triton")
    best = min(sweep, key=lambda r: r["ms"])
    del setup
    torch.cuda.empty_cache()
    return {"decode": rows, "decode_sweep": sweep, "decode_4k_fraction": default_4k["fraction"],
            "decode_4k_best_fraction": best["fraction"], "decode_4k_best_knobs": best}


def bench_prefill_and_write(device: torch.device, copy_bw: float, num_seqs: int = 4, new: int = 2048,
                            cached: int = 2048, write_tokens: tuple[int, ...] = (64, 8192)) -> dict:
    from fairgate.kernels.ops import reference
    from fairgate.kernels.triton.cache import write_kv
    from fairgate.kernels.triton.prefill import paged_prefill_attention

    ctx = new + cached
    blocks = num_seqs * ctx // BLOCK
    k_cache = torch.randn(blocks, BLOCK, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
    v_cache = torch.randn_like(k_cache)
    tables = torch.randperm(blocks, device=device, dtype=torch.int32).view(num_seqs, -1)
    q = torch.randn(num_seqs * new, HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
    starts = torch.arange(0, num_seqs * new + 1, new, dtype=torch.int32, device=device)
    lens = torch.full((num_seqs,), ctx, dtype=torch.int32, device=device)
    args = (q, k_cache, v_cache, tables, starts, lens, HEAD_DIM**-0.5)
    # causal: query i (0-based among the new) sees cached + i + 1 keys; 4 flops per key per dim
    flops = 4 * num_seqs * HEADS * HEAD_DIM * (new * cached + new * (new + 1) / 2)
    rows = []
    for name, impl in (("triton", paged_prefill_attention), ("reference", reference.paged_prefill_attention)):
        ms = _bench_ms(lambda impl=impl: impl(*args))
        rows.append({"kernel": f"prefill {num_seqs}x{new} after {cached}", "impl": name, "ms": ms,
                     "TFLOP/s": flops / (ms * 1e-3) / 1e12})
    for tokens in write_tokens:
        key = torch.randn(tokens, KV_HEADS, HEAD_DIM, dtype=torch.bfloat16, device=device)
        slots = torch.randperm(blocks * BLOCK, device=device)[:tokens]
        moved = 2 * 2 * key.numel() * key.element_size()  # K and V, read + write
        for name, impl in (("triton", write_kv), ("reference", reference.write_kv)):
            ms = _bench_ms(lambda impl=impl, key=key, slots=slots: impl(key, key, k_cache, v_cache, slots))
            rows.append({"kernel": f"write_kv {tokens} tokens", "impl": name, "ms": ms,
                         "fraction": moved / (ms * 1e-3) / copy_bw})
    _table(f"prefill attention and write_kv, {HEADS}/{KV_HEADS} heads x {HEAD_DIM}, bf16", rows)
    return {"prefill_write": rows}


def bench_engine(device: torch.device, batch: int = 64, prompt: int = 1024, steps: int = 16,
                 intermediate: int = 2048) -> dict:
    """Decode tokens/s of the real runner on each kernel path, from the same prefilled cache."""
    import tempfile

    from fairgate.backends.local.engine.types import (
        RunnerInput,
        SamplingParams,
    )
    from fairgate.backends.local.model.runner import ModelRunner
    from tests.helpers.tiny_models import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = make_tiny_model(
            Path(tmp) / "m", "llama", hidden_size=HEADS * HEAD_DIM, intermediate_size=intermediate,
            num_hidden_layers=2, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
            max_position_embeddings=prompt + steps + 16, initializer_range=0.02,
        )
        blocks_per_seq = -(-(prompt + steps) // BLOCK)
        runner = ModelRunner(model_dir, device=device, dtype="bfloat16", block_size=BLOCK,
                             num_kv_blocks=batch * blocks_per_seq)
    greedy = SamplingParams(temperature=0.0, max_tokens=steps + 1)
    gen = torch.Generator().manual_seed(0)
    prompts = torch.randint(3, runner.config.vocab_size, (batch, prompt), generator=gen).tolist()
    tables = [list(range(i * blocks_per_seq, (i + 1) * blocks_per_seq)) for i in range(batch)]
    first = []
    for i in range(0, batch, 8):  # prefill once (default kernel path), 8 prompts per step
        first += runner.execute([RunnerInput(f"r{j}", prompts[j], 0, tables[j], True, greedy)
                                 for j in range(i, min(i + 8, batch))])
    result = {}
    for mode in ("triton", "reference"):
        os.environ["FAIRGATE_KERNELS"] = mode
        last, outputs = list(first), [[] for _ in range(batch)]
        torch.cuda.synchronize()
        start = None
        for step in range(steps + 2):  # two warm-up steps, not timed
            if step == 2:
                torch.cuda.synchronize()
                start = time.perf_counter()
            inputs = [RunnerInput(f"r{j}", [last[j]], prompt + step, tables[j], True, greedy, step + 1)
                      for j in range(batch)]
            last = runner.execute(inputs)
            for j, tok in enumerate(last):
                outputs[j].append(tok)
        torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        result[mode] = {"tokens/s": batch * steps / elapsed, "ms/step": 1e3 * elapsed / steps,
                        "outputs": outputs}
    os.environ.pop("FAIRGATE_KERNELS", None)
    same = result["triton"].pop("outputs") == result["reference"].pop("outputs")
    rows = [{"path": m, **v} for m, v in result.items()]
    _table(f"engine decode, batch {batch}, prompt {prompt}, 2 layers of {HEADS}/{KV_HEADS} x {HEAD_DIM}, bf16", rows)
    print(f"greedy tokens identical on both paths: {same} (bf16 rounding may legitimately differ)")
    speedup = result["triton"]["tokens/s"] / result["reference"]["tokens/s"]
    return {"engine": rows, "engine_speedup": speedup, "engine_greedy_identical": same}


def _table(title: str, rows: list[dict]) -> None:
    print(f"\n== {title}")
    if not rows:
        return
    cols = list(dict.fromkeys(c for r in rows for c in r))  # union of keys, first-seen order
    cells = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-engine", action="store_true", help="skip the engine throughput part")
    parser.add_argument("--budget-s", type=float, default=270.0, help="stop optional parts after this")
    args = parser.parse_args()
    _fail_without_cuda()
    begin = time.monotonic()
    device = torch.device("cuda")
    out: dict = {"device": torch.cuda.get_device_name(device)}

    checks = check_kernels(device)
    _table("correctness vs torch reference", checks)
    out["checks_ok"] = all(r["ok"] for r in checks)
    out["checks"] = checks

    copy_bw = copy_bandwidth(device)
    print(f"\ncopy bandwidth (1 GiB copy_, read + write): {copy_bw / 1e9:.0f} GB/s")
    out["copy_GBps"] = copy_bw / 1e9
    out.update(bench_decode(device, copy_bw, deadline=begin + 0.5 * args.budget_s))
    frac = out["decode_4k_fraction"]
    out["meets_decode_target"] = frac >= TARGET_FRACTION
    print(f"decode b64 ctx4k: {frac:.0%} of copy bandwidth with default knobs "
          f"(best swept {out['decode_4k_best_fraction']:.0%}); target {TARGET_FRACTION:.0%}: "
          f"{'met' if frac >= TARGET_FRACTION else f'short by {TARGET_FRACTION - frac:.0%}'}")
    out.update(bench_prefill_and_write(device, copy_bw))

    if args.skip_engine:
        out["engine"] = "skipped (--skip-engine)"
    elif time.monotonic() - begin > 0.75 * args.budget_s:
        out["engine"] = "skipped (time budget)"
    else:
        try:
            out.update(bench_engine(device))
        except ImportError as exc:  # transformers missing: the tiny-model writer needs it
            out["engine"] = f"skipped ({exc})"
    out["elapsed_s"] = time.monotonic() - begin
    print(json.dumps(out, default=str))
    return 0 if out["checks_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
