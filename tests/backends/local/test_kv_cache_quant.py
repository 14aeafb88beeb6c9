"""The engine on quantized KV caches: greedy parity with a float cache on the tiny parity
models, the pool's byte accounting, and the engine flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fairgate.backends.local.engine.async_engine import AsyncEngine
from fairgate.backends.local.engine.config import EngineConfig
from fairgate.backends.local.engine.metrics import install
from fairgate.backends.local.engine.types import SamplingParams
from fairgate.backends.local.model.runner import ModelRunner
from tests.backends.local.paged_driver import PagedDriver

PROMPTS = [[1, *range(40, 58)], [1, 7, 8], [1, *range(90, 130)], [1, 5, 9, 200, 31, 64]]


def _agreement(a: list[list[int]], b: list[list[int]]) -> float:
    pairs = [(x, y) for p, q in zip(a, b, strict=True) for x, y in zip(p, q, strict=True)]
    return sum(x == y for x, y in pairs) / len(pairs)


@pytest.mark.parametrize("model", ["tiny_model_dir", "tiny_mistral_dir", "tiny_qwen2_dir", "tiny_llama3_dir",
                                   "tiny_qwen3_dir", "tiny_phi3_dir"])
def test_int8_kv_greedy_matches_float32_kv_on_the_parity_models(model: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(model)
    outs = {}
    for kv in (None, "int8", "int4"):
        runner = ModelRunner(path, block_size=8, num_kv_blocks=40, kv_cache_dtype=kv)
        outs[kv] = PagedDriver(runner, chunk=7, seed=3, stop_at_eos=False).generate(PROMPTS, 8)
    int8, int4 = _agreement(outs["int8"], outs[None]), _agreement(outs["int4"], outs[None])
    print(f"{model}: greedy token agreement with float32 KV: int8 {int8:.3f}, int4 {int4:.3f}")
    assert [o[:4] for o in outs["int8"]] == [o[:4] for o in outs[None]]
    assert int8 >= 0.9


def test_pool_bytes_per_token(tiny_model_dir: Path) -> None:
    # tiny model: head_dim 16, 2 KV heads, 2 layers
    fp16 = ModelRunner(tiny_model_dir, num_kv_blocks=4, kv_cache_dtype="float16")
    int8 = ModelRunner(tiny_model_dir, num_kv_blocks=4, kv_cache_dtype="int8")
    int4 = ModelRunner(tiny_model_dir, num_kv_blocks=4, kv_cache_dtype="int4")
    per_row = {r.kv_cache_name: r.kv_block_bytes // (2 * 2 * 16 * 2) for r in (fp16, int8, int4)}
    assert per_row == {"float16": 32, "int8": 16 + 2, "int4": 8 + 4}
    assert int8.kv_scales is not None and int8.kv_scales.shape == (2, 2, 4, 16, 2, 1)
    assert int4.kv_cache.shape[-1] == 8 and int4.kv_scales.shape[-1] == 2
    assert int8.kv_caches[1].k_scale.data_ptr() == int8.kv_scales[1, 0].data_ptr()
    sized = ModelRunner(tiny_model_dir, kv_cache_memory=64 * int8.kv_block_bytes, kv_cache_dtype="int8")
    assert sized.num_kv_blocks == 64


async def test_an_int8_kv_cache_from_the_cli_flags_serves_and_reuses_prefixes(tiny_model_dir: Path) -> None:
    from fairgate.gateway.cli import build_parser

    args = build_parser().parse_args(["engine", "--model", str(tiny_model_dir), "--kv-cache-dtype", "int8",
                                      "--num-kv-blocks", "32", "--quantization", "int8"])
    config = EngineConfig.from_args(args)
    assert config.quantization == "int8" and config.kv_cache_dtype == "int8"
    eng = AsyncEngine(config)
    try:
        assert eng.runner.kv_cache_name == "int8" and eng.runner.quantization_name == "int8"
        greedy = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
        prompt = list(range(5, 45))
        first = await eng.generate(prompt, greedy)
        again = await eng.generate(prompt, greedy)  # prefix blocks come back with their scales
        assert again.token_ids == first.token_ids and len(first.token_ids) == 6
        assert eng.block_manager.check_pool_whole()
        registry = CollectorRegistry()
        install(eng, registry, "tiny", requests=False)
        text = generate_latest(registry).decode()
        assert 'fairgate_model_quantization{kv_cache="int8",model="tiny",weights="int8"} 1.0' in text
    finally:
        await eng.aclose()
