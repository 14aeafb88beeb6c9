"""What the per-family parity tests (Qwen3, Gemma 3, mixture-of-experts) share: transformers on
the same folder in float32, its greedy tokens, its linears rounded through our weight codes (and
the engine on the quantized folder beside it), and the prefix-cache and preemption parity checks."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fairgate.backends.local.engine.async_engine import AsyncEngine
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.model.quantization import quantize_folder
from fairgate.backends.local.model.runner import ModelRunner
from fairgate.kernels import QuantMethod, quantize_weight
from fairgate.kernels.ops.quant_format import dequantize_weight


def hf_model(model_dir: Path) -> Any:
    import transformers

    return transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


def hf_greedy(hf: Any, prompt: list[int], max_new: int) -> list[int]:
    with torch.no_grad():
        out = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                          do_sample=False, max_new_tokens=max_new, pad_token_id=hf.config.eos_token_id)
    return out[0, len(prompt):].tolist()


def round_linears(hf: Any, method: str) -> None:
    """Every decoder linear of `hf` replaced by what the engine's codes for `method` stand for."""
    qm = QuantMethod.parse(method)
    with torch.no_grad():
        for name, module in hf.named_modules():
            if isinstance(module, torch.nn.Linear) and ".layers." in name:
                module.weight.copy_(dequantize_weight(quantize_weight(module.weight.detach().clone(), qm)))


def quantized_pair(folder: Path, out: Path, method: str) -> tuple[ModelRunner, Any]:
    """The engine's runner on `folder` quantized with `method` into `out`, and transformers on exactly
    the weights the engine's codes stand for."""
    quantize_folder(folder, out, QuantMethod.parse(method))
    runner = ModelRunner(out, num_kv_blocks=96)
    hf = hf_model(folder)
    round_linears(hf, method)
    return runner, hf


async def check_prefix_cache_hits(model_dir: Path, greedy: Callable[[list[int], int], list[int]]) -> None:
    """Three prompts on one 39-token system part (two full blocks of 16 and 7 into the third):
    the engine's tokens equal transformers' (`greedy`) while at least two full blocks come from
    the prefix cache for each later prompt."""
    eng = AsyncEngine(EngineConfig(str(model_dir), enable_prefix_caching=True, num_kv_blocks=64,
                                   max_num_batched_tokens=24))
    try:
        rng = random.Random(1)
        system = [rng.randrange(3, 500) for _ in range(39)]
        for i in range(3):
            prompt = system + [rng.randrange(3, 500) for _ in range(4 + 3 * i)]
            out = await eng.generate(prompt, SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))
            assert out.token_ids == greedy(prompt, 8)
        assert eng.block_manager.prefix_cache_hits >= 2 * 32
    finally:
        await eng.aclose()


def check_preemption_recompute(model_dir: Path, greedy: Callable[[list[int], int], list[int]]) -> None:
    """24 KV blocks of 4 tokens cannot hold test_spec_engine's four ~60-token PROMPTS: requests are
    preempted and recomputed, and each still generates transformers' (`greedy`) 30 tokens."""
    from tests.backends.local.test_spec_engine import PROMPTS, add, drain, engine
    from tests.backends.local.test_spec_engine import greedy as greedy_params

    core = engine(model_dir, num_kv_blocks=24)
    for i, prompt in enumerate(PROMPTS):
        add(core, f"r{i}", prompt, greedy_params(30))
    results = drain(core)
    assert core.scheduler.num_preemptions > 0 and core.scheduler.kv.check_pool_whole()
    for i, prompt in enumerate(PROMPTS):
        assert results[f"r{i}"].token_ids == greedy(prompt, 30)
